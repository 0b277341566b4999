//===- Normalization.cpp - softmax, reduce, norms and RoPE to linalg -------===//
//
// Row-wise ops: each is a reduction (max, sum, mean of squares, ...) followed by an elementwise pass that reads
// the reduced value back broadcast along the reduced axes. Reductions accumulate in f32 whatever the input type.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

namespace {

Value identity(OpBuilder &, Location, ValueRange x) { return x[0]; }

struct SoftmaxLowering : OpConversionPattern<SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    ArrayRef<int64_t> shape = type.getShape();
    int64_t axis = op.getAxis();
    AffineMap full = rewriter.getMultiDimIdentityMap(shape.size());
    AffineMap reduced = getDroppedAxesMap(shape.size(), {axis}, rewriter.getContext());
    Type f32 = rewriter.getF32Type();
    Value input = adaptor.getInput();
    Value rowMax = buildReduction(rewriter, loc, shape, {axis}, Combiner::Max, input, full, identity);
    Value exps = buildElementwise(rewriter, loc, shape, f32, ValueRange{input, rowMax}, {full, reduced},
                                  [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                    return expBelowMax(b, l, x[0], x[1]);
                                  });
    Value rowSum = buildReduction(rewriter, loc, shape, {axis}, Combiner::Sum, exps, full, identity);
    bool zeroEmptyRows = op.getZeroEmptyRows();
    rewriter.replaceOp(op, buildElementwise(rewriter, loc, shape, type.getElementType(), ValueRange{exps, rowSum},
                                            {full, reduced}, [&](OpBuilder &b, Location l, ValueRange x) -> Value {
                                              return zeroEmptyRows ? divideByTotal(b, l, x[0], x[1])
                                                                   : arith::DivFOp::create(b, l, x[0], x[1]);
                                            }));
    return success();
  }
};

/// max + log(sum(exp(x - max))) along the axis.
struct LogSumExpLowering : OpConversionPattern<LogSumExpOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LogSumExpOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ArrayRef<int64_t> shape = op.getInput().getType().getShape();
    int64_t axis = op.getAxis();
    AffineMap full = rewriter.getMultiDimIdentityMap(shape.size());
    AffineMap reduced = getDroppedAxesMap(shape.size(), {axis}, rewriter.getContext());
    Value input = adaptor.getInput();
    Value rowMax = buildReduction(rewriter, loc, shape, {axis}, Combiner::Max, input, full, identity);
    Value sum = buildReduction(rewriter, loc, shape, {axis}, Combiner::Sum, ValueRange{input, rowMax},
                               {full, reduced}, [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                 return expBelowMax(b, l, x[0], x[1]);
                               });
    RankedTensorType type = op.getType();
    AffineMap id = rewriter.getMultiDimIdentityMap(type.getRank());
    rewriter.replaceOp(op, buildElementwise(rewriter, loc, type.getShape(), type.getElementType(),
                                            ValueRange{rowMax, sum}, {id, id},
                                            [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                              return arith::AddFOp::create(b, l, finiteMax(b, l, x[0]),
                                                                           math::LogOp::create(b, l, x[1]));
                                            }));
    return success();
  }
};

