//===- SelectConfig.cpp - The kiln-select-config pass ----------------------===//
//
// Default strategies per target. The numbers are the usual starting points of hand-written kernels for each
// architecture (CUTLASS/FlashAttention tile shapes); the autotuner refines them, and an explicit attribute always
// wins.
//
//===----------------------------------------------------------------------===//

#include "MaskBounds.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <numeric>
#include <limits>

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSELECTCONFIG
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

int64_t kiln::maxSharedBytesPerBlock(Target target) { return target == Target::Sm90a ? 232448 : 166912; }

bool kiln::isKernelOp(Operation *op) { return isa<MatmulOp, AttentionOp>(op) || isRowOp(op); }

ConfigAttr kiln::getConfig(Operation *op) { return op->getAttrOfType<ConfigAttr>(kConfigAttrName); }

/// Whether the mask_mod of `op` gives each query a run of keys that starts where the query is (a sliding
/// window's lower bound, a document's or a packed sequence's span, document ids): each query tile then sees a
/// short run of keys, whatever the length.
static bool masksToMovingSpans(AttentionOp op, int64_t seqQ, int64_t seqK) {
  if (!op.hasMaskMod())
    return false;
  MaskBounds bounds = MaskBounds::analyze(op.getMaskMod(), op.getNondecreasingTables().value_or(ArrayRef<int64_t>{}),
                                          seqQ, seqK);
  return !bounds.runs.empty() || llvm::any_of(bounds.bounds, [](const LinearKeyBound &bound) {
           return bound.kvCoefficient > 0 && (bound.qCoefficient != 0 || !bound.rowTables.empty());
         });
}

/// Shrinks a default tile to fit a small dimension: to the dimension itself on the host, and to the next power
/// of two (at least 16, the tensor-core fragment size) on the GPU.
static int64_t fitTile(int64_t tile, int64_t dim, Target target) {
  if (target == Target::Host)
    return std::max<int64_t>(1, std::min(tile, dim));
  return std::min(tile, std::max<int64_t>(16, llvm::PowerOf2Ceil(std::max<int64_t>(dim, 1))));
}

/// The most keys for which sm_90a attention at head dim 64 takes 32-key tiles.
static constexpr int64_t kNarrowKeyTileKeysD64 = 160;

int64_t kiln::multiprocessorCount(Target target) { return target == Target::Sm90a ? 132 : 108; }

int64_t kiln::attentionSharedBytes(int64_t bq, int64_t bk, int64_t headDim, int64_t valueDim, unsigned elementBits,
                                   bool wgmma) {
  // The Q tile and two K and two V tiles, their rows a whole number of tensor-core steps (16 elements, 8 of
  // f32 for TF32); rows padded by 16 bytes against bank conflicts, except the K and V panels that wgmma reads
  // through a 128-byte swizzle.
  int64_t step = elementBits == 32 ? 8 : 16, pad = 128 / elementBits;
  int64_t headDimPadded = llvm::alignTo(headDim, step), valueDimPadded = llvm::alignTo(valueDim, step);
  int64_t strideQ = headDimPadded + pad, strideK = wgmma ? headDim : headDimPadded + pad,
          strideV = wgmma ? valueDim : valueDimPadded + pad;
  return elementBits / 8 * (bq * strideQ + 2 * bk * strideK + 2 * bk * strideV);
}

MmaOperandSlots kiln::mmaOperandSlots(int64_t bm, int64_t bn, int64_t bk, bool transposedRhs,
                                     unsigned elementBits) {
  int64_t pad = 128 / elementBits; // 16 bytes
  MmaOperandSlots slots;
  slots.rowsA = bm, slots.columnsA = bk, slots.strideA = bk + pad;
  slots.rowsB = transposedRhs ? bn : bk, slots.columnsB = transposedRhs ? bk : bn;
  slots.strideB = slots.columnsB + (!transposedRhs && elementBits == 32 ? 2 * pad : pad);
  slots.slotA = slots.rowsA * slots.strideA;
  slots.slotB = (transposedRhs ? bn + 8 : bk) * slots.strideB;
  slots.stageBytes = (slots.slotA + slots.slotB) * elementBits / 8;
  return slots;
}

/// The shortest contraction a split matmul's chunk runs: four of mma_sync's 128-deep k-tiles, eight of wgmma's
/// 64-deep ones (a shorter K loop does not fill its pipeline, nor repay the sum's kernel).
static constexpr int64_t kMinChunk = 512;

