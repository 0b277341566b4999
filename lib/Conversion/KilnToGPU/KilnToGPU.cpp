//===- KilnToGPU.cpp - The convert-kiln-to-gpu pass ------------------------===//
//
// Turns each outlined kernel function (kiln-outline-kernels) into a GPU kernel in the module's
// `gpu.module @kiln_kernels`, and records on the function how to launch it (kiln.gpu_kernel, kiln.launch), so
// that kilnc can write the kernel and its manifest. Row kernels, matmuls and attentions are lowered from their
// tiled loops by layout; the elementwise and data-movement glue kernels are built from the op. Kernel kinds
// without a GPU lowering are an error that names the op. On sm_90a every kernel waits for its predecessor itself
// and is launched to overlap it (DependentLaunch.cpp).
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"
#include "GpuKernels.h"
#include "KernelBuilding.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_CONVERTKILNTOGPU
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {
struct ConvertKilnToGPUPass : kiln::impl::ConvertKilnToGPUBase<ConvertKilnToGPUPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Target target = chip;
    OpBuilder builder(&getContext());
    gpu::GPUModuleOp gpuModule;
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (!func->hasAttr("kiln.kernel"))
        continue;
      Operation *kernelOp = kernelOpOf(func);
      auto tiledLoop = dyn_cast_or_null<scf::ForallOp>(kernelOp);
      if (!kernelOp)
        continue;
      ConfigAttr config = getConfig(kernelOp);
      bool wgmma = config && config.getLowering() == "wgmma";
      bool matmulOrAttention = isa<MatmulOp, AttentionOp>(kernelOp) ||
                               (tiledLoop && (kernelOpName(tiledLoop) == MatmulOp::getOperationName() ||
                                              kernelOpName(tiledLoop) == AttentionOp::getOperationName()));
      if (wgmma && (target != Target::Sm90a || !matmulOrAttention)) {
        if (matmulOrAttention)
          kernelOp->emitOpError() << "the wgmma lowering needs sm_90a, not " << stringifyTarget(target);
        else
          kernelOp->emitOpError() << "the wgmma lowering is for matmuls and attention only";
        return signalPassFailure();
      }
      if (!tiledLoop && isa<AttentionOp>(kernelOp)) {
        kernelOp->emitOpError() << "needs a #kiln.config with lowering \"mma_sync\" or \"wgmma\" and its tiled "
                                   "loop (kiln-select-config, kiln-tile, kiln-online-softmax, "
                                   "kiln-split-masked-tiles, kiln-assign-layouts first), for the GPU backend";
        return signalPassFailure();
      }
      if (!tiledLoop && isRowOp(kernelOp)) {
        kernelOp->emitOpError() << "is a row kernel: the GPU lowers it from its tiled loop (kiln-select-config, "
                                   "kiln-tile, kiln-decompose-rows, kiln-assign-layouts first)";
        return signalPassFailure();
      }
      if (!tiledLoop && isa<MatmulOp>(kernelOp)) {
        kernelOp->emitOpError() << "needs a #kiln.config with lowering \"mma_sync\" or \"wgmma\" and its tiled "
                                   "loop (kiln-select-config, kiln-tile, kiln-assign-layouts first), for the GPU "
                                   "backend";
        return signalPassFailure();
      }
      auto append = dyn_cast<AppendKvOp>(kernelOp);
      if (!tiledLoop && !append && !isElementwiseKernelOp(kernelOp)) {
        kernelOp->emitError() << "convert-kiln-to-gpu: the GPU backend has no lowering for '"
                              << kernelOp->getName()
                              << "' yet (matmul, attention, row, elementwise, data-movement and KV-append kernels only)";
        return signalPassFailure();
      }
      if (!gpuModule) {
        module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), builder.getUnitAttr());
        builder.setInsertionPointToEnd(module.getBody());
        gpuModule = gpu::GPUModuleOp::create(builder, module.getLoc(), "kiln_kernels");
      }
      StringRef name = func.getSymName();
      FailureOr<KernelLaunch> launch = failure();
      StringRef lowering = config ? config.getLowering() : "";
      if (tiledLoop && lowering == "rows")
        launch = lowerRowKernel(builder, gpuModule, func, name);
      else if (tiledLoop && (lowering == "mma_sync" || lowering == "wgmma") &&
               kernelOpName(tiledLoop) == AttentionOp::getOperationName())
        launch = lowerMmaAttentionKernel(builder, gpuModule, func, name);
      else if (tiledLoop && lowering == "mma_sync")
        launch = lowerMmaMatmulKernel(builder, gpuModule, func, name);
      else if (tiledLoop && lowering == "wgmma" && kernelOpName(tiledLoop) == MatmulOp::getOperationName())
        launch = lowerWgmmaMatmulKernel(builder, gpuModule, func, name);
      else if (tiledLoop)
        return tiledLoop.emitError() << "convert-kiln-to-gpu: a tiled " << kernelOpName(tiledLoop)
                                     << " with lowering \"" << lowering << "\" has no GPU lowering",
               signalPassFailure();
      else if (append)
        launch = buildAppendKvKernel(builder, gpuModule, func, append, name);
      else
        launch = buildElementwiseKernel(builder, gpuModule, kernelOp, name);
      if (failed(launch))
        return signalPassFailure();
      if (launch->dynamicSharedBytes > maxSharedBytesPerBlock(target)) {
        kernelOp->emitError() << "'" << kernelOpName(kernelOp) << "' op config needs " << launch->dynamicSharedBytes
                                << " bytes of shared memory per block; " << stringifyTarget(target) << " allows "
                                << maxSharedBytesPerBlock(target);
        return signalPassFailure();
      }
      func->setAttr("kiln.gpu_kernel",
                    SymbolRefAttr::get(gpuModule.getSymNameAttr(), {FlatSymbolRefAttr::get(func.getSymNameAttr())}));
      SmallVector<NamedAttribute> fields{
          builder.getNamedAttr("grid", builder.getDenseI64ArrayAttr(launch->grid)),
          builder.getNamedAttr("block", builder.getDenseI64ArrayAttr(launch->block)),
          builder.getNamedAttr("dynamic_shared_bytes", builder.getI64IntegerAttr(launch->dynamicSharedBytes))};
      if (!launch->sizes.empty())
        fields.push_back(builder.getNamedAttr("sizes", builder.getDenseI64ArrayAttr(launch->sizes)));
      if (!launch->tensorMaps.empty()) {
        SmallVector<Attribute> maps;
        for (const TensorMapParam &map : launch->tensorMaps)
          maps.push_back(builder.getDictionaryAttr(
              {builder.getNamedAttr("buffer", builder.getI64IntegerAttr(map.buffer)),
               builder.getNamedAttr("dtype", builder.getStringAttr(map.dtype)),
               builder.getNamedAttr("dims", builder.getDenseI64ArrayAttr(map.dims)),
               builder.getNamedAttr("strides", builder.getDenseI64ArrayAttr(map.strides)),
               builder.getNamedAttr("box", builder.getDenseI64ArrayAttr(map.box)),
               builder.getNamedAttr("swizzle", builder.getI64IntegerAttr(map.swizzleBytes))}));
        fields.push_back(builder.getNamedAttr("tensor_maps", builder.getArrayAttr(maps)));
      }
      func->setAttr("kiln.launch", builder.getDictionaryAttr(fields));
      // The plan launches a size-generic kernel with these sizes alone (another compile with other sizes builds
      // its own launch, and shares the kernel only where its IR, this bound included, is the same): a bound
      // that every size meets tells kiln-fold-conversion-offsets how large the kernel's positions get.
      using gpukernel::kSizeBound;
      if (!launch->sizes.empty() && llvm::all_of(launch->sizes, [](int64_t size) { return size <= kSizeBound; }))
        gpuModule.lookupSymbol<gpu::GPUFuncOp>(name)->setAttr(gpukernel::kSizeBoundAttrName,
                                                             builder.getI64IntegerAttr(kSizeBound));
      if (target == Target::Sm90a) {
        awaitPredecessorKernel(gpuModule.lookupSymbol<gpu::GPUFuncOp>(name));
        if (overlapsPredecessorWell(func, *launch, target))
          func->setAttr("kiln.dependent_launch", builder.getUnitAttr());
      }
    }
    if (gpuModule)
      kiln::approximateExpAndDivision(gpuModule);
  }
};
} // namespace
