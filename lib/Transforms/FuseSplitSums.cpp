//===- FuseSplitSums.cpp - The kiln-fuse-split-sums pass -------------------===//
//
// A split matmul (kiln-split-k) leaves its chunks' sum to a kernel of its own, kiln.sum_splits, whose one reader
// is often another small glue kernel: a decode step's q and k projections go on to RoPE, v to the KV append, and
// the MLP's gate to the epilogue of the up projection's sum. Each such kernel costs a launch and a dependency wait
// (1-2 us on the H200, about 1% of a decode layer each) to move a few kilobytes. On a GPU plan the sum can run
// in its reader instead: the reader's kernel takes the sum's operands (the chunks and the epilogue's operands)
// in place of the sum, and its thread adds up the chunks of each element it reads, runs the epilogue and rounds
// to the sum's element type, the same arithmetic in the same order as the sum's kernel, so the bits do not
// change. Only reshapes may lie between the sum and its reader (a reshape keeps each element's row-major index,
// which is how the reader's thread finds the element's chunks); the readers are those whose GPU kernels compute
// such an operand per element: RoPE's input, the KV append's new rows, a sum's epilogue operands.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSESPLITSUMS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

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

/// The plan value whose bytes `value` views (through reshapes and contiguous slices).
static Value storageOf(Value value) {
  while (Operation *view = value.getDefiningOp()) {
    if (!isPlanView(view))
      break;
    value = view->getOperand(0);
  }
  return value;
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
        if (cache < call.getNumOperands() && storageOf(input) == storageOf(call.getOperand(cache)))
          return true;
  }
  return false;
}

FailureOr<func::CallOp> kiln::fuseSplitSum(RewriterBase &rewriter, func::CallOp sumCall) {
  func::FuncOp sumKernel = kernelCalledBy(sumCall);
  auto sum = sumKernel ? dyn_cast_or_null<SumSplitsOp>(kernelOpOf(sumKernel)) : SumSplitsOp();
  if (!sum || sumCall.getNumResults() != 1)
    return rewriter.notifyMatchFailure(sumCall, "not the call of a kiln.sum_splits kernel");
  // The sum must read only its kernel's inputs, which the reader's kernel can then take.
  Block &sumBody = sumKernel.getBody().front();
  for (Value operand : sum->getOperands()) {
    auto argument = dyn_cast<BlockArgument>(operand);
    if (!argument || argument.getOwner() != &sumBody)
      return rewriter.notifyMatchFailure(sumCall, "the sum reads a value computed in its kernel");
  }

  // The sum's one reader, through a chain of reshapes that nothing else reads.
  SmallVector<Operation *> views;
  Value value = sumCall.getResult(0);
  while (value.hasOneUse() && isa<ReshapeOp>(*value.getUsers().begin())) {
    views.push_back(*value.getUsers().begin());
    value = views.back()->getResult(0);
  }
  if (value.use_empty())
    return rewriter.notifyMatchFailure(sumCall, "nothing reads the sum");
  auto reader = dyn_cast<func::CallOp>(*value.getUsers().begin());
  if (!reader || reader->getBlock() != sumCall->getBlock() ||
      llvm::any_of(value.getUsers(), [&](Operation *user) { return user != reader; }))
    return rewriter.notifyMatchFailure(sumCall, "the sum has another reader than one kernel of its plan");
  func::FuncOp readerKernel = kernelCalledBy(reader);
  Operation *readerOp = readerKernel ? kernelOpOf(readerKernel) : nullptr;
  if (!readerOp || readerOp->hasAttr(kTiledOpAttrName) || readerKernel->hasAttr(kUpdatesInPlaceAttrName))
    return rewriter.notifyMatchFailure(sumCall, "the reader is not an untiled glue kernel");
  // The reader's kernel changes its signature: no other call may share it.
  std::optional<SymbolTable::UseRange> readerCalls =
      SymbolTable::getSymbolUses(readerKernel, readerKernel->getParentOp());
  if (!readerCalls || !llvm::hasSingleElement(*readerCalls))
    return rewriter.notifyMatchFailure(sumCall, "another call shares the reader's kernel");
  unsigned numInputs = reader.getNumOperands() - reader.getNumResults();
  Block &readerBody = readerKernel.getBody().front();
  llvm::BitVector replaced(readerKernel.getNumArguments());
  for (OpOperand &use : value.getUses()) {
    if (use.getOperandNumber() >= numInputs)
      return rewriter.notifyMatchFailure(sumCall, "the sum is the reader's destination");
    BlockArgument argument = readerBody.getArgument(use.getOperandNumber());
    for (OpOperand &read : argument.getUses())
      if (read.getOwner() != readerOp || !readsFusedSplitSum(readerOp, read.getOperandNumber()))
        return rewriter.notifyMatchFailure(sumCall, "the reader's kernel reads the sum other than per element");
    replaced.set(use.getOperandNumber());
  }
  SmallVector<Value> sumInputs(sumCall.getOperands().drop_back());
  if (writtenBetween(sumInputs, sumCall, reader))
    return rewriter.notifyMatchFailure(sumCall, "a kernel between the sum and its reader writes what the sum reads");

  // The reader's kernel takes the sum's inputs (each once) before its destinations and computes the sum, and the
  // reshapes, where it read their result.
  SmallVector<Value> operands(reader.getOperands().take_front(numInputs));
  IRMapping mapping;
  for (auto [index, input] : llvm::enumerate(sumInputs)) {
    auto at = llvm::find(operands, input);
    if (at != operands.end() && !replaced.test(at - operands.begin())) {
      mapping.map(sumBody.getArgument(index), readerBody.getArgument(at - operands.begin()));
      continue;
    }
    unsigned position = operands.size();
    if (failed(readerKernel.insertArgument(position, input.getType(), DictionaryAttr(), sumCall.getLoc())))
      return failure();
    operands.push_back(input);
    replaced.resize(readerKernel.getNumArguments());
    mapping.map(sumBody.getArgument(index), readerBody.getArgument(position));
  }
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(&readerBody);
  Value computed = rewriter.clone(*sum, mapping)->getResult(0);
  for (Operation *view : views) {
    IRMapping viewMapping;
    viewMapping.map(view->getOperand(0), computed);
    computed = rewriter.clone(*view, viewMapping)->getResult(0);
  }
  for (unsigned index : replaced.set_bits())
    rewriter.replaceAllUsesWith(readerBody.getArgument(index), computed);
  if (failed(readerKernel.eraseArguments(replaced)))
    return failure();
  SmallVector<Value> kept;
  for (auto [index, operand] : llvm::enumerate(operands))
    if (index >= replaced.size() || !replaced.test(index))
      kept.push_back(operand);
  llvm::append_range(kept, reader.getOperands().drop_front(numInputs));
  rewriter.modifyOpInPlace(reader, [&] { reader->setOperands(kept); });

  // The plan no longer computes the sum; its kernel goes when nothing else calls it.
  Value destination = sumCall.getOperands().back();
  for (Operation *view : llvm::reverse(views))
    rewriter.eraseOp(view);
  rewriter.eraseOp(sumCall);
  if (auto empty = destination.getDefiningOp<tensor::EmptyOp>(); empty && empty->use_empty())
    rewriter.eraseOp(empty);
  if (SymbolTable::symbolKnownUseEmpty(sumKernel, sumKernel->getParentOp()))
    rewriter.eraseOp(sumKernel);
  return reader;
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
