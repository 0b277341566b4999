//===- SplitSlicedMatmuls.cpp - The kiln-split-sliced-matmuls pass ---------===//
//
// Fused projections (GPT-2's c_attn, gpt-fast's wqkv and w13) compute q, k and v (or the gate and up halves of
// an MLP) as one GEMM whose output columns are then sliced apart. Those slices take every row's columns
// [o, o + n): a strided copy of the whole output, a kernel of its own, and a wall between each part and what
// follows it (a gate's SiLU cannot sit in the epilogue of a GEMM whose output is a slice away). The weight of an
// nn.Linear is [N, K], read transposed, and its rows [o, o + n) are one contiguous run of its bytes: this pass
// runs one GEMM per slice on those rows instead (with the bias's [o, o + n)), so each slice of the weight and
// of the bias is a view in the run plan, the part is computed where it is needed, and the GEMMs, which read the
// same activation, are grouped into one launch for the GPU. A constant [K, N] weight (an ONNX MatMul's
// initializer) is cut into constants of its columns instead.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "Matching.h"

#include "mlir/IR/Matchers.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNSPLITSLICEDMATMULS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The last-dimension window [offset, offset + size) of a slice that takes every other dimension whole with
/// stride 1, or nullopt.
static std::optional<std::pair<int64_t, int64_t>> lastDimWindow(SliceOp slice) {
  ArrayRef<int64_t> input = slice.getInput().getType().getShape(), result = slice.getType().getShape();
  int64_t last = static_cast<int64_t>(input.size()) - 1;
  for (int64_t d = 0; d <= last; ++d)
    if (slice.getStrides()[d] != 1 || (d != last && (slice.getOffsets()[d] != 0 || result[d] != input[d])))
      return std::nullopt;
  return std::make_pair(slice.getOffsets()[last], result[last]);
}

/// Collects the slices that read `value` through reshapes keeping its last dimension (of size `columns`); false
/// when anything else reads it or a slice is not a last-dimension window.
static bool collectColumnSlices(Value value, int64_t columns, SmallVectorImpl<SliceOp> &slices) {
  for (Operation *user : value.getUsers()) {
    if (auto reshape = dyn_cast<ReshapeOp>(user)) {
      if (reshape.getType().getShape().back() != columns ||
          !collectColumnSlices(reshape.getResult(), columns, slices))
        return false;
    } else if (auto slice = dyn_cast<SliceOp>(user); slice && lastDimWindow(slice)) {
      slices.push_back(slice);
    } else {
      return false;
    }
  }
  return true;
}

/// `value` (of shape [..., N]) cut to columns [offset, offset + size) along its last dimension; a size-1 last
/// dimension (a broadcast) is kept.
static Value sliceColumns(RewriterBase &rewriter, Location loc, Value value, int64_t offset, int64_t size) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape().back() == 1)
    return value;
  SmallVector<int64_t> shape(type.getShape()), offsets(type.getRank(), 0), strides(type.getRank(), 1);
  shape.back() = size;
  offsets.back() = offset;
  return rewriter.createOrFold<SliceOp>(loc, RankedTensorType::get(shape, type.getElementType()), value, offsets,
                                        strides);
}

/// Rows [offset, offset + size) of an [N, K] weight read transposed, or columns of a [K, N] one; a slice of a
/// constant folds to a constant.
static Value sliceWeight(RewriterBase &rewriter, Location loc, Value weight, bool transposed, int64_t offset,
                         int64_t size) {
  auto type = cast<RankedTensorType>(weight.getType());
  int64_t along = transposed ? 0 : 1;
  SmallVector<int64_t> shape(type.getShape()), offsets{0, 0};
  shape[along] = size;
  offsets[along] = offset;
  return rewriter.createOrFold<SliceOp>(loc, RankedTensorType::get(shape, type.getElementType()), weight, offsets,
                                        ArrayRef<int64_t>{1, 1});
}

/// True when a slice of `value` from its `index`-th element is a constant or a view in the run plan (it starts
/// on a 16-byte line: kiln::planViewOffset), not a copy made on every call.
static bool slicesFreely(Value value, int64_t index) {
  auto type = cast<RankedTensorType>(value.getType());
  return matchPattern(value, m_Constant()) || index * type.getElementTypeBitWidth() / 8 % 16 == 0;
}

