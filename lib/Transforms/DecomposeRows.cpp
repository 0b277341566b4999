//===- DecomposeRows.cpp - The kiln-decompose-rows pass --------------------===//
//
// A row op on a tile (softmax along the last axis, RMSNorm, LayerNorm, logsumexp) is written once here as the
// primitives every backend lowers: f32 row reductions that keep the reduced column, and elementwise ops that
// broadcast it back over the row. The host lowers these through linalg and the GPU by their register layout, so
// the CPU numerics tests check the very arithmetic the GPU kernels run.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "TilingUtils.h"

#include <limits>

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNDECOMPOSEROWS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The primitives of one decomposition, building on `b` at the op's location, all in f32.
namespace {
struct RowMath {
  OpBuilder &b;
  Location loc;

  RankedTensorType f32Like(Value value) const {
    auto type = cast<RankedTensorType>(value.getType());
    return RankedTensorType::get(type.getShape(), b.getF32Type());
  }
  Value toF32(Value value) const {
    if (cast<RankedTensorType>(value.getType()).getElementType().isF32())
      return value;
    return CastOp::create(b, loc, f32Like(value), value);
  }
  Value castTo(Value value, Type element) const {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == element)
      return value;
    return CastOp::create(b, loc, RankedTensorType::get(type.getShape(), element), value);
  }
  /// The row's `kind` reduction, kept as a column of the input's rank.
  Value reduceRow(ReduceKind kind, Value x) const {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = 1;
    return ReduceOp::create(b, loc, RankedTensorType::get(shape, type.getElementType()), kind, x,
                            ArrayRef<int64_t>{type.getRank() - 1}, /*keep_dims=*/true);
  }
  Value add(Value x, Value y) const { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) const { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) const { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) const { return DivOp::create(b, loc, x, y); }
  Value max(Value x, Value y) const { return MaxOp::create(b, loc, x, y); }
  Value exp(Value x) const { return ExpOp::create(b, loc, x.getType(), x); }
  Value log(Value x) const { return LogOp::create(b, loc, x.getType(), x); }
  Value rsqrt(Value x) const { return RsqrtOp::create(b, loc, x.getType(), x); }
  Value constant(double value) const { return scalarConstant(b, loc, value); }

  /// The row max and exp(x - max): softmax's and logsumexp's common part. A row of -inf is shifted by the most
  /// negative float instead of its max, so that its exponentials are 0 rather than exp(-inf + inf), NaN.
  std::pair<Value, Value> shiftedExp(Value x) const {
    Value rowMax = max(reduceRow(ReduceKind::max, x), constant(-std::numeric_limits<float>::max()));
    Value e = exp(sub(x, rowMax));
    return {rowMax, e};
  }
};
} // namespace

/// Whether `op` is a row op of a tile that this file decomposes (a row reduction is already a primitive).
static bool isTileRowOp(Operation *op) {
  return op->getParentOfType<scf::ForallOp>() && isRowOp(op) && !isa<ReduceOp>(op);
}

FailureOr<Value> kiln::decomposeRowOp(RewriterBase &rewriter, Operation *op) {
  if (!isTileRowOp(op))
    return rewriter.notifyMatchFailure(op, "not a last-axis row op inside a tiled kernel");
  rewriter.setInsertionPoint(op);
  RowMath m{rewriter, op->getLoc()};
  Value x = m.toF32(op->getOperand(0));
  Type element = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  Value result;
  // Each step is its own statement so that the ops come out in the order written (argument evaluation order
  // is unspecified).
  if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
    Value e = m.shiftedExp(x).second;
    Value sum = m.reduceRow(ReduceKind::sum, e);
    // A row with a finite max sums to at least exp(0) = 1, so only an empty row (sum 0) divides by 1 instead.
    if (softmax.getZeroEmptyRows())
      sum = m.max(sum, m.constant(1.0));
    result = m.castTo(m.div(e, sum), element);
  } else if (auto logSumExp = dyn_cast<LogSumExpOp>(op)) {
    auto [max, e] = m.shiftedExp(x);
    Value sum = m.reduceRow(ReduceKind::sum, e);
    Value column = m.add(max, m.log(sum));
    result = ReshapeOp::create(rewriter, op->getLoc(), logSumExp.getType(), column);
  } else if (auto rms = dyn_cast<RmsNormOp>(op)) {
    Value meanSquare = m.reduceRow(ReduceKind::mean, m.mul(x, x));
    Value epsilon = m.constant(rms.getEpsilon().convertToDouble());
    Value inv = m.rsqrt(m.add(meanSquare, epsilon));
    Value normed = m.mul(x, inv);
    Value weight = m.toF32(rms.getWeight());
    result = m.castTo(m.mul(normed, weight), element);
  } else {
    auto norm = cast<LayerNormOp>(op);
    Value centred = m.sub(x, m.reduceRow(ReduceKind::mean, x));
    Value variance = m.reduceRow(ReduceKind::mean, m.mul(centred, centred));
    Value epsilon = m.constant(norm.getEpsilon().convertToDouble());
    Value inv = m.rsqrt(m.add(variance, epsilon));
    Value normed = m.mul(centred, inv);
    Value weight = m.toF32(norm.getWeight());
    Value y = m.mul(normed, weight);
    if (norm.getBias()) {
      Value bias = m.toF32(norm.getBias());
      y = m.add(y, bias);
    }
    result = m.castTo(y, element);
  }
  rewriter.replaceOp(op, result);
  return result;
}

namespace {
struct KilnDecomposeRowsPass : kiln::impl::KilnDecomposeRowsBase<KilnDecomposeRowsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> rowOps;
    getOperation()->walk([&](Operation *op) {
      if (isTileRowOp(op))
        rowOps.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : rowOps)
      if (failed(decomposeRowOp(rewriter, op)))
        return signalPassFailure();
  }
};
} // namespace
