//===- AttentionParts.h - What the attention kernel's key-tile loops share -*- C++ -*-===//
//
// The wgmma FlashAttention kernel (AttentionKernel.cpp) sets up its tiles, copies and online softmax once; the
// loops over key tiles come in two forms, pipelined and sequential (AttentionWgmmaLoops.cpp), which build from
// the same parts: the K/V ring copies, the softmax of one tile, P as A fragments.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_ATTENTIONPARTS_H
#define KILN_LIB_CONVERSION_KILNTOGPU_ATTENTIONPARTS_H

#include "WgmmaBuilding.h"

#include <functional>

namespace mlir {
namespace kiln {
namespace gpukernel {

/// The online softmax of one key tile against the running state: the new row maxima and sums (rows lane / 4 and
/// 8 below), the factor O is rescaled by (vector<4xf32> in the accumulator layout), and P (this thread's
/// fragments of the tile).
struct TileSoftmax {
  Value maxA, maxB, sumA, sumB, alphas;
  SmallVector<Value> probs;
};

/// The tiles, running-state constants and building steps of one attention kernel's key-tile loops.
struct AttentionParts {
  int64_t bk, headDim, valueDim, outFrags, allTiles;
  /// Elements per K and V ring slot, and where the rings start in the dynamic shared memory.
  int64_t sizeK, sizeV, offsetK, offsetV;
  bool bf16;
  /// Whether any key tile can need the mask (keys past the end, or the causal diagonal): else every tile runs
  /// unmasked.
  bool anyTileMasked;
  /// A zero accumulator fragment, -inf, the key tiles this block visits and those that need no mask.
  Value zeroAcc, negInf, numTiles, unmaskedTiles;
  /// This warp's Q fragments, one A fragment per k16 step of the head dim.
  SmallVector<SmallVector<Value>> qRegs;
  /// The cp.async copies of key tile `tile`'s K (or V) rows into ring slot `slot`.
  std::function<SmallVector<Value>(Value tile, Value slot)> loadK, loadV;
  /// One cp.async group of copies, and a wait until at most `pending` groups are in flight.
  std::function<Value(ArrayRef<SmallVector<Value>> copies)> commitGroup;
  std::function<void(Value group, int32_t pending)> waitGroups;
  /// The online softmax of a tile's scores (masked where `masked`) against the running maxima and sums.
  std::function<TileSoftmax(SmallVector<Value> scores, Value tile, bool masked, Value maxA, Value maxB, Value sumA,
                            Value sumB)>
      softmaxTile;
  /// P rounded to the input type as A fragments, four registers per k16 step.
  std::function<SmallVector<SmallVector<Value>>(ArrayRef<Value> probs)> packProbabilities;
  /// O fragments times the per-row factors.
  std::function<SmallVector<Value>(SmallVector<Value> acc, Value alphas)> rescale;
};

/// What both wgmma loop forms issue: descriptors of the K and V ring slots and the P V group.
struct WgmmaAttentionOperands {
  OpBuilder &builder;
  Location loc;
  const AttentionParts &parts;
  DescriptorBuilder &descriptors;

  /// K ring slot `slot` as wgmma B operands (K-major), one descriptor per k16 step of the head dim.
  SmallVector<Value> kDescriptors(Value slot);
  /// V ring slot `slot` as wgmma B operands (N-major), one descriptor per k16 step of the key tile.
  SmallVector<Value> vDescriptors(Value slot);
  /// acc += P V issued as one group, not waited for; `pRegs` holds four registers per k16 step.
  Value issueProbabilitiesTimesV(Value acc, ValueRange pRegs, ArrayRef<Value> vDescs);
  /// P's A fragments as one list of registers.
  static SmallVector<Value> flatten(ArrayRef<SmallVector<Value>> pRegs);
};

/// The key-tile loops on wgmma, pipelined within the warpgroup as in FlashAttention-3, after the prologue's
/// copies (`group0`: Q, K(0), V(0); K(1) is its own group after it): returns the row maxima, row sums and O
/// fragments after the last tile.
SmallVector<Value> buildWgmmaAttentionLoops(OpBuilder &builder, Location loc, const AttentionParts &parts,
                                            DescriptorBuilder &descriptors, Value group0);

/// The key-tile loop on wgmma in its compact form: one loop over every tile, each masked (where any can need
/// it), computing S, the softmax, the rescaled O and O += P V in turn while the next tile's K and V are copied;
/// after the prologue's copies (`group0`: Q, K(0), V(0), waited for). Returns what buildWgmmaAttentionLoops
/// does.
SmallVector<Value> buildSequentialWgmmaAttentionLoop(OpBuilder &builder, Location loc, const AttentionParts &parts,
                                                     DescriptorBuilder &descriptors, Value group0);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_ATTENTIONPARTS_H
