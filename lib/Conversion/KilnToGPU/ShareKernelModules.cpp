//===- ShareKernelModules.cpp - The kiln-share-kernel-modules pass ---------===//
//
// A program often runs one kernel several times over: the gate and up projections of an MLP, a layer's matmuls
// repeated across layers, two RoPE calls. With matmul kernels size-generic (M, N and K are parameters), such
// kernels are the same gpu.module but for its name, and the GPU half of a compile (NVVM lowering, LLVM, the PTX
// assembler: tens of milliseconds a kernel) would otherwise run once for each. This pass keeps one module per
// distinct kernel and points every host kernel function that used a copy at the kept one; the manifest then
// lists each such function with the kept module's files and its own launch (grid, sizes).
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSHAREKERNELMODULES
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// The text of `gpuModule` with its name and its symbols' names replaced by placeholders in the order they
/// appear, so that two modules differing in nothing else have the same text. Each symbol's position, the
/// name's stand-in, is returned in `positions` (by name).
std::string canonicalText(gpu::GPUModuleOp gpuModule, llvm::StringMap<unsigned> &positions) {
  auto copy = cast<gpu::GPUModuleOp>(gpuModule->clone());
  copy.setName("module");
  SymbolTable symbols(copy);
  SmallVector<Operation *> named;
  for (Operation &op : copy.getBody()->getOperations())
    if (isa<SymbolOpInterface>(op))
      named.push_back(&op);
  for (auto [position, op] : llvm::enumerate(named)) {
    positions[SymbolTable::getSymbolName(op).getValue()] = position;
    (void)symbols.rename(op, ("symbol" + Twine(position)).str());
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  copy->print(os, OpPrintingFlags().assumeVerified());
  copy->erase();
  return text;
}

/// A hash of the kinds of op in `gpuModule`, in order: modules that differ in it are different kernels, which
/// is cheap to tell (printing a kernel module costs about a millisecond, a walk a few microseconds).
llvm::hash_code opSequenceHash(gpu::GPUModuleOp gpuModule) {
  llvm::hash_code hash = llvm::hash_value(0);
  gpuModule.getBody()->walk(
      [&](Operation *op) { hash = llvm::hash_combine(hash, op->getName().getAsOpaquePointer()); });
  return hash;
}

struct KilnShareKernelModulesPass : kiln::impl::KilnShareKernelModulesBase<KilnShareKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Modules by the kinds of op they hold; only modules with others of the same kinds are compared by text.
    DenseMap<llvm::hash_code, SmallVector<gpu::GPUModuleOp, 1>> candidates;
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
      candidates[opSequenceHash(gpuModule)].push_back(gpuModule);
    // For each later copy of a kernel, the kept module, and every compared module's symbols by position.
    DenseMap<StringAttr, gpu::GPUModuleOp> keptFor;
    DenseMap<StringAttr, llvm::StringMap<unsigned>> positionsOf;
    SmallVector<gpu::GPUModuleOp> copies;
    for (auto &[hash, sameKinds] : candidates) {
      llvm::StringMap<gpu::GPUModuleOp> firstOfText;
      for (gpu::GPUModuleOp gpuModule : sameKinds.size() > 1 ? sameKinds : SmallVector<gpu::GPUModuleOp, 1>()) {
        llvm::StringMap<unsigned> &positions = positionsOf[gpuModule.getNameAttr()];
        auto [it, inserted] = firstOfText.try_emplace(canonicalText(gpuModule, positions), gpuModule);
        if (inserted)
          continue;
        keptFor[gpuModule.getNameAttr()] = it->second;
        copies.push_back(gpuModule);
      }
    }
    if (copies.empty())
      return;
    for (auto host : module.getOps<func::FuncOp>()) {
      auto ref = host->getAttrOfType<SymbolRefAttr>("kiln.gpu_kernel");
      if (!ref || !keptFor.count(ref.getRootReference()))
        continue;
      gpu::GPUModuleOp kept = keptFor[ref.getRootReference()];
      // The kernel at the same position in the kept module.
      unsigned position = positionsOf[ref.getRootReference()].lookup(ref.getLeafReference().getValue());
      StringAttr kernel;
      for (auto [index, op] : llvm::enumerate(llvm::make_filter_range(
               kept.getBody()->getOperations(), [](Operation &op) { return isa<SymbolOpInterface>(op); })))
        if (index == position)
          kernel = SymbolTable::getSymbolName(&op);
      host->setAttr("kiln.gpu_kernel", SymbolRefAttr::get(kept.getNameAttr(), {FlatSymbolRefAttr::get(kernel)}));
    }
    for (gpu::GPUModuleOp copy : copies)
      copy->erase();
  }
};

} // namespace
