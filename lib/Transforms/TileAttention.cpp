//===- TileAttention.cpp - Tiling kiln.attention ---------------------------===//
//
// Attention becomes an scf.forall over (batch, head, BQ query rows). Within a query tile, one scf.for over
// BK-wide key tiles computes the scaled, masked score tile and places it in the row of scores; a kiln.softmax
// normalises the row; a second scf.for over the same key tiles accumulates P V. kiln-online-softmax then fuses
// the two loops into one with a running max and sum, so the row is never materialised.
//
// Masking is per tile: only tiles that straddle the causal diagonal or the end of the keys pay for it (an
// scf.if on `keyStart >= maskFrom`, the first key tile that needs the mask, which kiln-split-masked-tiles turns
// into a loop of unmasked tiles and one of masked ones), and with `causal` the key loops stop at the last tile
// any row of the query tile can see, so fully masked tiles are skipped. GQA reads k/v head h / (Hq / Hkv). With
// `layout = "bshd"` the tiles are read (and with `out_layout` the output written) at the same (batch, head,
// position) with heads and positions swapped. P is rounded to the type of v before P V, as the tensor cores take
// it, so that the host computes what the GPU does.
//
// A score_mod rewrites each score tile after the scale and the additive mask (a generic over the tile whose body
// is the region, at the tile's positions); a mask_mod joins the position mask, and its linear bounds (MaskBounds.h)
// start the key loops at the first tile a row of the query tile sees, end them after the last, and add the tiles
// before the first one every row sees in full to the masked ones (`keyStart < maskBefore || keyStart >= maskFrom`).
//
// A split attention (`kv_chunk = C`) iterates over its chunks as well, first: chunk s runs the key loops over
// keys [s * C, (s + 1) * C) only, and its (f32) output and lse tiles go to the chunk's slice of the results.
//
// K and V read from a paged cache (kiln.gather_pages views) are read tile by tile from their pages: the page
// id of each page a key tile spans from the block table (BK divides the page size, or the page size BK: then the
// tile is assembled from its pages' rows), rows past the sequence's length zero. The views' length is the table's capacity; the mask_mod that
// kiln-expand-paged-attention writes ends each sequence's key loops at its own length.
//
// A GPU tiling ("mma_sync") maps the forall onto thread blocks and keeps the config on it, and reads the
// sequence lengths through kiln.dim: the key loop's bound and the masks stay expressions of them, and the kernel
// serves other lengths.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "MaskBounds.h"
#include "TilingUtils.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Everything the per-tile builders need about one attention op and the current query tile.
struct AttentionTiling {
  AttentionOp op;
  int64_t batch, heads, seqQ, seqK, headDim, valueDim, group, bq, bk;
  Value b, h, kvHead, queryStart;
  /// The sequence lengths as the kernel reads them (constants on the host, kiln.dim on the GPU).
  Value seqQv, seqKv;
  /// With k and v read from a paged cache: their views, and the length of this tile's sequence.
  GatherPagesOp pagedK, pagedV;
  Value pagedLength;
  /// The ops of the score_mod and mask_mod that depend only on the batch, the head and the tables, evaluated
  /// once per query tile (hoistInvariantOps).
  IRMapping scoreHoisted, maskHoisted;
  OpFoldResult queryRows;

  /// (batch, head, position, feature) offsets or sizes of q, k or v in the op's layout.
  SmallVector<OpFoldResult> inLayout(OpFoldResult batchIndex, OpFoldResult head, OpFoldResult position,
                                     OpFoldResult feature) {
    return ordered(op.isSeqMajor(), batchIndex, head, position, feature);
  }
  /// The same for the output (and its epilogue operands), in the output's layout.
  SmallVector<OpFoldResult> outLayout(OpFoldResult batchIndex, OpFoldResult head, OpFoldResult position,
                                      OpFoldResult feature) {
    return ordered(op.isOutSeqMajor(), batchIndex, head, position, feature);
  }
  /// (batch, head, position, feature) as a [B, S, H, D] (seq-major) or [B, H, S, D] tensor indexes them.
  static SmallVector<OpFoldResult> ordered(bool seqMajor, OpFoldResult batchIndex, OpFoldResult head,
                                           OpFoldResult position, OpFoldResult feature) {
    if (seqMajor)
      return {batchIndex, position, head, feature};
    return {batchIndex, head, position, feature};
  }
};

