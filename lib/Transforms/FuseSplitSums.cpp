//===- FuseSplitSums.cpp - The kiln-fuse-split-sums pass -------------------===//
//
// A split matmul (kiln-split-k) leaves its chunks' sum to a kernel of its own, kiln.sum_splits, whose readers
// are often small kernels that read it element by element: a decode step's q and k projections go on to RoPE, v
// to the KV append, the MLP's gate to the epilogue of the up projection's sum, the output projection's residual
// sum to the next RMSNorm and to the next residual add. Each such kernel costs a launch and a dependency wait
// (1-2 us on the H200, about 1% of a decode layer each) to move a few kilobytes. On a GPU plan the sum can run
// in its readers instead: each reader's kernel takes the sum's operands (the chunks and the epilogue's operands)
// in place of the sum, and the thread that reads an element adds up its chunks, runs the epilogue and rounds to
// the sum's element type, the same arithmetic in the same order as the sum's kernel, so the bits do not change.
// Only reshapes may lie between the sum and a reader (a reshape keeps each element's row-major index, which is
// how the reader finds the element's chunks); the readers are those whose GPU kernels compute such an operand
// per element: RoPE's input, the KV append's new rows, a sum's epilogue operands, and the row tiles of a row
// kernel (a norm). With several readers each adds up the chunks again, so they may read a few chunks only.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSESPLITSUMS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The most chunk reads per element that the readers of one sum may make between them when there are several
/// (each adds up every chunk): a residual sum of four chunks read by a norm and the next residual add.
static constexpr int64_t kMaxFusedSumReads = 16;

bool kiln::readsFusedSplitSum(Operation *reader, unsigned operand) {
  if (isa<RopeOp>(reader))
    return operand == 0;
  if (isa<AppendKvOp>(reader))
    return operand == 2 || operand == 3;
  if (isa<SumSplitsOp>(reader))
    return operand >= 1;
  return false;
}

/// The outlined kernel function that `call` calls, if it is one and has a body.
static func::FuncOp kernelCalledBy(func::CallOp call) {
  auto kernel = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  if (!kernel || !kernel->hasAttr("kiln.kernel") || kernel.isExternal())
    return nullptr;
  return kernel;
}

/// Whether a call in [from, to] may write a buffer that `inputs` read: an append kernel writes its caches in place
/// on the GPU (kiln-update-caches-in-place), so moving a read of a cache past it would read the new rows.
static bool writtenBetween(ValueRange inputs, Operation *from, Operation *to) {
  for (Operation *op = from; op; op = op == to ? nullptr : op->getNextNode()) {
    auto call = dyn_cast<func::CallOp>(op);
    func::FuncOp kernel = call ? kernelCalledBy(call) : nullptr;
    if (!kernel || kernel.getBody().getOps<AppendKvOp>().empty())
      continue;
    for (Value input : inputs)
      for (unsigned cache : {0u, 1u})
        if (cache < call.getNumOperands() && viewedStorage(input) == viewedStorage(call.getOperand(cache)))
          return true;
  }
  return false;
}

namespace {
/// A call that reads a sum: the value it is passed, which is the sum's result through `views` (reshapes).
struct SumReader {
  func::CallOp call;
  Value value;
  SmallVector<Operation *> views;
};
} // namespace

/// Every call that reads `result` through reshapes; failure when anything else reads it (the plan's return, a
/// view other than a reshape), a reshape of it is read by nothing, or one call reads it through two different
/// views.
static FailureOr<SmallVector<SumReader>> readersOf(Value result) {
  SmallVector<SumReader> readers;
  SmallVector<std::pair<Value, SmallVector<Operation *>>> pending{{result, {}}};
  while (!pending.empty()) {
    auto [value, views] = pending.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (isa<ReshapeOp>(user)) {
        if (user->use_empty())
          return failure(); // a dead view of the sum would outlive it
        SmallVector<Operation *> longer(views);
        longer.push_back(user);
        pending.push_back({user->getResult(0), std::move(longer)});
        continue;
      }
      auto call = dyn_cast<func::CallOp>(user);
      if (!call)
        return failure();
      auto same = llvm::find_if(readers, [&](const SumReader &reader) { return reader.call == call; });
      if (same == readers.end())
        readers.push_back({call, value, views});
      else if (same->value != value)
        return failure();
    }
  }
  return readers;
}

