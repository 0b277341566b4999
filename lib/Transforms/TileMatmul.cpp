//===- TileMatmul.cpp - Tiling kiln.matmul ---------------------------------===//
//
// A matmul becomes an scf.forall over (batch..., BM-row, BN-column) output tiles; each tile runs an scf.for over
// BK-wide slices of the contraction, multiplying padded static tiles with a tile-sized kiln.matmul into an f32
// accumulator, and stores the valid part of the tile. This is the loop nest every backend starts from: the host
// lowers it to loops; the GPU ("mma_sync") maps the forall onto thread blocks, and the loop keeps the config. A
// split matmul (`k_chunk = C`) has the chunk as the forall's outermost dimension, and its contraction loop runs
// over that chunk only, from n * C to min(n * C + C, K). A config with `k_splits = S` splits each output tile's
// contraction instead: inside the tile's iteration a loop (`kiln.cluster_split`) over the S chunks adds each
// chunk's f32 partial tile, from its own K loop, to the tile's sum before the epilogue; on the GPU the chunks are
// the blocks of one thread-block cluster, which add their partial tiles up in the same order.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "TilingUtils.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::kiln;

/// Offsets and sizes of an operand tile: the operand's batch dims follow the result's (index 0 where the
/// operand broadcasts), then its two matrix dims.
static void operandTileRegion(OpBuilder &b, RankedTensorType operand, ArrayRef<Value> batchIvs,
                              ArrayRef<int64_t> resultBatch, OpFoldResult rowOffset, OpFoldResult rowSize,
                              OpFoldResult colOffset, OpFoldResult colSize, SmallVectorImpl<OpFoldResult> &offsets,
                              SmallVectorImpl<OpFoldResult> &sizes) {
  int64_t numBatch = operand.getRank() - 2, skip = resultBatch.size() - numBatch;
  for (int64_t d = 0; d < numBatch; ++d) {
    bool broadcast = operand.getDimSize(d) == 1 && resultBatch[skip + d] != 1;
    offsets.push_back(broadcast ? OpFoldResult(b.getIndexAttr(0)) : OpFoldResult(batchIvs[skip + d]));
    sizes.push_back(b.getIndexAttr(1));
  }
  offsets.append({rowOffset, colOffset});
  sizes.append({rowSize, colSize});
}

