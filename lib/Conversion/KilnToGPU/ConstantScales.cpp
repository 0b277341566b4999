//===- ConstantScales.cpp - One multiply for a chain of constant scalings -===//
//
// A score_mod sits between constant scalings that the kernel would otherwise compute one by one on every score:
// a softcap's `cap * tanh(s / cap)` reads the score scaled by 1/sqrt(D), divides it by the cap, and its result
// is multiplied by the cap and then by log2(e) for the exponent. Per score that is four multiplies around the
// tanh where two do: the scale and 1/cap make one constant, and cap * log2(e) another, which then contracts
// with the exponent's subtraction into one FFMA. At head dim 64 the softmax's instructions, not the tensor
// cores, bound an attention kernel, so each instruction per score costs time. Folding reorders the roundings of
// two f32 products (at most an ulp), as contraction into FMAs already does.
//
//===----------------------------------------------------------------------===//

#include "TiledLoopLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// The f32 constant `value` if it is a normal number (neither zero, subnormal, infinite nor NaN).
std::optional<double> normalConstant(Value value) {
  FloatAttr constant;
  if (!value.getType().isF32() || !matchPattern(value, m_Constant(&constant)))
    return std::nullopt;
  double result = constant.getValueAsDouble();
  float rounded = static_cast<float>(result);
  if (!std::isnormal(rounded))
    return std::nullopt;
  return result;
}

/// `op` as (x, c) when it computes x * c (either operand order) or x / c, c a normal constant; c is then the
/// factor it scales x by (1 / c for a division).
std::optional<std::pair<Value, double>> scalingOf(Operation *op) {
  if (auto mul = dyn_cast_if_present<arith::MulFOp>(op)) {
    if (std::optional<double> c = normalConstant(mul.getRhs()))
      return std::make_pair(mul.getLhs(), *c);
    if (std::optional<double> c = normalConstant(mul.getLhs()))
      return std::make_pair(mul.getRhs(), *c);
  }
  if (auto div = dyn_cast_if_present<arith::DivFOp>(op))
    if (std::optional<double> c = normalConstant(div.getRhs()))
      return std::make_pair(div.getLhs(), 1.0 / *c);
  return std::nullopt;
}

} // namespace

void gpukernel::foldConstantScales(gpu::GPUFuncOp func) {
  SmallVector<Operation *> scalings;
  func.walk([&](Operation *op) {
    if (isa<arith::MulFOp, arith::DivFOp>(op) && scalingOf(op))
      scalings.push_back(op);
  });
  // One constant per factor, at the top of the kernel.
  OpBuilder atEntry = OpBuilder::atBlockBegin(&func.getBody().front());
  std::map<float, Value> constants;
  auto constantOf = [&](float value, Location loc) {
    Value &constant = constants[value];
    if (!constant)
      constant = arith::ConstantOp::create(atEntry, loc, atEntry.getF32FloatAttr(value));
    return constant;
  };
  // In order, so that a scaling whose operand was itself folded sees the folded one.
  for (Operation *op : scalings) {
    auto [x, factor] = *scalingOf(op);
    std::optional<std::pair<Value, double>> inner = scalingOf(x.getDefiningOp());
    bool fold = inner && x.hasOneUse() && std::isnormal(static_cast<float>(inner->second * factor));
    // A division by a constant becomes a multiply by its reciprocal even alone (the kernels divide by an
    // approximate reciprocal anyway).
    if (!fold && !isa<arith::DivFOp>(op))
      continue;
    OpBuilder b(op);
    Value base = fold ? inner->first : x;
    double combined = fold ? inner->second * factor : factor;
    Value product = arith::MulFOp::create(b, op->getLoc(), base, constantOf(static_cast<float>(combined), op->getLoc()));
    op->getResult(0).replaceAllUsesWith(product);
    Operation *innerOp = fold ? x.getDefiningOp() : nullptr;
    op->erase();
    if (innerOp && innerOp->use_empty())
      innerOp->erase();
  }
  // The factors the folds replaced.
  eraseDeadOps(func);
}