/// The column tile of a decode step's GEMM that a split into chunks takes (its config keeps it: the chunks bring
/// enough tiles), and of its wgmma kernel.
static constexpr int64_t kSplitColumnTile = 128;

/// The column tile of the wgmma kernel of at most 16 rows against a large weight (streamsWeight).
static constexpr int64_t kStreamingColumnTile = 256;

/// Whether an M x K by K x N matmul of at most 16 rows streams a weight of at least 4096 x 4096 (a decode step's
/// projection), where 64 x 256 wgmma tiles fed by TMA and split over K stream it faster than the mma_sync kernel.
static bool streamsWeight(int64_t m, int64_t n, int64_t k) {
  return m <= 16 && n >= 256 && llvm::SaturatingMultiply<uint64_t>(n, k) >= uint64_t(4096) * 4096;
}

/// Whether the sm_90a default for `matmul` is the wgmma kernel: bf16/f16 operands whose rows TMA copies (16-byte
/// strides, K > 0: a tensor map describes no empty array), at least one 64-column tile, and more than 16 rows, or
/// 1 to 16 against a weight of 4096 x 4096 or more (streamsWeight; smaller ones keep the mma_sync kernel's 16-row
/// tiles, where a 64-row warpgroup tile is mostly padding).
static bool usesWgmma(MatmulOp matmul, int64_t m, int64_t n, int64_t k) {
  Type element = matmul.getLhs().getType().getElementType();
  bool copiesByTma = (element.isBF16() || element.isF16()) && !matmul.getTransposeLhs() && n >= 64 && k > 0 &&
                     k % 8 == 0 && (matmul.getTransposeRhs() || n % 8 == 0);
  return copiesByTma && (m > 16 || streamsWeight(m, n, k));
}

/// The number of output tiles of BM x BN in `result` (batch dims included), saturating at INT64_MAX: the shapes
/// are only bounded by int64 each, and their product may not be (m * n wrapped to 0 and divided by once).
static int64_t outputTiles(RankedTensorType result, int64_t bm, int64_t bn) {
  ArrayRef<int64_t> shape = result.getShape();
  int64_t m = shape[shape.size() - 2], n = shape.back();
  uint64_t tiles = llvm::SaturatingMultiply<uint64_t>(llvm::divideCeil(m, bm), llvm::divideCeil(n, bn));
  for (int64_t dim : shape.drop_back(2))
    tiles = llvm::SaturatingMultiply<uint64_t>(tiles, dim);
  return static_cast<int64_t>(std::min<uint64_t>(tiles, std::numeric_limits<int64_t>::max()));
}

/// The block order of a GPU matmul of `tiles` output tiles: groups of 16 tile rows, the rows of a group fastest,
/// once the tiles take more than one wave of blocks (row-major, a wave of a wide B reads all of B, which L2 does
/// not hold: on the H200, 4096 x 14336 x 4096 in bf16 ran 557 TFLOP/s row-major, 567 / 596 / 623 / 634 / 624 in
/// groups of 2 / 4 / 8 / 16 / 32 rows; bench/results/matmul_lowering), else (or with one row of tiles, or on the
/// host, which has no blocks) row-major.
static int64_t tileGroup(RankedTensorType result, int64_t bm, int64_t bn, Target target) {
  if (target == Target::Host)
    return 1;
  bool rows = result.getDimSize(result.getRank() - 2) > bm;
  return rows && outputTiles(result, bm, bn) > multiprocessorCount(target) ? 16 : 1;
}

