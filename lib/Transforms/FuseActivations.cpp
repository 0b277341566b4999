//===- FuseActivations.cpp - The kiln-fuse-activations pass ----------------===//
//
// Exporters write activations that have no operator of their own as formulas: SiLU as x * sigmoid(x), GELU as
// 0.5 x (1 + erf(x / sqrt 2)) or GPT-2's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Left that way each op
// is a kernel and none reaches a matmul's epilogue; as kiln.silu / kiln.gelu they fuse like any activation. The
// matchers compare products as multisets of factors, so the order and grouping an exporter chose do not matter.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include <cmath>

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSEACTIVATIONS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The product without the factor at `index`.
static Product withoutFactor(const Product &product, size_t index) {
  Product rest = product;
  rest.factors.erase(rest.factors.begin() + index);
  return rest;
}

/// x when `factor` is 1 + erf(x / sqrt 2) (the erf form) or 1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)).
static Value matchGeluBracket(Value factor, GeluApproximation &approximation) {
  Value one, curve;
  if (!matchEitherOrder<AddOp>(factor, one, curve, [](Value v) { return isSplatNear(v, 1.0); }))
    return {};
  if (auto erf = curve.getDefiningOp<ErfOp>()) {
    Product argument = flattenProduct(erf.getInput());
    if (argument.factors.size() != 1 || !isScaledPowerOf(argument, argument.factors[0], 1, M_SQRT1_2))
      return {};
    approximation = GeluApproximation::none;
    return argument.factors[0];
  }
  auto tanh = curve.getDefiningOp<TanhOp>();
  if (!tanh)
    return {};
  Product argument = flattenProduct(tanh.getInput());
  // Constants a bf16 model writes are rounded to 8 bits of mantissa: accept them within 2^-8 relative.
  constexpr double bf16Tolerance = 1.0 / 256;
  const double sqrt2OverPi = std::sqrt(2.0 / M_PI);
  if (argument.factors.size() != 1 || std::abs(argument.scale - sqrt2OverPi) > bf16Tolerance * sqrt2OverPi)
    return {};
  auto sum = argument.factors[0].getDefiningOp<AddOp>();
  if (!sum)
    return {};
  for (auto [x, cubic] : {std::pair(sum.getLhs(), sum.getRhs()), std::pair(sum.getRhs(), sum.getLhs())})
    if (isScaledPowerOf(flattenProduct(cubic), x, 3, 0.044715, bf16Tolerance)) {
      approximation = GeluApproximation::tanh;
      return x;
    }
  return {};
}

FailureOr<Value> kiln::fuseActivation(RewriterBase &rewriter, Operation *root) {
  if (!isa<MulOp, DivOp>(root))
    return failure();
  Value result = root->getResult(0);
  Product product = flattenProduct(result);
  for (auto [index, factor] : llvm::enumerate(product.factors)) {
    Product rest = withoutFactor(product, index);
    Value replacement;
    if (auto sigmoid = factor.getDefiningOp<SigmoidOp>()) {
      Value x = sigmoid.getInput();
      if (x.getType() == result.getType() && isScaledPowerOf(rest, x, 1, 1.0)) {
        rewriter.setInsertionPoint(root);
        replacement = SiluOp::create(rewriter, root->getLoc(), x.getType(), x);
      }
    } else {
      GeluApproximation approximation;
      Value x = matchGeluBracket(factor, approximation);
      if (x && x.getType() == result.getType() && isScaledPowerOf(rest, x, 1, 0.5)) {
        rewriter.setInsertionPoint(root);
        replacement = GeluOp::create(rewriter, root->getLoc(), x.getType(), x, approximation);
      }
    }
    if (replacement) {
      replaceAndEraseDead(rewriter, root, replacement);
      return replacement;
    }
  }
  return failure();
}

namespace {
struct KilnFuseActivationsPass : kiln::impl::KilnFuseActivationsBase<KilnFuseActivationsPass> {
  void runOnOperation() override {
    forEachInProgramOrder<MulOp, DivOp>(
        getOperation(), [](IRRewriter &rewriter, Operation *op) { (void)fuseActivation(rewriter, op); });
  }
};
} // namespace
