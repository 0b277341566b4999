//===- PackGqaDecode.cpp - The kiln-pack-gqa-decode pass --------------------===//
//
// A decode step of grouped-query attention, q [B, Hq, 1, D] against k and v [B, Hkv, Sk, D], runs one block per
// query head over a 16-row tile that holds one row, and reads every KV head once for each of the Hq / Hkv query
// heads that share it. With one query row the q heads of a group are consecutive rows of D elements, so q is also
// [B, Hkv, Hq / Hkv, D]: the same computation as multi-head attention of Hq / Hkv query rows per KV head, each KV
// head read once, the group's rows filling the tile. The single row sees every key under the causal mask (aligned
// bottom-right), so the packed attention has none; a mask_mod that reads neither the head nor the query position (a
// paged sequence's length) moves over unchanged. On the H200 the packed decode steps ran faster than one block per
// query head at every cache length and head dim measured, most at head dim 128
// (bench/results/decode/attention_gqa_pack.md).
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNPACKGQADECODE
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

FailureOr<AttentionOp> kiln::packGqaDecode(RewriterBase &rewriter, AttentionOp op) {
  RankedTensorType qType = op.getQ().getType(), outType = op.getOut().getType();
  // One row makes a seq-major output [B, 1, Hq, Dv] the same memory as [B, Hq, 1, Dv]: only k and v's layout
  // matters.
  if (op.isSeqMajor())
    return rewriter.notifyMatchFailure(op, "k and v are seq-major: q's packed rows would be another layout");
  if (op.getKvChunk())
    return rewriter.notifyMatchFailure(op, "a split attention's results lead with the chunk");
  if (op.getMask() || op.hasEpilogue())
    return rewriter.notifyMatchFailure(op, "a mask or an epilogue broadcasts over the query heads");
  // A mask_mod that reads neither the head nor the query position (a paged sequence's length) means the same
  // for the packed rows.
  auto readsRow = [](Region &mod) {
    Block &body = mod.front();
    return !body.getArgument(1).use_empty() || !body.getArgument(2).use_empty();
  };
  if (op.hasScoreMod() || (op.hasMaskMod() && readsRow(op.getMaskMod())))
    return rewriter.notifyMatchFailure(op, "a score_mod or mask_mod reads the query head and position");
  int64_t group = op.getGroupSize();
  if (qType.getDimSize(2) != 1 || group == 1)
    return rewriter.notifyMatchFailure(op, "not one query row of grouped-query attention");
  int64_t batch = qType.getDimSize(0), kvHeads = qType.getDimSize(1) / group;
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto packedQType = RankedTensorType::get({batch, kvHeads, group, qType.getDimSize(3)}, qType.getElementType());
  auto packedOutType =
      RankedTensorType::get({batch, kvHeads, group, outType.getDimSize(3)}, outType.getElementType());
  Value q = ReshapeOp::create(rewriter, loc, packedQType, op.getQ());
  Type lseType;
  if (Value lse = op.getLse())
    lseType = RankedTensorType::get({batch, kvHeads, group}, cast<RankedTensorType>(lse.getType()).getElementType());
  auto packed = AttentionOp::create(rewriter, loc, packedOutType, lseType, q, op.getK(), op.getV(), Value(),
                                    op.getScaleAttr(), /*causal=*/false);
  packed->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  packed.setFp32PrecisionAttr(op.getFp32PrecisionAttr());
  packed.getModOperandsMutable().assign(op.getModOperands());
  if (op.hasMaskMod())
    rewriter.inlineRegionBefore(op.getMaskMod(), packed.getMaskMod(), packed.getMaskMod().end());
  SmallVector<Value> results{ReshapeOp::create(rewriter, loc, outType, packed.getOut())};
  if (Value lse = op.getLse())
    results.push_back(ReshapeOp::create(rewriter, loc, lse.getType(), packed.getLse()));
  rewriter.replaceOp(op, results);
  return packed;
}

namespace {
struct KilnPackGqaDecodePass : kiln::impl::KilnPackGqaDecodeBase<KilnPackGqaDecodePass> {
  void runOnOperation() override {
    forEachInProgramOrder<AttentionOp>(getOperation(), [](IRRewriter &rewriter, Operation *op) {
      (void)packGqaDecode(rewriter, cast<AttentionOp>(op));
    });
  }
};
} // namespace