/// The wgmma config: 128-row tiles (two warpgroups); 256 columns while that still gives nine in ten
/// multiprocessors of the H200 a tile (2048^3 in f16: 128 tiles of 128 x 256 ran 1.12x 256 of 128 x 128,
/// bench/results/matmul_lowering), else 128 while half of them get one, else 64; 64-deep k-tiles (one 128-byte
/// swizzle row); 4 stages (at most 4 x 48 KB, within the 227 KB a block may have).
static ConfigAttr getWgmmaConfig(MatmulOp matmul) {
  RankedTensorType result = matmul.getType();
  // A decode step's GEMM (at most 64 rows): one warpgroup's 64-row tiles.
  if (result.getDimSize(result.getRank() - 2) <= 64) {
    int64_t rows = result.getDimSize(result.getRank() - 2);
    int64_t sms = multiprocessorCount(Target::Sm90a);
    // A split matmul's tiles counted as before its split (its chunks are its leading dim), so that its config is
    // the one chooseKChunk split it for.
    RankedTensorType whole =
        matmul.getKChunk() ? RankedTensorType::get(result.getShape().drop_front(), result.getElementType()) : result;
    // At most 16 rows against a large weight, split by chooseKChunk: 128-column tiles on eight stages where twice
    // their count fits one wave, else 256 columns on five (all that fit). On the H200 at 16 rows
    // (bench/results/config_sweeps/decode_gemm_cluster_stages.md) 4096 x 4096 2.68 TB/s against the 256-column
    // tiles' 2.46, 4096 x 14336 3.63 against 3.48; N = 14336 keeps 256 columns (3.49 against 3.01). The 256-column
    // tiles against the mma_sync kernel (bench/results/decode/decode_gemm.md): M = 1 1.05-1.11x, M = 16 1.07-1.26x.
    if (rows <= 16)
      return 2 * outputTiles(whole, 64, kSplitColumnTile) <= sms
                 ? ConfigAttr::get(matmul.getContext(), {64, kSplitColumnTile, 64}, 4, /*stages=*/8, "wgmma")
                 : ConfigAttr::get(matmul.getContext(), {64, kStreamingColumnTile, 64}, 4, /*stages=*/5, "wgmma");
    // 33 to 64 rows whose tiles leave half the multiprocessors idle, against a contraction that chooseKChunk
    // would split: the contraction split in two over a cluster (k_splits, summed through distributed shared
    // memory, no second kernel), eight stages, 64-column tiles where twice their count still fits one wave, else
    // 128. On the H200 against nn.Linear weights 1.15x the split into four chunks and a sum kernel at N = 4096
    // and 6144 (4096 x 4096: 2.72 TB/s against 2.26, cuBLAS 2.89); at 17-32 rows it gained 1.04x at most, and
    // cluster kernels do not join grouped launches, so those keep the split.
    if (rows > 32 && !matmul.getKChunk() && matmul.getContractionSize() >= 2 * kMinChunk)
      for (int64_t bn : {int64_t(64), kSplitColumnTile})
        if (2 * outputTiles(result, 64, bn) <= sms)
          return ConfigAttr::get(matmul.getContext(), {64, bn, 64}, 4, /*stages=*/8, "wgmma", /*group=*/1,
                                 /*k_splits=*/2);
    // 17 to 64 rows otherwise: one warpgroup's 64-row tiles of 128 columns, six stages; against the mma_sync
    // kernel on the H200 (bench/results/decode/decode_gemm.md) 1.2-1.5x at M = 32 and 64, e.g. M = 64, N = 14336:
    // 3.95 TB/s against 2.65 (cuBLAS 3.86).
    return ConfigAttr::get(matmul.getContext(), {64, kSplitColumnTile, 64}, 4, /*stages=*/6, "wgmma");
  }
  int64_t bm = 128, bk = 64;
  auto tiles = [&](int64_t bn) { return outputTiles(result, bm, bn); };
  int64_t sms = multiprocessorCount(Target::Sm90a);
  auto atLeast = [&](int64_t count, int64_t tenths) {
    return count >= static_cast<int64_t>(llvm::divideCeil(sms * tenths, 10));
  };
  int64_t bn = atLeast(tiles(256), 9) ? 256 : atLeast(tiles(128), 5) ? 128 : 64;
  return ConfigAttr::get(matmul.getContext(), {bm, bn, bk}, bm / 16, /*stages=*/4, "wgmma",
                         tileGroup(result, bm, bn, Target::Sm90a));
}

/// The GPU config of a row kernel over `input`: enough threads per row (a power of two up to a block of 1024;
/// short rows take a group of lanes of one warp) that each holds about 16 of the row's elements in registers,
/// and blocks of four warps, several rows each when rows are short (no more rows than there are, but at least
/// one warp).
static ConfigAttr getRowConfig(RankedTensorType input, MLIRContext *ctx) {
  int64_t width = input.getShape().back();
  int64_t rows = input.getRank() >= 2 ? input.getDimSize(input.getRank() - 2) : 1;
  int64_t threadsPerRow = std::clamp<int64_t>(llvm::PowerOf2Ceil(llvm::divideCeilSigned(width, 16)), 1, 1024);
  // A few short rows spread over one warp rather than leave most of its lanes idle.
  int64_t rowSlots = llvm::PowerOf2Ceil(std::max<int64_t>(rows, 1));
  while (threadsPerRow < 32 && rowSlots * threadsPerRow < 32)
    threadsPerRow *= 2;
  int64_t rowsPerBlock = std::max<int64_t>(std::max<int64_t>(1, 32 / threadsPerRow),
                                           std::min<int64_t>(std::max<int64_t>(1, 128 / threadsPerRow), rowSlots));
  return ConfigAttr::get(ctx, {rowsPerBlock}, rowsPerBlock * threadsPerRow / 32, /*stages=*/1, "rows");
}

