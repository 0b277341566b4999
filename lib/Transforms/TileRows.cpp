//===- TileRows.cpp - Tiling the row kernels (softmax, RMSNorm, LayerNorm) --===//
//
// Row kernels normalise along the last dimension, so tiles are blocks of whole rows: an scf.forall over the
// leading dimensions (R rows at a time in the second-to-last one), each applying the same op to an [R, D] tile
// padded with zero rows, and storing the valid rows.
//
//===----------------------------------------------------------------------===//

#include "TilingUtils.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::kiln;

FailureOr<Value> kiln::tileRowKernel(RewriterBase &rewriter, Operation *op) {
  ConfigAttr config = getConfig(op);
  if (!config || config.getTile().size() != 1)
    return rewriter.notifyMatchFailure(op, "needs a #kiln.config with tile = [rows]");
  if (!isa<SoftmaxOp, RmsNormOp, LayerNormOp>(op))
    return rewriter.notifyMatchFailure(op, "not a row kernel");
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t rank = type.getRank();
  if (rank < 2)
    return rewriter.notifyMatchFailure(op, "a single row has nothing to tile");
  if (auto softmax = dyn_cast<SoftmaxOp>(op); softmax && static_cast<int64_t>(softmax.getAxis()) != rank - 1)
    return rewriter.notifyMatchFailure(op, "only a softmax along the last axis is a row kernel");

  int64_t rowsPerTile = config.getTile()[0], rows = type.getDimSize(rank - 2), width = type.getDimSize(rank - 1);
  Location loc = op->getLoc();
  SmallVector<OpFoldResult> lbs(rank - 1, rewriter.getIndexAttr(0)), ubs, steps(rank - 1, rewriter.getIndexAttr(1));
  for (int64_t d = 0; d < rank - 1; ++d)
    ubs.push_back(rewriter.getIndexAttr(type.getDimSize(d)));
  steps[rank - 2] = rewriter.getIndexAttr(rowsPerTile);
  Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(), type.getElementType());
  auto forall = scf::ForallOp::create(rewriter, loc, lbs, ubs, steps, ValueRange{init}, std::nullopt);

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(forall.getBody());
  ValueRange ivs = forall.getInductionVars();
  OpFoldResult validRows = clampedTileSize(rewriter, loc, ivs.back(), rowsPerTile, rows);
  SmallVector<OpFoldResult> offsets(ivs.begin(), ivs.end()), sizes(rank, rewriter.getIndexAttr(1));
  offsets.push_back(rewriter.getIndexAttr(0));
  sizes[rank - 2] = validRows;
  sizes[rank - 1] = rewriter.getIndexAttr(width);
  Value tile = extractPaddedTile(rewriter, loc, op->getOperand(0), offsets, sizes, {rowsPerTile, width}, 0.0);

  // The same op on the tile; its per-channel operands are unchanged.
  IRMapping mapping;
  mapping.map(op->getOperand(0), tile);
  Operation *tiled = rewriter.clone(*op, mapping);
  tiled->removeAttr(kConfigAttrName);
  if (auto softmax = dyn_cast<SoftmaxOp>(tiled))
    softmax.setAxis(1);
  tiled->getResult(0).setType(RankedTensorType::get({rowsPerTile, width}, type.getElementType()));
  Value valid = extractValidPart(rewriter, loc, tiled->getResult(0), {validRows, rewriter.getIndexAttr(width)});

  rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(rewriter, loc, valid, forall.getRegionIterArgs()[0], offsets, sizes,
                                        SmallVector<OpFoldResult>(rank, rewriter.getIndexAttr(1)));
  rewriter.replaceOp(op, forall.getResult(0));
  return forall.getResult(0);
}
