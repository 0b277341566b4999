//===- FuseAttention.cpp - The kiln-fuse-attention pass --------------------===//
//
// Recognises attention written out op by op — matmul(q, k^T), a scalar scale (multiply or divide), an additive
// mask or a causal select/where, softmax over the keys, matmul with v — and replaces it with one
// kiln.attention. Grouped-query attention written as an unsqueeze/expand/reshape of k and v (each kv head
// repeated for its group of q heads) is folded into the op's head counts. Anything that does not match exactly
// (a softmax over another axis, a non-scalar scale, a select mask that is not causal, ...) is left as it was.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSEATTENTION
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// Scores at or below this are "masked" when a mask is written with a large negative instead of -inf.
static constexpr double kMaskedThreshold = -1.0e4;

/// True for a value whose every element is one number (a splat constant of any broadcastable shape).
static bool isScalarLike(Value value) { return splatValue(value).has_value(); }

/// Looks through the GQA expansion reshape(broadcast(reshape(x))) of [B, Hkv, S, D] to [B, Hkv * G, S, D].
/// Returns x and G (1 when there is no expansion).
static std::pair<Value, int64_t> stripHeadExpansion(Value value) {
  auto merge = value.getDefiningOp<ReshapeOp>();
  if (!merge)
    return {value, 1};
  auto expand = merge.getInput().getDefiningOp<BroadcastOp>();
  auto split = expand ? expand.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!split)
    return {value, 1};
  RankedTensorType source = split.getInput().getType(), unsqueezed = split.getType(),
                   expanded = expand.getType(), merged = merge.getType();
  if (source.getRank() != 4 || unsqueezed.getRank() != 5 || expanded.getRank() != 5 || merged.getRank() != 4)
    return {value, 1};
  ArrayRef<int64_t> s = source.getShape(), u = unsqueezed.getShape(), e = expanded.getShape(),
                    m = merged.getShape();
  bool unsqueezeAt2 = u[0] == s[0] && u[1] == s[1] && u[2] == 1 && u[3] == s[2] && u[4] == s[3];
  bool expandGroup = e[0] == u[0] && e[1] == u[1] && e[3] == u[3] && e[4] == u[4];
  bool mergeHeads = m[0] == e[0] && m[1] == e[1] * e[2] && m[2] == e[3] && m[3] == e[4];
  if (!unsqueezeAt2 || !expandGroup || !mergeHeads)
    return {value, 1};
  return {split.getInput(), e[2]};
}

/// Whether a constant is exactly a [.., seqQ, seqK] bottom-right-aligned causal pattern (every leading dim 1):
/// `keep(i, j)` must hold exactly when j <= i + (Sk - Sq). A constant that would broadcast along the query or key
/// axis is not: its pattern is not causal over the scores.
static bool isCausalPattern(DenseElementsAttr attr, int64_t seqQ, int64_t seqK,
                            llvm::function_ref<std::optional<bool>(int64_t)> keep) {
  auto type = cast<RankedTensorType>(attr.getType());
  if (type.getRank() < 2 || type.getDimSize(type.getRank() - 2) != seqQ ||
      type.getDimSize(type.getRank() - 1) != seqK || type.getNumElements() != seqQ * seqK)
    return false;
  for (int64_t i = 0; i < seqQ; ++i)
    for (int64_t j = 0; j < seqK; ++j) {
      std::optional<bool> kept = keep(i * seqK + j);
      if (!kept || *kept != (j <= i + (seqK - seqQ)))
        return false;
    }
  return true;
}

namespace {
/// What the score expression between the two matmuls turned out to be.
struct ScoreForm {
  double scale = 1.0;
  bool causal = false;
  Value mask;
};
} // namespace

/// Parses softmax's input back to the q k^T matmul: [select(causal, ., -inf)] [add mask] [mul/div scalar].
static std::optional<ScoreForm> parseScores(Value value, MatmulOp &scores) {
  ScoreForm form;
  ArrayRef<int64_t> scoreShape = cast<RankedTensorType>(value.getType()).getShape();
  int64_t seqQ = scoreShape[scoreShape.size() - 2], seqK = scoreShape.back();
  // Causal as select/where(keep, scores, -inf or a large negative).
  if (auto select = value.getDefiningOp<SelectOp>()) {
    DenseElementsAttr cond;
    std::optional<double> fill = splatValue(select.getOnFalse());
    if (!matchPattern(select.getCondition(), m_Constant(&cond)) || !fill || *fill > kMaskedThreshold)
      return std::nullopt;
    auto values = cond.getValues<bool>();
    if (!isCausalPattern(cond, seqQ, seqK, [&](int64_t i) -> std::optional<bool> { return values[i]; }))
      return std::nullopt;
    form.causal = true;
    value = select.getOnTrue();
  }
  // Additive mask: a causal constant pattern becomes `causal`, anything else stays a mask operand.
  if (auto add = value.getDefiningOp<AddOp>()) {
    Value lhs = add.getLhs(), rhs = add.getRhs();
    bool lhsIsScores = lhs.getDefiningOp<MatmulOp>() || lhs.getDefiningOp<MulOp>() || lhs.getDefiningOp<DivOp>();
    Value mask = lhsIsScores ? rhs : lhs;
    value = lhsIsScores ? lhs : rhs;
    DenseElementsAttr constant;
    bool causalConstant = false;
    if (!form.causal && matchPattern(mask, m_Constant(&constant)) && isa<FloatType>(constant.getElementType())) {
      auto values = constant.getValues<APFloat>();
      causalConstant = isCausalPattern(constant, seqQ, seqK, [&](int64_t i) -> std::optional<bool> {
        double v = values[i].convertToDouble();
        if (v == 0.0)
          return true;
        if (v <= kMaskedThreshold)
          return false;
        return std::nullopt;
      });
    }
    if (causalConstant)
      form.causal = true;
    else
      form.mask = mask;
  }
  // Scale by a scalar.
  if (auto mul = value.getDefiningOp<MulOp>()) {
    Value factor = isScalarLike(mul.getRhs()) ? mul.getRhs() : mul.getLhs();
    std::optional<double> c = splatValue(factor);
    if (!c)
      return std::nullopt;
    form.scale = *c;
    value = factor == mul.getRhs() ? mul.getLhs() : mul.getRhs();
  } else if (auto div = value.getDefiningOp<DivOp>()) {
    std::optional<double> c = splatValue(div.getRhs());
    if (!c || *c == 0.0)
      return std::nullopt;
    form.scale = 1.0 / *c;
    value = div.getLhs();
  }
  scores = value.getDefiningOp<MatmulOp>();
  if (!scores || !(form.scale > 0.0) || !std::isfinite(form.scale))
    return std::nullopt;
  return form;
}

