//===- ShareKernelModules.cpp - The kiln-share-kernel-modules pass ---------===//
//
// A program often runs one kernel several times over: the gate and up projections of an MLP, a layer's matmuls
// repeated across layers, two RoPE calls. With matmul kernels size-generic (M, N and K are parameters), such
// kernels are the same gpu.module but for its name (and the order of its constants), and the GPU half of a
// compile (NVVM lowering, LLVM, the PTX assembler: tens of milliseconds a kernel) would otherwise run once for
// each. This pass keeps one module per
// distinct kernel and points every host kernel function that used a copy at the kept one; the manifest then
// lists each such function with the kept module's files and its own launch (grid, sizes).
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSHAREKERNELMODULES
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// A hash of the kinds of op in `gpuModule`, in order: modules that differ in it are different kernels, which
/// is cheap to tell (a walk of a few microseconds, where a full comparison takes a millisecond or so).
llvm::hash_code opSequenceHash(gpu::GPUModuleOp gpuModule) {
  llvm::hash_code hash = llvm::hash_value(0);
  gpuModule.getBody()->walk(
      [&](Operation *op) { hash = llvm::hash_combine(hash, op->getName().getAsOpaquePointer()); });
  return hash;
}

/// Orders the constants that lead each function of `gpuModule` by their value (type included). The folds that
/// create them run in an order that the kernel's static sizes can change (a constant first needed by a bound that
/// folded in one kernel and not in another), while the kernels compute the same; sorted, such kernels compare
/// equal.
void sortLeadingConstants(gpu::GPUModuleOp gpuModule) {
  gpuModule.walk([](gpu::GPUFuncOp func) {
    Block &entry = func.getBody().front();
    SmallVector<std::pair<std::string, Operation *>> constants;
    for (Operation &op : entry) {
      auto constant = dyn_cast<arith::ConstantOp>(op);
      if (!constant)
        break;
      std::string key;
      llvm::raw_string_ostream stream(key);
      stream << constant.getValue();
      constants.push_back({std::move(key), &op});
    }
    llvm::stable_sort(constants, [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &entryConstant : llvm::reverse(constants))
      entryConstant.second->moveBefore(&entry, entry.begin());
  });
}

/// The symbols defined in `gpuModule`'s body, in order.
SmallVector<Operation *> symbolsOf(gpu::GPUModuleOp gpuModule) {
  SmallVector<Operation *> symbols;
  for (Operation &op : gpuModule.getBody()->getOperations())
    if (isa<SymbolOpInterface>(op))
      symbols.push_back(&op);
  return symbols;
}

/// Whether `candidate` is `kept` (targets and offloading handler included) but for its name and the names of its
/// symbols. The candidate's symbols take the
/// names of `kept`'s at the same positions (uses included) for the comparison, and get their own back when it
/// differs; a candidate that already has one of those names elsewhere is not compared. When it is the same,
/// `renamed` maps each of its symbols' names to its new one. Fails when a symbol's uses cannot be renamed.
FailureOr<bool> isSameKernel(gpu::GPUModuleOp kept, gpu::GPUModuleOp candidate,
                             DenseMap<StringAttr, StringAttr> &renamed) {
  Block *keptBody = kept.getBody(), *candidateBody = candidate.getBody();
  SmallVector<Operation *> keptSymbols = symbolsOf(kept), candidateSymbols = symbolsOf(candidate);
  if (kept.getTargetsAttr() != candidate.getTargetsAttr() ||
      kept.getOffloadingHandlerAttr() != candidate.getOffloadingHandlerAttr() ||
      keptBody->getOperations().size() != candidateBody->getOperations().size() ||
      keptSymbols.size() != candidateSymbols.size())
    return false;
  SymbolTable table(candidate);
  SmallVector<StringAttr> ownNames, keptNames;
  for (auto [keptSymbol, symbol] : llvm::zip_equal(keptSymbols, candidateSymbols)) {
    keptNames.push_back(SymbolTable::getSymbolName(keptSymbol));
    Operation *holder = table.lookup(keptNames.back());
    if (holder && holder != symbol)
      return false;
    ownNames.push_back(SymbolTable::getSymbolName(symbol));
  }
  auto renameAll = [&](ArrayRef<StringAttr> names) -> LogicalResult {
    for (auto [symbol, name] : llvm::zip_equal(candidateSymbols, names))
      if (failed(table.rename(symbol, name)))
        return candidate.emitError() << "kiln-share-kernel-modules: cannot rename the uses of @"
                                     << SymbolTable::getSymbolName(symbol);
    return success();
  };
  if (failed(renameAll(keptNames)))
    return failure();
  bool same = llvm::all_of(llvm::zip_equal(keptBody->getOperations(), candidateBody->getOperations()),
                           [](auto pair) {
                             return OperationEquivalence::isEquivalentTo(&std::get<0>(pair), &std::get<1>(pair),
                                                                         OperationEquivalence::IgnoreLocations);
                           });
  if (!same)
    return failed(renameAll(ownNames)) ? FailureOr<bool>(failure()) : FailureOr<bool>(false);
  for (auto [own, now] : llvm::zip_equal(ownNames, keptNames))
    renamed[own] = now;
  return true;
}

struct KilnShareKernelModulesPass : kiln::impl::KilnShareKernelModulesBase<KilnShareKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Modules by the kinds of op they hold; only modules with others of the same kinds are compared.
    llvm::MapVector<llvm::hash_code, SmallVector<gpu::GPUModuleOp, 1>> candidates;
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
      sortLeadingConstants(gpuModule);
      candidates[opSequenceHash(gpuModule)].push_back(gpuModule);
    }
    // The kept module of each later copy of a kernel, and the copy's symbols' new names.
    DenseMap<StringAttr, std::pair<gpu::GPUModuleOp, DenseMap<StringAttr, StringAttr>>> keptFor;
    SmallVector<gpu::GPUModuleOp> copies;
    for (auto &[hash, sameKinds] : candidates) {
      SmallVector<gpu::GPUModuleOp> kept;
      for (gpu::GPUModuleOp gpuModule : sameKinds) {
        DenseMap<StringAttr, StringAttr> renamed;
        gpu::GPUModuleOp same;
        for (gpu::GPUModuleOp other : kept) {
          FailureOr<bool> isSame = isSameKernel(other, gpuModule, renamed);
          if (failed(isSame))
            return signalPassFailure();
          if (*isSame) {
            same = other;
            break;
          }
        }
        if (!same) {
          kept.push_back(gpuModule);
          continue;
        }
        keptFor[gpuModule.getNameAttr()] = {same, std::move(renamed)};
        copies.push_back(gpuModule);
      }
    }
    if (copies.empty())
      return;
    for (auto host : module.getOps<func::FuncOp>()) {
      auto ref = host->getAttrOfType<SymbolRefAttr>("kiln.gpu_kernel");
      auto found = ref ? keptFor.find(ref.getRootReference()) : keptFor.end();
      if (found == keptFor.end())
        continue;
      auto &[kept, renamed] = found->second;
      StringAttr kernel = renamed.lookup(ref.getLeafReference());
      if (!kernel) {
        host.emitError() << "kiln-share-kernel-modules: kiln.gpu_kernel names " << ref
                         << ", which is no symbol of its module";
        return signalPassFailure();
      }
      host->setAttr("kiln.gpu_kernel", SymbolRefAttr::get(kept.getNameAttr(), {FlatSymbolRefAttr::get(kernel)}));
    }
    for (gpu::GPUModuleOp copy : copies)
      copy->erase();
  }
};

} // namespace