/// The config of `op` on `target` from its shapes alone (getDefaultConfig adds what its operands' producers say).
static ConfigAttr configFromShapes(Operation *op, Target target) {
  MLIRContext *ctx = op->getContext();
  // Everything but the larger sm_90a matmuls and attentions runs the mma_sync kernels (with a deeper pipeline on
  // sm_90a).
  StringRef lowering = target == Target::Host ? "host" : "mma_sync";
  auto make = [&](ArrayRef<int64_t> tile, int64_t warps, int64_t stages, StringRef kernel = "", int64_t group = 1) {
    return ConfigAttr::get(ctx, tile, target == Target::Host ? 1 : warps, target == Target::Host ? 1 : stages,
                           kernel.empty() ? lowering : kernel, group);
  };
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    RankedTensorType result = matmul.getType(), lhs = matmul.getLhs().getType();
    int64_t m = result.getDimSize(result.getRank() - 2), n = result.getDimSize(result.getRank() - 1);
    // A split matmul's K loop runs over one chunk (TMA's row strides are the whole K's).
    int64_t k = matmul.getContractionSize();
    if (target == Target::Sm90a && usesWgmma(matmul, m, n, k))
      return getWgmmaConfig(matmul);
    if (std::optional<int64_t> chunk = matmul.getKChunk())
      k = std::min(k, *chunk);
    unsigned bits = lhs.getElementType().getIntOrFloatBitWidth();
    int64_t bm = 64, bn = 64, bk = 64, warps = 4, stages = 3;
    // 33 to 64 rows of a decode step: 64-row tiles, whose tile matmuls eight warps keep up with the weight's
    // stream (M = 64, K = N = 4096 split in 4: 2.13 TB/s against 1.96 with four warps on the H200,
    // bench/results/decode/decode_gemm.md).
    if (target != Target::Host && m > 32 && m <= 64)
      warps = 8;
    if (target != Target::Host) {
      bm = m <= 64 ? 64 : 128, bn = 128, bk = 32, stages = target == Target::Sm90a ? 4 : 3;
      // Small M (decoding) streams the weight: with a few thin tiles per multiprocessor, only deep K steps keep
      // enough bytes in flight (at BK = 32, 128 blocks x 4 stages hold ~1 MB, ~1 TB/s on the H200).
      if (m <= 64) {
        bk = 128;
        // Hopper's 227 KB of shared memory holds six such stages: more of the weight in flight per block, when K
        // is long enough to fill them.
        if (target == Target::Sm90a && k >= 6 * 128)
          stages = 6;
      }
    }
    bm = fitTile(bm, m, target), bn = fitTile(bn, n, target), bk = fitTile(bk, k, target);
    if (target != Target::Host) {
      // Too few tiles to fill the GPU (small M, as in decoding): narrower column tiles, down to 32, until about
      // two thirds of the multiprocessors (108 on the A100, 132 on the H100/H200) get one. Wider column tiles
      // stream the weight faster while enough are in flight; narrower ones win once too few tiles would leave
      // multiprocessors idle (bench/results/decode/gemm_column_tiles.md).
      auto tiles = [&] { return outputTiles(result, bm, bn); };
      while (bn > 32 && tiles() < static_cast<int64_t>(llvm::divideCeil(2 * multiprocessorCount(target), 3)))
        bn /= 2;
      // As many of the chosen stages as the target's shared memory holds, in the kernel's layout.
      auto stageBytes = [&] { return mmaOperandSlots(bm, bn, bk, matmul.getTransposeRhs(), bits).stageBytes; };
      while (stages > 2 && stages * stageBytes() > maxSharedBytesPerBlock(target))
        --stages;
    }
    // Small tiles get fewer warps, so that every thread copies whole 16-byte chunks of each tile and the warps
    // split the tile into warp tiles of whole fragments (16 rows by 8 columns each way the kernel tries).
    auto splitsIntoFragments = [&](int64_t count) {
      for (int64_t rows = 1; rows <= count; rows *= 2)
        if (count % rows == 0 && bm % (rows * 16) == 0 && bn % ((count / rows) * 8) == 0)
          return true;
      return false;
    };
    while (target != Target::Host && warps > 1 &&
           ((bm * bk * bits / 128) % (warps * 32) || (bk * bn * bits / 128) % (warps * 32) ||
            !splitsIntoFragments(warps)))
      warps /= 2;
    return make({bm, bn, bk}, warps, stages, "", tileGroup(result, bm, bn, target));
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    RankedTensorType q = attention.getQ().getType(), k = attention.getK().getType();
    int64_t seqQ = q.getDimSize(attention.getSeqDim()), seqK = k.getDimSize(attention.getSeqDim());
    int64_t headDim = q.getDimSize(3);
    int64_t bq = 64, bk = 64, warps = 4, stages = 2;
    if (target == Target::Host)
      return make({fitTile(bq, seqQ, target), fitTile(bk, seqK, target)}, warps, stages);
    // Measured on the H200 (bench/results/config_sweeps/attention_mma_sync.md): 128 x 128 tiles for head dim 128,
    // 128 x 64 for head dim 64. One warp per 16 query rows.
    // Past head dim 128 the O fragment takes more of each thread's registers: narrower key tiles keep the S
    // fragment small enough not to spill (64 keys up to head dim 192, 32 beyond).
    int64_t keys = headDim <= 64 ? 64 : headDim <= 128 ? 128 : headDim <= 192 ? 64 : 32;
    bq = fitTile(128, seqQ, target), bk = fitTile(keys, seqK, target);
    // On sm_90a bf16/f16 attention at head dims 64 and 128 takes the wgmma lowering, in query tiles of whole
    // warpgroups (64 rows; the decode shapes, a few query rows, stay on mma_sync). Measured on the H200
    // (bench/results/attention_lowering): at head dim 128 past 1024 keys, 128 x 128 tiles and two stages (the key
    // loop runs the next tile's Q K^T during this tile's softmax, holding two score tiles); everywhere else one
    // stage, the sequential loop, whose fewer registers let two blocks share a multiprocessor (at head dim 64
    // 1.04x the two-stage loop causal, as fast without the mask). Up to 1024 keys one-warpgroup 64-row tiles
    // run faster (a block of 128 rows gets too few key tiles to amortise its start), at head dim 128 and up to
    // 512 keys with 32-key tiles, at head dim 64 up to 160 keys too (bench/results/config_sweeps/attention_wgmma_short_keys.md).
    // A score_mod or mask_mod takes 64-key tiles: the mods' arithmetic needs the registers. A mask that leaves
    // each query a span of keys starting near it (windows, documents) takes one warpgroup's 64 rows, as short
    // key ranges do: two blocks share a multiprocessor, one's start and end overlapping the other's key loop
    // (bench/results/config_sweeps/attention_wgmma_variant_tiles.md, on the H100: d128 1024-key window 1.09x the
    // 128-row tiles, documents by id 1.19x, document spans 1.14x; d64 documents 1.11x with two stages, spans
    // 1.05x; a score_mod alone, softcap or ALiBi, 0.93-1.01x, so it keeps 128 rows).
    Type element = q.getElementType();
    int64_t valueDim = attention.getV().getType().getDimSize(3);
    bool mods = attention.hasScoreMod() || attention.hasMaskMod();
    if (target == Target::Sm90a && (element.isBF16() || element.isF16()) && bq % 64 == 0 &&
        headDim == valueDim && (headDim == 64 || headDim == 128)) {
      if (masksToMovingSpans(attention, seqQ, seqK))
        return make({64, fitTile(64, seqK, target)}, 4, headDim == 128 ? 1 : 2, "wgmma");
      if (mods)
        return make({bq, fitTile(64, seqK, target)}, bq / 16, headDim == 128 ? 2 : 1, "wgmma");
      if (seqK <= 1024)
        bq = 64, bk = fitTile(headDim == 128 && seqK <= 512 ? 32 : 64, seqK, target);
      if (headDim == 64 && seqK <= kNarrowKeyTileKeysD64)
        bk = fitTile(32, seqK, target);
      return make({bq, bk}, bq / 16, headDim == 128 && seqK > 1024 ? 2 : 1, "wgmma");
    }
    // A decode step (one 16-row query tile, one warp) above head dim 64 takes 64-key tiles: at head dim 128 its
    // S and O fragments needed more than 255 registers with 128-key tiles and spilled, and the 64-key kernel ran
    // faster at every cache length measured (bench/results/decode/attention_gqa_pack.md); larger head dims need more
    // registers still: past 128, 16-key tiles
    // (a warp that also copies the K and V tiles alone spilled hundreds of bytes with 32 or 64 keys).
    if (bq == 16 && headDim > 64)
      bk = std::min(bk, fitTile(headDim <= 128 ? 64 : 16, seqK, target));
    // Large head dims (and f32, whose tiles take twice the bytes): narrower key tiles, then fewer query rows,
    // until the tiles fit the chip's shared memory.
    while (attentionSharedBytes(bq, bk, headDim, valueDim, element.getIntOrFloatBitWidth(), /*wgmma=*/false) >
           maxSharedBytesPerBlock(target)) {
      if (bk > 32)
        bk /= 2;
      else if (bq > 16)
        bq /= 2;
      else
        break;
    }
    return make({bq, bk}, bq / 16, stages);
  }
  // Row kernels: a block of rows per program.
  auto input = cast<RankedTensorType>(op->getOperand(0).getType());
  int64_t rows = input.getRank() >= 2 ? input.getDimSize(input.getRank() - 2) : 1;
  if (target == Target::Host)
    return make({fitTile(16, rows, target)}, 1, 1);
  return getRowConfig(input, ctx);
}

