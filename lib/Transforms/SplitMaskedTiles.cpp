//===- SplitMaskedTiles.cpp - The kiln-split-masked-tiles pass -------------===//
//
// kiln-tile masks attention per key tile: the tiles past the end of the keys or across the causal diagonal take
// an `scf.if (keyStart >= maskFrom)` around the mask, the others its plain branch. The tiles that need the mask
// are the last ones of the loop, so the loop splits in two: the tiles before the threshold without the branch
// and without mask arithmetic, then the masked ones (or, where only the last tile can need the mask, that tile
// alone after the loop). On the GPU a branch between tensor-core instructions (and a mask select on every
// score) costs more than a second copy of the loop body.
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

/// The scf.if directly in `loop`'s body that branches on `iv >= bound` with `bound` defined before the loop.
static scf::IfOp thresholdBranch(scf::ForOp loop, Value &bound) {
  for (auto branch : loop.getBody()->getOps<scf::IfOp>()) {
    auto compare = branch.getCondition().getDefiningOp<arith::CmpIOp>();
    if (!compare || compare.getPredicate() != arith::CmpIPredicate::sge ||
        compare.getLhs() != loop.getInductionVar() || loop.getRegion().isAncestor(compare.getRhs().getParentRegion()))
      continue;
    bound = compare.getRhs();
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
  if (condition->use_empty())
    rewriter.eraseOp(condition);
}

LogicalResult kiln::splitLoopAtThreshold(RewriterBase &rewriter, scf::ForOp loop) {
  Value bound;
  scf::IfOp branch = thresholdBranch(loop, bound);
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!branch || !step || *step <= 0 || (branch.getNumResults() > 0 && !branch.elseBlock()))
    return failure();
  unsigned position = std::distance(loop.getBody()->begin(), branch->getIterator());
  Location loc = loop.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(loop);
  // The first iteration at or past the bound: lb + ceil((bound - lb) / step) * step, within [lb, ub].
  AffineExpr lb = getAffineDimExpr(0, ctx), threshold = getAffineDimExpr(1, ctx);
  Value first = affine::makeComposedAffineApply(rewriter, loc,
                                                AffineMap::get(2, 0, lb + (threshold - lb).ceilDiv(*step) * *step),
                                                ArrayRef<OpFoldResult>{loop.getLowerBound(), bound})
                    .getResult();
  Value split = arith::MinSIOp::create(rewriter, loc, arith::MaxSIOp::create(rewriter, loc, first, loop.getLowerBound()),
                                       loop.getUpperBound());

  bool oneMasked = branch->hasAttr(kOneMaskedTileAttrName);
  auto before = cast<scf::ForOp>(rewriter.clone(*loop));
  before.setUpperBound(split);
  auto branchOf = [&](Block *body) { return cast<scf::IfOp>(*std::next(body->begin(), position)); };
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
