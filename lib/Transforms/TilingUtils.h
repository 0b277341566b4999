//===- TilingUtils.h - Building blocks of kiln-tile --------------*- C++ -*-===//
//
// Tiles in Kiln always have a static shape: a tile that runs past the edge of its operand is padded (zeros for
// contraction operands, -inf for scores), and only its valid part is stored. These helpers build the clamped
// sizes, the padded loads and the masked stores that the matmul, attention and row tilers share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_TILINGUTILS_H
#define KILN_LIB_TRANSFORMS_TILINGUTILS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir {
namespace kiln {

/// min(tile, dim - offset): the valid extent of a tile that starts at `offset`, a multiple of `tile` below
/// `dim` (a loop induction variable stepping by the tile). A constant when the tile divides `dim`.
OpFoldResult clampedTileSize(OpBuilder &b, Location loc, OpFoldResult offset, int64_t tile, int64_t dim);

/// Reads source[offsets][sizes], rank-reduced to `tileShape.size()` dimensions (every other size must be 1),
/// and pads it at the high end to the static `tileShape` with `padValue`.
Value extractPaddedTile(OpBuilder &b, Location loc, Value source, ArrayRef<OpFoldResult> offsets,
                        ArrayRef<OpFoldResult> sizes, ArrayRef<int64_t> tileShape, double padValue);

/// The leading `validSizes` part of a static tile.
Value extractValidPart(OpBuilder &b, Location loc, Value tile, ArrayRef<OpFoldResult> validSizes);

/// The 2-D tile of `operand` that broadcasts (numpy rules) onto the tile of a larger result at
/// `resultOffsets`/`resultSizes` (one entry per result dimension; all but the tile's row dimension `rowDim`
/// (default: the one before the last) and the last of size 1). A dimension the operand lacks or has as 1 stays 1
/// in the tile; the others get `tileShape`'s static size, padded with 0.
Value extractBroadcastTile(OpBuilder &b, Location loc, Value operand, ArrayRef<OpFoldResult> resultOffsets,
                           ArrayRef<OpFoldResult> resultSizes, ArrayRef<int64_t> resultShape,
                           ArrayRef<int64_t> tileShape, std::optional<int64_t> rowDim = std::nullopt);

/// The mapping of a tiled loop of `dims` dimensions onto GPU thread blocks: every iteration a block
/// (#gpu.block linear dimensions, the loop's last dimension fastest). It also keeps folding from dissolving a
/// loop of one iteration, which the GPU lowerings start from. Fails beyond the 10 dimensions it names.
FailureOr<ArrayAttr> gpuBlockMapping(MLIRContext *context, int64_t dims);

/// A `kiln.constant` scalar (tensor<f32>) holding `value`.
Value scalarConstant(OpBuilder &b, Location loc, double value);

} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_TRANSFORMS_TILINGUTILS_H
