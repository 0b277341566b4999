//===- AttentionWgmmaLoops.cpp - The attention kernel's key loops on wgmma --===//
//
// The key-tile loops of the FlashAttention kernel with the "wgmma" lowering (sm_90a), in two forms:
//
// - pipelined as in FlashAttention-3 within a warpgroup (config stages >= 2): iteration j issues
//   S(j+1) = Q K(j+1)^T and O += P(j) V(j) back to back, waits for S(j+1) only, computes its softmax while
//   P(j) V(j) runs, then waits for O and rescales it. K and V each have a two-slot ring, V one tile behind K:
//   iteration j reads K(j+1) and V(j) and prefetches K(j+2) and V(j+1) into the slots of K(j) and V(j-1), which
//   nothing reads anymore. Tile 0's S and softmax come before the loops, the last tile's P V after them, and
//   the tiles that need a mask have a loop of their own;
// - sequential (stages = 1), for a few key tiles, where the pipeline has little to overlap: one loop, every
//   tile masked where any can need it, whose iteration computes S, the softmax, rescales O and adds P V, with
//   the next tile's K and V copied meanwhile. One copy of the loop body instead of four (prologue, two loops,
//   epilogue) makes a kernel that ptxas or the driver assembles in about half the time, which is most of a
//   cold JIT compile.
//
//===----------------------------------------------------------------------===//

#include "AttentionParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

SmallVector<Value> WgmmaAttentionOperands::kDescriptors(Value slot) {
  // K [BK keys][d] is B K-major: a k16 step of the head dim is 32 bytes into a 64-column panel.
  IndexMath im{builder, loc};
  SmallVector<Value> result;
  Value kBytes = im.mul(im.add(im.mul(slot, parts.sizeK), parts.offsetK), 2); // from the buffer's start
  for (int64_t kk = 0; kk < parts.headDim / 16; ++kk)
    result.push_back(
        descriptors.get(im.add(kBytes, (kk / 4) * parts.bk * kSwizzleRowBytes + (kk % 4) * 32), 16, 1024));
  return result;
}

SmallVector<Value> WgmmaAttentionOperands::vDescriptors(Value slot) {
  // V [BK keys][d] is B N-major: 64-column panels of BK rows; a k16 step is 16 rows (2048 bytes) down.
  IndexMath im{builder, loc};
  SmallVector<Value> result;
  Value vBytes = im.mul(im.add(im.mul(slot, parts.sizeV), parts.offsetV), 2);
  for (int64_t kk = 0; kk < parts.bk / 16; ++kk)
    result.push_back(descriptors.get(im.add(vBytes, kk * 16 * kSwizzleRowBytes), parts.bk * kSwizzleRowBytes, 1024));
  return result;
}

Value WgmmaAttentionOperands::issueProbabilitiesTimesV(Value acc, ValueRange pRegs, ArrayRef<Value> vDescs) {
  SmallVector<SmallVector<Value>> steps;
  for (size_t kk = 0; kk < pRegs.size() / 4; ++kk)
    steps.push_back(SmallVector<Value>(pRegs.slice(4 * kk, 4)));
  return issueWgmmaRegisterAGroup(builder, loc, acc, steps, vDescs, parts.valueDim, parts.bf16, /*bNMajor=*/true);
}

SmallVector<Value> WgmmaAttentionOperands::flatten(ArrayRef<SmallVector<Value>> pRegs) {
  SmallVector<Value> flat;
  for (const SmallVector<Value> &step : pRegs)
    flat.append(step);
  return flat;
}