struct ReduceLowering : OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType(), resultType = op.getType();
    ArrayRef<int64_t> shape = inputType.getShape(), axes = op.getAxes();
    Combiner combiner = op.getKind() == ReduceKind::max   ? Combiner::Max
                        : op.getKind() == ReduceKind::min ? Combiner::Min
                                                          : Combiner::Sum;
    Value reduced = buildReduction(rewriter, loc, shape, axes, combiner, adaptor.getInput(),
                                   rewriter.getMultiDimIdentityMap(shape.size()), identity);
    auto reducedType = cast<RankedTensorType>(reduced.getType());
    double divisor = 1.0;
    if (op.getKind() == ReduceKind::mean)
      for (int64_t axis : axes)
        divisor *= shape[axis];
    AffineMap id = rewriter.getMultiDimIdentityMap(reducedType.getRank());
    Value result = buildElementwise(rewriter, loc, reducedType.getShape(), resultType.getElementType(), reduced,
                                    id, [divisor](OpBuilder &b, Location l, ValueRange x) -> Value {
                                      if (divisor == 1.0)
                                        return x[0];
                                      return arith::DivFOp::create(b, l, x[0],
                                                                   floatConstant(b, l, x[0].getType(), divisor));
                                    });
    // The kept axes are unit dimensions: an expand_shape, which bufferizes to a view.
    if (op.getKeepDims()) {
      std::optional<SmallVector<ReassociationIndices>> groups =
          getReassociationIndicesForReshape(cast<ShapedType>(result.getType()), resultType);
      if (!groups)
        return rewriter.notifyMatchFailure(op, "the kept dimensions do not expand the reduced shape");
      result = tensor::ExpandShapeOp::create(rewriter, loc, resultType, result, *groups);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// x * rsqrt(mean(x^2) + eps) * weight over the last dimension.
struct RmsNormLowering : OpConversionPattern<RmsNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RmsNormOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    ArrayRef<int64_t> shape = type.getShape();
    int64_t last = shape.size() - 1;
    MLIRContext *ctx = rewriter.getContext();
    AffineMap full = rewriter.getMultiDimIdentityMap(shape.size());
    AffineMap row = getDroppedAxesMap(shape.size(), {last}, ctx);
    AffineMap channel = AffineMap::get(shape.size(), 0, getAffineDimExpr(last, ctx));
    Value sumSquares = buildReduction(rewriter, loc, shape, {last}, Combiner::Sum, adaptor.getInput(), full,
                                      [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                        return arith::MulFOp::create(b, l, x[0], x[0]);
                                      });
    double count = shape[last], epsilon = op.getEpsilon().convertToDouble();
    rewriter.replaceOp(
        op, buildElementwise(rewriter, loc, shape, type.getElementType(),
                             ValueRange{adaptor.getInput(), sumSquares, adaptor.getWeight()}, {full, row, channel},
                             [&](OpBuilder &b, Location l, ValueRange x) -> Value {
                               Type f32 = x[1].getType();
                               Value meanSquare = arith::DivFOp::create(b, l, x[1], floatConstant(b, l, f32, count));
                               Value inv = math::RsqrtOp::create(
                                   b, l, arith::AddFOp::create(b, l, meanSquare, floatConstant(b, l, f32, epsilon)));
                               return arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x[0], inv), x[2]);
                             }));
    return success();
  }
};

/// (x - mean) * rsqrt(var + eps) * weight (+ bias) over the last dimension.
struct LayerNormLowering : OpConversionPattern<LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    ArrayRef<int64_t> shape = type.getShape();
    int64_t last = shape.size() - 1;
    MLIRContext *ctx = rewriter.getContext();
    AffineMap full = rewriter.getMultiDimIdentityMap(shape.size());
    AffineMap row = getDroppedAxesMap(shape.size(), {last}, ctx);
    AffineMap channel = AffineMap::get(shape.size(), 0, getAffineDimExpr(last, ctx));
    double count = shape[last], epsilon = op.getEpsilon().convertToDouble();
    Value input = adaptor.getInput();
    Type f32 = rewriter.getF32Type();

    Value sum = buildReduction(rewriter, loc, shape, {last}, Combiner::Sum, input, full, identity);
    SmallVector<int64_t> rowShape(shape.drop_back());
    AffineMap rowId = rewriter.getMultiDimIdentityMap(rowShape.size());
    Value mean = buildElementwise(rewriter, loc, rowShape, f32, sum, rowId,
                                  [count](OpBuilder &b, Location l, ValueRange x) -> Value {
                                    return arith::DivFOp::create(b, l, x[0], floatConstant(b, l, x[0].getType(), count));
                                  });
    Value sumSquares = buildReduction(rewriter, loc, shape, {last}, Combiner::Sum, ValueRange{input, mean},
                                      {full, row}, [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                        Value centred = arith::SubFOp::create(b, l, x[0], x[1]);
                                        return arith::MulFOp::create(b, l, centred, centred);
                                      });
    SmallVector<Value> inputs{input, mean, sumSquares, adaptor.getWeight()};
    SmallVector<AffineMap> maps{full, row, row, channel};
    if (Value bias = adaptor.getBias()) {
      inputs.push_back(bias);
      maps.push_back(channel);
    }
    rewriter.replaceOp(op, buildElementwise(rewriter, loc, shape, type.getElementType(), inputs, maps,
                                            [&](OpBuilder &b, Location l, ValueRange x) -> Value {
                                              Value var = arith::DivFOp::create(b, l, x[2], floatConstant(b, l, f32, count));
                                              Value inv = math::RsqrtOp::create(
                                                  b, l, arith::AddFOp::create(b, l, var, floatConstant(b, l, f32, epsilon)));
                                              Value y = arith::MulFOp::create(
                                                  b, l, arith::MulFOp::create(b, l, arith::SubFOp::create(b, l, x[0], x[1]), inv),
                                                  x[3]);
                                              return x.size() > 4 ? Value(arith::AddFOp::create(b, l, y, x[4])) : y;
                                            }));
    return success();
  }
};