/// The additive mask tile for query rows [queryStart, +BQ) and keys [keyStart, +BK), as f32 and padded.
Value maskTile(OpBuilder &b, Location loc, AttentionTiling &t, Value keyStart, OpFoldResult keyCols) {
  Value tile = extractBroadcastTile(b, loc, t.op.getMask(), {t.b, t.h, t.queryStart, keyStart},
                                    {b.getIndexAttr(1), b.getIndexAttr(1), t.queryRows, keyCols},
                                    {t.batch, t.heads, t.seqQ, t.seqK}, {t.bq, t.bk});
  auto type = cast<RankedTensorType>(tile.getType());
  if (!type.getElementType().isF32())
    tile = CastOp::create(b, loc, RankedTensorType::get(type.getShape(), b.getF32Type()), tile);
  return tile;
}

/// The [BK, D] tile of keys [keyStart, +BK) of the sequence `t.b` read from a paged cache through `view`: from
/// the one page it lies in (BK divides the page size), or from the BK / page_size pages it spans (the page size
/// divides BK), each page id read from the block table, rows from the sequence's length on zero. The table
/// column and the page id are clamped into the table and the cache, so a tile past the length (a prefetch) still
/// reads in bounds.
Value pagedKeyTile(OpBuilder &b, Location loc, AttentionTiling &t, GatherPagesOp view, Value keyStart) {
  RankedTensorType cache = view.getCache().getType();
  int64_t pageSize = view.getPageSize(), maxPages = view.getBlockTable().getType().getDimSize(1);
  int64_t headDim = cache.getDimSize(3), rowsPerPiece = std::min(t.bk, pageSize);
  auto constant = [&](int64_t value) { return arith::ConstantIndexOp::create(b, loc, value); };
  // Rows [start, start + rowsPerPiece) of the sequence, all in one page.
  auto piece = [&](Value start) {
    Value column = arith::MinSIOp::create(b, loc, arith::DivSIOp::create(b, loc, start, constant(pageSize)),
                                          constant(maxPages - 1));
    Value entry = tensor::ExtractOp::create(b, loc, view.getBlockTable(), ValueRange{t.b, column});
    Value page = arith::IndexCastOp::create(b, loc, b.getIndexType(), entry);
    page = arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, page, constant(0)),
                                  constant(cache.getDimSize(0) - 1));
    Value row = arith::RemSIOp::create(b, loc, start, constant(pageSize));
    Value left = arith::SubIOp::create(b, loc, t.pagedLength, start);
    Value rows = arith::MaxSIOp::create(b, loc, arith::MinSIOp::create(b, loc, left, constant(rowsPerPiece)),
                                        constant(0));
    return extractPaddedTile(b, loc, view.getCache(), {page, row, t.kvHead, b.getIndexAttr(0)},
                             {b.getIndexAttr(1), rows, b.getIndexAttr(1), b.getIndexAttr(headDim)},
                             {rowsPerPiece, headDim}, 0.0);
  };
  if (t.bk <= pageSize)
    return piece(keyStart);
  Value tile = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{t.bk, headDim}, cache.getElementType());
  for (int64_t first = 0; first < t.bk; first += pageSize)
    tile = tensor::InsertSliceOp::create(
        b, loc, piece(arith::AddIOp::create(b, loc, keyStart, constant(first))), tile,
        ArrayRef<OpFoldResult>{b.getIndexAttr(first), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(pageSize), b.getIndexAttr(headDim)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
  return tile;
}

/// The logical (batch, head, query, key) position of element (i, j) of the tile at (queryStart, keyStart), as the
/// mod regions take it, followed by the mod operands. In the padding past the last query or key the positions
/// run on: those scores are masked or dropped, and a table read there is guarded like any other (it reads 0).
SmallVector<Value> modArguments(AttentionTiling &t, Value row, Value col) {
  SmallVector<Value> args{t.b, t.h, row, col};
  llvm::append_range(args, t.op.getModOperands());
  return args;
}

/// A generic over a score tile at (queryStart, keyStart) whose body `element` maps each score, with its query
/// row and key column, to the new one.
linalg::GenericOp mapScoreTile(OpBuilder &b, Location loc, AttentionTiling &t, Value scores, Value keyStart,
                               function_ref<Value(OpBuilder &, Location, Value, Value, Value)> element) {
  auto type = cast<RankedTensorType>(scores.getType());
  AffineMap id = b.getMultiDimIdentityMap(2);
  return linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{scores},
      ValueRange{tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType())},
      ArrayRef<AffineMap>{id, id}, {utils::IteratorType::parallel, utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value row = arith::AddIOp::create(nb, l, t.queryStart, linalg::IndexOp::create(nb, l, 0));
        Value col = arith::AddIOp::create(nb, l, keyStart, linalg::IndexOp::create(nb, l, 1));
        linalg::YieldOp::create(nb, l, element(nb, l, args[0], row, col));
      });
}

