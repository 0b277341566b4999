//===- ExpandPagedAttention.cpp - The kiln-expand-paged-attention pass -----===//
//
// Paged attention is attention whose keys and values are read through a block table, each sequence seeing its
// own number of them. Written as a `kiln.attention` over `kiln.gather_pages` views of the two caches, with a
// mask_mod that reads the sequence's length from `seq_lens`, it is an attention like any other: kiln-tile reads
// its key tiles straight from their pages, the mask's bounds end each query tile's key loop at its sequence's
// length (the mask_mod's linear bounds may hold a per-sequence term), and split-KV, GQA decode packing and the
// GPU lowering apply unchanged. The host backend runs the same expansion, so there is one meaning of paged
// attention, the attention's.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNEXPANDPAGEDATTENTION
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

FailureOr<AttentionOp> kiln::expandPagedAttention(RewriterBase &rewriter, PagedAttentionOp op) {
  Location loc = op.getLoc();
  RankedTensorType qType = op.getQ().getType(), cacheType = op.getKCache().getType();
  int64_t batch = qType.getDimSize(0), seqQ = qType.getDimSize(2);
  auto viewType = RankedTensorType::get({batch, cacheType.getDimSize(2), op.getCapacity(), cacheType.getDimSize(3)},
                                        cacheType.getElementType());
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  Value keys = GatherPagesOp::create(rewriter, loc, viewType, op.getKCache(), op.getBlockTable(), op.getSeqLens());
  Value values = GatherPagesOp::create(rewriter, loc, viewType, op.getVCache(), op.getBlockTable(), op.getSeqLens());
  auto attention = AttentionOp::create(rewriter, loc, op.getOut().getType(), /*lse=*/Type(), op.getQ(), keys, values,
                                       /*mask=*/Value(), rewriter.getF32FloatAttr(op.getEffectiveScale()),
                                       /*causal=*/false);
  attention.setFp32PrecisionAttr(op.getFp32PrecisionAttr());
  attention.getModOperandsMutable().assign(op.getSeqLens());

  // Query i of sequence b sees the keys j <= seq_lens[b] - Sq + i. With one query row that is j < seq_lens[b],
  // which reads neither the query position nor the head (kiln-pack-gqa-decode may then pack the group's heads as
  // rows).
  Type index = rewriter.getIndexType();
  SmallVector<Type> types{index, index, index, index, op.getSeqLens().getType()};
  Block *body = rewriter.createBlock(&attention.getMaskMod(), {}, types, SmallVector<Location>(types.size(), loc));
  Value length = arith::IndexCastOp::create(
      rewriter, loc, index, tensor::ExtractOp::create(rewriter, loc, body->getArgument(4), body->getArgument(0)));
  Value visible;
  if (seqQ == 1) {
    visible = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, body->getArgument(3), length);
  } else {
    Value newest = arith::SubIOp::create(rewriter, loc, length, arith::ConstantIndexOp::create(rewriter, loc, seqQ));
    Value last = arith::AddIOp::create(rewriter, loc, newest, body->getArgument(2));
    visible = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sle, body->getArgument(3), last);
  }
  YieldOp::create(rewriter, loc, visible);
  rewriter.replaceOp(op, attention.getOut());
  return attention;
}

namespace {
struct KilnExpandPagedAttentionPass : kiln::impl::KilnExpandPagedAttentionBase<KilnExpandPagedAttentionPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<PagedAttentionOp> ops;
    getOperation()->walk([&](PagedAttentionOp op) { ops.push_back(op); });
    for (PagedAttentionOp op : ops)
      (void)expandPagedAttention(rewriter, op);
  }
};
} // namespace
