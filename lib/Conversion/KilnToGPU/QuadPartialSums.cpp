//===- QuadPartialSums.cpp - Row sums an attention's key loops may leave unreduced -===//
//
// A fixed point: each round recomputes the shares forward in program order from the carried iter args
// (optimistically, at first, every zero-initialised row vector) and the zero-initialised row sums, then drops what
// a round disproves: an iter arg not yielded as a share, a value with a use that is not linear in it. Dropping is
// always safe (a whole value is reduced across the quad where it is made), so the rules need only be sound.
//
//===----------------------------------------------------------------------===//

#include "QuadPartialSums.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

/// Whether `value` is a linalg.fill of floating-point zero: zero is a share of a zero sum.
static bool isZeroFill(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.value(), m_AnyZeroFloat());
}

static bool isRowVector(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getRank() == 1 && type.getElementType().isF32();
}

/// An add-reduction of a [rows, columns] tile into a zero row vector.
static bool isZeroInitRowSum(linalg::GenericOp op) {
  if (op.getNumLoops() != 2 || op.getNumReductionLoops() != 1 || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || !isZeroFill(op.getDpsInits()[0]))
    return false;
  Block &body = op->getRegion(0).front();
  return llvm::hasSingleElement(body.without_terminator()) && isa<arith::AddFOp>(body.front()) &&
         body.getTerminator()->getOperand(0) == body.front().getResult(0);
}

/// Whether the 1-D row generic `op` yields a share when its inputs in `shares` are shares: its body multiplies
/// a share only by values that are not shares, adds or subtracts only shares to shares, and yields a share.
static bool yieldsShare(linalg::GenericOp op, const DenseSet<Value> &shares) {
  Block &body = op->getRegion(0).front();
  DenseSet<Value> partial;
  for (auto [input, argument] : llvm::zip(op.getDpsInputs(), body.getArguments()))
    if (shares.contains(input))
      partial.insert(argument);
  for (Operation &inner : body.without_terminator()) {
    unsigned count = llvm::count_if(inner.getOperands(), [&](Value v) { return partial.contains(v); });
    if (count == 0)
      continue;
    bool linear = (isa<arith::MulFOp>(inner) && count == 1) ||
                  (isa<arith::AddFOp, arith::SubFOp>(inner) && count == 2) || isa<arith::NegFOp>(inner);
    if (!linear)
      return false;
    partial.insert(inner.getResult(0));
  }
  return partial.contains(body.getTerminator()->getOperand(0));
}

QuadPartialSums gpukernel::findQuadPartialSums(ArrayRef<scf::ForOp> loops, scf::IfOp last) {
  QuadPartialSums result;
  scf::ForOp first = loops.front(), back = loops.back();
  unsigned count = first.getNumRegionIterArgs();
  for (unsigned i = 0; i < count; ++i)
    result.carried.push_back(isRowVector(first.getRegionIterArgs()[i]) && isZeroFill(first.getInitArgs()[i]));
  ValueRange finals = last ? ValueRange(last.getResults()) : ValueRange(back.getResults());
  SmallVector<Block *> bodies;
  for (scf::ForOp loop : loops)
    bodies.push_back(loop.getBody());
  if (last)
    bodies.push_back(last.thenBlock());
  DenseSet<Value> &shares = result.values;
  // Values that a use showed cannot be shares.
  DenseSet<Value> excluded;
  auto isTerminatorOf = [&](Operation *user) {
    return isa<scf::YieldOp>(user) && (user->getParentOp() == last.getOperation() ||
                                       llvm::is_contained(loops, dyn_cast<scf::ForOp>(user->getParentOp())));
  };
  // A use that keeps a share a share: a row generic input whose result is a share, or the state of a carried
  // iter arg (a loop's or the last tile's yield, the next loop's init).
  auto keepsShare = [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto generic = dyn_cast<linalg::GenericOp>(user))
      return generic.getNumLoops() == 1 && generic.isDpsInput(&use) && shares.contains(generic.getResult(0));
    if (isTerminatorOf(user))
      return use.getOperandNumber() < count && result.carried[use.getOperandNumber()];
    if (auto loop = dyn_cast<scf::ForOp>(user); loop && llvm::is_contained(loops, loop))
      if (BlockArgument tied = loop.getTiedLoopRegionIterArg(&use))
        return result.carried[tied.getArgNumber() - loop.getNumInductionVars()];
    return false;
  };
  for (bool changed = true; changed;) {
    // Forward, in program order: the carried state, the zero-based sums, the generics linear in shares.
    shares.clear();
    for (unsigned i = 0; i < count; ++i) {
      if (!result.carried[i])
        continue;
      for (scf::ForOp loop : loops) {
        shares.insert(loop.getRegionIterArgs()[i]);
        shares.insert(loop.getResult(i));
      }
      if (last)
        shares.insert(last.getResult(i));
    }
    for (Block *body : bodies)
      for (auto generic : body->getOps<linalg::GenericOp>()) {
        Value value = generic->getNumResults() == 1 ? generic->getResult(0) : Value();
        if (!value || !isRowVector(value) || excluded.contains(value))
          continue;
        bool readsShare = llvm::any_of(generic.getDpsInputs(), [&](Value v) { return shares.contains(v); });
        if ((generic.getNumLoops() == 2 && isZeroInitRowSum(generic)) ||
            (generic.getNumLoops() == 1 && readsShare && yieldsShare(generic, shares)))
          shares.insert(value);
      }
    // Then the checks: a carried iter arg is yielded as shares; every share is used only as one.
    changed = false;
    for (unsigned i = 0; i < count; ++i) {
      bool yielded = llvm::all_of(loops, [&](scf::ForOp loop) {
        return shares.contains(loop.getBody()->getTerminator()->getOperand(i));
      }) && (!last || shares.contains(last.thenYield().getOperand(i)));
      if (result.carried[i] && !yielded)
        result.carried[i] = false, changed = true;
    }
    for (Value value : shares)
      if (!llvm::is_contained(finals, value) &&
          !llvm::all_of(value.getUses(), [&](OpOperand &use) { return keepsShare(use); })) {
        changed = true;
        if (auto arg = dyn_cast<BlockArgument>(value); arg && llvm::is_contained(loops, arg.getOwner()->getParentOp()))
          result.carried[arg.getArgNumber() - 1] = false;
        else if (auto loop = value.getDefiningOp<scf::ForOp>(); loop || value.getDefiningOp<scf::IfOp>())
          result.carried[cast<OpResult>(value).getResultNumber()] = false;
        else
          excluded.insert(value);
      }
  }
  return result;
}