/// The bias `add` adds to the matmul `product` when it is a row of the output's columns ([N] or [1, ..., N]; or
/// a size-1 last dimension), else null.
static Value columnBias(AddOp add, Value product) {
  Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto type = cast<RankedTensorType>(bias.getType());
  if (bias == product || type.getRank() == 0)
    return {};
  return llvm::all_of(type.getShape().drop_back(), [](int64_t size) { return size == 1; }) ? bias : Value();
}

FailureOr<SmallVector<MatmulOp>> kiln::splitSlicedMatmul(RewriterBase &rewriter, MatmulOp op) {
  bool transposed = op.getTransposeRhs();
  if (op.getTransposeLhs() || op.getKChunk() || !op.getEpilogue().empty() || op.getRhs().getType().getRank() != 2 ||
      !(transposed || matchPattern(op.getRhs(), m_Constant())))
    return rewriter.notifyMatchFailure(op, "not a plain matmul of an [N, K] weight read transposed or a constant");
  RankedTensorType resultType = op.getType();
  int64_t columns = resultType.getShape().back();
  // The value the slices read: the product, or the product plus a bias over its columns.
  Value whole = op.getResult();
  Value bias;
  if (op->hasOneUse())
    if (auto add = dyn_cast<AddOp>(*op->getUsers().begin()); add && add.getType() == resultType)
      if ((bias = columnBias(add, op.getResult())))
        whole = add.getResult();
  SmallVector<SliceOp> slices;
  if (whole.use_empty() || !collectColumnSlices(whole, columns, slices))
    return rewriter.notifyMatchFailure(op, "the output is read by something other than column slices");
  // Each part of the weight (and of the bias) must be a view or a constant: copying it on every call would cost
  // more than the slices of the output it saves when the rows are few (decode).
  int64_t rowLength = op.getRhs().getType().getDimSize(1);
  for (SliceOp slice : slices) {
    int64_t offset = lastDimWindow(slice)->first;
    if (!slicesFreely(op.getRhs(), offset * rowLength) ||
        (bias && cast<RankedTensorType>(bias.getType()).getShape().back() != 1 && !slicesFreely(bias, offset)))
      return rewriter.notifyMatchFailure(slice, "a part's weight rows or bias columns start off a 16-byte line");
  }
  SmallVector<MatmulOp> parts;
  for (SliceOp slice : slices) {
    auto [offset, size] = *lastDimWindow(slice);
    Location loc = slice.getLoc();
    rewriter.setInsertionPoint(slice);
    SmallVector<int64_t> shape(resultType.getShape());
    shape.back() = size;
    auto part = MatmulOp::create(rewriter, op.getLoc(), RankedTensorType::get(shape, resultType.getElementType()),
                                 op.getLhs(), sliceWeight(rewriter, loc, op.getRhs(), transposed, offset, size),
                                 /*transposeLhs=*/false, transposed, ValueRange{}, op.getFp32PrecisionAttr(),
                                 IntegerAttr());
    part->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    parts.push_back(part);
    Value value = part.getResult();
    if (bias)
      value = AddOp::create(rewriter, loc, value, sliceColumns(rewriter, loc, bias, offset, size));
    if (value.getType() != slice.getType())
      value = ReshapeOp::create(rewriter, loc, slice.getType(), value);
    rewriter.replaceOp(slice, value);
  }
  // The whole product and the reshapes between it and the slices are read by nothing now.
  SmallVector<Operation *> dead{op};
  for (size_t i = 0; i < dead.size(); ++i)
    for (Operation *user : dead[i]->getUsers())
      dead.push_back(user);
  for (Operation *deadOp : llvm::reverse(dead))
    rewriter.eraseOp(deadOp);
  return parts;
}

namespace {
struct KilnSplitSlicedMatmulsPass : kiln::impl::KilnSplitSlicedMatmulsBase<KilnSplitSlicedMatmulsPass> {
  void runOnOperation() override {
    forEachInProgramOrder<MatmulOp>(getOperation(), [](IRRewriter &rewriter, Operation *op) {
      (void)splitSlicedMatmul(rewriter, cast<MatmulOp>(op));
    });
  }
};
} // namespace