/// Whether `argument` of the tiled row kernel `forall` lives in is read only as [rows, columns] tiles in the
/// loop (tensor.extract_slice, or the whole argument by the kiln ops of a one-block loop), which the row
/// lowering loads element by element.
static bool readAsRowTiles(BlockArgument argument, scf::ForallOp forall) {
  auto config = forall->getAttrOfType<ConfigAttr>("kiln.config");
  if (!config || config.getLowering() != "rows" || cast<RankedTensorType>(argument.getType()).getRank() != 2)
    return false;
  return llvm::all_of(argument.getUsers(), [&](Operation *user) {
    return (isa<tensor::ExtractSliceOp>(user) || isa<KilnDialect>(user->getDialect())) &&
           forall->isProperAncestor(user);
  });
}

/// Why `reader` cannot compute the sum where it reads it, or null: it must be the one call of an outlined kernel
/// in the sum's block, and its kernel must read the value only per element (an untiled glue op at a position
/// readsFusedSplitSum allows, or a row kernel's row tiles).
static const char *whyNotReader(func::CallOp sumCall, const SumReader &reader) {
  func::CallOp call = reader.call;
  if (call->getBlock() != sumCall->getBlock())
    return "a reader lies in another block";
  func::FuncOp kernel = kernelCalledBy(call);
  Operation *kernelOp = kernel ? kernelOpOf(kernel) : nullptr;
  if (!kernelOp || kernel->hasAttr(kUpdatesInPlaceAttrName))
    return "a reader is not an outlined kernel";
  std::optional<SymbolTable::UseRange> calls = SymbolTable::getSymbolUses(kernel, kernel->getParentOp());
  if (!calls || !llvm::hasSingleElement(*calls))
    return "another call shares a reader's kernel (whose signature changes)";
  unsigned numInputs = call.getNumOperands() - call.getNumResults();
  auto tiled = dyn_cast<scf::ForallOp>(kernelOp);
  for (OpOperand &use : reader.value.getUses()) {
    if (use.getOwner() != call)
      continue;
    if (use.getOperandNumber() >= numInputs)
      return "the sum is a reader's destination";
    BlockArgument argument = kernel.getArgument(use.getOperandNumber());
    bool perElement = tiled ? tiled->hasAttr(kTiledOpAttrName) && readAsRowTiles(argument, tiled)
                            : llvm::all_of(argument.getUses(), [&](OpOperand &read) {
                                return read.getOwner() == kernelOp &&
                                       readsFusedSplitSum(kernelOp, read.getOperandNumber());
                              });
    if (!perElement)
      return "a reader's kernel reads the sum other than per element";
  }
  return nullptr;
}

/// Makes `reader`'s kernel take the inputs of the sum that `sumCall` computes (each once, before its
/// destinations) and compute the sum, and the reshapes, where it read their result.
static LogicalResult moveSumInto(RewriterBase &rewriter, func::CallOp sumCall, SumSplitsOp sum,
                                 const SumReader &reader) {
  func::CallOp call = reader.call;
  func::FuncOp kernel = kernelCalledBy(call);
  Block &body = kernel.getBody().front();
  Block &sumBody = *sum->getBlock();
  unsigned numInputs = call.getNumOperands() - call.getNumResults();
  llvm::BitVector replaced(kernel.getNumArguments());
  for (OpOperand &use : reader.value.getUses())
    if (use.getOwner() == call)
      replaced.set(use.getOperandNumber());
  SmallVector<Value> operands(call.getOperands().take_front(numInputs));
  IRMapping mapping;
  for (auto [index, input] : llvm::enumerate(sumCall.getOperands().drop_back())) {
    auto at = llvm::find(operands, input);
    if (at != operands.end() && !replaced.test(at - operands.begin())) {
      mapping.map(sumBody.getArgument(index), body.getArgument(at - operands.begin()));
      continue;
    }
    unsigned position = operands.size();
    if (failed(kernel.insertArgument(position, input.getType(), DictionaryAttr(), sumCall.getLoc())))
      return failure();
    operands.push_back(input);
    replaced.resize(kernel.getNumArguments());
    mapping.map(sumBody.getArgument(index), body.getArgument(position));
  }
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(&body);
  Value computed = rewriter.clone(*sum, mapping)->getResult(0);
  for (Operation *view : reader.views) {
    IRMapping viewMapping;
    viewMapping.map(view->getOperand(0), computed);
    computed = rewriter.clone(*view, viewMapping)->getResult(0);
  }
  for (unsigned index : replaced.set_bits())
    rewriter.replaceAllUsesWith(body.getArgument(index), computed);
  if (failed(kernel.eraseArguments(replaced)))
    return failure();
  SmallVector<Value> kept;
  for (auto [index, operand] : llvm::enumerate(operands))
    if (index >= replaced.size() || !replaced.test(index))
      kept.push_back(operand);
  llvm::append_range(kept, call.getOperands().drop_front(numInputs));
  rewriter.modifyOpInPlace(call, [&] { call->setOperands(kept); });
  return success();
}

