//===- FoldHeadTransposes.cpp - The kiln-fold-head-transposes pass ---------===//
//
// Exporters write attention in the [B, H, S, D] layout: each projection's [B, S, H*D] output is reshaped to
// [B, S, H, D] and transposed to [B, H, S, D], RoPE is applied there, and the attention output is transposed back
// before the output projection. Each transpose is a kernel that copies the whole tensor. The attention kernel
// reads [B, S, H, D] just as well (its rows are further apart), and RoPE only needs to know which dimension holds
// the positions, so this pass moves the transposes out of their way: rope(transpose(x)) becomes
// transpose(rope(x)) with the rope reading positions from the dimension the transpose moved, and an attention of
// three [0, 2, 1, 3] transposes becomes a seq-major attention (layout = "bshd") of their inputs followed by a
// transpose of its output, which folds away against the transpose back. An attention whose inputs stay
// [B, H, S, D] but whose output is only ever transposed back stores [B, S, H, D] directly (out_layout).
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFOLDHEADTRANSPOSES
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The permutation that swaps the heads and sequence dimensions of a [B, S, H, D] tensor (its own inverse).
static constexpr int64_t kSwapHeads[] = {0, 2, 1, 3};

FailureOr<TransposeOp> kiln::sinkTransposeThroughRope(RewriterBase &rewriter, RopeOp op) {
  auto transpose = op.getInput().getDefiningOp<TransposeOp>();
  if (!transpose || !transpose->hasOneUse())
    return rewriter.notifyMatchFailure(op, "the input is not a transpose used only here");
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  int64_t last = static_cast<int64_t>(permutation.size()) - 1;
  if (permutation.back() != last)
    return rewriter.notifyMatchFailure(op, "the transpose moves the rotated (last) dimension");
  rewriter.setInsertionPoint(op);
  Value source = transpose.getInput();
  auto rope = RopeOp::create(rewriter, op.getLoc(), source.getType(), source, op.getCos(), op.getSin(),
                             op.getInterleaved(), rewriter.getI64IntegerAttr(permutation[op.getPositionDim()]));
  auto moved = TransposeOp::create(rewriter, transpose.getLoc(), op.getType(), rope.getResult(), permutation);
  rewriter.replaceOp(op, moved.getResult());
  return moved;
}

/// The [B, S, H, D] tensor that `value` transposes to [B, H, S, D], or null.
static Value headsSwappedFrom(Value value) {
  auto transpose = value.getDefiningOp<TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>(kSwapHeads))
    return {};
  return transpose.getInput();
}

/// True when every user of `value` transposes it with kSwapHeads.
static bool onlySwappedBack(Value value) {
  return !value.use_empty() && llvm::all_of(value.getUsers(), [](Operation *user) {
    auto transpose = dyn_cast<TransposeOp>(user);
    return transpose && transpose.getPermutation() == ArrayRef<int64_t>(kSwapHeads);
  });
}

/// `type` ([B, H, S, D]) with its heads and sequence dimensions swapped.
static RankedTensorType swapHeads(RankedTensorType type) {
  ArrayRef<int64_t> shape = type.getShape();
  return RankedTensorType::get({shape[0], shape[2], shape[1], shape[3]}, type.getElementType());
}