ConfigAttr kiln::getDefaultConfig(Operation *op, Target target) {
  ConfigAttr config = configFromShapes(op, target);
  // A split matmul's chunks are whole k-tiles: BK divides the chunk (its greatest common divisor with it).
  if (auto matmul = dyn_cast<MatmulOp>(op); matmul && matmul.getKChunk()) {
    ArrayRef<int64_t> tile = config.getTile();
    int64_t bk = std::gcd(tile[2], *matmul.getKChunk());
    if (bk != tile[2])
      config = ConfigAttr::get(op->getContext(), {tile[0], tile[1], bk}, config.getWarps(), config.getStages(),
                               config.getLowering(), config.getGroup());
    return config;
  }
  // K and V read from a paged cache: a key tile spans whole pages (64 keys over 16- or 32-row pages) or lies
  // within one page (otherwise BK becomes its greatest common divisor with the page size).
  auto attention = dyn_cast<AttentionOp>(op);
  if (!attention)
    return config;
  for (Value operand : {attention.getK(), attention.getV()}) {
    auto view = operand.getDefiningOp<GatherPagesOp>();
    int64_t bk = config.getTile()[1];
    if (view && bk % view.getPageSize() != 0)
      config = ConfigAttr::get(op->getContext(), {config.getTile()[0], std::gcd(bk, view.getPageSize())},
                               config.getWarps(), config.getStages(), config.getLowering());
  }
  return config;
}