SmallVector<Value> gpukernel::buildWgmmaAttentionLoops(OpBuilder &builder, Location loc, const AttentionParts &p,
                                                       DescriptorBuilder &descriptors, Value group0) {
  const int64_t bk = p.bk, outFrags = p.outFrags, allTiles = p.allTiles;
  const bool bf16 = p.bf16;
  const SmallVector<SmallVector<Value>> &qRegs = p.qRegs;
  Value zeroAcc = p.zeroAcc, negInf = p.negInf, numTiles = p.numTiles, unmaskedTiles = p.unmaskedTiles;
  IndexMath im{builder, loc};
  auto f32c = [&](double value) { return arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(value)); };
  const auto &loadK = p.loadK, &loadV = p.loadV;
  const auto &commitGroup = p.commitGroup;
  const auto &waitGroups = p.waitGroups;
  const auto &softmaxTile = p.softmaxTile;
  const auto &packProbabilities = p.packProbabilities;
  const auto &rescale = p.rescale;
  // Every input of a pipeline stage's MMAs (descriptors, accumulators) is built before its wgmma fence: ptxas
  // serialises the MMAs when an ordinary instruction defines one between the stage's first and last wgmma.
  WgmmaAttentionOperands operands{builder, loc, p, descriptors};

  // Tile 0: its scores and softmax (masked where any tile can need it: which ones is known only at run time).
  Value s0 = wgmmaRegisterAGroup(builder, loc, zeroAccumulator(builder, loc, bk), qRegs,
                                 operands.kDescriptors(im.c(0)), bk, bf16, /*bNMajor=*/false);
  TileSoftmax first = softmaxTile(accumulatorFragments(builder, loc, s0), im.c(0), p.anyTileMasked, negInf,
                                  negInf, f32c(0.0), f32c(0.0));
  SmallVector<Value> state{first.maxA, first.maxB, first.sumA, first.sumB};
  state.append(outFrags, zeroAcc);
  int64_t pCount = bk / 16 * 4;
  state.append(WgmmaAttentionOperands::flatten(packProbabilities(first.probs)));

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

      SmallVector<Value> kDescs = operands.kDescriptors(im.rem(next, 2));
      SmallVector<Value> vDescs = operands.vDescriptors(im.rem(j, 2));
      Value o = fragmentsAccumulator(builder, loc, SmallVector<Value>(carried.slice(4, outFrags)));
      Value s = zeroAccumulator(builder, loc, bk);
      fenceWgmmaOperands(builder, loc);
      s = issueWgmmaRegisterAGroup(builder, loc, s, qRegs, kDescs, bk, bf16, /*bNMajor=*/false);
      o = operands.issueProbabilitiesTimesV(o, carried.drop_front(4 + outFrags), vDescs);
      s = wgmmaWaitFor(builder, loc, 1, s);
      TileSoftmax soft = softmaxTile(accumulatorFragments(builder, loc, s), next, masked, carried[0], carried[1],
                                     carried[2], carried[3]);
      SmallVector<Value> pRegs = WgmmaAttentionOperands::flatten(packProbabilities(soft.probs));
      o = wgmmaWaitFor(builder, loc, 0, o, SmallVector<Value>(carried.drop_front(4 + outFrags)));
      SmallVector<Value> yielded{soft.maxA, soft.maxB, soft.sumA, soft.sumB};
      yielded.append(rescale(accumulatorFragments(builder, loc, o), soft.alphas));
      yielded.append(pRegs);
      scf::YieldOp::create(builder, loc, yielded);
    };
  };
  // Tile j + 1 is the one whose softmax iteration j computes: unmasked while it is below unmaskedTiles.
  Value last = im.sub(numTiles, 1); // at least one tile
  // No unmasked tiles known when building (every tile masked), or no tile that needs the mask: one loop.
  std::optional<int64_t> knownUnmasked = getConstantIntValue(unmaskedTiles);
  assert((p.anyTileMasked || knownUnmasked != 0) && "no loop over tiles 1 .. last");
  Value split = !p.anyTileMasked ? last : knownUnmasked == 0 ? im.c(0) : im.sub(im.max(unmaskedTiles, im.c(1)), 1);
  ValueRange results = state;
  if (knownUnmasked != 0)
    results = scf::ForOp::create(builder, loc, im.c(0), split, im.c(1), results, body(false)).getResults();
  if (p.anyTileMasked)
    results = scf::ForOp::create(builder, loc, split, last, im.c(1), results, body(true)).getResults();

  // The last tile's O += P V, once its V is in place (waiting for no group pending: the last V's too).
  waitGroups(group0, 0);
  fenceCopiesForWgmma(builder, loc);
  gpu::BarrierOp::create(builder, loc);
  SmallVector<Value> vDescs = operands.vDescriptors(im.rem(last, 2));
  Value o = fragmentsAccumulator(builder, loc, SmallVector<Value>(results.slice(4, outFrags)));
  fenceWgmmaOperands(builder, loc);
  o = operands.issueProbabilitiesTimesV(o, results.slice(4 + outFrags, pCount), vDescs);
  o = wgmmaWaitFor(builder, loc, 0, o, SmallVector<Value>(results.slice(4 + outFrags, pCount)));
  SmallVector<Value> final(results.begin(), results.begin() + 4);
  final.append(accumulatorFragments(builder, loc, o));
  return final;
}

