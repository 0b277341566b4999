//===- ConstantScales.cpp - One multiply for a chain of constant scalings -===//
//
// A score_mod sits between constant scalings that the kernel would otherwise compute one by one on every score:
// a softcap's `cap * tanh(s / cap)` reads the score scaled by 1/sqrt(D), divides it by the cap, and its result
// is multiplied by the cap and then by log2(e) for the exponent. Per score that is four multiplies around the
// tanh where two do: the scale and 1/cap make one constant, and cap * log2(e) another, which then contracts
// with the exponent's subtraction into one FFMA. At head dim 64 the softmax's instructions, not the tensor
// cores, bound an attention kernel, so each instruction per score costs time. Folding changes the roundings, as
// contraction into FMAs already does: the product of the constants is rounded once to f32 (an ulp or so of the
// result), and an intermediate product that would have overflowed or underflowed no longer does (only normal
// constants and normal products fold, so that such a case needs a score beyond 2^100 or so).
//
//===----------------------------------------------------------------------===//

#include "TiledLoopLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// The value of `value` if it is an f32 constant that is a normal number (neither zero, subnormal, infinite nor
/// NaN).
std::optional<double> normalF32Constant(Value value) {
  FloatAttr constant;
  if (!value.getType().isF32() || !matchPattern(value, m_Constant(&constant)))
    return std::nullopt;
  double result = constant.getValueAsDouble();
  if (!std::isnormal(static_cast<float>(result)))
    return std::nullopt;
  return result;
}

} // namespace

std::optional<std::pair<Value, double>> gpukernel::constantScalingOf(Operation *op) {
  if (auto mul = dyn_cast_if_present<arith::MulFOp>(op)) {
    if (std::optional<double> c = normalF32Constant(mul.getRhs()))
      return std::make_pair(mul.getLhs(), *c);
    if (std::optional<double> c = normalF32Constant(mul.getLhs()))
      return std::make_pair(mul.getRhs(), *c);
  }
  if (auto div = dyn_cast_if_present<arith::DivFOp>(op))
    if (std::optional<double> c = normalF32Constant(div.getRhs()))
      return std::make_pair(div.getLhs(), 1.0 / *c);
  return std::nullopt;
}

void gpukernel::foldConstantScales(gpu::GPUFuncOp func) {
  SmallVector<Operation *> scalings;
  func.walk([&](Operation *op) {
    if (isa<arith::MulFOp, arith::DivFOp>(op) && constantScalingOf(op))
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
  // In order, so that a scaling whose operand was itself folded sees the folded one; an inner scaling a fold
  // leaves unused is erased at once (its one use was the op folded), and skipped if the list still holds it.
  DenseSet<Operation *> erased;
  for (Operation *op : scalings) {
    if (erased.contains(op))
      continue;
    auto [x, factor] = *constantScalingOf(op);
    std::optional<std::pair<Value, double>> inner = constantScalingOf(x.getDefiningOp());
    bool fold = inner && x.hasOneUse() && std::isnormal(static_cast<float>(inner->second * factor));
    // A division by a constant becomes a multiply by its reciprocal even alone (the kernels divide by an
    // approximate reciprocal anyway), where that reciprocal is a normal number.
    if (!fold && (!isa<arith::DivFOp>(op) || !std::isnormal(static_cast<float>(factor))))
      continue;
    OpBuilder b(op);
    Value base = fold ? inner->first : x;
    double combined = fold ? inner->second * factor : factor;
    Value product = arith::MulFOp::create(b, op->getLoc(), base, constantOf(static_cast<float>(combined), op->getLoc()));
    op->getResult(0).replaceAllUsesWith(product);
    Operation *innerOp = fold ? x.getDefiningOp() : nullptr;
    op->erase();
    if (innerOp && innerOp->use_empty()) {
      erased.insert(innerOp);
      innerOp->erase();
    }
  }
  // The factors the folds replaced.
  eraseDeadOps(func);
}