/// Each output element reads itself and its rotation partner (tensor.extract), and the factors of its pair (or,
/// with full tables, its own).
struct RopeLowering : OpConversionPattern<RopeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RopeOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank(), dim = type.getDimSize(rank - 1), half = dim / 2;
    bool interleaved = op.getInterleaved();
    Value input = adaptor.getInput(), cosTable = adaptor.getCos(), sinTable = adaptor.getSin();
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, ValueRange{}, ValueRange{createEmpty(rewriter, loc, type.getShape(),
                                                                             type.getElementType())},
        ArrayRef<AffineMap>{rewriter.getMultiDimIdentityMap(rank)},
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange) {
          SmallVector<Value> index;
          for (int64_t d = 0; d < rank; ++d)
            index.push_back(linalg::IndexOp::create(b, l, d));
          Value c = index.back();
          auto cst = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, l, v); };
          // Pair number and whether this element is the pair's first or second member.
          Value pair, isSecond, partner;
          if (interleaved) {
            pair = arith::DivUIOp::create(b, l, c, cst(2));
            isSecond = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, arith::RemUIOp::create(b, l, c, cst(2)),
                                             cst(1));
            partner = arith::XOrIOp::create(b, l, c, cst(1));
          } else {
            isSecond = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, c, cst(half));
            pair = arith::SelectOp::create(b, l, isSecond, arith::SubIOp::create(b, l, c, cst(half)), c);
            partner = arith::SelectOp::create(b, l, isSecond, pair, arith::AddIOp::create(b, l, c, cst(half)));
          }
          SmallVector<Value> partnerIndex(index);
          partnerIndex.back() = partner;
          Value self = widen(b, l, tensor::ExtractOp::create(b, l, input, index));
          Value other = widen(b, l, tensor::ExtractOp::create(b, l, input, partnerIndex));
          Value position = index[op.getPositionDim()], column = op.hasFullTables() ? c : pair;
          Value cosv = widen(b, l, tensor::ExtractOp::create(b, l, cosTable, ValueRange{position, column}));
          Value sinv = widen(b, l, tensor::ExtractOp::create(b, l, sinTable, ValueRange{position, column}));
          // first: a cos - b sin; second: b cos + a sin (self = b, other = a).
          Value selfCos = arith::MulFOp::create(b, l, self, cosv);
          Value otherSin = arith::MulFOp::create(b, l, other, sinv);
          Value result = arith::SelectOp::create(b, l, isSecond, arith::AddFOp::create(b, l, selfCos, otherSin),
                                                 arith::SubFOp::create(b, l, selfCos, otherSin));
          linalg::YieldOp::create(b, l, narrow(b, l, result, type.getElementType()));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void kiln::populateNormalizationLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<SoftmaxLowering, LogSumExpLowering, ReduceLowering, RmsNormLowering, LayerNormLowering, RopeLowering>(
      patterns.getContext());
}