/// The score tile rewritten by the op's score_mod, element by element.
Value applyScoreMod(OpBuilder &b, Location loc, AttentionTiling &t, Value scores, Value keyStart) {
  return mapScoreTile(b, loc, t, scores, keyStart,
                      [&](OpBuilder &nb, Location, Value score, Value row, Value col) {
                        SmallVector<Value> inputs{score};
                        llvm::append_range(inputs, modArguments(t, row, col));
                        return lowering::inlineScalarRegion(nb, t.op.getScoreMod(), inputs, &t.scoreHoisted);
                      })
      .getResult(0);
}

/// Sets to -inf the scores of keys past the end and, with `causal`, above the bottom-right-aligned diagonal, and
/// those the mask_mod hides.
Value applyPositionMask(OpBuilder &b, Location loc, AttentionTiling &t, Value scores, Value keyStart) {
  bool causal = t.op.getCausal();
  Value seqK = t.seqKv;
  Value diagonal = causal ? arith::SubIOp::create(b, loc, t.seqKv, t.seqQv).getResult() : Value();
  auto masked = mapScoreTile(
      b, loc, t, scores, keyStart, [&](OpBuilder &nb, Location l, Value score, Value row, Value col) -> Value {
        Value outside = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge, col, seqK);
        if (causal) {
          Value limit = arith::AddIOp::create(nb, l, row, diagonal);
          Value future = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sgt, col, limit);
          outside = arith::OrIOp::create(nb, l, outside, future);
        }
        if (t.op.hasMaskMod()) {
          Value visible =
              lowering::inlineScalarRegion(nb, t.op.getMaskMod(), modArguments(t, row, col), &t.maskHoisted);
          Value hidden = arith::XOrIOp::create(nb, l, visible, arith::ConstantIntOp::create(nb, l, 1, 1));
          outside = arith::OrIOp::create(nb, l, outside, hidden);
        }
        Value negInf = arith::ConstantOp::create(
            nb, l, nb.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
        return arith::SelectOp::create(nb, l, outside, negInf, score).getResult();
      });
  masked->setAttr("kiln.position_mask", b.getUnitAttr());
  return masked.getResult(0);
}