FailureOr<SmallVector<func::CallOp>> kiln::fuseSplitSum(RewriterBase &rewriter, func::CallOp sumCall) {
  func::FuncOp sumKernel = kernelCalledBy(sumCall);
  auto sum = sumKernel ? dyn_cast_or_null<SumSplitsOp>(kernelOpOf(sumKernel)) : SumSplitsOp();
  if (!sum || sumCall.getNumResults() != 1)
    return rewriter.notifyMatchFailure(sumCall, "not the call of a kiln.sum_splits kernel");
  // The sum must read only its kernel's inputs, which the readers' kernels can then take.
  for (Value operand : sum->getOperands()) {
    auto argument = dyn_cast<BlockArgument>(operand);
    if (!argument || argument.getOwner() != sum->getBlock())
      return rewriter.notifyMatchFailure(sumCall, "the sum reads a value computed in its kernel");
  }
  FailureOr<SmallVector<SumReader>> readers = readersOf(sumCall.getResult(0));
  if (failed(readers) || readers->empty())
    return rewriter.notifyMatchFailure(sumCall, "the sum has no readers, or one that is not a kernel call");
  // Each reader adds up the chunks again: a few readers of a few chunks cost less than a kernel.
  int64_t chunks = sum.getParts().getType().getDimSize(0);
  if (readers->size() > 1 && chunks * static_cast<int64_t>(readers->size()) > kMaxFusedSumReads)
    return rewriter.notifyMatchFailure(sumCall, "too many readers would each add up the chunks");
  SmallVector<Value> sumInputs(sumCall.getOperands().drop_back());
  for (const SumReader &reader : *readers) {
    if (const char *why = whyNotReader(sumCall, reader))
      return rewriter.notifyMatchFailure(sumCall, why);
    if (writtenBetween(sumInputs, sumCall, reader.call))
      return rewriter.notifyMatchFailure(sumCall, "a kernel between the sum and a reader writes what the sum reads");
  }
  SmallVector<func::CallOp> calls;
  for (const SumReader &reader : *readers) {
    if (failed(moveSumInto(rewriter, sumCall, sum, reader)))
      return failure();
    calls.push_back(reader.call);
  }

  // The plan no longer computes the sum; its views, and its kernel when nothing else calls it, go.
  Value destination = sumCall.getOperands().back();
  llvm::SetVector<Operation *> views;
  for (const SumReader &reader : *readers)
    views.insert(reader.views.begin(), reader.views.end());
  // Each reshape after the ones that read it (they come later in its readers' chains).
  SmallVector<Operation *> unused = views.takeVector();
  for (Operation *view : llvm::reverse(unused))
    rewriter.eraseOp(view);
  rewriter.eraseOp(sumCall);
  if (auto empty = destination.getDefiningOp<tensor::EmptyOp>(); empty && empty->use_empty())
    rewriter.eraseOp(empty);
  if (SymbolTable::symbolKnownUseEmpty(sumKernel, sumKernel->getParentOp()))
    rewriter.eraseOp(sumKernel);
  return calls;
}

namespace {
struct KilnFuseSplitSumsPass : kiln::impl::KilnFuseSplitSumsBase<KilnFuseSplitSumsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    IRRewriter rewriter(&getContext());
    SmallVector<func::CallOp> calls;
    module.walk([&](func::CallOp call) { calls.push_back(call); });
    // In plan order, so that a sum whose reader is itself a sum (the gate of a split MLP) moves into it before
    // that sum is considered.
    for (func::CallOp call : calls)
      (void)fuseSplitSum(rewriter, call);
  }
};
} // namespace
