//===- DataMovement.cpp - kiln data-movement ops to tensor/linalg ----------===//
//
// Transpose, reshape, broadcast, concat, slice and gather become the upstream tensor/linalg ops that bufferize
// to views or copies; nothing here computes, so nothing is widened. A kiln.dim is its static extent.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

namespace {

struct TransposeLowering : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Value init = createEmpty(rewriter, op.getLoc(), type.getShape(), type.getElementType());
    rewriter.replaceOp(op, linalg::TransposeOp::create(rewriter, op.getLoc(), adaptor.getInput(), init,
                                                       op.getPermutation())
                               .getResult());
    return success();
  }
};

/// A kiln.dim on the host: the static extent.
struct DimLowering : OpConversionPattern<DimOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(DimOp op, OpAdaptor, ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, arith::ConstantIndexOp::create(rewriter, op.getLoc(),
                                                          op.getSource().getType().getDimSize(op.getDim())));
    return success();
  }
};

/// A reshape of a static tensor: a collapse_shape or expand_shape (a view once bufferized) when the shapes group
/// into one another, otherwise a tensor.reshape through a constant shape operand.
Value reshapeTo(OpBuilder &b, Location loc, Value input, RankedTensorType type) {
  auto inputType = cast<RankedTensorType>(input.getType());
  if (inputType.getRank() != type.getRank())
    if (std::optional<SmallVector<ReassociationIndices>> groups = getReassociationIndicesForReshape(inputType, type)) {
      if (inputType.getRank() > type.getRank())
        return tensor::CollapseShapeOp::create(b, loc, type, input, *groups);
      return tensor::ExpandShapeOp::create(b, loc, type, input, *groups);
    }
  Value shape = arith::ConstantOp::create(b, loc, b.getIndexTensorAttr(type.getShape()));
  return tensor::ReshapeOp::create(b, loc, type, input, shape);
}

struct ReshapeLowering : OpConversionPattern<ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReshapeOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reshapeTo(rewriter, op.getLoc(), adaptor.getInput(), op.getType()));
    return success();
  }
};

/// Copies through a broadcasting generic; the element type is unchanged, so nothing is widened.
Value copyBroadcast(OpBuilder &b, Location loc, Value input, RankedTensorType type) {
  auto inputType = cast<RankedTensorType>(input.getType());
  AffineMap map = getBroadcastMap(inputType.getShape(), type.getShape(), b.getContext());
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, input,
             ValueRange{createEmpty(b, loc, type.getShape(), type.getElementType())},
             ArrayRef<AffineMap>{map, b.getMultiDimIdentityMap(type.getRank())},
             SmallVector<utils::IteratorType>(type.getRank(), utils::IteratorType::parallel),
             [](OpBuilder &nested, Location l, ValueRange args) { linalg::YieldOp::create(nested, l, args[0]); })
      .getResult(0);
}

struct BroadcastLowering : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, copyBroadcast(rewriter, op.getLoc(), adaptor.getInput(), op.getType()));
    return success();
  }
};

struct ConcatLowering : OpConversionPattern<ConcatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ConcatOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Value result = createEmpty(rewriter, loc, type.getShape(), type.getElementType());
    int64_t offset = 0, axis = op.getAxis();
    for (Value input : adaptor.getInputs()) {
      auto inputType = cast<RankedTensorType>(input.getType());
      SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
      offsets[axis] = offset;
      result = tensor::InsertSliceOp::create(rewriter, loc, input, result, ValueRange{}, ValueRange{}, ValueRange{},
                                             offsets, inputType.getShape(), strides);
      offset += inputType.getDimSize(axis);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SliceLowering : OpConversionPattern<SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SliceOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(op, op.getType(), adaptor.getInput(), ValueRange{},
                                                        ValueRange{}, ValueRange{}, op.getOffsets(),
                                                        op.getType().getShape(), op.getStrides());
    return success();
  }
};

/// result[pre..., idx..., post...] = table[pre..., indices[idx...], post...], negative indices from the end and
/// out-of-range indices clamped.
struct GatherLowering : OpConversionPattern<GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GatherOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType type = op.getType(), table = op.getTable().getType(), indices = op.getIndices().getType();
    int64_t axis = op.getAxis(), numIndexDims = indices.getRank(), rank = type.getRank();
    SmallVector<AffineExpr> indexExprs;
    for (int64_t d = 0; d < numIndexDims; ++d)
      indexExprs.push_back(getAffineDimExpr(axis + d, ctx));
    AffineMap indexMap = AffineMap::get(rank, 0, indexExprs, ctx);
    Value tableValue = adaptor.getTable();
    int64_t axisSize = table.getDimSize(axis);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, adaptor.getIndices(),
        ValueRange{createEmpty(rewriter, loc, type.getShape(), type.getElementType())},
        ArrayRef<AffineMap>{indexMap, rewriter.getMultiDimIdentityMap(rank)},
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value index = arith::IndexCastOp::create(b, l, b.getIndexType(), args[0]);
          Value size = arith::ConstantIndexOp::create(b, l, axisSize);
          Value zero = arith::ConstantIndexOp::create(b, l, 0);
          Value negative = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, index, zero);
          index = arith::SelectOp::create(b, l, negative, arith::AddIOp::create(b, l, index, size), index);
          // An index outside the table must not read outside memory: clamp it into range.
          index = arith::MaxSIOp::create(b, l, index, zero);
          index = arith::MinSIOp::create(b, l, index, arith::ConstantIndexOp::create(b, l, axisSize - 1));
          SmallVector<Value> tableIndex;
          for (int64_t d = 0; d < axis; ++d)
            tableIndex.push_back(linalg::IndexOp::create(b, l, d));
          tableIndex.push_back(index);
          for (int64_t d = axis + numIndexDims; d < rank; ++d)
            tableIndex.push_back(linalg::IndexOp::create(b, l, d));
          linalg::YieldOp::create(b, l, tensor::ExtractOp::create(b, l, tableValue, tableIndex).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void kiln::populateDataMovementLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<DimLowering, TransposeLowering, ReshapeLowering, BroadcastLowering, ConcatLowering, SliceLowering,
               GatherLowering>(patterns.getContext());
}
