//===- FoldMatmulBatch.cpp - The kiln-fold-matmul-batch pass ---------------===//
//
// A projection `x @ W` with x of shape [B, S, K] and a 2-D weight is written as a batched matmul, but it is one
// GEMM of B*S rows: the batch dims of x are just more rows. As a batched matmul each batch re-reads all of W,
// which for decode shapes (B=32, S=1) multiplies the weight traffic by B and leaves an M=1 GEMM per batch. This
// pass reshapes x to [B*S, K] (a view), runs one matmul with the same epilogue, and reshapes the result back.
// Epilogue operands of the full result shape are viewed as [B*S, N]; row vectors and scalars broadcast as before.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "llvm/Support/MathExtras.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFOLDMATMULBATCH
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The epilogue operand as it broadcasts against [rows, N]: unchanged for rank <= 1, viewed as [rows, N] when it
/// has the batched result's full shape; null when it broadcasts some other way.
static Value flattenEpilogueOperand(RewriterBase &rewriter, Location loc, Value operand, RankedTensorType result,
                                    int64_t rows) {
  auto type = cast<RankedTensorType>(operand.getType());
  if (type.getRank() <= 1)
    return operand;
  if (type.getShape() != result.getShape())
    return {};
  auto flat = RankedTensorType::get({rows, result.getShape().back()}, type.getElementType());
  return ReshapeOp::create(rewriter, loc, flat, operand);
}

FailureOr<MatmulOp> kiln::foldMatmulBatch(RewriterBase &rewriter, MatmulOp op) {
  RankedTensorType lhsType = op.getLhs().getType(), rhsType = op.getRhs().getType(), resultType = op.getType();
  if (lhsType.getRank() <= 2 || rhsType.getRank() != 2 || op.getTransposeLhs() || op.getKChunk())
    return rewriter.notifyMatchFailure(op, "not a batched lhs against a 2-D rhs, unsplit");
  for (Value operand : op.getEpilogueOperands()) {
    auto type = cast<RankedTensorType>(operand.getType());
    if (type.getRank() > 1 && type.getShape() != resultType.getShape())
      return rewriter.notifyMatchFailure(op, "an epilogue operand broadcasts over the batch dims");
  }
  // The product of the leading dims, not the element count over K: K may be 0, and then the count says
  // nothing about the rows (which may even overflow).
  int64_t rows = 1;
  for (int64_t size : lhsType.getShape().drop_back())
    if (llvm::MulOverflow(rows, size, rows))
      return rewriter.notifyMatchFailure(op, "the lhs row count overflows int64");
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto flatLhsType = RankedTensorType::get({rows, lhsType.getShape().back()}, lhsType.getElementType());
  Value lhs = ReshapeOp::create(rewriter, loc, flatLhsType, op.getLhs());
  SmallVector<Value> operands;
  for (Value operand : op.getEpilogueOperands())
    operands.push_back(flattenEpilogueOperand(rewriter, loc, operand, resultType, rows));
  auto flatType = RankedTensorType::get({rows, resultType.getShape().back()}, resultType.getElementType());
  auto flat = MatmulOp::create(rewriter, loc, flatType, lhs, op.getRhs(), /*transposeLhs=*/false,
                               op.getTransposeRhs(), operands, op.getFp32PrecisionAttr(), IntegerAttr());
  flat->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(op.getEpilogue(), flat.getEpilogue(), flat.getEpilogue().end());
  rewriter.replaceOpWithNewOp<ReshapeOp>(op, resultType, flat.getResult());
  return flat;
}

namespace {
struct KilnFoldMatmulBatchPass : kiln::impl::KilnFoldMatmulBatchBase<KilnFoldMatmulBatchPass> {
  void runOnOperation() override {
    forEachInProgramOrder<MatmulOp>(
        getOperation(), [](IRRewriter &rewriter, Operation *op) { (void)foldMatmulBatch(rewriter, cast<MatmulOp>(op)); });
  }
};
} // namespace
