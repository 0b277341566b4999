//===- PadMatmulOperands.cpp - The kiln-pad-matmul-operands pass -----------===//
//
// sm_90a's fast GEMM reads its tiles by TMA, whose tensor maps need rows of whole 16 bytes: a bf16/f16 matmul with
// K or N off a multiple of 8 (2048 x 2050 x 2047) falls back to the mma_sync kernel with narrow or element loads
// and ran at 78 TFLOP/s on the H200 (cuBLAS: 113). Padding is cheaper than that: the operands are copied once
// into zero-padded tensors whose rows are whole 16-byte chunks (K and N rounded up to 8; zeros add nothing to the
// products), the matmul runs padded, and the result's first N columns are its answer. Each copy is a pass over
// one operand's bytes, a few microseconds where the GEMM takes tens; small GEMMs, which the copies would
// dominate, are left alone. Epilogue operands that run along N are padded with the rhs, so that the fused
// epilogue still reads them element for element.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/MathExtras.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNPADMATMULOPERANDS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The fewest multiply-adds (M * N * K) for which padding pays: below 2^30 (1024^3) the copies' time approaches
/// what the faster GEMM saves.
static constexpr uint64_t kMinPaddedWork = uint64_t(1) << 30;

/// `value` with `extra` zeros appended along `axis` (unchanged when `extra` is 0).
static Value padWithZeros(RewriterBase &rewriter, Location loc, Value value, int64_t axis, int64_t extra) {
  if (extra == 0)
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> zerosShape(type.getShape()), paddedShape(type.getShape());
  zerosShape[axis] = extra;
  paddedShape[axis] += extra;
  auto zerosType = RankedTensorType::get(zerosShape, type.getElementType());
  Value zeros = ConstantOp::create(
      rewriter, loc, DenseElementsAttr::get(zerosType, rewriter.getZeroAttr(type.getElementType())));
  return ConcatOp::create(rewriter, loc, RankedTensorType::get(paddedShape, type.getElementType()),
                          ValueRange{value, zeros}, axis);
}

FailureOr<MatmulOp> kiln::padMatmulOperands(RewriterBase &rewriter, MatmulOp op) {
  RankedTensorType lhsType = op.getLhs().getType(), rhsType = op.getRhs().getType(), resultType = op.getType();
  Type element = lhsType.getElementType();
  if (!element.isBF16() && !element.isF16())
    return rewriter.notifyMatchFailure(op, "only 16-bit operands take the TMA GEMM");
  if (op.getTransposeLhs() || op.getKChunk())
    return rewriter.notifyMatchFailure(op, "a transposed lhs or a split K does not take the TMA GEMM");
  if (getConfig(op))
    return rewriter.notifyMatchFailure(op, "a pinned config keeps the shapes it was chosen for");
  int64_t rank = resultType.getRank();
  int64_t m = resultType.getDimSize(rank - 2), n = resultType.getDimSize(rank - 1),
          k = lhsType.getDimSize(lhsType.getRank() - 1);
  bool transposedRhs = op.getTransposeRhs();
  int64_t paddedK = llvm::alignTo(k, 8), paddedN = transposedRhs ? n : llvm::alignTo(n, 8);
  if (paddedK == k && paddedN == n)
    return rewriter.notifyMatchFailure(op, "the rows are already whole 16-byte chunks");
  // The shapes the TMA GEMM takes (more rows than a decode step, a 64-column tile), and enough work.
  uint64_t work = llvm::SaturatingMultiply<uint64_t>(llvm::SaturatingMultiply<uint64_t>(m, n), k);
  if (m <= 64 || n < 64 || k == 0 || work < kMinPaddedWork)
    return rewriter.notifyMatchFailure(op, "too small for the copies to pay");

  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Value lhs = padWithZeros(rewriter, loc, op.getLhs(), lhsType.getRank() - 1, paddedK - k);
  int64_t rhsRank = rhsType.getRank();
  Value rhs = transposedRhs ? padWithZeros(rewriter, loc, op.getRhs(), rhsRank - 1, paddedK - k)
                            : padWithZeros(rewriter, loc,
                                           padWithZeros(rewriter, loc, op.getRhs(), rhsRank - 2, paddedK - k),
                                           rhsRank - 1, paddedN - n);
  // An epilogue operand broadcasts to [..., M, N]: one that runs along N (its last dim is N) is padded too.
  SmallVector<Value> epilogueOperands;
  for (Value operand : op.getEpilogueOperands()) {
    auto type = cast<RankedTensorType>(operand.getType());
    bool alongN = type.getRank() > 0 && type.getShape().back() == n && n != 1;
    epilogueOperands.push_back(alongN ? padWithZeros(rewriter, loc, operand, type.getRank() - 1, paddedN - n)
                                      : operand);
  }
  SmallVector<int64_t> paddedShape(resultType.getShape());
  paddedShape.back() = paddedN;
  auto padded = MatmulOp::create(rewriter, loc, RankedTensorType::get(paddedShape, resultType.getElementType()),
                                 lhs, rhs, /*transposeLhs=*/false, transposedRhs, epilogueOperands,
                                 op.getFp32PrecisionAttr(), IntegerAttr());
  padded->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(op.getEpilogue(), padded.getEpilogue(), padded.getEpilogue().end());
  if (paddedN == n) {
    rewriter.replaceOp(op, padded.getResult());
    return padded;
  }
  SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
  rewriter.replaceOpWithNewOp<SliceOp>(op, resultType, padded.getResult(), offsets, strides);
  return padded;
}

namespace {
struct KilnPadMatmulOperandsPass : kiln::impl::KilnPadMatmulOperandsBase<KilnPadMatmulOperandsPass> {
  using KilnPadMatmulOperandsBase::KilnPadMatmulOperandsBase;
  void runOnOperation() override {
    // Only sm_90a has the TMA GEMM that the padding is for.
    if (target != Target::Sm90a)
      return;
    forEachInProgramOrder<MatmulOp>(getOperation(), [](IRRewriter &rewriter, Operation *op) {
      (void)padMatmulOperands(rewriter, cast<MatmulOp>(op));
    });
  }
};
} // namespace
