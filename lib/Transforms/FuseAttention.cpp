//===- FuseAttention.cpp - The kiln-fuse-attention pass --------------------===//
//
// Recognises attention written out op by op — matmul(q, k^T), a scalar scale (multiply or divide), an additive mask or
// a causal select/where, softmax over the keys, matmul with v — and replaces it with one kiln.attention. Three variants
// as exporters write them become its score_mod / mask_mod: a tanh softcap after the scale (Gemma 2's `cap * tanh(s /
// cap)`), a causal mask constant that is a band (a sliding window), and a constant additive mask that is ALiBi's
// `slope[h] * (j - i)` (its slopes a constant table). Grouped-query attention written as an unsqueeze/expand/reshape of
// k and v (each kv head repeated for its group of q heads) is folded into the op's head counts. Anything that does not
// match exactly (a softmax over another axis, a non-scalar scale, a select mask that is not causal, ...) is left as it
// was.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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
  /// A tanh softcap `cap * tanh(s / cap)` after the scale (Gemma 2), or 0.
  double cap = 0.0;
  /// With `causal`: a sliding window, key j visible to query i only when i + (Sk - Sq) - j < window; 0 for none.
  int64_t window = 0;
  /// An ALiBi bias `slope[h] * (j - i)` (`relative`) or `slope[h] * j` written as a constant additive mask: the
  /// slopes per head.
  SmallVector<float> slopes;
  bool relative = false;
};
} // namespace

/// True when a constant holds one [Sq, Sk] matrix (its leading dims 1), as a band mask over the scores must.
static bool isWholeScoreMatrix(DenseElementsAttr attr, int64_t seqQ, int64_t seqK) {
  auto type = cast<RankedTensorType>(attr.getType());
  return type.getRank() >= 2 && type.getDimSize(type.getRank() - 2) == seqQ &&
         type.getDimSize(type.getRank() - 1) == seqK && type.getNumElements() == seqQ * seqK;
}

/// The window W when keep(i, j) holds exactly for i + shift - W < j <= i + shift (a causal sliding window; W
/// covering every key is plain causal, 0); nullopt when the pattern is no such band.
static std::optional<int64_t> bandWindow(int64_t seqQ, int64_t seqK,
                                         llvm::function_ref<std::optional<bool>(int64_t)> keep) {
  int64_t shift = seqK - seqQ, last = seqQ - 1, window = 0;
  // The last row sees keys (last + shift - W, last + shift]: W is its count of kept keys.
  for (int64_t j = 0; j < seqK; ++j) {
    std::optional<bool> kept = keep(last * seqK + j);
    if (!kept)
      return std::nullopt;
    window += *kept;
  }
  if (window == 0)
    return std::nullopt;
  for (int64_t i = 0; i < seqQ; ++i)
    for (int64_t j = 0; j < seqK; ++j) {
      std::optional<bool> kept = keep(i * seqK + j);
      if (!kept || *kept != (j <= i + shift && i + shift - j < window))
        return std::nullopt;
    }
  return window >= seqK ? 0 : window;
}