/// The granule of a split attention's key chunks: a multiple of every key tile the configs take.
static constexpr int64_t kKvChunkGranule = 256;

/// Shared memory of one multiprocessor (blocks share it; each also takes 1 KB of the system's).
static int64_t sharedBytesPerMultiprocessor(Target target) { return target == Target::Sm90a ? 233472 : 167936; }

std::optional<int64_t> kiln::chooseKvChunk(AttentionOp op, Target target) {
  if (target == Target::Host || op.getKvChunk() || op.getLse() || op.hasEpilogue() || op.isOutSeqMajor() ||
      getConfig(op))
    return std::nullopt;
  ConfigAttr config = getDefaultConfig(op, target);
  if (config.getLowering() != "mma_sync")
    return std::nullopt;
  RankedTensorType q = op.getQ().getType();
  int64_t seqQ = q.getDimSize(op.getSeqDim()), seqK = op.getK().getType().getDimSize(op.getSeqDim());
  int64_t bq = config.getTile()[0], bk = config.getTile()[1];
  uint64_t tiles = llvm::SaturatingMultiply<uint64_t>(
      llvm::SaturatingMultiply<uint64_t>(q.getDimSize(0), q.getDimSize(op.getHeadsDim())),
      llvm::divideCeil(seqQ, bq));
  int64_t granules = llvm::divideCeilSigned(seqK, kKvChunkGranule);
  uint64_t sms = multiprocessorCount(target);
  int64_t chunks = 1;
  if (tiles < 2 * sms) {
    // Two blocks per multiprocessor: a decode block (one warp streaming K and V through a two-slot ring) keeps
    // too few bytes in flight alone. Measured on the H200 (bench/results/decode): 256 blocks beat 128 at every
    // batch and length split (batch 1, 8192 keys: 9.3 us against 11.3; batch 8: 68 against 74), and 512 or more
    // lost again to the merge and the chunks' fixed costs.
    chunks = static_cast<int64_t>(std::min<uint64_t>(2 * sms / std::max<uint64_t>(tiles, 1), granules));
  } else if (seqQ <= bq) {
    // More decode blocks than the chip holds at once: chunks that make the last wave nearly full (batch 64, GQA
    // 32/8: 512 blocks are 1.3 waves of the H200's 396 and ran at 3.43 TB/s; 3 chunks, 3.9 waves, at 4.12).
    RankedTensorType v = op.getV().getType();
    int64_t shared = attentionSharedBytes(bq, bk, q.getDimSize(3), v.getDimSize(3),
                                          q.getElementType().getIntOrFloatBitWidth(), /*wgmma=*/false);
    uint64_t slots = sms * std::clamp<int64_t>(sharedBytesPerMultiprocessor(target) / (shared + 1024), 1, 32);
    auto fullness = [&](int64_t n) {
      double waves = static_cast<double>(tiles * n) / static_cast<double>(slots);
      return waves / std::ceil(waves);
    };
    if (tiles > slots)
      for (int64_t n = 2; n <= std::min<int64_t>(4, granules); ++n)
        if (fullness(n) > fullness(chunks) + 0.05)
          chunks = n;
  }
  if (chunks < 2)
    return std::nullopt;
  // Chunks of equal whole granules (the last one shorter where the keys end): as many as wanted or fewer.
  return llvm::divideCeilSigned(granules, chunks) * kKvChunkGranule;
}