FailureOr<Value> kiln::tileMatmul(RewriterBase &rewriter, MatmulOp op) {
  ConfigAttr config = getConfig(op);
  if (!config || config.getTile().size() != 3)
    return rewriter.notifyMatchFailure(op, "needs a #kiln.config with tile = [BM, BN, BK]");
  int64_t bm = config.getTile()[0], bn = config.getTile()[1], bk = config.getTile()[2];
  std::optional<int64_t> chunk = op.getKChunk();
  int64_t clusterSplits = config.getKSplits();
  if (chunk && clusterSplits > 1)
    return op.emitOpError() << "is already split into chunks of " << *chunk << " (k_chunk); its config's k_splits = "
                            << clusterSplits << " cannot split it again";
  if (chunk && *chunk % bk != 0)
    return op.emitOpError() << "k_chunk = " << *chunk << " is not a whole number of " << bk
                            << "-deep k-tiles (the config's BK)";
  Location loc = op.getLoc();
  RankedTensorType resultType = op.getType(), lhsType = op.getLhs().getType(), rhsType = op.getRhs().getType();
  int64_t rank = resultType.getRank(), chunkDims = chunk ? 1 : 0, numBatch = rank - 2 - chunkDims;
  int64_t m = resultType.getDimSize(rank - 2), n = resultType.getDimSize(rank - 1);
  int64_t k = op.getContractionSize();
  ArrayRef<int64_t> resultBatch = resultType.getShape().drop_front(chunkDims).drop_back(2);
  Type f32 = rewriter.getF32Type();

  SmallVector<OpFoldResult> lbs(rank, rewriter.getIndexAttr(0)), ubs, steps(rank, rewriter.getIndexAttr(1));
  for (int64_t size : resultType.getShape())
    ubs.push_back(rewriter.getIndexAttr(size));
  steps[rank - 2] = rewriter.getIndexAttr(bm);
  steps[rank - 1] = rewriter.getIndexAttr(bn);
  // A GPU matmul keeps its config and name on the loop, whose iterations become thread blocks.
  bool gpu = config.getLowering() == "mma_sync" || config.getLowering() == "wgmma";
  std::optional<ArrayAttr> blockMapping;
  if (gpu) {
    FailureOr<ArrayAttr> mapping = gpuBlockMapping(rewriter.getContext(), rank);
    if (failed(mapping))
      return rewriter.notifyMatchFailure(op, "a GPU matmul maps at most 8 batch dimensions onto blocks");
    blockMapping = *mapping;
  }
  Value init = tensor::EmptyOp::create(rewriter, loc, resultType.getShape(), resultType.getElementType());
  auto forall = scf::ForallOp::create(rewriter, loc, lbs, ubs, steps, ValueRange{init}, blockMapping);
  if (gpu) {
    forall->setAttr(kConfigAttrName, config);
    forall->setAttr(kTiledOpAttrName, rewriter.getStringAttr(MatmulOp::getOperationName()));
  }

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(forall.getBody());
  SmallVector<Value> ivs = forall.getInductionVars();
  SmallVector<Value> batchIvs(ArrayRef<Value>(ivs).slice(chunkDims, numBatch));
  Value row = ivs[rank - 2], col = ivs[rank - 1];
  OpFoldResult rows = clampedTileSize(rewriter, loc, row, bm, m);
  OpFoldResult cols = clampedTileSize(rewriter, loc, col, bn, n);

  Value zero = arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(0.0));
  auto accType = RankedTensorType::get({bm, bn}, f32);
  // One K loop's body: the operand tiles of k-tile kIv multiplied and added to the accumulator.
  auto kLoopBody = [&](OpBuilder &b, Location l, Value kIv, ValueRange iterArgs) {
    OpFoldResult depth = clampedTileSize(b, l, kIv, bk, k);
    SmallVector<OpFoldResult> lhsOffsets, lhsSizes, rhsOffsets, rhsSizes;
    // The stored layout of each operand decides which tile dim is rows and which is columns.
    if (op.getTransposeLhs())
      operandTileRegion(b, lhsType, batchIvs, resultBatch, kIv, depth, row, rows, lhsOffsets, lhsSizes);
    else
      operandTileRegion(b, lhsType, batchIvs, resultBatch, row, rows, kIv, depth, lhsOffsets, lhsSizes);
    if (op.getTransposeRhs())
      operandTileRegion(b, rhsType, batchIvs, resultBatch, col, cols, kIv, depth, rhsOffsets, rhsSizes);
    else
      operandTileRegion(b, rhsType, batchIvs, resultBatch, kIv, depth, col, cols, rhsOffsets, rhsSizes);
    SmallVector<int64_t> lhsShape = op.getTransposeLhs() ? SmallVector<int64_t>{bk, bm}
                                                         : SmallVector<int64_t>{bm, bk};
    SmallVector<int64_t> rhsShape = op.getTransposeRhs() ? SmallVector<int64_t>{bn, bk}
                                                         : SmallVector<int64_t>{bk, bn};
    Value lhsTile = extractPaddedTile(b, l, op.getLhs(), lhsOffsets, lhsSizes, lhsShape, 0.0);
    Value rhsTile = extractPaddedTile(b, l, op.getRhs(), rhsOffsets, rhsSizes, rhsShape, 0.0);
    auto product = MatmulOp::create(b, l, accType, lhsTile, rhsTile, op.getTransposeLhs(), op.getTransposeRhs());
    product.setFp32PrecisionAttr(op.getFp32PrecisionAttr());
    Value sum = AddOp::create(b, l, accType, iterArgs[0], product);
    scf::YieldOp::create(b, l, sum);
  };
  // A zeroed accumulator and the K loop into it over [0, K) (or, with a chunk index n of chunks of C, over
  // [n * C, min(n * C + C, K))), at the builder's insertion point.
  auto contraction = [&](OpBuilder &b, Location l, Value chunkIndex, int64_t chunkSize) {
    Value accInit =
        linalg::FillOp::create(b, l, ValueRange{zero},
                               ValueRange{tensor::EmptyOp::create(b, l, accType.getShape(), f32)})
            .getResult(0);
    Value kEnd = arith::ConstantIndexOp::create(b, l, k);
    Value cBK = arith::ConstantIndexOp::create(b, l, bk);
    Value kStart;
    if (chunkIndex) {
      Value cChunk = arith::ConstantIndexOp::create(b, l, chunkSize);
      kStart = arith::MulIOp::create(b, l, chunkIndex, cChunk);
      kEnd = arith::MinSIOp::create(b, l, arith::AddIOp::create(b, l, kStart, cChunk), kEnd);
    } else {
      kStart = arith::ConstantIndexOp::create(b, l, 0);
    }
    return scf::ForOp::create(b, l, kStart, kEnd, cBK, ValueRange{accInit}, kLoopBody).getResult(0);
  };
  Value tile;
  if (clusterSplits > 1) {
    // The tile's contraction in `clusterSplits` chunks of whole k-tiles, added up chunk by chunk: each chunk is
    // one iteration of the loop, a block of a cluster on the GPU.
    int64_t size = llvm::divideCeilSigned(std::max<int64_t>(k, 1), clusterSplits * bk) * bk;
    Value sumInit =
        linalg::FillOp::create(rewriter, loc, ValueRange{zero},
                               ValueRange{tensor::EmptyOp::create(rewriter, loc, accType.getShape(), f32)})
            .getResult(0);
    Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value cSplits = arith::ConstantIndexOp::create(rewriter, loc, clusterSplits);
    Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
    auto chunkBody = [&](OpBuilder &b, Location l, Value index, ValueRange sums) {
      Value part = contraction(b, l, index, size);
      Value added = AddOp::create(b, l, accType, sums[0], part);
      scf::YieldOp::create(b, l, added);
    };
    auto chunks = scf::ForOp::create(rewriter, loc, c0, cSplits, c1, ValueRange{sumInit}, chunkBody);
    chunks->setAttr(kClusterSplitAttrName, rewriter.getUnitAttr());
    tile = chunks.getResult(0);
  } else {
    tile = contraction(rewriter, loc, chunk ? ivs[0] : Value(), chunk.value_or(0));
  }
  SmallVector<OpFoldResult> tileOffsets(ivs.begin(), ivs.end()), tileSizes(rank, rewriter.getIndexAttr(1));
  tileSizes[rank - 2] = rows;
  tileSizes[rank - 1] = cols;
  if (op.hasEpilogue()) {
    // The epilogue runs on the accumulator tile, reading the matching tiles of its operands.
    SmallVector<Value> inputs{tile};
    SmallVector<AffineMap> maps{rewriter.getMultiDimIdentityMap(2)};
    for (Value operand : op.getEpilogueOperands()) {
      Value operandTile = extractBroadcastTile(rewriter, loc, operand, tileOffsets, tileSizes,
                                               resultType.getShape(), {bm, bn});
      inputs.push_back(operandTile);
      maps.push_back(lowering::getBroadcastMap(cast<RankedTensorType>(operandTile.getType()).getShape(), {bm, bn},
                                               rewriter.getContext()));
    }
    tile = lowering::buildEpilogue(rewriter, loc, op.getEpilogue(), {bm, bn}, resultType.getElementType(), inputs,
                                   maps);
  } else if (resultType.getElementType() != f32) {
    tile = CastOp::create(rewriter, loc, RankedTensorType::get({bm, bn}, resultType.getElementType()), tile);
  }
  Value valid = extractValidPart(rewriter, loc, tile, {rows, cols});

  rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(rewriter, loc, valid, forall.getRegionIterArgs()[0], tileOffsets,
                                        tileSizes, SmallVector<OpFoldResult>(rank, rewriter.getIndexAttr(1)));
  rewriter.replaceOp(op, forall.getResult(0));
  return forall.getResult(0);
}
