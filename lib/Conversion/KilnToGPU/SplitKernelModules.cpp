//===- SplitKernelModules.cpp - The kiln-split-kernel-modules pass ---------===//
//
// One gpu.module per kernel. The GPU half of a compile (NVVM lowering, LLVM's optimiser and NVPTX backend, the
// PTX assembler) takes tens of milliseconds per kernel and nothing in it crosses kernels; with every kernel in a
// module of its own, MLIR's nested pass manager lowers them on the context's threads and the driver emits and
// assembles them in parallel, so a program of many kernels compiles in about the time of its largest.
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSPLITKERNELMODULES
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// The ops of `gpuModule` that `kernel` needs: every op that is no symbol (it goes with every kernel), and the
/// symbols that the kernel, or a symbol it needs, refers to (its shared-memory global, a device function). One
/// walk of the kernel and of each symbol it reaches.
llvm::SmallPtrSet<Operation *, 8> opsUsedBy(gpu::GPUFuncOp kernel, gpu::GPUModuleOp gpuModule) {
  llvm::SmallPtrSet<Operation *, 8> used;
  for (Operation &op : gpuModule.getBody()->getOperations())
    if (!isa<SymbolOpInterface>(op))
      used.insert(&op);
  SmallVector<Operation *> worklist{kernel};
  while (!worklist.empty()) {
    std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(worklist.pop_back_val());
    for (const SymbolTable::SymbolUse &use : uses ? *uses : SymbolTable::UseRange({}))
      if (Operation *symbol = SymbolTable::lookupSymbolIn(gpuModule, use.getSymbolRef());
          symbol && used.insert(symbol).second)
        worklist.push_back(symbol);
  }
  return used;
}

struct KilnSplitKernelModulesPass : kiln::impl::KilnSplitKernelModulesBase<KilnSplitKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto gpuModule : llvm::to_vector(module.getOps<gpu::GPUModuleOp>())) {
      SmallVector<gpu::GPUFuncOp> kernels;
      for (auto func : gpuModule.getOps<gpu::GPUFuncOp>())
        if (func.isKernel())
          kernels.push_back(func);
      if (kernels.empty())
        continue;
      SmallVector<Operation *> shared;
      for (Operation &op : gpuModule.getBody()->getOperations())
        if (!llvm::is_contained(kernels, dyn_cast<gpu::GPUFuncOp>(&op)))
          shared.push_back(&op);
      DenseMap<StringAttr, SymbolRefAttr> movedTo;
      OpBuilder builder(&getContext());
      for (gpu::GPUFuncOp kernel : kernels) {
        auto split = gpu::GPUModuleOp::create(builder, gpuModule.getLoc(), (kernel.getName() + "_module").str(),
                                              gpuModule.getTargetsAttr(), gpuModule.getOffloadingHandlerAttr());
        split->remove();
        symbols.insert(split, Block::iterator(gpuModule.getOperation()));
        builder.setInsertionPointToEnd(split.getBody());
        llvm::SmallPtrSet<Operation *, 8> used = opsUsedBy(kernel, gpuModule);
        for (Operation *op : shared)
          if (used.contains(op))
            builder.clone(*op);
        kernel->moveBefore(split.getBody(), split.getBody()->end());
        movedTo[kernel.getNameAttr()] =
            SymbolRefAttr::get(split.getNameAttr(), {FlatSymbolRefAttr::get(kernel.getNameAttr())});
      }
      for (auto host : module.getOps<func::FuncOp>()) {
        auto ref = host->getAttrOfType<SymbolRefAttr>("kiln.gpu_kernel");
        if (ref && ref.getRootReference() == gpuModule.getNameAttr() && movedTo.count(ref.getLeafReference()))
          host->setAttr("kiln.gpu_kernel", movedTo[ref.getLeafReference()]);
      }
      symbols.erase(gpuModule);
    }
  }
};

} // namespace
