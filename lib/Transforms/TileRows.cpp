//===- TileRows.cpp - Tiling the row kernels (softmax, norms, row reductions) --===//
//
// Row kernels normalise or reduce along the last dimension, so tiles are blocks of whole rows: an scf.forall
// over the leading dimensions (R rows at a time in the second-to-last one), each applying the same op to an
// [R, D] tile padded with zero rows, and storing the valid rows. A single row ([D]) is tiled as a [1, D] view.
// The forall keeps the op's #kiln.config: the GPU lowering spreads its rows over the config's warps, and maps
// the iterations onto thread blocks (gpuBlockMapping).
//
//===----------------------------------------------------------------------===//

#include "TilingUtils.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::kiln;

bool kiln::isRowOp(Operation *op) {
  auto lastAxisOf = [](Value input) { return cast<RankedTensorType>(input.getType()).getRank() - 1; };
  if (auto softmax = dyn_cast<SoftmaxOp>(op))
    return static_cast<int64_t>(softmax.getAxis()) == lastAxisOf(softmax.getInput());
  if (auto logSumExp = dyn_cast<LogSumExpOp>(op))
    return static_cast<int64_t>(logSumExp.getAxis()) == lastAxisOf(logSumExp.getInput());
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return reduce.getAxes().size() == 1 && reduce.getAxes()[0] == lastAxisOf(reduce.getInput());
  return isa<RmsNormOp, LayerNormOp>(op);
}

/// Whether the row op's result drops the reduced last dimension (logsumexp, reduce without keep_dims) or keeps
/// it as 1 (reduce with keep_dims); null for the ops whose result has the input's shape.
static std::optional<bool> reducedKeepsDim(Operation *op) {
  if (isa<LogSumExpOp>(op))
    return false;
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return reduce.getKeepDims();
  return std::nullopt;
}

/// Points a row op of a [rows, columns] tile or view at its axis 1 (the ops without an axis attribute need none).
static void reduceAlongSecondAxis(Operation *op) {
  if (auto softmax = dyn_cast<SoftmaxOp>(op))
    softmax.setAxis(1);
  else if (auto logSumExp = dyn_cast<LogSumExpOp>(op))
    logSumExp.setAxis(1);
  else if (auto reduce = dyn_cast<ReduceOp>(op))
    reduce.setAxes(ArrayRef<int64_t>{1});
}

/// Rewrites a row op of a single row [D] as the same op of a [1, D] view between reshapes. Returns the new op.
static Operation *viewSingleRowAsTile(RewriterBase &rewriter, Operation *op) {
  Location loc = op->getLoc();
  auto inputType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  Value row = ReshapeOp::create(rewriter, loc, RankedTensorType::get({1, inputType.getDimSize(0)},
                                                                     inputType.getElementType()),
                                op->getOperand(0));
  SmallVector<int64_t> viewShape{1};
  llvm::append_range(viewShape, resultType.getShape());
  IRMapping mapping;
  mapping.map(op->getOperand(0), row);
  Operation *view = rewriter.clone(*op, mapping);
  view->getResult(0).setType(RankedTensorType::get(viewShape, resultType.getElementType()));
  reduceAlongSecondAxis(view);
  rewriter.replaceOp(op, ReshapeOp::create(rewriter, loc, resultType, view->getResult(0)));
  rewriter.setInsertionPoint(view); // the tiled loop replaces the view, between the two reshapes
  return view;
}

FailureOr<Value> kiln::tileRowKernel(RewriterBase &rewriter, Operation *op) {
  ConfigAttr config = getConfig(op);
  if (!config || config.getTile().size() != 1)
    return rewriter.notifyMatchFailure(op, "needs a #kiln.config with tile = [rows]");
  if (!isRowOp(op))
    return rewriter.notifyMatchFailure(op, "not a row kernel");
  if (cast<RankedTensorType>(op->getOperand(0).getType()).getRank() == 1)
    op = viewSingleRowAsTile(rewriter, op);
  auto inputType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t rank = inputType.getRank();
  std::optional<bool> keepsDim = reducedKeepsDim(op);

  int64_t rowsPerTile = config.getTile()[0], rows = inputType.getDimSize(rank - 2),
          width = inputType.getDimSize(rank - 1);
  Location loc = op->getLoc();
  SmallVector<OpFoldResult> lbs(rank - 1, rewriter.getIndexAttr(0)), ubs, steps(rank - 1, rewriter.getIndexAttr(1));
  for (int64_t d = 0; d < rank - 1; ++d)
    ubs.push_back(rewriter.getIndexAttr(inputType.getDimSize(d)));
  steps[rank - 2] = rewriter.getIndexAttr(rowsPerTile);
  std::optional<ArrayAttr> blockMapping;
  if (config.getLowering() == "rows") {
    FailureOr<ArrayAttr> mapping = gpuBlockMapping(rewriter.getContext(), rank - 1);
    if (failed(mapping))
      return rewriter.notifyMatchFailure(op, "a GPU row kernel maps at most 10 leading dimensions onto blocks");
    blockMapping = *mapping;
  }
  Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(), type.getElementType());
  auto forall = scf::ForallOp::create(rewriter, loc, lbs, ubs, steps, ValueRange{init}, blockMapping);
  forall->setAttr(kConfigAttrName, config);
  forall->setAttr(kTiledOpAttrName, rewriter.getStringAttr(op->getName().getStringRef()));

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(forall.getBody());
  SmallVector<Value> ivs = forall.getInductionVars();
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
  SmallVector<int64_t> tileShape{rowsPerTile};
  if (!keepsDim || *keepsDim)
    tileShape.push_back(keepsDim ? 1 : width);
  reduceAlongSecondAxis(tiled);
  tiled->getResult(0).setType(RankedTensorType::get(tileShape, type.getElementType()));

  // The valid rows go to the same place of the result, whose last dimension is the row's (width), 1 (kept
  // reduction) or gone (dropped reduction).
  SmallVector<OpFoldResult> validSizes{validRows}, resultOffsets(offsets), resultSizes(sizes);
  if (keepsDim && !*keepsDim) {
    resultOffsets.pop_back();
    resultSizes.pop_back();
  } else {
    int64_t columns = keepsDim ? 1 : width;
    validSizes.push_back(rewriter.getIndexAttr(columns));
    resultSizes.back() = rewriter.getIndexAttr(columns);
  }
  Value valid = extractValidPart(rewriter, loc, tiled->getResult(0), validSizes);

  rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(rewriter, loc, valid, forall.getRegionIterArgs()[0], resultOffsets,
                                        resultSizes,
                                        SmallVector<OpFoldResult>(resultOffsets.size(), rewriter.getIndexAttr(1)));
  rewriter.replaceOp(op, forall.getResult(0));
  return forall.getResult(0);
}
