//===- TensorMapParams.cpp - The kiln-tensor-map-params pass ---------------===//
//
// A TMA copy (cp.async.bulk.tensor) names its tensor map by address, and the map must sit in the kernel's
// parameter space (or constant or global memory): CUDA passes it as a `const __grid_constant__ CUtensorMap`
// parameter. In LLVM that is a by-value parameter marked nvvm.grid_constant, whose address NVPTX gives as the
// parameter's own (cvta.param) rather than a local copy's. The kernel builders cannot say so on the gpu.func
// (convert-gpu-to-nvvm drops argument attributes, and the NVVM dialect rejects the mark on a gpu.func), so they
// list the parameters in `kiln.tensor_map_params` and this pass marks them on the lowered llvm.func.
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNTENSORMAPPARAMS
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {
/// Bytes of a CUtensorMap, and its alignment.
constexpr unsigned kTensorMapBytes = 128, kTensorMapAlignment = 64;

struct KilnTensorMapParamsPass : kiln::impl::KilnTensorMapParamsBase<KilnTensorMapParamsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder builder(ctx);
    Type mapType = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), kTensorMapBytes);
    WalkResult result = getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto params = func->getAttrOfType<DenseI64ArrayAttr>("kiln.tensor_map_params");
      if (!params)
        return WalkResult::advance();
      for (int64_t index : params.asArrayRef()) {
        if (index < 0 || index >= func.getNumArguments() ||
            !isa<LLVM::LLVMPointerType>(func.getArgument(index).getType())) {
          func.emitOpError() << "kiln.tensor_map_params lists parameter " << index
                             << ", which is not one of its pointer parameters";
          return WalkResult::interrupt();
        }
        func.setArgAttr(index, LLVM::LLVMDialect::getByValAttrName(), TypeAttr::get(mapType));
        func.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                        builder.getI64IntegerAttr(kTensorMapAlignment));
        func.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(), builder.getUnitAttr());
      }
      func->removeAttr("kiln.tensor_map_params");
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