std::optional<int64_t> kiln::chooseKChunk(MatmulOp op, Target target) {
  if (target == Target::Host || op.getKChunk() || getConfig(op))
    return std::nullopt;
  ConfigAttr config = getDefaultConfig(op, target);
  // The mma_sync kernel, and the wgmma one of a decode step (64-row tiles) unless a cluster splits it.
  if (config.getLowering() == "wgmma" ? config.getTile()[0] != 64 || config.getKSplits() > 1
                                      : config.getLowering() != "mma_sync")
    return std::nullopt;
  // Measured on the H200 (bench/results/decode/decode_gemm.md; M = 1..64 against the Llama block's weights): a
  // weight-streaming block takes a whole multiprocessor (five or six stages of 128-column tiles), the fastest
  // split fills one wave of them with the widest tiles (M = 32, K = N = 4096: 4 chunks of 32 tiles, 2.64 TB/s
  // against 1.87 unsplit). A split into two repays its second kernel only where a block's tile has 32 rows or more
  // (N = 6144, 48 tiles: 2.39 TB/s against 1.91 at M = 32; 2.58 against 2.57 at M = 16).
  // The wgmma kernel's tiles are its config's; the mma_sync kernel's are counted 128 columns wide whatever its
  // config narrowed them to (a split gives the blocks enough to stream).
  int64_t bm = config.getTile()[0], bk = config.getTile()[2];
  int64_t bn = config.getLowering() == "wgmma" ? config.getTile()[1] : kSplitColumnTile;
  int64_t tiles = outputTiles(op.getType(), bm, bn);
  int64_t kTiles = llvm::divideCeilSigned(op.getContractionSize(), bk);
  int64_t chunks = std::min<int64_t>(multiprocessorCount(target) / std::max<int64_t>(tiles, 1),
                                     op.getContractionSize() / kMinChunk);
  if (chunks < (bm >= 32 ? 2 : 3))
    return std::nullopt;
  return llvm::divideCeilSigned(kTiles, chunks) * bk;
}

namespace {
struct KilnSelectConfigPass : kiln::impl::KilnSelectConfigBase<KilnSelectConfigPass> {
  using KilnSelectConfigBase::KilnSelectConfigBase;
  void runOnOperation() override {
    getOperation()->walk([&](Operation *op) {
      if (isKernelOp(op) && !getConfig(op))
        op->setAttr(kConfigAttrName, getDefaultConfig(op, target));
    });
  }
};
} // namespace
