//===- Matching.cpp - Small matchers shared by the graph fusion passes ----===//
//
// Splat constants, product trees, mean reductions and dead-producer clean-up, for the passes that turn
// written-out formulas back into kiln ops.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;

std::optional<double> kiln::splatValue(Value value) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat() || !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

bool kiln::isSplatNear(Value value, double expected, double tolerance) {
  std::optional<double> actual = splatValue(value);
  return actual && std::abs(*actual - expected) <= tolerance * std::abs(expected);
}

static void flattenInto(Value value, Product &product) {
  if (std::optional<double> constant = splatValue(value)) {
    product.scale *= *constant;
    return;
  }
  if (auto mul = value.getDefiningOp<MulOp>()) {
    flattenInto(mul.getLhs(), product);
    flattenInto(mul.getRhs(), product);
    return;
  }
  if (auto neg = value.getDefiningOp<NegOp>()) {
    product.scale = -product.scale;
    flattenInto(neg.getInput(), product);
    return;
  }
  if (auto pow = value.getDefiningOp<PowOp>()) {
    std::optional<double> exponent = splatValue(pow.getRhs());
    if (exponent && (*exponent == 2.0 || *exponent == 3.0)) {
      for (int i = 0; i < static_cast<int>(*exponent); ++i)
        flattenInto(pow.getLhs(), product);
      return;
    }
  }
  if (auto div = value.getDefiningOp<DivOp>()) {
    std::optional<double> divisor = splatValue(div.getRhs());
    if (divisor && *divisor != 0.0) {
      product.scale /= *divisor;
      flattenInto(div.getLhs(), product);
      return;
    }
  }
  product.factors.push_back(value);
}

Product kiln::flattenProduct(Value value) {
  Product product;
  flattenInto(value, product);
  return product;
}

bool kiln::isScaledPowerOf(const Product &product, Value x, int power, double coefficient, double tolerance) {
  Product base = flattenProduct(x);
  SmallVector<Value> expected;
  for (int i = 0; i < power; ++i)
    llvm::append_range(expected, base.factors);
  SmallVector<Value> actual(product.factors);
  auto byAddress = [](Value a, Value b) { return a.getAsOpaquePointer() < b.getAsOpaquePointer(); };
  llvm::sort(expected, byAddress);
  llvm::sort(actual, byAddress);
  double expectedScale = coefficient * std::pow(base.scale, power);
  return actual == expected && std::abs(product.scale - expectedScale) <= tolerance * std::abs(expectedScale);
}

bool kiln::isMeanOverLastAxis(Value value, Value &input) {
  auto reduce = value.getDefiningOp<ReduceOp>();
  if (!reduce || reduce.getKind() != ReduceKind::mean || !reduce.getKeepDims())
    return false;
  int64_t rank = cast<RankedTensorType>(reduce.getInput().getType()).getRank();
  if (reduce.getAxes().size() != 1 || reduce.getAxes()[0] != rank - 1)
    return false;
  input = reduce.getInput();
  return true;
}

void kiln::eraseDeadProducers(RewriterBase &rewriter, SmallVector<Operation *> roots) {
  while (!roots.empty()) {
    Operation *op = roots.pop_back_val();
    if (!op->use_empty() || !isa<KilnDialect>(op->getDialect()))
      continue;
    SmallVector<Operation *> producers;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        producers.push_back(producer);
    rewriter.eraseOp(op);
    for (Operation *producer : producers)
      if (llvm::find(roots, producer) == roots.end())
        roots.push_back(producer);
  }
}

Value kiln::widenedFrom(Value value, Type narrowElement) {
  auto cast = value.getDefiningOp<CastOp>();
  if (!cast || cast.getInput().getType().getElementType() != narrowElement)
    return {};
  return cast.getInput();
}

void kiln::replaceAndEraseDead(RewriterBase &rewriter, Operation *root, Value replacement) {
  SmallVector<Operation *> producers;
  for (Value operand : root->getOperands())
    if (Operation *producer = operand.getDefiningOp())
      producers.push_back(producer);
  rewriter.replaceOp(root, replacement);
  eraseDeadProducers(rewriter, producers);
}