SmallVector<Value> gpukernel::buildSequentialWgmmaAttentionLoop(OpBuilder &builder, Location loc,
                                                                const AttentionParts &p, DescriptorBuilder &descriptors,
                                                                Value group0) {
  IndexMath im{builder, loc};
  WgmmaAttentionOperands operands{builder, loc, p, descriptors};
  auto f32c = [&](double value) { return arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(value)); };
  SmallVector<Value> inits{p.negInf, p.negInf, f32c(0.0), f32c(0.0)};
  inits.append(p.outFrags, p.zeroAcc);
  auto body = [&](OpBuilder &nested, Location, Value tile, ValueRange carried) {
    OpBuilder::InsertionGuard loopGuard(builder);
    builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
    // Prefetch the next tile into the other slot (read in the previous iteration, whose MMAs are done), and
    // wait for this one, leaving the prefetch in flight.
    gpu::BarrierOp::create(builder, loc);
    Value next = im.add(tile, 1), nextTile = im.min(next, im.c(p.allTiles - 1));
    p.waitGroups(p.commitGroup({p.loadK(nextTile, im.rem(next, 2)), p.loadV(nextTile, im.rem(next, 2))}), 1);
    fenceCopiesForWgmma(builder, loc);
    gpu::BarrierOp::create(builder, loc);

    Value slot = im.rem(tile, 2);
    SmallVector<Value> kDescs = operands.kDescriptors(slot), vDescs = operands.vDescriptors(slot);
    Value s = zeroAccumulator(builder, loc, p.bk);
    fenceWgmmaOperands(builder, loc);
    s = issueWgmmaRegisterAGroup(builder, loc, s, p.qRegs, kDescs, p.bk, p.bf16, /*bNMajor=*/false);
    s = wgmmaWaitFor(builder, loc, 0, s); // no read of S can be scheduled before the wait
    TileSoftmax soft = p.softmaxTile(accumulatorFragments(builder, loc, s), tile, p.anyTileMasked, carried[0],
                                     carried[1], carried[2], carried[3]);
    SmallVector<Value> pRegs = WgmmaAttentionOperands::flatten(p.packProbabilities(soft.probs));
    Value o = fragmentsAccumulator(builder, loc, p.rescale(SmallVector<Value>(carried.drop_front(4)), soft.alphas));
    fenceWgmmaOperands(builder, loc);
    o = operands.issueProbabilitiesTimesV(o, pRegs, vDescs);
    o = wgmmaWaitFor(builder, loc, 0, o, pRegs); // P's registers stay untouched until the MMAs have read them
    SmallVector<Value> yielded{soft.maxA, soft.maxB, soft.sumA, soft.sumB};
    yielded.append(accumulatorFragments(builder, loc, o));
    scf::YieldOp::create(builder, loc, yielded);
  };
  auto loop = scf::ForOp::create(builder, loc, im.c(0), p.numTiles, im.c(1), inits, body);
  p.waitGroups(group0, 0); // the last prefetch lands before the block can exit
  return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
}
