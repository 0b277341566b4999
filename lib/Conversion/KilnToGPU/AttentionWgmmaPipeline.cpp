//===- AttentionWgmmaPipeline.cpp - The attention kernel's key loops on wgmma -===//
//
// The key-tile loops of the FlashAttention kernel with the "wgmma" lowering (sm_90a), pipelined as in
// FlashAttention-3 within a warpgroup: iteration j issues S(j+1) = Q K(j+1)^T and O += P(j) V(j) back to back,
// waits for S(j+1) only, computes its softmax while P(j) V(j) runs, then waits for O and rescales it. K and V
// each have a two-slot ring, V one tile behind K: iteration j reads K(j+1) and V(j) and prefetches K(j+2) and
// V(j+1) into the slots of K(j) and V(j-1), which nothing reads anymore. Tile 0's S and softmax come before the
// loops, the last tile's P V after them.
//
//===----------------------------------------------------------------------===//

#include "AttentionParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

SmallVector<Value> gpukernel::buildWgmmaAttentionLoops(OpBuilder &builder, Location loc, const AttentionParts &p,
                                                       DescriptorBuilder &descriptors, Value group0) {
  const int64_t bk = p.bk, headDim = p.headDim, valueDim = p.valueDim, outFrags = p.outFrags;
  const int64_t allTiles = p.allTiles, sizeK = p.sizeK, sizeV = p.sizeV, offsetK = p.offsetK, offsetV = p.offsetV;
  const bool bf16 = p.bf16;
  Value zeroAcc = p.zeroAcc, negInf = p.negInf, numTiles = p.numTiles, unmaskedTiles = p.unmaskedTiles;
  const SmallVector<SmallVector<Value>> &qRegs = p.qRegs;
  IndexMath im{builder, loc};
  auto f32c = [&](double value) { return arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(value)); };
  const auto &loadK = p.loadK, &loadV = p.loadV;
  const auto &commitGroup = p.commitGroup;
  const auto &waitGroups = p.waitGroups;
  const auto &softmaxTile = p.softmaxTile;
  const auto &packProbabilities = p.packProbabilities;
  const auto &rescale = p.rescale;

  auto kDescriptors = [&](Value slot) {
    // K [BK keys][d] is B K-major: a k16 step of the head dim is 32 bytes into a 64-column panel.
    SmallVector<Value> result;
    Value kBytes = im.mul(im.add(im.mul(slot, sizeK), offsetK), 2); // descriptors count from the buffer's start
    for (int64_t kk = 0; kk < headDim / 16; ++kk)
      result.push_back(descriptors.get(im.add(kBytes, (kk / 4) * bk * kSwizzleRowBytes + (kk % 4) * 32), 16, 1024));
    return result;
  };
  auto vDescriptors = [&](Value slot) {
    // V [BK keys][d] is B N-major: 64-column panels of BK rows; a k16 step is 16 rows (2048 bytes) down.
    SmallVector<Value> result;
    Value vBytes = im.mul(im.add(im.mul(slot, sizeV), offsetV), 2);
    for (int64_t kk = 0; kk < bk / 16; ++kk)
      result.push_back(descriptors.get(im.add(vBytes, kk * 16 * kSwizzleRowBytes), bk * kSwizzleRowBytes, 1024));
    return result;
  };
  // Every input of a pipeline stage's MMAs (descriptors, accumulators) is built before its wgmma fence: ptxas
  // serialises the MMAs when an ordinary instruction defines one between the stage's first and last wgmma.
  auto pvGroup = [&](Value acc, ValueRange pRegs, ArrayRef<Value> vDescs) {
    SmallVector<SmallVector<Value>> steps;
    for (size_t kk = 0; kk < pRegs.size() / 4; ++kk)
      steps.push_back(SmallVector<Value>(pRegs.slice(4 * kk, 4)));
    return issueWgmmaRegisterAGroup(builder, loc, acc, steps, vDescs, valueDim, bf16, /*bNMajor=*/true);
  };
  auto flatten = [](ArrayRef<SmallVector<Value>> pRegs) {
    SmallVector<Value> flat;
    for (const SmallVector<Value> &step : pRegs)
      flat.append(step);
    return flat;
  };

  // Tile 0: its scores and softmax (masked: whether it needs the mask is known only at run time).
  Value s0 = wgmmaRegisterAGroup(builder, loc, zeroAccumulator(builder, loc, bk), qRegs, kDescriptors(im.c(0)), bk,
                                 bf16, /*bNMajor=*/false);
  TileSoftmax first = softmaxTile(accumulatorFragments(builder, loc, s0), im.c(0), /*masked=*/true, negInf, negInf,
                                  f32c(0.0), f32c(0.0));
  SmallVector<Value> state{first.maxA, first.maxB, first.sumA, first.sumB};
  state.append(outFrags, zeroAcc);
  int64_t pCount = bk / 16 * 4;
  state.append(flatten(packProbabilities(first.probs)));

  auto body = [&](bool masked) {
    return [&, masked](OpBuilder &nested, Location, Value j, ValueRange carried) {
      OpBuilder::InsertionGuard loopGuard(builder);
      builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
      Value next = im.add(j, 1), afterNext = im.add(j, 2);
      gpu::BarrierOp::create(builder, loc); // K(j) and V(j-1) are read by no one now
      waitGroups(commitGroup({loadK(im.min(afterNext, im.c(allTiles - 1)), im.rem(j, 2)),
                              loadV(im.min(next, im.c(allTiles - 1)), im.rem(next, 2))}),
                 1);
      fenceCopiesForWgmma(builder, loc);
      gpu::BarrierOp::create(builder, loc); // K(j+1) and V(j) are in place

      SmallVector<Value> kDescs = kDescriptors(im.rem(next, 2)), vDescs = vDescriptors(im.rem(j, 2));
      Value o = fragmentsAccumulator(builder, loc, SmallVector<Value>(carried.slice(4, outFrags)));
      Value s = zeroAccumulator(builder, loc, bk);
      fenceWgmmaOperands(builder, loc);
      s = issueWgmmaRegisterAGroup(builder, loc, s, qRegs, kDescs, bk, bf16, /*bNMajor=*/false);
      o = pvGroup(o, carried.drop_front(4 + outFrags), vDescs);
      s = wgmmaWaitFor(builder, loc, 1, s);
      TileSoftmax soft = softmaxTile(accumulatorFragments(builder, loc, s), next, masked, carried[0], carried[1],
                                     carried[2], carried[3]);
      SmallVector<Value> pRegs = flatten(packProbabilities(soft.probs));
      o = wgmmaWaitFor(builder, loc, 0, o, SmallVector<Value>(carried.drop_front(4 + outFrags)));
      SmallVector<Value> yielded{soft.maxA, soft.maxB, soft.sumA, soft.sumB};
      yielded.append(rescale(accumulatorFragments(builder, loc, o), soft.alphas));
      yielded.append(pRegs);
      scf::YieldOp::create(builder, loc, yielded);
    };
  };
  // Tile j + 1 is the one whose softmax iteration j computes: unmasked while it is below unmaskedTiles.
  Value last = im.sub(numTiles, 1); // at least one tile
  Value split = im.sub(im.max(unmaskedTiles, im.c(1)), 1);
  auto unmasked = scf::ForOp::create(builder, loc, im.c(0), split, im.c(1), state, body(false));
  auto loop = scf::ForOp::create(builder, loc, split, last, im.c(1), unmasked.getResults(), body(true));

  // The last tile's O += P V, once its V is in place (waiting for no group pending: the last V's too).
  waitGroups(group0, 0);
  fenceCopiesForWgmma(builder, loc);
  gpu::BarrierOp::create(builder, loc);
  ValueRange results = loop.getResults();
  SmallVector<Value> vDescs = vDescriptors(im.rem(last, 2));
  Value o = fragmentsAccumulator(builder, loc, SmallVector<Value>(results.slice(4, outFrags)));
  fenceWgmmaOperands(builder, loc);
  o = pvGroup(o, results.slice(4 + outFrags, pCount), vDescs);
  o = wgmmaWaitFor(builder, loc, 0, o, SmallVector<Value>(results.slice(4 + outFrags, pCount)));
  SmallVector<Value> final(results.begin(), results.begin() + 4);
  final.append(accumulatorFragments(builder, loc, o));
  return final;
}