/// Only the output is transposed back: an attention of the same q, k and v that stores [B, S, H, D] directly
/// (out_layout = "bshd"), its result replacing the transposes.
static FailureOr<AttentionOp> storeOutputSeqMajor(RewriterBase &rewriter, AttentionOp op) {
  if (op.isOutSeqMajor())
    return rewriter.notifyMatchFailure(op, "the output is already stored [B, S, H, D]");
  if (!onlySwappedBack(op.getOut()))
    return rewriter.notifyMatchFailure(op, "q, k, v are not all swapped and the output is not swapped back");
  rewriter.setInsertionPoint(op);
  Type lseType = op.getLse() ? op.getLse().getType() : Type();
  auto attention = AttentionOp::create(rewriter, op.getLoc(), swapHeads(op.getOut().getType()), lseType, op.getQ(),
                                       op.getK(), op.getV(), op.getMask(), op.getScaleAttr(), op.getCausal(),
                                       op.getLayoutAttr(), rewriter.getStringAttr("bshd"), ValueRange{},
                                       ValueRange{}, IntegerAttr(), DenseI64ArrayAttr(), StringAttr());
  attention.takeVariantFrom(op); // the mods see logical positions, whatever the layout
  attention->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  for (Operation *user : llvm::to_vector(op.getOut().getUsers()))
    rewriter.replaceOp(user, attention.getOut());
  if (op.getLse())
    rewriter.replaceAllUsesWith(op.getLse(), attention.getLse());
  rewriter.eraseOp(op);
  return attention;
}

FailureOr<AttentionOp> kiln::foldHeadTransposes(RewriterBase &rewriter, AttentionOp op) {
  if (op.isSeqMajor() || op.hasEpilogue() || op.getKvChunk())
    return rewriter.notifyMatchFailure(op, "already seq-major, split, or with an epilogue in the [B, H, S, D] layout");
  Value q = headsSwappedFrom(op.getQ()), k = headsSwappedFrom(op.getK()), v = headsSwappedFrom(op.getV());
  if (!q || !k || !v)
    return storeOutputSeqMajor(rewriter, op);
  // Profitable when the input transposes go away or the output transpose folds into its users' transposes;
  // otherwise the rewrite would only add a transpose of the output.
  // An explicit out_layout keeps the output where it is; otherwise the output follows the inputs to [B, S, H, D]
  // and is transposed back for its users.
  bool outputMoves = !op.getOutLayout();
  bool inputsVanish = op.getQ().hasOneUse() && op.getK().hasOneUse() && op.getV().hasOneUse();
  if (!inputsVanish && outputMoves && !onlySwappedBack(op.getOut()))
    return rewriter.notifyMatchFailure(op, "the transposes are shared and the output is used as [B, H, S, D]");
  RankedTensorType outType = op.getOut().getType();
  rewriter.setInsertionPoint(op);
  Type lseType = op.getLse() ? op.getLse().getType() : Type();
  // Seq-major inputs make a seq-major output the default: only an explicit [B, H, S, D] output keeps its attribute.
  StringAttr outLayout = op.isOutSeqMajor() ? StringAttr() : op.getOutLayoutAttr();
  auto attention = AttentionOp::create(rewriter, op.getLoc(), outputMoves ? swapHeads(outType) : outType, lseType, q, k,
                                       v, op.getMask(), op.getScaleAttr(), op.getCausal(),
                                       rewriter.getStringAttr("bshd"), outLayout, ValueRange{}, ValueRange{},
                                       IntegerAttr(), DenseI64ArrayAttr(), StringAttr());
  attention.takeVariantFrom(op);
  attention->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  SmallVector<Value> replacements{attention.getOut()};
  if (outputMoves)
    replacements[0] =
        TransposeOp::create(rewriter, op.getLoc(), outType, attention.getOut(), ArrayRef<int64_t>(kSwapHeads));
  if (op.getLse())
    replacements.push_back(attention.getLse());
  rewriter.replaceOp(op, replacements);
  return attention;
}

namespace {
struct SinkRopeTranspose : OpRewritePattern<RopeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RopeOp op, PatternRewriter &rewriter) const override {
    return sinkTransposeThroughRope(rewriter, op);
  }
};

struct FoldAttentionHeadTransposes : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rewriter) const override {
    return foldHeadTransposes(rewriter, op);
  }
};

/// The greedy driver also folds the transposes this leaves back to back (TransposeOp::fold composes them).
struct KilnFoldHeadTransposesPass : kiln::impl::KilnFoldHeadTransposesBase<KilnFoldHeadTransposesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SinkRopeTranspose, FoldAttentionHeadTransposes>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
