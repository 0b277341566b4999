//===- SplitK.cpp - The kiln-split-k pass ----------------------------------===//
//
// A decode step's GEMM multiplies a few rows by a large weight: a few dozen output tiles, so as many blocks each
// stream a whole column panel of the weight through one long K loop while other multiprocessors idle (M = 32, K =
// N = 4096: 1.7 TB/s on the H200, half of cuBLAS). Splitting the contraction into chunks gives each chunk a
// block of its own: the matmul becomes a split matmul (`k_chunk`), which leaves each chunk's f32 partial
// product, and a kiln.sum_splits that adds them up and runs the matmul's epilogue. Both are ordinary kiln ops, so
// the tiling, the GPU lowering and the host backend treat them like any other (the chunk is one more loop of the
// tiled forall, whose K loop stays within the chunk); kiln::chooseKChunk, beside the default configs, decides
// when and how finely to split.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSPLITK
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

FailureOr<SumSplitsOp> kiln::splitK(RewriterBase &rewriter, MatmulOp op, int64_t chunk) {
  if (op.getKChunk() || chunk < 1)
    return rewriter.notifyMatchFailure(op, "already split, or no chunk");
  RankedTensorType resultType = op.getType();
  int64_t splits = std::max<int64_t>(1, llvm::divideCeilSigned(op.getContractionSize(), chunk));
  SmallVector<int64_t> partsShape{splits};
  llvm::append_range(partsShape, resultType.getShape());
  auto partsType = RankedTensorType::get(partsShape, rewriter.getF32Type());

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  auto split = MatmulOp::create(rewriter, op.getLoc(), partsType, op.getLhs(), op.getRhs(), op.getTransposeLhs(),
                                op.getTransposeRhs(), ValueRange{}, op.getFp32PrecisionAttr(),
                                rewriter.getI64IntegerAttr(chunk));
  split->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  auto sum = SumSplitsOp::create(rewriter, op.getLoc(), resultType, split.getResult(), op.getEpilogueOperands());
  rewriter.inlineRegionBefore(op.getEpilogue(), sum.getEpilogue(), sum.getEpilogue().end());
  rewriter.replaceOp(op, sum.getResult());
  return sum;
}

namespace {
struct KilnSplitKPass : kiln::impl::KilnSplitKBase<KilnSplitKPass> {
  using KilnSplitKBase::KilnSplitKBase;
  void runOnOperation() override {
    forEachInProgramOrder<MatmulOp>(getOperation(), [&](IRRewriter &rewriter, Operation *op) {
      auto matmul = cast<MatmulOp>(op);
      if (std::optional<int64_t> chunk = chooseKChunk(matmul, target))
        (void)splitK(rewriter, matmul, *chunk);
    });
  }
};
} // namespace