/// The slope of each head when the constant `attr`, of shape [1, H, Sq or 1, Sk], is slope[h] * (j - i)
/// (`relative`) or slope[h] * j, to f32 rounding; nullopt otherwise.
static std::optional<SmallVector<float>> alibiSlopes(DenseElementsAttr attr, int64_t heads, int64_t seqQ,
                                                     int64_t seqK, bool &relative) {
  auto type = cast<RankedTensorType>(attr.getType());
  if (type.getRank() != 4 || type.getDimSize(0) != 1 || type.getDimSize(1) != heads || seqK < 2 ||
      (type.getDimSize(2) != seqQ && type.getDimSize(2) != 1) || type.getDimSize(3) != seqK)
    return std::nullopt;
  SmallVector<double> values;
  for (const APFloat &value : attr.getValues<APFloat>())
    values.push_back(value.convertToDouble());
  int64_t rows = type.getDimSize(2);
  SmallVector<float> slopes;
  for (int64_t h = 0; h < heads; ++h) {
    const double *head = values.data() + h * rows * seqK;
    double slope = head[1] - head[0], tolerance = 1e-5 * (1 + std::abs(slope) * (seqK + seqQ));
    if (slope == 0.0 || std::abs(head[0]) > tolerance)
      return std::nullopt; // no bias, or an offset: not ALiBi
    // Row 1 tells the form (a row-constant mask, one row, is the absolute one).
    bool isRelative = rows > 1 && std::abs(head[seqK] + slope) <= tolerance;
    if (h > 0 && isRelative != relative)
      return std::nullopt;
    relative = isRelative;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < seqK; ++j)
        if (std::abs(head[i * seqK + j] - slope * (relative ? j - i : j)) > tolerance)
          return std::nullopt;
    slopes.push_back(static_cast<float>(slope));
  }
  return slopes;
}

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
    auto keep = [&](int64_t i) -> std::optional<bool> { return values[i]; };
    if (!isCausalPattern(cond, seqQ, seqK, keep)) {
      std::optional<int64_t> window = isWholeScoreMatrix(cond, seqQ, seqK) ? bandWindow(seqQ, seqK, keep)
                                                                          : std::nullopt;
      if (!window)
        return std::nullopt;
      form.window = *window;
    }
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
      auto keep = [&](int64_t i) -> std::optional<bool> {
        double v = values[i].convertToDouble();
        if (v == 0.0)
          return true;
        if (v <= kMaskedThreshold)
          return false;
        return std::nullopt;
      };
      causalConstant = isCausalPattern(constant, seqQ, seqK, keep);
      if (!causalConstant && isWholeScoreMatrix(constant, seqQ, seqK)) {
        if (std::optional<int64_t> window = bandWindow(seqQ, seqK, keep)) {
          causalConstant = true;
          form.window = *window;
        }
      }
      if (!causalConstant) {
        if (auto slopes = alibiSlopes(constant, scoreShape[1], seqQ, seqK, form.relative))
          form.slopes = std::move(*slopes);
      }
    }
    if (causalConstant)
      form.causal = true;
    else if (form.slopes.empty())
      form.mask = mask;
  }
  // A tanh softcap, cap * tanh(s / cap) (or tanh(s * (1 / cap)) * cap), after the scale.
  if (auto outer = value.getDefiningOp<MulOp>()) {
    auto tanh = outer.getLhs().getDefiningOp<TanhOp>();
    Value capValue = outer.getRhs();
    if (!tanh) {
      tanh = outer.getRhs().getDefiningOp<TanhOp>();
      capValue = outer.getLhs();
    }
    std::optional<double> cap = splatValue(capValue);
    if (tanh && cap && *cap > 0.0 && std::isfinite(*cap) && !form.mask && form.slopes.empty()) {
      auto near = [&](std::optional<double> x, double y) { return x && std::abs(*x - y) <= 1e-6 * y; };
      Value inner = tanh.getInput(), capped;
      if (auto div = inner.getDefiningOp<DivOp>(); div && near(splatValue(div.getRhs()), *cap))
        capped = div.getLhs();
      else if (auto mul = inner.getDefiningOp<MulOp>()) {
        if (near(splatValue(mul.getRhs()), 1.0 / *cap))
          capped = mul.getLhs();
        else if (near(splatValue(mul.getLhs()), 1.0 / *cap))
          capped = mul.getRhs();
      }
      if (capped) {
        form.cap = *cap;
        value = capped;
      }
    }
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

/// Writes the softcap, the ALiBi bias and the sliding window that parseScores found as the attention's
/// score_mod and mask_mod regions (the ALiBi slopes a constant mod operand).
static void addRecognisedMods(RewriterBase &rewriter, AttentionOp attention, const ScoreForm &form) {
  Location loc = attention.getLoc();
  Type f32 = rewriter.getF32Type(), index = rewriter.getIndexType();
  OpBuilder::InsertionGuard guard(rewriter);
  if (!form.slopes.empty()) {
    rewriter.setInsertionPoint(attention);
    auto type = RankedTensorType::get({static_cast<int64_t>(form.slopes.size())}, f32);
    Value slopes = ConstantOp::create(rewriter, loc, type, DenseElementsAttr::get(type, ArrayRef(form.slopes)));
    attention.getModOperandsMutable().assign(slopes);
  }
  auto constantIndex = [&](int64_t value) { return arith::ConstantIndexOp::create(rewriter, loc, value); };
  if (form.cap > 0.0 || !form.slopes.empty()) {
    SmallVector<Type> types{f32, index, index, index, index};
    for (Value operand : attention.getModOperands())
      types.push_back(operand.getType());
    Block *body = rewriter.createBlock(&attention.getScoreMod(), {}, types, SmallVector<Location>(types.size(), loc));
    Value score = body->getArgument(0);
    if (form.cap > 0.0) {
      Value cap = arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(form.cap));
      Value ratio = arith::DivFOp::create(rewriter, loc, score, cap);
      score = arith::MulFOp::create(rewriter, loc, math::TanhOp::create(rewriter, loc, ratio), cap);
    }
    if (!form.slopes.empty()) {
      Value slope = tensor::ExtractOp::create(rewriter, loc, body->getArgument(5), ValueRange{body->getArgument(2)});
      Value distance = form.relative ? arith::SubIOp::create(rewriter, loc, body->getArgument(4), body->getArgument(3))
                                           .getResult()
                                     : body->getArgument(4);
      // Through i32, which a GPU converts to f32 at full rate.
      Value narrow = arith::IndexCastOp::create(rewriter, loc, rewriter.getI32Type(), distance);
      Value bias = arith::MulFOp::create(rewriter, loc, slope, arith::SIToFPOp::create(rewriter, loc, f32, narrow));
      score = arith::AddFOp::create(rewriter, loc, score, bias);
    }
    YieldOp::create(rewriter, loc, score);
  }
  if (form.window > 0) {
    // Key j is visible to query i while i + (Sk - Sq) - j < window (causal bounds the other side).
    SmallVector<Type> types{index, index, index, index};
    for (Value operand : attention.getModOperands())
      types.push_back(operand.getType());
    Block *body = rewriter.createBlock(&attention.getMaskMod(), {}, types, SmallVector<Location>(types.size(), loc));
    auto scoreType = cast<RankedTensorType>(attention.getOut().getType());
    int64_t shift = attention.getK().getType().getDimSize(attention.getSeqDim()) -
                    scoreType.getDimSize(attention.isOutSeqMajor() ? 1 : 2);
    Value position = arith::AddIOp::create(rewriter, loc, body->getArgument(2), constantIndex(shift));
    Value distance = arith::SubIOp::create(rewriter, loc, position, body->getArgument(3));
    YieldOp::create(rewriter, loc,
                    arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, distance,
                                          constantIndex(form.window))
                        .getResult());
  }
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
  // f32 products as precise as the more precise of the two matmuls asked ("ieee" over "tf32" over none).
  StringAttr precision = output.getFp32PrecisionAttr();
  if (!precision || scores.getFp32Precision() == "ieee")
    precision = scores.getFp32PrecisionAttr();
  attention.setFp32PrecisionAttr(precision);
  addRecognisedMods(rewriter, attention, *form);
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
