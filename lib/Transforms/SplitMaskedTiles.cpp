//===- SplitMaskedTiles.cpp - The kiln-split-masked-tiles pass -------------===//
//
// kiln-tile masks attention per key tile: the tiles past the end of the keys or across the causal diagonal take an
// `scf.if (keyStart >= maskFrom)` around the mask, the others its plain branch. The tiles that need the mask are the
// last ones of the loop, so the loop splits in two: the tiles before the threshold without the branch and without mask
// arithmetic, then the masked ones (or, where only the last tile can need the mask, that tile alone after the loop). A
// mask_mod's sliding window also masks the first tiles (`keyStart < maskBefore || keyStart >= maskFrom`): then three
// loops, masked, plain, masked. On the GPU a branch between tensor-core instructions (and a mask select on every score)
// costs more than a second copy of the loop body.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSPLITMASKEDTILES
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The bound of `condition` when it is `iv pred bound` with `bound` defined before the loop.
static Value comparedBound(scf::ForOp loop, Value condition, arith::CmpIPredicate pred) {
  auto compare = condition.getDefiningOp<arith::CmpIOp>();
  if (!compare || compare.getPredicate() != pred || compare.getLhs() != loop.getInductionVar() ||
      loop.getRegion().isAncestor(compare.getRhs().getParentRegion()))
    return {};
  return compare.getRhs();
}

/// The scf.if directly in `loop`'s body that branches on `iv >= bound`, or on `iv < below || iv >= bound`, with
/// the bounds defined before the loop.
static scf::IfOp thresholdBranch(scf::ForOp loop, Value &below, Value &bound) {
  for (auto branch : loop.getBody()->getOps<scf::IfOp>()) {
    Value condition = branch.getCondition();
    below = {};
    if (auto either = condition.getDefiningOp<arith::OrIOp>()) {
      below = comparedBound(loop, either.getLhs(), arith::CmpIPredicate::slt);
      condition = either.getRhs();
      if (!below)
        continue;
    }
    bound = comparedBound(loop, condition, arith::CmpIPredicate::sge);
    if (bound)
      return branch;
  }
  return {};
}

/// Replaces `branch` by the ops of one of its regions (nothing, for a missing `else`), and its condition when
/// nothing else uses it.
static void inlineRegion(RewriterBase &rewriter, scf::IfOp branch, bool thenRegion) {
  Block *block = thenRegion ? branch.thenBlock() : branch.elseBlock();
  Operation *condition = branch.getCondition().getDefiningOp();
  if (block) {
    auto yield = cast<scf::YieldOp>(block->getTerminator());
    SmallVector<Value> results(yield.getOperands());
    rewriter.eraseOp(yield);
    rewriter.inlineBlockBefore(block, branch);
    rewriter.replaceOp(branch, results);
  } else {
    rewriter.eraseOp(branch); // an if without results
  }
  // The condition and the comparisons it joins, once nothing else uses them.
  SmallVector<Operation *> dead{condition};
  while (!dead.empty()) {
    Operation *op = dead.pop_back_val();
    if (!op || !op->use_empty() || !isa<arith::CmpIOp, arith::OrIOp>(op))
      continue;
    for (Value operand : op->getOperands())
      dead.push_back(operand.getDefiningOp());
    rewriter.eraseOp(op);
  }
}

LogicalResult kiln::splitLoopAtThreshold(RewriterBase &rewriter, scf::ForOp loop) {
  Value below, bound;
  scf::IfOp branch = thresholdBranch(loop, below, bound);
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!branch || !step || *step <= 0 || (branch.getNumResults() > 0 && !branch.elseBlock()))
    return failure();
  unsigned position = std::distance(loop.getBody()->begin(), branch->getIterator());
  Location loc = loop.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(loop);
  // The first iteration at or past a threshold: lb + ceil((threshold - lb) / step) * step, within [from, ub].
  AffineExpr lb = getAffineDimExpr(0, ctx), threshold = getAffineDimExpr(1, ctx);
  auto firstAtOrPast = [&](Value limit, Value from) -> Value {
    Value first = affine::makeComposedAffineApply(rewriter, loc,
                                                  AffineMap::get(2, 0, lb + (threshold - lb).ceilDiv(*step) * *step),
                                                  ArrayRef<OpFoldResult>{loop.getLowerBound(), limit})
                      .getResult();
    return arith::MinSIOp::create(rewriter, loc, arith::MaxSIOp::create(rewriter, loc, first, from),
                                  loop.getUpperBound());
  };
  // With a lower threshold the loop has three parts: masked iterations before `below`, plain ones, masked ones
  // from `bound` on.
  Value start = below ? firstAtOrPast(below, loop.getLowerBound()) : Value();
  Value split = firstAtOrPast(bound, start ? start : loop.getLowerBound());
  auto branchOf = [&](Block *body) { return cast<scf::IfOp>(*std::next(body->begin(), position)); };
  ValueRange inits = loop.getInitArgs();
  if (start) {
    auto head = cast<scf::ForOp>(rewriter.clone(*loop));
    head.setUpperBound(start);
    inlineRegion(rewriter, branchOf(head.getBody()), /*thenRegion=*/true);
    inits = head.getResults();
  }

  bool oneMasked = branch->hasAttr(kOneMaskedTileAttrName) && !start;
  auto before = cast<scf::ForOp>(rewriter.clone(*loop));
  if (start) {
    before.setLowerBound(start);
    before.getInitArgsMutable().assign(inits);
  }
  before.setUpperBound(split);
  inlineRegion(rewriter, branchOf(before.getBody()), /*thenRegion=*/false);
  if (!oneMasked) {
    auto after = cast<scf::ForOp>(rewriter.clone(*loop));
    after.setLowerBound(split);
    after.getInitArgsMutable().assign(before.getResults());
    inlineRegion(rewriter, branchOf(after.getBody()), /*thenRegion=*/true);
    rewriter.replaceOp(loop, after.getResults());
    return success();
  }
  // The one iteration at or past the bound, if the loop reaches it: the body at iv = split.
  Value reached = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, split, loop.getUpperBound());
  auto last = scf::IfOp::create(
      rewriter, loc, reached,
      [&](OpBuilder &b, Location l) {
        IRMapping mapping;
        mapping.map(loop.getInductionVar(), split);
        mapping.map(loop.getRegionIterArgs(), before.getResults());
        for (Operation &op : loop.getBody()->without_terminator())
          b.clone(op, mapping);
        SmallVector<Value> results;
        for (Value value : loop.getBody()->getTerminator()->getOperands())
          results.push_back(mapping.lookupOrDefault(value));
        scf::YieldOp::create(b, l, results);
      },
      [&](OpBuilder &b, Location l) { scf::YieldOp::create(b, l, before.getResults()); });
  inlineRegion(rewriter, branchOf(last.thenBlock()), /*thenRegion=*/true);
  rewriter.replaceOp(loop, last.getResults());
  return success();
}

namespace {
struct KilnSplitMaskedTilesPass : kiln::impl::KilnSplitMaskedTilesBase<KilnSplitMaskedTilesPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation()->walk([&](scf::ForOp loop) { loops.push_back(loop); });
    IRRewriter rewriter(&getContext());
    for (scf::ForOp loop : loops)
      (void)splitLoopAtThreshold(rewriter, loop);
  }
};
} // namespace
