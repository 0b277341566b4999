//===- FuseNorms.cpp - The kiln-fuse-norms pass ----------------------------===//
//
// RMSNorm and LayerNorm written out op by op — mean of squares, plus epsilon, an inverse square root (rsqrt,
// 1/sqrt, reciprocal of sqrt, pow -0.5, or a division by sqrt), the weight, the bias, and for LayerNorm the
// centring by the mean — become one kiln.rms_norm / kiln.layer_norm: one row kernel instead of seven or more
// elementwise and reduction kernels. A norm computed in f32 between casts from and back to the tensor's type (as
// Llama-style modules write it, or as torch decomposes nn.RMSNorm of a bf16 tensor: casts of the input and the
// weight, the norm, a cast of its result) becomes the norm of the original tensor, which the row kernel computes
// in f32.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSENORMS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {
/// What a written-out normalisation computes: (x - mean?) / sqrt(mean(.^2) + epsilon).
struct Normalized {
  Value input;
  double epsilon = 0.0;
  bool centered = false;
};
} // namespace

/// a when `value` is 1 / sqrt(a) as rsqrt(a), reciprocal(sqrt(a)), 1 / sqrt(a) or pow(a, -0.5).
static Value matchInverseSqrt(Value value) {
  if (auto rsqrt = value.getDefiningOp<RsqrtOp>())
    return rsqrt.getInput();
  if (auto reciprocal = value.getDefiningOp<ReciprocalOp>())
    if (auto sqrt = reciprocal.getInput().getDefiningOp<SqrtOp>())
      return sqrt.getInput();
  if (auto div = value.getDefiningOp<DivOp>())
    if (isSplatNear(div.getLhs(), 1.0, 0.0))
      if (auto sqrt = div.getRhs().getDefiningOp<SqrtOp>())
        return sqrt.getInput();
  if (auto pow = value.getDefiningOp<PowOp>())
    if (isSplatNear(pow.getRhs(), -0.5, 0.0))
      return pow.getLhs();
  return {};
}

/// True when `value` is d * d or pow(d, 2).
static bool isSquareOf(Value value, Value d) {
  if (auto mul = value.getDefiningOp<MulOp>())
    return mul.getLhs() == d && mul.getRhs() == d;
  if (auto pow = value.getDefiningOp<PowOp>())
    return pow.getLhs() == d && isSplatNear(pow.getRhs(), 2.0, 0.0);
  return false;
}

/// Matches d / sqrt(mean(d^2, -1) + epsilon), written as a division by sqrt or a product with an inverse sqrt;
/// d is either the input itself (RMSNorm) or input - mean(input, -1) (LayerNorm).
static std::optional<Normalized> matchNormalized(Value value) {
  Value d, variancePlusEps;
  if (auto div = value.getDefiningOp<DivOp>()) {
    if (auto sqrt = div.getRhs().getDefiningOp<SqrtOp>()) {
      d = div.getLhs();
      variancePlusEps = sqrt.getInput();
    }
  } else {
    Value inverse;
    if (matchEitherOrder<MulOp>(value, inverse, d, [](Value v) { return bool(matchInverseSqrt(v)); }))
      variancePlusEps = matchInverseSqrt(inverse);
  }
  Value epsilon, variance, square;
  if (!d || !matchEitherOrder<AddOp>(variancePlusEps, epsilon, variance,
                                     [](Value v) { return splatValue(v).has_value(); }))
    return std::nullopt;
  if (!isMeanOverLastAxis(variance, square) || !isSquareOf(square, d) || *splatValue(epsilon) < 0.0)
    return std::nullopt;
  Normalized normalized{d, *splatValue(epsilon), false};
  if (auto sub = d.getDefiningOp<SubOp>()) {
    Value x;
    if (isMeanOverLastAxis(sub.getRhs(), x) && x == sub.getLhs())
      normalized = Normalized{x, normalized.epsilon, true};
  }
  if (normalized.input.getType() != value.getType())
    return std::nullopt;
  return normalized;
}

/// True for a rank-1 tensor of the last dimension of `like`, with its element type.
static bool isRowVector(Value value, Value like) {
  auto type = cast<RankedTensorType>(value.getType());
  auto likeType = cast<RankedTensorType>(like.getType());
  return type.getRank() == 1 && type.getDimSize(0) == likeType.getShape().back() &&
         type.getElementType() == likeType.getElementType();
}

/// The normalisation behind `value`, seen through a cast back from the type it was computed in.
static std::optional<Normalized> matchNormalizedThroughCast(Value value) {
  auto cast = value.getDefiningOp<CastOp>();
  if (!cast)
    return matchNormalized(value);
  std::optional<Normalized> inner = matchNormalized(cast.getInput());
  auto widen = inner ? inner->input.getDefiningOp<CastOp>() : CastOp();
  if (!widen || widen.getInput().getType() != value.getType())
    return std::nullopt;
  inner->input = widen.getInput();
  return inner;
}

