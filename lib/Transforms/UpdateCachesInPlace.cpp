//===- UpdateCachesInPlace.cpp - The kiln-update-caches-in-place pass ------===//
//
// kiln.append_kv returns the caches with a few new rows written: value semantics, so the host backend copies
// the caches (fine on the CPU, where a test's caches hold a few MB). A decode step on the GPU cannot copy half a
// gigabyte of KV cache to write 128 KB of new rows, so there the appended caches are the old caches' buffers:
// the plan hands the append kernel its cache operands as its destinations, and the kernel writes only the new
// rows. That is correct only while nothing reads the old caches after the append, which this pass checks on the
// plan (a later reader, a cache returned unchanged or a plan constant is an error naming it) before it ties the
// destinations. The kernel is marked `kiln.updates_in_place`, which the GPU lowering of the append requires.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNUPDATECACHESINPLACE
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// Every plan value that views the bytes of `root`: the root and its views (reshapes, contiguous slices),
/// transitively.
static SmallVector<Value> aliasesOf(Value root) {
  SmallVector<Value> aliases{root};
  for (size_t i = 0; i < aliases.size(); ++i)
    for (Operation *user : aliases[i].getUsers())
      if (isPlanView(user))
        aliases.push_back(user->getResult(0));
  return aliases;
}

/// The bytes a plan value holds: its storage (through views) and the range [begin, end) in it.
struct ByteRange {
  Value storage;
  int64_t begin, end;
  bool overlaps(const ByteRange &other) const {
    return storage == other.storage && begin < other.end && other.begin < end;
  }
};

static ByteRange bytesOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t offset = 0;
  Value storage = value;
  while (Operation *view = storage.getDefiningOp()) {
    std::optional<int64_t> at = planViewOffset(view);
    if (!at)
      break;
    offset += *at;
    storage = view->getOperand(0);
  }
  return {storage, offset, offset + type.getNumElements() * std::max<int64_t>(type.getElementTypeBitWidth(), 8) / 8};
}

LogicalResult kiln::updateCachesInPlace(RewriterBase &rewriter, func::CallOp call, AppendKvOp append) {
  auto kernel = append->getParentOfType<func::FuncOp>();
  unsigned destinations = call.getNumResults(), firstDestination = call.getNumOperands() - destinations;
  auto cacheArgument = [&](Value operand) -> std::optional<unsigned> {
    auto argument = dyn_cast<BlockArgument>(operand);
    if (!argument || argument.getOwner() != &kernel.getBody().front() || argument.getArgNumber() >= firstDestination)
      return std::nullopt;
    return argument.getArgNumber();
  };
  std::optional<unsigned> kIndex = cacheArgument(append.getKCache()), vIndex = cacheArgument(append.getVCache());
  if (destinations != 2 || !kIndex || !vIndex)
    return append.emitOpError() << "kiln-update-caches-in-place: expected an outlined append (its caches kernel "
                                   "arguments, two destinations)";
  Value caches[2] = {call.getOperand(*kIndex), call.getOperand(*vIndex)};
  StringRef names[2] = {"k_cache", "v_cache"};
  if (bytesOf(caches[0]).overlaps(bytesOf(caches[1])))
    return call.emitError() << "kiln.append_kv on the GPU writes its caches in place, so 'k_cache' and 'v_cache' "
                               "must not share bytes";
  for (auto [cache, name] : llvm::zip_equal(caches, names)) {
    ByteRange written = bytesOf(cache);
    if (written.storage.getDefiningOp<ConstantOp>())
      return call.emitError() << "kiln.append_kv on the GPU writes its caches in place, so '" << name
                              << "' cannot be a constant of the program";
    for (Value alias : aliasesOf(written.storage)) {
      if (!bytesOf(alias).overlaps(written))
        continue; // another part of the storage (a stacked cache's other half)
      for (OpOperand &use : alias.getUses()) {
        Operation *user = use.getOwner();
        if (user == call.getOperation() || isPlanView(user) ||
            (user->getBlock() == call->getBlock() && user->isBeforeInBlock(call)))
          continue;
        InFlightDiagnostic error = call.emitError()
                                   << "kiln.append_kv on the GPU writes its caches in place, but the old '" << name
                                   << "' is used after the append; use the appended cache (its result) instead";
        error.attachNote(user->getLoc()) << "the later use";
        return error;
      }
    }
  }
  for (auto [index, cache] : llvm::enumerate(caches)) {
    Value destination = call.getOperand(firstDestination + index);
    rewriter.modifyOpInPlace(call, [&] { call->setOperand(firstDestination + index, cache); });
    if (auto empty = destination.getDefiningOp<tensor::EmptyOp>(); empty && empty->use_empty())
      rewriter.eraseOp(empty);
  }
  kernel->setAttr(kUpdatesInPlaceAttrName, rewriter.getUnitAttr());
  return success();
}

namespace {
struct KilnUpdateCachesInPlacePass : kiln::impl::KilnUpdateCachesInPlaceBase<KilnUpdateCachesInPlacePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    IRRewriter rewriter(&getContext());
    SymbolTable symbols(module);
    SmallVector<func::CallOp> calls;
    module.walk([&](func::CallOp call) { calls.push_back(call); });
    for (func::CallOp call : calls) {
      auto kernel = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!kernel || !kernel->hasAttr("kiln.kernel") || kernel.isExternal())
        continue;
      auto appends = llvm::to_vector(kernel.getBody().getOps<AppendKvOp>());
      if (appends.empty() || kernel->hasAttr(kUpdatesInPlaceAttrName))
        continue;
      if (failed(updateCachesInPlace(rewriter, call, appends.front())))
        return signalPassFailure();
    }
  }
};
} // namespace
