//===- AttentionKernel.cpp - kiln.attention as a FlashAttention-3 wgmma kernel -===//
//
// The "wgmma" attention (sm_90a, head dims 64 and 128), still built whole from the op and its config; the
// "mma_sync" attention is lowered from its tiled loop (AttentionLayoutLowering.cpp). Emitted op by op:
//   - grid (ceil(Sq/BQ), Hq, B), BQ / 16 warps, a warpgroup per 64 query rows (BQ and BK from #kiln.config);
//   - the Q tile is copied once (cp.async) and kept in registers as A fragments; K and V tiles of BK keys stream
//     through double-buffered rings in 128-byte swizzled dynamic shared memory, the next tile's copies in
//     flight while this one is used;
//   - S = Q K^T and O += P V are warpgroup MMAs with Q and P in registers, pipelined as in FlashAttention-3: the
//     next tile's S is issued with this tile's P V, and its softmax runs while P V does (V one tile behind K),
//     or, with one stage, in turn in one loop that compiles faster (the loops are in AttentionWgmmaLoops.cpp);
//   - the online softmax in registers: scores scaled by scale * log2(e), row max by quad shuffles, exp2,
//     accumulator rescaled by exp2(m_old - m_new); a row still at -inf uses 0 as its offset; P is rounded to
//     the input type and repacked from accumulator fragments into A fragments;
//   - keys past the end, and with `causal` keys above the bottom-right-aligned diagonal, are set to -inf in a
//     second loop over the tiles that need it (the first runs the others unmasked); causal blocks stop at the
//     last key tile their rows can see;
//   - GQA: the block of q head h reads k/v head h / (Hq / Hkv);
//   - `layout = "bshd"` (and `out_layout`) only change where a head's rows start and how far apart they are;
//   - Sq and Sk are kernel parameters (the launch's sizes), so that other lengths share the kernel; what the
//     loops' form and the bounds checks depend on stays static: the number of key tiles, whether they are
//     whole, whether Sq is a whole number of query tiles, and under the causal mask one query row or more.
// An additive mask is added to the scores in base 2; the output O / l goes through the epilogue (if any) and is
// stored with rows past Sq skipped; the lse, when asked for, is (m + log2 l) ln 2.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "KernelBuilding.h"
#include "AttentionParts.h"
#include "WgmmaBuilding.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

static constexpr double kLog2E = 1.4426950408889634;

/// Max or sum of a value over the four lanes of a quad (lanes that share accumulator rows).
static Value quadReduce(OpBuilder &b, Location loc, Value value, bool isMax) {
  for (int32_t offset : {1, 2}) {
    Value other = gpu::ShuffleOp::create(b, loc, value, offset, 32, gpu::ShuffleMode::XOR).getShuffleResult();
    value = isMax ? Value(arith::MaximumFOp::create(b, loc, value, other))
                  : Value(arith::AddFOp::create(b, loc, value, other));
  }
  return value;
}