FailureOr<AttentionOp> kiln::fuseAttention(RewriterBase &rewriter, MatmulOp output) {
  auto fail = [&](const char *why) { return rewriter.notifyMatchFailure(output, why); };
  if (output.getTransposeLhs() || output.getTransposeRhs() || output.getType().getRank() != 4 ||
      output.hasEpilogue())
    return fail("not a [B, H, Sq, Dv] probabilities x values matmul without epilogue");
  auto softmax = output.getLhs().getDefiningOp<SoftmaxOp>();
  if (!softmax || softmax.getAxis() != 3 || !softmax->hasOneUse())
    return fail("lhs is not a single-use softmax over the last axis");
  MatmulOp scores;
  std::optional<ScoreForm> form = parseScores(softmax.getInput(), scores);
  if (!form)
    return fail("the softmax input is not scale/mask applied to a q k^T matmul");
  if (scores.getTransposeLhs() || scores.getType().getRank() != 4 || scores.hasEpilogue() ||
      softmax.getType().getShape() != scores.getType().getShape())
    return fail("the score matmul is not [B, H, Sq, D] x [B, H, D, Sk], or the mask broadcasts it");

  // k^T: either transpose_rhs or a transpose whose last two dims swap. A transpose that also permutes the
  // leading dims (canonicalization composes [B, S, H, D] -> [B, H, S, D] with the swap) leaves the rest of the
  // permutation to a transpose that produces k, made once the whole pattern holds.
  Value keys = scores.getRhs();
  SmallVector<int64_t> keyPermutation;
  if (!scores.getTransposeRhs()) {
    auto transpose = keys.getDefiningOp<TransposeOp>();
    if (!transpose || transpose.getPermutation().size() != 4)
      return fail("the score matmul's rhs is not k transposed over its last two dims");
    SmallVector<int64_t> permutation(transpose.getPermutation());
    std::swap(permutation[2], permutation[3]);
    keys = transpose.getInput();
    if (permutation != SmallVector<int64_t>{0, 1, 2, 3})
      keyPermutation = permutation;
  }
  auto [k, keyGroup] = keyPermutation.empty() ? stripHeadExpansion(keys) : std::pair(keys, int64_t(1));
  RankedTensorType kType = cast<RankedTensorType>(k.getType());
  if (!keyPermutation.empty()) {
    SmallVector<int64_t> shape;
    for (int64_t dim : keyPermutation)
      shape.push_back(kType.getDimSize(dim));
    kType = RankedTensorType::get(shape, kType.getElementType());
  }
  auto [v, valueGroup] = stripHeadExpansion(output.getRhs());
  Value q = scores.getLhs();
  auto qType = cast<RankedTensorType>(q.getType()), vType = cast<RankedTensorType>(v.getType());
  if (qType.getRank() != 4 || kType.getRank() != 4 || vType.getRank() != 4 ||
      kType.getDimSize(1) != vType.getDimSize(1) || keyGroup != valueGroup ||
      qType.getDimSize(1) != kType.getDimSize(1) * keyGroup || qType.getDimSize(0) != kType.getDimSize(0) ||
      qType.getDimSize(0) != vType.getDimSize(0))
    return fail("q, k and v do not form [B, Hq, Sq, D] / [B, Hkv, Sk, D] / [B, Hkv, Sk, Dv]");
  if (qType.getElementType() != kType.getElementType() || qType.getElementType() != vType.getElementType() ||
      output.getType().getElementType() != qType.getElementType())
    return fail("q, k, v and the output do not share an element type");
  if (form->causal && qType.getDimSize(2) > kType.getDimSize(2))
    return fail("causal with more queries than keys");

  rewriter.setInsertionPoint(output);
  if (!keyPermutation.empty())
    k = TransposeOp::create(rewriter, output.getLoc(), kType, k, rewriter.getDenseI64ArrayAttr(keyPermutation));
  FloatAttr scaleAttr = rewriter.getF32FloatAttr(form->scale);
  auto attention = AttentionOp::create(rewriter, output.getLoc(), output.getType(), /*lse=*/Type(), q, k, v,
                                       form->mask, scaleAttr, form->causal);
  SmallVector<Operation *> unfused{softmax};
  if (Operation *values = output.getRhs().getDefiningOp())
    unfused.push_back(values);
  rewriter.replaceOp(output, attention.getOut());
  eraseDeadProducers(rewriter, unfused);
  return attention;
}

namespace {
struct KilnFuseAttentionPass : kiln::impl::KilnFuseAttentionBase<KilnFuseAttentionPass> {
  void runOnOperation() override {
    forEachInProgramOrder<MatmulOp>(
        getOperation(), [](IRRewriter &rewriter, Operation *op) { (void)fuseAttention(rewriter, cast<MatmulOp>(op)); });
  }
};
} // namespace