/// The first key (a tile start) whose tile holds a masked position for this query tile: the key tile at j
/// needs the mask when it runs past the end of the keys (j + BK > Sk) or, with `causal`, its last key lies
/// beyond the first row's diagonal (j + BK - 1 > i + Sk - Sq). The tiles before it run without mask arithmetic.
Value firstMaskedKey(OpBuilder &b, Location loc, AttentionTiling &t) {
  MLIRContext *ctx = b.getContext();
  AffineExpr i = getAffineDimExpr(0, ctx), sk = getAffineSymbolExpr(0, ctx), sq = getAffineSymbolExpr(1, ctx);
  SmallVector<AffineExpr> bounds{sk - (t.bk - 1)};
  if (t.op.getCausal())
    bounds.push_back(i + sk - sq - (t.bk - 2));
  return affine::makeComposedAffineMin(b, loc, AffineMap::get(1, 2, bounds, ctx),
                                       ArrayRef<OpFoldResult>{t.queryStart, t.seqKv, t.seqQv});
}

} // namespace

FailureOr<SmallVector<Value>> kiln::tileAttention(RewriterBase &rewriter, AttentionOp op) {
  ConfigAttr config = getConfig(op);
  if (!config || config.getTile().size() != 2)
    return rewriter.notifyMatchFailure(op, "needs a #kiln.config with tile = [BQ, BK]");
  Location loc = op.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  RankedTensorType qType = op.getQ().getType(), vType = op.getV().getType(), outType = op.getOut().getType();
  AttentionTiling t;
  t.op = op;
  t.batch = qType.getDimSize(0), t.heads = qType.getDimSize(op.getHeadsDim());
  t.seqQ = qType.getDimSize(op.getSeqDim()), t.headDim = qType.getDimSize(3);
  t.seqK = vType.getDimSize(op.getSeqDim()), t.valueDim = vType.getDimSize(3);
  t.group = op.getGroupSize(), t.bq = config.getTile()[0], t.bk = config.getTile()[1];
  int64_t paddedKeys = llvm::divideCeilSigned(t.seqK, t.bk) * t.bk;
  Type f32 = rewriter.getF32Type();
  double scale = op.getEffectiveScale();
  constexpr double negInf = -std::numeric_limits<double>::infinity();

  SmallVector<Value> inits{tensor::EmptyOp::create(rewriter, loc, outType.getShape(), outType.getElementType())};
  if (Value lse = op.getLse())
    inits.push_back(tensor::EmptyOp::create(rewriter, loc, cast<RankedTensorType>(lse.getType()).getShape(), f32));
  SmallVector<OpFoldResult> lbs(3, rewriter.getIndexAttr(0)),
      ubs{rewriter.getIndexAttr(t.batch), rewriter.getIndexAttr(t.heads), rewriter.getIndexAttr(t.seqQ)},
      steps{rewriter.getIndexAttr(1), rewriter.getIndexAttr(1), rewriter.getIndexAttr(t.bq)};
  // A split attention iterates over its key chunks too, first: chunk s takes keys [s * C, (s + 1) * C).
  // The chunk's keys, or 0 when the attention is not split (the verifier keeps kv_chunk positive).
  int64_t chunk = op.getKvChunk().value_or(0);
  if (chunk) {
    if (chunk % t.bk != 0)
      return op.emitOpError() << "kv_chunk " << chunk << " must be a multiple of the key tile " << t.bk
                              << " of " << config;
    lbs.insert(lbs.begin(), rewriter.getIndexAttr(0));
    ubs.insert(ubs.begin(), rewriter.getIndexAttr(op.getKvSplits()));
    steps.insert(steps.begin(), rewriter.getIndexAttr(1));
  }
  // k and v read page by page: a key tile lies within one page or spans whole pages.
  t.pagedK = op.getK().getDefiningOp<GatherPagesOp>();
  t.pagedV = op.getV().getDefiningOp<GatherPagesOp>();
  for (GatherPagesOp view : {t.pagedK, t.pagedV}) {
    if (!view)
      continue;
    if (view.getPageSize() % t.bk != 0 && t.bk % view.getPageSize() != 0)
      return op.emitOpError() << "the key tile " << t.bk << " of " << config << " and the page size "
                              << view.getPageSize() << " of the paged cache it reads must divide one another";
    if (op.isSeqMajor())
      return op.emitOpError() << "k and v read from a paged cache must be in the [B, H, S, D] layout";
  }
  if (t.pagedK && t.pagedV && t.pagedK.getSeqLens() != t.pagedV.getSeqLens())
    return op.emitOpError() << "k and v are read from paged caches of different seq_lens";
  // A GPU attention keeps its config and name on the loop, whose iterations become thread blocks.
  bool gpu = config.getLowering() == "mma_sync" || config.getLowering() == "wgmma";
  std::optional<ArrayAttr> blockMapping;
  if (gpu)
    blockMapping = *gpuBlockMapping(ctx, lbs.size());
  auto forall = scf::ForallOp::create(rewriter, loc, lbs, ubs, steps, inits, blockMapping);
  if (gpu) {
    forall->setAttr(kConfigAttrName, config);
    forall->setAttr(kTiledOpAttrName, rewriter.getStringAttr(AttentionOp::getOperationName()));
  }

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(forall.getBody());
  SmallVector<Value> allIvs = forall.getInductionVars();
  ArrayRef<Value> ivs = ArrayRef<Value>(allIvs).take_back(3);
  t.b = ivs[0], t.h = ivs[1], t.queryStart = ivs[2];
  if (t.pagedK || t.pagedV) {
    // A paged cache's view has its capacity as its length; each sequence's own length comes from seq_lens
    // (the mask_mod of kiln-expand-paged-attention bounds the key loops by it).
    GatherPagesOp view = t.pagedK ? t.pagedK : t.pagedV;
    t.seqQv = gpu ? DimOp::create(rewriter, loc, op.getQ(), op.getSeqDim()).getResult()
                  : arith::ConstantIndexOp::create(rewriter, loc, t.seqQ).getResult();
    t.seqKv = arith::ConstantIndexOp::create(rewriter, loc, t.seqK);
    Value length = tensor::ExtractOp::create(rewriter, loc, view.getSeqLens(), ValueRange{t.b});
    t.pagedLength = arith::IndexCastOp::create(rewriter, loc, rewriter.getIndexType(), length);
  } else if (gpu) {
    t.seqQv = DimOp::create(rewriter, loc, op.getQ(), op.getSeqDim());
    t.seqKv = DimOp::create(rewriter, loc, op.getK(), op.getSeqDim());
  } else {
    t.seqQv = arith::ConstantIndexOp::create(rewriter, loc, t.seqQ);
    t.seqKv = arith::ConstantIndexOp::create(rewriter, loc, t.seqK);
  }
  t.kvHead = affine::makeComposedAffineApply(
      rewriter, loc, AffineMap::get(1, 0, getAffineDimExpr(0, ctx).floorDiv(t.group), ctx), {t.h});
  t.queryRows = clampedTileSize(rewriter, loc, t.queryStart, t.bq, t.seqQ);
  OpFoldResult one = rewriter.getIndexAttr(1), zeroIndex = rewriter.getIndexAttr(0);
  Value qTile = extractPaddedTile(rewriter, loc, op.getQ(), t.inLayout(t.b, t.h, t.queryStart, zeroIndex),
                                  t.inLayout(one, one, t.queryRows, rewriter.getIndexAttr(t.headDim)),
                                  {t.bq, t.headDim}, 0.0);

  // Keys visible to the tile's last row: all of them, or with `causal` up to its diagonal.
  Value keyEnd = t.seqKv;
  if (op.getCausal()) {
    AffineExpr i = getAffineDimExpr(0, ctx), sk = getAffineSymbolExpr(0, ctx), sq = getAffineSymbolExpr(1, ctx);
    keyEnd = affine::makeComposedAffineMin(rewriter, loc, AffineMap::get(1, 2, {sk, i + t.bq + sk - sq}, ctx),
                                           ArrayRef<OpFoldResult>{t.queryStart, t.seqKv, t.seqQv});
  }
  // The mods' per-head work (an ALiBi slope read from its table), once per query tile.
  auto hoist = [&](Region &region, unsigned first) {
    SmallVector<std::pair<unsigned, Value>> invariant{{first, t.b}, {first + 1, t.h}};
    for (auto [i, operand] : llvm::enumerate(op.getModOperands()))
      invariant.push_back({first + 4 + i, operand});
    return lowering::hoistInvariantOps(rewriter, region, invariant);
  };
  if (op.hasScoreMod())
    t.scoreHoisted = hoist(op.getScoreMod(), 1);
  if (op.hasMaskMod())
    t.maskHoisted = hoist(op.getMaskMod(), 0);
  Value maskFrom = firstMaskedKey(rewriter, loc, t);
  Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value cBK = arith::ConstantIndexOp::create(rewriter, loc, t.bk);
  // A mask_mod's linear bounds narrow the key loops to the tiles some row sees, and the tiles every row sees by
  // them run without the mask; where the mask is more than its bounds, every tile takes it.
  Value firstKey = c0, maskBefore;
  if (op.hasMaskMod()) {
    MaskBounds bounds =
        MaskBounds::analyze(op.getMaskMod(), op.getNondecreasingTables().value_or(ArrayRef<int64_t>{}), t.seqQ,
                            t.seqK);
    // Equal runs need static lengths, so the causal diagonal is a constant wherever one is searched.
    std::optional<int64_t> causalDiagonal;
    if (op.getCausal() && !ShapedType::isDynamic(t.seqQ) && !ShapedType::isDynamic(t.seqK))
      causalDiagonal = t.seqK - t.seqQ;
    KeyRange range = buildKeyRange(rewriter, loc, bounds, t.queryStart, t.bq, t.seqQv, t.maskHoisted,
                                   op.getModOperands(), causalDiagonal);
    if (range.from) {
      Value from = arith::MaxSIOp::create(rewriter, loc, range.from, c0);
      firstKey = arith::MulIOp::create(rewriter, loc, arith::DivSIOp::create(rewriter, loc, from, cBK), cBK);
    }
    if (range.to)
      keyEnd = arith::MinSIOp::create(rewriter, loc, keyEnd, range.to);
    if (!bounds.exact) {
      maskFrom = firstKey;
    } else {
      if (range.visibleTo) {
        Value lastWhole = arith::SubIOp::create(rewriter, loc, range.visibleTo,
                                                arith::ConstantIndexOp::create(rewriter, loc, t.bk - 1));
        maskFrom = arith::MinSIOp::create(rewriter, loc, maskFrom, lastWhole);
      }
      maskBefore = range.visibleFrom;
    }
  }

  // A chunk's loops stay within its keys; the threshold of the masked tiles is unchanged (only the chunk holding
  // the last key reaches it).
  Value chunkIv;
  if (chunk) {
    chunkIv = allIvs.front();
    Value chunkSize = arith::ConstantIndexOp::create(rewriter, loc, chunk);
    Value chunkStart = arith::MulIOp::create(rewriter, loc, chunkIv, chunkSize);
    firstKey = firstKey == c0 ? chunkStart : arith::MaxSIOp::create(rewriter, loc, firstKey, chunkStart).getResult();
    keyEnd = arith::MinSIOp::create(rewriter, loc, keyEnd, arith::AddIOp::create(rewriter, loc, chunkStart, chunkSize));
  }

  // Loop 1: the row of scores, tile by tile.
  auto rowType = RankedTensorType::get({t.bq, paddedKeys}, f32);
  Value rowInit = linalg::FillOp::create(rewriter, loc,
                                         ValueRange{arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(
                                                                                                 negInf))},
                                         ValueRange{tensor::EmptyOp::create(rewriter, loc, rowType.getShape(), f32)})
                      .getResult(0);
  auto scoreTileType = RankedTensorType::get({t.bq, t.bk}, f32);
  auto scoreLoop = scf::ForOp::create(
      rewriter, loc, firstKey, keyEnd, cBK, ValueRange{rowInit},
      [&](OpBuilder &b, Location l, Value keyStart, ValueRange iterArgs) {
        OpFoldResult keyCols = clampedTileSize(b, l, keyStart, t.bk, t.seqK);
        Value kTile = t.pagedK ? pagedKeyTile(b, l, t, t.pagedK, keyStart)
                               : extractPaddedTile(b, l, op.getK(), t.inLayout(t.b, t.kvHead, keyStart, zeroIndex),
                                                   t.inLayout(one, one, keyCols, b.getIndexAttr(t.headDim)),
                                                   {t.bk, t.headDim}, 0.0);
        auto product = MatmulOp::create(b, l, scoreTileType, qTile, kTile, /*transposeLhs=*/false,
                                        /*transposeRhs=*/true);
        product.setFp32PrecisionAttr(op.getFp32PrecisionAttr());
        Value scores = MulOp::create(b, l, scoreTileType, product, scalarConstant(b, l, scale));
        if (op.getMask())
          scores = AddOp::create(b, l, scoreTileType, scores, maskTile(b, l, t, keyStart, keyCols));
        if (op.hasScoreMod())
          scores = applyScoreMod(b, l, t, scores, keyStart);
        Value needsMask = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, keyStart, maskFrom);
        if (maskBefore)
          needsMask = arith::OrIOp::create(
              b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, keyStart, maskBefore), needsMask);
        auto ifOp = scf::IfOp::create(
            b, l, needsMask,
            [&](OpBuilder &tb, Location tl) {
              scf::YieldOp::create(tb, tl, applyPositionMask(tb, tl, t, scores, keyStart));
            },
            [&](OpBuilder &eb, Location el) { scf::YieldOp::create(eb, el, scores); });
        // Without the causal diagonal (or with one query row, which sees every key) only the last key tile, a
        // partial one, is masked.
        if ((!op.getCausal() || t.seqQ == 1) && !op.hasMaskMod())
          ifOp->setAttr(kOneMaskedTileAttrName, b.getUnitAttr());
        SmallVector<OpFoldResult> offsets{zeroIndex, keyStart}, sizes{b.getIndexAttr(t.bq), b.getIndexAttr(t.bk)},
            strides{one, one};
        Value row = tensor::InsertSliceOp::create(b, l, ifOp.getResult(0), iterArgs[0], offsets, sizes, strides);
        scf::YieldOp::create(b, l, row);
      });

  // A query row that sees no key gives zeros, as kiln.attention defines.
  Value probs = SoftmaxOp::create(rewriter, loc, scoreLoop.getResult(0), rewriter.getI64IntegerAttr(1),
                                  rewriter.getUnitAttr());
  Value lse;
  if (op.getLse())
    lse = LogSumExpOp::create(rewriter, loc, RankedTensorType::get({t.bq}, f32), scoreLoop.getResult(0),
                              rewriter.getI64IntegerAttr(1));

  // Loop 2: P V over the same key tiles.
  auto accType = RankedTensorType::get({t.bq, t.valueDim}, f32);
  Value accInit = linalg::FillOp::create(rewriter, loc,
                                         ValueRange{arith::ConstantOp::create(rewriter, loc,
                                                                              rewriter.getF32FloatAttr(0.0))},
                                         ValueRange{tensor::EmptyOp::create(rewriter, loc, accType.getShape(), f32)})
                      .getResult(0);
  auto valueLoop = scf::ForOp::create(
      rewriter, loc, firstKey, keyEnd, cBK, ValueRange{accInit},
      [&](OpBuilder &b, Location l, Value keyStart, ValueRange iterArgs) {
        OpFoldResult keyCols = clampedTileSize(b, l, keyStart, t.bk, t.seqK);
        Value pTile = tensor::ExtractSliceOp::create(b, l, scoreTileType, probs,
                                                     ArrayRef<OpFoldResult>{zeroIndex, keyStart},
                                                     ArrayRef<OpFoldResult>{b.getIndexAttr(t.bq), b.getIndexAttr(t.bk)},
                                                     ArrayRef<OpFoldResult>{one, one});
        Value vTile = t.pagedV ? pagedKeyTile(b, l, t, t.pagedV, keyStart)
                               : extractPaddedTile(b, l, op.getV(), t.inLayout(t.b, t.kvHead, keyStart, zeroIndex),
                                                   t.inLayout(one, one, keyCols, b.getIndexAttr(t.valueDim)),
                                                   {t.bk, t.valueDim}, 0.0);
        Type vElement = vType.getElementType();
        if (!vElement.isF32())
          pTile = CastOp::create(b, l, RankedTensorType::get({t.bq, t.bk}, vElement), pTile);
        auto pv = MatmulOp::create(b, l, accType, pTile, vTile, false, false);
        pv.setFp32PrecisionAttr(op.getFp32PrecisionAttr());
        scf::YieldOp::create(b, l, AddOp::create(b, l, accType, iterArgs[0], pv).getResult());
      });

  Value out = valueLoop.getResult(0);
  if (op.hasEpilogue()) {
    // The epilogue finishes the output tile, reading the matching tiles of its operands.
    SmallVector<Value> inputs{out};
    SmallVector<AffineMap> maps{rewriter.getMultiDimIdentityMap(2)};
    for (Value operand : op.getEpilogueOperands()) {
      Value operandTile = extractBroadcastTile(
          rewriter, loc, operand, t.outLayout(t.b, t.h, t.queryStart, zeroIndex),
          t.outLayout(one, one, t.queryRows, rewriter.getIndexAttr(t.valueDim)), outType.getShape(),
          {t.bq, t.valueDim}, op.isOutSeqMajor() ? 1 : 2);
      inputs.push_back(operandTile);
      maps.push_back(lowering::getBroadcastMap(cast<RankedTensorType>(operandTile.getType()).getShape(),
                                               {t.bq, t.valueDim}, ctx));
    }
    out = lowering::buildEpilogue(rewriter, loc, op.getEpilogue(), {t.bq, t.valueDim}, outType.getElementType(),
                                  inputs, maps);
  } else if (!outType.getElementType().isF32()) {
    out = CastOp::create(rewriter, loc, RankedTensorType::get({t.bq, t.valueDim}, outType.getElementType()), out);
  }
  Value validOut = extractValidPart(rewriter, loc, out, {t.queryRows, rewriter.getIndexAttr(t.valueDim)});
  Value validLse = lse ? extractValidPart(rewriter, loc, lse, {t.queryRows}) : Value();

  rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
  // A split attention's results lead with the chunk.
  auto chunked = [&](SmallVector<OpFoldResult> list, OpFoldResult first) {
    if (chunk)
      list.insert(list.begin(), first);
    return list;
  };
  SmallVector<OpFoldResult> outStrides(outType.getRank(), one);
  tensor::ParallelInsertSliceOp::create(
      rewriter, loc, validOut, forall.getRegionIterArgs()[0],
      chunked(t.outLayout(t.b, t.h, t.queryStart, zeroIndex), chunkIv),
      chunked(t.outLayout(one, one, t.queryRows, rewriter.getIndexAttr(t.valueDim)), one), outStrides);
  if (validLse)
    tensor::ParallelInsertSliceOp::create(rewriter, loc, validLse, forall.getRegionIterArgs()[1],
                                          chunked({t.b, t.h, t.queryStart}, chunkIv),
                                          chunked({one, one, t.queryRows}, one),
                                          SmallVector<OpFoldResult>(outStrides.size() - 1, one));
  SmallVector<Value> results(forall.getResults());
  rewriter.replaceOp(op, results);
  return results;
}
