//===- SplitKv.cpp - The kiln-split-kv pass --------------------------------===//
//
// A decode step attends from a few query rows per (batch, KV head) over thousands of keys: one query tile each,
// so at batch 1 with 8 KV heads eight blocks stream the whole KV cache while the other multiprocessors idle (0.19
// TB/s on the H200, a fifth of cuDNN's). Splitting the keys into chunks (flash-decoding) gives each chunk a block
// of its own: the attention becomes a split attention (`kv_chunk`), which leaves each chunk's normalised output
// and log-sum-exp, and a kiln.merge_splits that weighs the chunks by their lse. Both are ordinary kiln ops, so
// the tiling, the GPU lowering and the host backend treat them like any other (the chunk is one more loop of the
// tiled forall, whose key loops stay within the chunk); kiln::chooseKvChunk, beside the default configs, decides
// when and how finely to split.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSPLITKV
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

FailureOr<MergeSplitsOp> kiln::splitKv(RewriterBase &rewriter, AttentionOp op, int64_t chunk) {
  if (op.getKvChunk() || op.getLse() || op.hasEpilogue() || op.isOutSeqMajor() || chunk < 1)
    return rewriter.notifyMatchFailure(op, "already split, or an lse, an epilogue or a seq-major output");
  RankedTensorType outType = op.getOut().getType();
  int64_t splits = llvm::divideCeilSigned(op.getK().getType().getDimSize(op.getSeqDim()), chunk);
  SmallVector<int64_t> partsShape{splits}, lseShape{splits};
  llvm::append_range(partsShape, outType.getShape());
  llvm::append_range(lseShape, outType.getShape().drop_back());
  Type f32 = rewriter.getF32Type();

  // The same op with the chunk and two results; its regions move over.
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  OperationState state(op.getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.addAttributes(op->getAttrs());
  state.addAttribute(op.getKvChunkAttrName(), rewriter.getI64IntegerAttr(chunk));
  state.addTypes({RankedTensorType::get(partsShape, f32), RankedTensorType::get(lseShape, f32)});
  for (unsigned i = 0; i < op->getNumRegions(); ++i)
    state.addRegion();
  auto split = cast<AttentionOp>(rewriter.create(state));
  for (auto [from, to] : llvm::zip(op->getRegions(), split->getRegions()))
    rewriter.inlineRegionBefore(from, to, to.end());
  auto merge = MergeSplitsOp::create(rewriter, op.getLoc(), outType, split.getOut(), split.getLse());
  rewriter.replaceOp(op, merge.getResult());
  return merge;
}

namespace {
struct KilnSplitKvPass : kiln::impl::KilnSplitKvBase<KilnSplitKvPass> {
  using KilnSplitKvBase::KilnSplitKvBase;
  void runOnOperation() override {
    forEachInProgramOrder<AttentionOp>(getOperation(), [&](IRRewriter &rewriter, Operation *op) {
      auto attention = cast<AttentionOp>(op);
      if (std::optional<int64_t> chunk = chooseKvChunk(attention, target))
        (void)splitKv(rewriter, attention, *chunk);
    });
  }
};
} // namespace