FailureOr<Value> kiln::fuseNorm(RewriterBase &rewriter, Operation *root) {
  Value result = root->getResult(0);
  Value weight, bias, normalizedValue;
  std::optional<Normalized> normalized;
  // Outermost first: + bias, then * weight, then the bare normalisation.
  Value scaled;
  if (isa<AddOp>(root) &&
      matchEitherOrder<AddOp>(result, bias, scaled, [&](Value v) { return isRowVector(v, result); })) {
    if (matchEitherOrder<MulOp>(scaled, weight, normalizedValue, [&](Value v) { return isRowVector(v, result); }))
      normalized = matchNormalizedThroughCast(normalizedValue);
    if (!normalized || !normalized->centered)
      return failure();
  } else if (isa<MulOp>(root) && matchEitherOrder<MulOp>(result, weight, normalizedValue,
                                                          [&](Value v) { return isRowVector(v, result); })) {
    normalized = matchNormalizedThroughCast(normalizedValue);
  }
  if (!normalized) {
    weight = {};
    normalized = matchNormalizedThroughCast(result);
  }
  if (!normalized || normalized->input.getType() != result.getType())
    return failure();
  // Leave a weighted or biased form to its outer op, which comes later in program order; a cast back to the
  // input's type may sit in between.
  if (!weight || (normalized->centered && !bias)) {
    SmallVector<Value> outputs{result};
    for (Operation *user : result.getUsers())
      if (isa<CastOp>(user))
        outputs.push_back(user->getResult(0));
    for (Value output : outputs)
      for (Operation *user : output.getUsers()) {
        if (user->getNumResults() != 1)
          continue;
        auto appliesRowVector = [&](Value v) { return v != output && isRowVector(v, output); };
        Value other, same;
        if ((!weight && matchEitherOrder<MulOp>(user->getResult(0), other, same, appliesRowVector)) ||
            (weight && matchEitherOrder<AddOp>(user->getResult(0), other, same, appliesRowVector)))
          return failure();
      }
  }

  Location loc = root->getLoc();
  rewriter.setInsertionPoint(root);
  auto type = cast<RankedTensorType>(result.getType());
  if (!weight) {
    auto weightType = RankedTensorType::get({type.getShape().back()}, type.getElementType());
    auto one = rewriter.getFloatAttr(type.getElementType(), 1.0);
    weight = ConstantOp::create(rewriter, loc, weightType, DenseElementsAttr::get(weightType, one));
  }
  FloatAttr epsilon = rewriter.getF32FloatAttr(normalized->epsilon);
  Value replacement =
      normalized->centered
          ? LayerNormOp::create(rewriter, loc, type, normalized->input, weight, bias, epsilon).getResult()
          : RmsNormOp::create(rewriter, loc, type, normalized->input, weight, epsilon).getResult();
  replaceAndEraseDead(rewriter, root, replacement);
  return replacement;
}

FailureOr<Value> kiln::narrowNorm(RewriterBase &rewriter, CastOp narrow) {
  Operation *norm = narrow.getInput().getDefiningOp();
  if (!isa_and_nonnull<RmsNormOp, LayerNormOp>(norm) || !norm->hasOneUse())
    return failure();
  Type element = narrow.getType().getElementType();
  auto wideElement = dyn_cast<FloatType>(narrow.getInput().getType().getElementType());
  auto narrowElement = dyn_cast<FloatType>(element);
  if (!wideElement || !narrowElement || narrowElement.getWidth() >= wideElement.getWidth())
    return failure();
  // Every operand (input, weight, bias) must be a cast up from the narrow type, so that the row kernel reading
  // them narrow and computing in f32 sees the same values.
  SmallVector<Value> operands;
  for (Value operand : norm->getOperands()) {
    Value source = widenedFrom(operand, element);
    if (!source)
      return failure();
    operands.push_back(source);
  }
  rewriter.setInsertionPoint(narrow);
  Location loc = norm->getLoc();
  Value replacement;
  if (auto rms = dyn_cast<RmsNormOp>(norm))
    replacement = RmsNormOp::create(rewriter, loc, narrow.getType(), operands[0], operands[1], rms.getEpsilonAttr());
  else
    replacement = LayerNormOp::create(rewriter, loc, narrow.getType(), operands[0], operands[1],
                                      operands.size() > 2 ? operands[2] : Value(),
                                      cast<LayerNormOp>(norm).getEpsilonAttr());
  replaceAndEraseDead(rewriter, narrow, replacement);
  return replacement;
}

namespace {
struct KilnFuseNormsPass : kiln::impl::KilnFuseNormsBase<KilnFuseNormsPass> {
  void runOnOperation() override {
    forEachInProgramOrder<MulOp, DivOp, AddOp>(
        getOperation(), [](IRRewriter &rewriter, Operation *op) { (void)fuseNorm(rewriter, op); });
    // A second walk: the first one erases casts that this one would otherwise visit.
    forEachInProgramOrder<CastOp>(getOperation(), [](IRRewriter &rewriter, Operation *op) {
      (void)narrowNorm(rewriter, cast<CastOp>(op));
    });
  }
};
} // namespace