FailureOr<KernelLaunch> kiln::buildAttentionKernel(OpBuilder &builder, gpu::GPUModuleOp module, AttentionOp op,
                                                   StringRef name) {
  RankedTensorType qType = op.getQ().getType(), kType = op.getK().getType(), outType = op.getOut().getType();
  Type element = qType.getElementType();
  if (!element.isBF16() && !element.isF16())
    return op.emitOpError() << "the GPU attention kernel takes bf16 or f16 q/k/v, got " << element;
  const int64_t headsDim = op.getHeadsDim(), seqDim = op.getSeqDim();
  int64_t batch = qType.getDimSize(0), heads = qType.getDimSize(headsDim), seqQ = qType.getDimSize(seqDim);
  int64_t headDim = qType.getDimSize(3), kvHeads = kType.getDimSize(headsDim), seqK = kType.getDimSize(seqDim);
  int64_t valueDim = op.getV().getType().getDimSize(3), group = op.getGroupSize();
  bool causal = op.getCausal();
  // Tiles from the config: BQ query rows (16 per warp, a warpgroup per 64) and BK keys per step.
  ConfigAttr config = getConfig(op);
  if (!config || config.getLowering() != "wgmma" || config.getTile().size() != 2)
    return op.emitOpError() << "needs a #kiln.config with lowering = \"wgmma\" and tile = [BQ, BK] to be built "
                               "whole (\"mma_sync\" attention is lowered from its tiled loop)";
  const int64_t bq = config.getTile()[0], bk = config.getTile()[1], warps = bq / 16, threads = warps * 32;
  if (bq % 64 != 0 || bq > 256 || bk % 16 != 0 || bk > 256 || headDim != valueDim ||
      (headDim != 64 && headDim != 128))
    return op.emitOpError() << "#kiln.config " << config
                            << " does not fit the wgmma attention kernel: BQ must be a multiple of 64 (a warpgroup "
                               "per 64 rows) up to 256, BK a multiple of 16 up to 256, and the head dims equal, 64 "
                               "or 128";
  bool bf16 = element.isBF16();
  // Two or more stages pipeline the MMAs (FlashAttention-3); one stage runs them in turn, in a loop that
  // compiles in about half the time (AttentionWgmmaLoops.cpp).
  bool pipelined = config.getStages() >= 2;

  // Shared memory: two K and two V tiles first (1024-byte aligned, in swizzled 64-column panels, unpadded), then
  // the Q tile, rows padded by 8 elements.
  int64_t strideQ = headDim + 8, strideK = headDim, strideV = valueDim;
  int64_t sizeQ = bq * strideQ, sizeK = bk * strideK, sizeV = bk * strideV;
  int64_t sharedBytes = attentionSharedBytes(bq, bk, headDim, valueDim, /*wgmma=*/true);
  int64_t offsetQ = 2 * sizeK + 2 * sizeV, offsetK = 0, offsetV = offsetK + 2 * sizeK;

  MLIRContext *ctx = builder.getContext();
  Location loc = op.getLoc();
  OpBuilder::InsertionGuard guard(builder);
  // Parameters: q, k, v, [mask], epilogue operands..., out, [lse] — the kernel function's operands, then its
  // destinations.
  SmallVector<RankedTensorType> buffers{qType, kType, op.getV().getType()};
  for (Value operand : op.getOperands().drop_front(3))
    buffers.push_back(cast<RankedTensorType>(operand.getType()));
  buffers.push_back(outType);
  if (Value lse = op.getLse())
    buffers.push_back(cast<RankedTensorType>(lse.getType()));
  // Size-generic in the sequence lengths: Sq and Sk are the kernel's two index parameters after its buffers.
  KernelFunction kernel = startKernel(builder, module, loc, name, buffers, threads, sharedBytes, 1024,
                                      /*sizeParams=*/2);
  Block &entry = kernel.func.getBody().front();
  Value seqQv = entry.getArgument(buffers.size()), seqKv = entry.getArgument(buffers.size() + 1);
  Value q = entry.getArgument(0), k = entry.getArgument(1), v = entry.getArgument(2);
  unsigned next = 3;
  Value mask = op.getMask() ? entry.getArgument(next++) : Value();
  ValueRange epilogueArgs = entry.getArguments().slice(next, op.getEpilogueOperands().size());
  next += op.getEpilogueOperands().size();
  Value out = entry.getArgument(next++);
  Value lseOut = op.getLse() ? entry.getArgument(next) : Value();
  IndexMath im{builder, loc};
  Type f32 = builder.getF32Type();
  auto f32c = [&](double value) { return arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(value)); };
  Value sharedQ = sharedView(builder, loc, kernel.sharedBytes, offsetQ, sizeQ, element);
  Value sharedK = sharedView(builder, loc, kernel.sharedBytes, offsetK, 2 * sizeK, element);
  Value sharedV = sharedView(builder, loc, kernel.sharedBytes, offsetV, 2 * sizeV, element);

  Value tid = gpu::ThreadIdOp::create(builder, loc, gpu::Dimension::x);
  Value qBlock = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::x);
  Value head = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::y);
  Value b = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::z);
  Value warp = im.div(tid, 32), lane = im.rem(tid, 32);
  Value q0 = im.mul(qBlock, bq), kvHead = im.div(head, group);
  // Where the rows (positions) of one head start, and how far apart they are: [B, H, S, X] keeps a head's rows
  // together; seq-major [B, S, H, X] interleaves the heads, so consecutive positions are H * X apart.
  bool seqMajor = op.isSeqMajor();
  auto headBase = [&](bool rowsInterleaved, Value headIndex, int64_t headCount, Value seq, int64_t width) {
    if (rowsInterleaved)
      return im.add(im.mul(im.mul(b, seq), headCount * width), im.mul(headIndex, width));
    return im.mul(im.mul(im.add(im.mul(b, headCount), headIndex), seq), width);
  };
  auto rowStride = [](bool rowsInterleaved, int64_t headCount, int64_t width) {
    return rowsInterleaved ? headCount * width : width;
  };
  Value qBase = headBase(seqMajor, head, heads, seqQv, headDim);
  Value kBase = headBase(seqMajor, kvHead, kvHeads, seqKv, headDim);
  Value vBase = headBase(seqMajor, kvHead, kvHeads, seqKv, valueDim);
  Type tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);

  // Copies rows [row0, row0 + rows) of a [limit x width] matrix at `base` (rows `globalStride` apart) into
  // `shared` (row stride `stride`, or swizzled 64-column panels when `swizzled`), zero-filling rows past
  // `limit`; no rows are zero-filled when the matrix is a whole number of such tiles (`wholeTiles`: row0 starts
  // one of them).
  auto copyRows = [&](Value shared, Value sharedBase, int64_t stride, Value global, Value base, int64_t globalStride,
                      Value row0, int64_t rows, int64_t width, Value limit, bool wholeTiles, bool swizzled = false) {
    int64_t chunksPerRow = width / 8, chunks = rows * chunksPerRow;
    SmallVector<Value> tokens;
    for (int64_t i = 0; i < llvm::divideCeilSigned(chunks, threads); ++i) {
      Value chunk = im.add(tid, i * threads);
      // Threads past the last chunk repeat the last one (same bytes, same place).
      if (chunks % threads != 0)
        chunk = im.min(chunk, im.c(chunks - 1));
      Value row = im.div(chunk, chunksPerRow), col = im.mul(im.rem(chunk, chunksPerRow), 8);
      Value globalRow = im.add(row0, row);
      Value count = im.c(8), src = im.add(base, im.add(im.mul(globalRow, globalStride), col));
      Value inside;
      if (!wholeTiles)
        inside = im.lt(globalRow, limit);
      if (inside) {
        count = im.select(inside, count, im.c(0));
        src = im.select(inside, src, im.c(0));
      }
      Value place = swizzled ? swizzledPanelIndex(im, row, col, rows) : im.add(im.mul(row, stride), col);
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(builder, loc, tokenType, shared, im.add(sharedBase, place),
                                                        global, src, builder.getIndexAttr(8), count,
                                                        builder.getUnitAttr()));
    }
    return tokens;
  };
  // K or V rows of key tile `tile` into ring slot `slot` (the copies; a caller groups them).
  auto loadK = [&](Value tile, Value slot) {
    return copyRows(sharedK, im.mul(slot, sizeK), strideK, k, kBase, rowStride(seqMajor, kvHeads, headDim),
                    im.mul(tile, bk), bk, headDim, seqKv, seqK % bk == 0, /*swizzled=*/true);
  };
  auto loadV = [&](Value tile, Value slot) {
    return copyRows(sharedV, im.mul(slot, sizeV), strideV, v, vBase, rowStride(seqMajor, kvHeads, valueDim),
                    im.mul(tile, bk), bk, valueDim, seqKv, seqK % bk == 0, /*swizzled=*/true);
  };
  // One cp.async group of copies: waiting for "all but the newest group" then leaves exactly it in flight.
  auto commitGroup = [&](ArrayRef<SmallVector<Value>> copies) {
    SmallVector<Value> tokens;
    for (const SmallVector<Value> &part : copies)
      tokens.append(part);
    return nvgpu::DeviceAsyncCreateGroupOp::create(builder, loc, tokenType, tokens).getResult();
  };
  auto waitGroups = [&](Value group, int32_t pending) {
    nvgpu::DeviceAsyncWaitOp::create(builder, loc, group, builder.getI32IntegerAttr(pending));
  };

  // What the kernel specialises on about the lengths, besides reading them: the number of key tiles (a
  // constant trip count and last tile: with them read at run time ptxas took up to 48 more registers, a block
  // less per SM, and 3-15% of the speed), whether they are whole (else the last one masks keys past the end)
  // and, with `causal`, whether a block's rows see the same keys (one query row: else the tiles along the
  // diagonal are masked). These decide which of the loops below exist.
  int64_t allTiles = llvm::divideCeilSigned(seqK, bk);
  bool unmaskedLoop = seqK >= bk, anyTileMasked = seqK % bk != 0 || (causal && seqQ > 1);
  Value tileCount = im.c(allTiles);
  // Key tiles this block visits: all of them, or with `causal` up to its last row's diagonal.
  Value kvOffset = causal ? im.sub(seqKv, seqQv) : Value(); // Sk - Sq: the diagonal's shift
  Value numTiles = tileCount;
  if (causal && allTiles > 1) { // one key tile: every block's first row sees key 0
    // Last key visible to row q0 + BQ - 1 is q0 + BQ - 1 + (Sk - Sq); tiles = ceil((that + 1) / BK).
    Value lastKey = im.add(im.add(q0, bq), kvOffset);
    numTiles = im.min(im.div(im.add(lastKey, bk - 1), bk), tileCount);
  }

  // Q and the first key tile; the wgmma pipeline also needs the second tile's K before its first iteration.
  Value group0 = commitGroup({copyRows(sharedQ, im.c(0), strideQ, q, qBase, rowStride(seqMajor, heads, headDim), q0,
                                       bq, headDim, seqQv, seqQ % bq == 0),
                              loadK(im.c(0), im.c(0)), loadV(im.c(0), im.c(0))});
  if (pipelined) {
    waitGroups(commitGroup({loadK(im.c(std::min<int64_t>(1, allTiles - 1)), im.c(1))}), 1);
    fenceCopiesForWgmma(builder, loc);
  } else {
    waitGroups(group0, 0);
  }
  gpu::BarrierOp::create(builder, loc);

  // Q fragments of this warp's 16 rows, kept in registers.
  auto fragA = VectorType::get({4, 2}, element);
  Value laneRow16 = im.rem(lane, 16), laneHalf = im.mul(im.div(lane, 16), 8);
  Value warpRow = im.mul(warp, 16);
  SmallVector<SmallVector<Value>> qRegs;
  for (int64_t kk = 0; kk < headDim / 16; ++kk) {
    Value index = im.add(im.mul(im.add(warpRow, laneRow16), strideQ), im.add(laneHalf, kk * 16));
    qRegs.push_back(packFragment(builder, loc,
                                 nvgpu::LdMatrixOp::create(builder, loc, fragA, sharedQ, index,
                                                           builder.getBoolAttr(false), builder.getI32IntegerAttr(4))));
  }

  // This thread's two rows (lane / 4 and 8 below) and its column pair within each 8-wide fragment.
  Value rowA = im.add(q0, im.add(warpRow, im.div(lane, 4))), rowB = im.add(rowA, 8);
  Value pairCol = im.mul(im.rem(lane, 4), 2);
  auto accType = VectorType::get({4}, f32);
  Value zeroAcc = arith::ConstantOp::create(builder, loc, DenseElementsAttr::get(accType, 0.0f));
  Value negInf = f32c(-std::numeric_limits<double>::infinity());
  int64_t outFrags = valueDim / 8, scoreFrags = bk / 8;
  SmallVector<Value> inits{negInf, negInf, f32c(0.0), f32c(0.0)};
  inits.append(outFrags, zeroAcc);
  double scaleLog2 = op.getEffectiveScale() * kLog2E;

  DescriptorBuilder descriptors(builder, loc, kernel.sharedBytes);
  // The key tiles that need no mask come first: those wholly before Sk and, with `causal`, wholly at or left of
  // the block's first row's diagonal (key0 + BK - 1 <= q0 + Sk - Sq; the verifier ensures Sq <= Sk). One loop
  // runs them, a second one masks every tile after them (where a tile can need it at all), so that the loop
  // bodies have no branch: with an scf.if on the tile index around the masking, between the two groups of
  // wgmma instructions (`.aligned`, which need the warp converged), the masked tiles came out wrong on the
  // H200, without a word from ptxas.
  // The same for every Sk of as many key tiles, whole or not.
  Value unmaskedTiles = im.c(seqK / bk);
  if (causal)
    unmaskedTiles = im.min(unmaskedTiles, im.div(im.add(im.add(q0, kvOffset), 1), bk));
  unmaskedTiles = im.min(unmaskedTiles, numTiles);

  // The last key each of this thread's two rows sees under the causal mask, and the last valid key and row.
  Value diagonalA, diagonalB;
  if (causal)
    diagonalA = im.add(rowA, kvOffset), diagonalB = im.add(rowB, kvOffset);
  Value lastValidKey = im.sub(seqKv, 1), lastValidRow = im.sub(seqQv, 1);
  auto element4 = [&](Value vec, int64_t e) {
    return vector::ExtractOp::create(builder, loc, vec, ArrayRef<int64_t>{e}).getResult();
  };
  // The online softmax of one tile's scores (this thread's fragments of S = Q K^T for key tile `tile`) against
  // the running row maxima and sums (TileSoftmax).
  auto softmaxTile = [&](SmallVector<Value> scores, Value tile, bool masked, Value maxA, Value maxB, Value sumA,
                         Value sumB) {
    // Scale to base 2 (and add the additive mask, also in base 2), then mask the keys past the end (or, with
    // `causal`, above the diagonal) where the tile needs it.
    Value scale = arith::ConstantOp::create(builder, loc, DenseElementsAttr::get(accType, float(scaleLog2)));
    for (Value &s : scores)
      s = arith::MulFOp::create(builder, loc, s, scale);
    Value key0 = im.mul(tile, bk);
    if (mask) {
      ArrayRef<int64_t> maskShape = cast<RankedTensorType>(op.getMask().getType()).getShape();
      SmallVector<int64_t> scoreShape{batch, heads, seqQ, seqK};
      for (int64_t j = 0; j < scoreFrags; ++j) {
        SmallVector<Value> parts;
        for (int64_t e = 0; e < 4; ++e) {
          // Positions past the end read a clamped (valid) element: a key past the end is set to -inf below, a
          // row past the end is not stored.
          Value key = im.min(im.add(key0, im.add(pairCol, j * 8 + e % 2)), lastValidKey);
          Value row = im.min(e < 2 ? rowA : rowB, lastValidRow);
          Value at = broadcastLinearIndex(im, maskShape, scoreShape, {b, head, row, key},
                                          {nullptr, nullptr, seqQv, seqKv});
          Value bias = lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, mask, at));
          bias = arith::MulFOp::create(builder, loc, bias, f32c(kLog2E));
          parts.push_back(arith::AddFOp::create(builder, loc, element4(scores[j], e), bias));
        }
        scores[j] = vector::FromElementsOp::create(builder, loc, accType, parts);
      }
    }
    if (masked) {
      for (int64_t j = 0; j < scoreFrags; ++j) {
        Value &s = scores[j];
        for (int64_t e = 0; e < 4; ++e) {
          // Keys past the end, where the last tile is partial; under the causal mask they are in the future
          // of every row that is one of the Sq (Sq <= Sk), and the other rows' results are not stored.
          Value key = im.add(key0, im.add(pairCol, j * 8 + e % 2));
          Value outside = causal ? arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ugt, key,
                                                         e < 2 ? diagonalA : diagonalB)
                                 : arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::uge, key, seqKv);
          Value value = arith::SelectOp::create(builder, loc, outside, negInf, element4(s, e));
          s = vector::InsertOp::create(builder, loc, value, s, ArrayRef<int64_t>{e});
        }
      }
    }

    // Row maxima over the tile: within the thread, then across the quad that shares the rows.
    Value tileMaxA = negInf, tileMaxB = negInf;
    for (Value s : scores) {
      tileMaxA = arith::MaximumFOp::create(builder, loc, tileMaxA,
                                           arith::MaximumFOp::create(builder, loc, element4(s, 0), element4(s, 1)));
      tileMaxB = arith::MaximumFOp::create(builder, loc, tileMaxB,
                                           arith::MaximumFOp::create(builder, loc, element4(s, 2), element4(s, 3)));
    }
    TileSoftmax result;
    result.maxA = arith::MaximumFOp::create(builder, loc, maxA, quadReduce(builder, loc, tileMaxA, true));
    result.maxB = arith::MaximumFOp::create(builder, loc, maxB, quadReduce(builder, loc, tileMaxB, true));
    // A row with nothing visible yet keeps -inf; exponentiate against 0 then, so nothing becomes NaN.
    auto offsetOf = [&](Value m) {
      Value isNegInf = arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::OEQ, m, negInf);
      return arith::SelectOp::create(builder, loc, isNegInf, f32c(0.0), m).getResult();
    };
    Value offA = offsetOf(result.maxA), offB = offsetOf(result.maxB);
    Value alphaA = math::Exp2Op::create(builder, loc, arith::SubFOp::create(builder, loc, maxA, offA));
    Value alphaB = math::Exp2Op::create(builder, loc, arith::SubFOp::create(builder, loc, maxB, offB));
    result.alphas = vector::FromElementsOp::create(builder, loc, accType, ValueRange{alphaA, alphaA, alphaB, alphaB});
    Value offsets = vector::FromElementsOp::create(builder, loc, accType, ValueRange{offA, offA, offB, offB});
    result.sumA = arith::MulFOp::create(builder, loc, sumA, alphaA);
    result.sumB = arith::MulFOp::create(builder, loc, sumB, alphaB);
    for (Value s : scores) {
      Value p = math::Exp2Op::create(builder, loc, arith::SubFOp::create(builder, loc, s, offsets));
      result.sumA = arith::AddFOp::create(builder, loc, result.sumA,
                                          arith::AddFOp::create(builder, loc, element4(p, 0), element4(p, 1)));
      result.sumB = arith::AddFOp::create(builder, loc, result.sumB,
                                          arith::AddFOp::create(builder, loc, element4(p, 2), element4(p, 3)));
      result.probs.push_back(p);
    }
    return result;
  };
  // P rounded to the input type and repacked from accumulator fragments into A fragments, one per k16 step.
  auto halfPair = VectorType::get({2}, f32);
  auto packProbabilities = [&](ArrayRef<Value> probs) {
    auto pack = [&](Value p, int64_t first) {
      Value pair = vector::FromElementsOp::create(builder, loc, halfPair,
                                                  ValueRange{element4(p, first), element4(p, first + 1)});
      Value narrow = arith::TruncFOp::create(builder, loc, VectorType::get({2}, element), pair);
      if (!bf16)
        return narrow;
      Value word = vector::BitCastOp::create(builder, loc, VectorType::get({1}, builder.getI32Type()), narrow);
      return vector::ExtractOp::create(builder, loc, word, ArrayRef<int64_t>{0}).getResult();
    };
    SmallVector<SmallVector<Value>> pRegs;
    for (int64_t kk = 0; kk < bk / 16; ++kk) {
      Value p0 = probs[2 * kk], p1 = probs[2 * kk + 1];
      pRegs.push_back({pack(p0, 0), pack(p0, 2), pack(p1, 0), pack(p1, 2)});
    }
    return pRegs;
  };
  auto rescale = [&](SmallVector<Value> acc, Value alphas) {
    for (Value &o : acc)
      o = arith::MulFOp::create(builder, loc, o, alphas);
    return acc;
  };

  SmallVector<Value> final; // row maxima, row sums and O fragments after the last key tile
  {
    // The wgmma loops (AttentionWgmmaLoops.cpp), from the same copies and softmax.
    // Up to four key tiles ending in a partial one, without the causal mask, the pipeline masks every tile in
    // one loop: with an unmasked and a masked loop of one trip each, MLIR folds both into straight-line copies
    // of the body, half again as much code for ptxas; the mask costs nothing measurable there
    // (bench/results/attention_wgmma_one_masked_loop_v1.log).
    bool maskAll = !unmaskedLoop || (pipelined && !causal && allTiles <= 4 && seqK % bk != 0);
    AttentionParts parts{bk, headDim, valueDim, outFrags, allTiles, sizeK, sizeV, offsetK, offsetV, bf16,
                         anyTileMasked, zeroAcc, negInf, numTiles, maskAll ? im.c(0) : unmaskedTiles, qRegs, loadK,
                         loadV, commitGroup, waitGroups, softmaxTile, packProbabilities, rescale};
    final = pipelined ? buildWgmmaAttentionLoops(builder, loc, parts, descriptors, group0)
                      : buildSequentialWgmmaAttentionLoop(builder, loc, parts, descriptors, group0);
  }

  // O / l, through the epilogue if there is one, stored in the output type; rows past Sq are skipped.
  Value sumA = quadReduce(builder, loc, final[2], false);
  Value sumB = quadReduce(builder, loc, final[3], false);
  Value invA = arith::DivFOp::create(builder, loc, f32c(1.0), sumA);
  Value invB = arith::DivFOp::create(builder, loc, f32c(1.0), sumB);
  bool outSeqMajor = op.isOutSeqMajor();
  Value outBase = headBase(outSeqMajor, head, heads, seqQv, valueDim);
  int64_t outRowStride = rowStride(outSeqMajor, heads, valueDim);
  ArrayRef<int64_t> outShape = outType.getShape();
  // One output element: O / l through the epilogue, in the output type.
  auto finishElement = [&](Value value, Value inverse, Value row, Value col) {
    value = arith::MulFOp::create(builder, loc, value, inverse);
    if (op.hasEpilogue()) {
      Block &body = op.getEpilogue().front();
      IRMapping mapping;
      mapping.map(body.getArgument(0), value);
      for (auto [index, operand] : llvm::enumerate(op.getEpilogueOperands())) {
        ArrayRef<int64_t> shape = cast<RankedTensorType>(operand.getType()).getShape();
        Value at = broadcastLinearIndex(im, shape, outShape,
                                        outSeqMajor ? SmallVector<Value>{b, row, head, col}
                                                    : SmallVector<Value>{b, head, row, col},
                                        outSeqMajor ? SmallVector<Value>{nullptr, seqQv, nullptr, nullptr}
                                                    : SmallVector<Value>{nullptr, nullptr, seqQv, nullptr});
        Value loaded = memref::LoadOp::create(builder, loc, epilogueArgs[index], at);
        mapping.map(body.getArgument(index + 1), lowering::widen(builder, loc, loaded));
      }
      for (Operation &inner : body.without_terminator())
        builder.clone(inner, mapping);
      value = mapping.lookup(body.getTerminator()->getOperand(0));
    }
    return lowering::narrow(builder, loc, value, outType.getElementType());
  };
  // Whether a row is one of the Sq: always, when Sq is a whole number of query tiles.
  auto rowInside = [&](Value row) {
    return seqQ % bq == 0 ? Value(arith::ConstantIntOp::create(builder, loc, /*value=*/1, /*width=*/1))
                          : im.lt(row, seqQv);
  };
  // Each thread holds column pairs (even column, head dims and row strides even): one 2-element store per pair,
  // for the fragments of the value dim's columns (not its zero padding).
  for (int64_t d = 0; d < valueDim / 8; ++d) {
    Value o = final[4 + d];
    for (int64_t e : {0, 2}) {
      Value row = e == 0 ? rowA : rowB, inverse = e == 0 ? invA : invB;
      Value col = im.add(pairCol, d * 8);
      scf::IfOp::create(builder, loc, rowInside(row), [&](OpBuilder &thenBuilder, Location) {
        OpBuilder::InsertionGuard thenGuard(builder);
        builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
        Value low = finishElement(element4(o, e), inverse, row, col);
        Value high = finishElement(element4(o, e + 1), inverse, row, im.add(col, 1));
        Value pair = vector::FromElementsOp::create(builder, loc, VectorType::get({2}, low.getType()),
                                                    ValueRange{low, high});
        Value at = im.add(outBase, im.add(im.mul(row, outRowStride), col));
        vector::StoreOp::create(builder, loc, pair, out, ValueRange{at}, /*nontemporal=*/false,
                                llvm::MaybeAlign(2 * low.getType().getIntOrFloatBitWidth() / 8));
        scf::YieldOp::create(builder, loc);
      });
    }
  }
  if (lseOut) {
    // lse = (m + log2 l) ln 2 (scores are in base 2); one lane of each quad stores its two rows.
    Value firstOfQuad = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, im.rem(lane, 4), im.c(0));
    Value lseBase = im.mul(im.add(im.mul(b, heads), head), seqQv);
    for (auto [row, max, sum] : {std::tuple<Value, Value, Value>{rowA, final[0], sumA}, {rowB, final[1], sumB}}) {
      Value store = im.andi(firstOfQuad, rowInside(row));
      scf::IfOp::create(builder, loc, store, [&](OpBuilder &thenBuilder, Location) {
        OpBuilder::InsertionGuard thenGuard(builder);
        builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
        Value log2Sum = math::Log2Op::create(builder, loc, sum);
        Value lse = arith::MulFOp::create(builder, loc, arith::AddFOp::create(builder, loc, max, log2Sum),
                                          f32c(0.6931471805599453));
        memref::StoreOp::create(builder, loc, lse, lseOut, im.add(lseBase, row));
        scf::YieldOp::create(builder, loc);
      });
    }
  }
  gpu::ReturnOp::create(builder, loc);
  return KernelLaunch{{llvm::divideCeilSigned(seqQ, bq), heads, batch}, {threads, 1, 1}, sharedBytes, {seqQ, seqK}};
}
