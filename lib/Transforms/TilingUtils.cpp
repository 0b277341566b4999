//===- TilingUtils.cpp - Building blocks of kiln-tile ----------------------===//
//
// Clamped tile sizes (affine.min, folded when the tile divides the dimension), padded tile loads
// (tensor.extract_slice + tensor.pad) and valid-part extraction for stores.
//
//===----------------------------------------------------------------------===//

#include "TilingUtils.h"

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"

using namespace mlir;
using namespace mlir::kiln;

OpFoldResult kiln::clampedTileSize(OpBuilder &b, Location loc, OpFoldResult offset, int64_t tile, int64_t dim) {
  // Offsets are multiples of the tile below dim, so a tile that divides dim is always whole.
  if (dim % tile == 0)
    return b.getIndexAttr(tile);
  MLIRContext *ctx = b.getContext();
  AffineExpr d0 = getAffineDimExpr(0, ctx);
  AffineMap map = AffineMap::get(1, 0, {getAffineConstantExpr(tile, ctx), getAffineConstantExpr(dim, ctx) - d0},
                                 ctx);
  return affine::makeComposedFoldedAffineMin(b, loc, map, {offset});
}

Value kiln::extractPaddedTile(OpBuilder &b, Location loc, Value source, ArrayRef<OpFoldResult> offsets,
                              ArrayRef<OpFoldResult> sizes, ArrayRef<int64_t> tileShape, double padValue) {
  auto sourceType = cast<RankedTensorType>(source.getType());
  SmallVector<OpFoldResult> strides(sourceType.getRank(), b.getIndexAttr(1));
  RankedTensorType sliceType = tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
      tileShape.size(), sourceType, sizes);
  Value slice = tensor::ExtractSliceOp::create(b, loc, sliceType, source, offsets, sizes, strides);
  auto tileType = RankedTensorType::get(tileShape, sourceType.getElementType());
  if (sliceType == tileType)
    return slice;
  Value pad = arith::ConstantOp::create(b, loc, b.getFloatAttr(sourceType.getElementType(), padValue));
  return tensor::createPadHighOp(tileType, slice, pad, /*nofold=*/false, loc, b);
}

Value kiln::extractValidPart(OpBuilder &b, Location loc, Value tile, ArrayRef<OpFoldResult> validSizes) {
  auto tileType = cast<RankedTensorType>(tile.getType());
  SmallVector<OpFoldResult> zeros(tileType.getRank(), b.getIndexAttr(0)), ones(tileType.getRank(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, tile, zeros, validSizes, ones);
}

Value kiln::scalarConstant(OpBuilder &b, Location loc, double value) {
  auto type = RankedTensorType::get({}, b.getF32Type());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, ArrayRef<Attribute>{b.getF32FloatAttr(value)}));
}

Value kiln::extractBroadcastTile(OpBuilder &b, Location loc, Value operand, ArrayRef<OpFoldResult> resultOffsets,
                                 ArrayRef<OpFoldResult> resultSizes, ArrayRef<int64_t> resultShape,
                                 ArrayRef<int64_t> tileShape, std::optional<int64_t> rowDim) {
  auto type = cast<RankedTensorType>(operand.getType());
  int64_t rank = type.getRank(), resultRank = resultShape.size();
  int64_t rows = rowDim.value_or(resultRank - 2), cols = resultRank - 1;
  SmallVector<int64_t> shape{1, 1};
  SmallVector<OpFoldResult> offsets, sizes;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t resultDim = resultRank - rank + d;
    bool broadcast = type.getDimSize(d) == 1 && resultShape[resultDim] != 1;
    offsets.push_back(broadcast ? OpFoldResult(b.getIndexAttr(0)) : resultOffsets[resultDim]);
    sizes.push_back(broadcast ? OpFoldResult(b.getIndexAttr(1)) : resultSizes[resultDim]);
    if ((resultDim == rows || resultDim == cols) && !broadcast)
      shape[resultDim == rows ? 0 : 1] = tileShape[resultDim == rows ? 0 : 1];
  }
  if (rank >= 2)
    return extractPaddedTile(b, loc, operand, offsets, sizes, shape, 0.0);
  // A rank-1 operand is one row of columns and a rank-0 operand a scalar: read it and make it 2-D.
  Value read = rank == 0 ? operand : extractPaddedTile(b, loc, operand, offsets, sizes, {shape[1]}, 0.0);
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, type.getElementType()), read);
}

FailureOr<ArrayAttr> kiln::gpuBlockMapping(MLIRContext *context, int64_t dims) {
  if (dims > 10)
    return failure();
  SmallVector<Attribute> blocks;
  for (int64_t d = 0; d < dims; ++d)
    blocks.push_back(gpu::GPUBlockMappingAttr::get(
        context, static_cast<gpu::MappingId>(static_cast<int64_t>(gpu::MappingId::LinearDim0) + dims - 1 - d)));
  return ArrayAttr::get(context, blocks);
}
