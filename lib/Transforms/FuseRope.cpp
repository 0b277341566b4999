//===- FuseRope.cpp - The kiln-fuse-rope pass ------------------------------===//
//
// Rotary embeddings as Llama-style modules write them: x * cos + rotate_half(x) * sin, where rotate_half is
// concat(-x[..., D/2:], x[..., :D/2]) and cos/sin are [S, D] tables whose two halves repeat the same [S, D/2]
// frequencies. Written out that is two slices, a negation, a concat, two products and a sum, each a kernel; as a
// kiln.rope it is one row kernel. Constant tables (after the importer folded their computation) whose halves
// repeat give the rope its [S, D/2] tables; runtime tables (a model's inputs, as torch.compile graphs pass them),
// whose halves nothing proves equal, give it the [S, D] tables themselves, a factor per element, which computes
// the written-out formula exactly.
//
//===----------------------------------------------------------------------===//

#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/IR/Matchers.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSEROPE
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// True for a unit-stride slice of the last dim of `x` that keeps every other dim whole and takes `size`
/// elements from `offset`.
static bool isLastDimSlice(Value value, Value &x, int64_t offset, int64_t size) {
  auto slice = value.getDefiningOp<SliceOp>();
  if (!slice || (x && slice.getInput() != x))
    return false;
  ArrayRef<int64_t> in = slice.getInput().getType().getShape(), out = slice.getType().getShape();
  ArrayRef<int64_t> offsets = slice.getOffsets(), strides = slice.getStrides();
  for (size_t i = 0; i + 1 < in.size(); ++i)
    if (offsets[i] != 0 || strides[i] != 1 || out[i] != in[i])
      return false;
  if (offsets.back() != offset || strides.back() != 1 || out.back() != size)
    return false;
  x = slice.getInput();
  return true;
}

/// x when `value` is concat(-x[..., D/2:], x[..., :D/2]) along the last axis.
static Value matchRotateHalf(Value value) {
  auto concat = value.getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2)
    return {};
  auto type = cast<RankedTensorType>(value.getType());
  int64_t dim = type.getShape().back();
  if (static_cast<int64_t>(concat.getAxis()) != type.getRank() - 1 || dim % 2)
    return {};
  Product negated = flattenProduct(concat.getInputs()[0]);
  Value x;
  if (negated.scale != -1.0 || negated.factors.size() != 1 || !isLastDimSlice(negated.factors[0], x, dim / 2, dim / 2))
    return {};
  if (!isLastDimSlice(concat.getInputs()[1], x, 0, dim / 2) || x.getType() != type)
    return {};
  return x;
}

/// The [S, D/2] half of a constant [1, .., 1, S, D] rope table of `x`'s element type whose two halves are
/// equal; null when the table is not such a constant.
static DenseElementsAttr halfTable(Value table, RankedTensorType xType) {
  DenseElementsAttr attr;
  if (!matchPattern(table, m_Constant(&attr)))
    return {};
  auto type = cast<RankedTensorType>(attr.getType());
  ArrayRef<int64_t> shape = type.getShape(), xShape = xType.getShape();
  int64_t rank = type.getRank();
  if (type.getElementType() != xType.getElementType() || rank < 2 || rank > xType.getRank() ||
      shape[rank - 2] != xShape[xShape.size() - 2] || shape[rank - 1] != xShape.back() ||
      llvm::any_of(shape.drop_back(2), [](int64_t d) { return d != 1; }))
    return {};
  int64_t rows = shape[rank - 2], dim = shape[rank - 1], half = dim / 2;
  SmallVector<APFloat> values(attr.getValues<APFloat>());
  SmallVector<APFloat> halfValues;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < half; ++c) {
      const APFloat &first = values[r * dim + c], &second = values[r * dim + half + c];
      if (first.compare(second) != APFloat::cmpEqual)
        return {};
      halfValues.push_back(first);
    }
  return DenseElementsAttr::get(RankedTensorType::get({rows, half}, type.getElementType()), halfValues);
}

/// True when `table` is [1, .., 1, S, D] of `x`'s element type, S and D being x's last two dimensions: a table
/// that broadcasts over x's leading dimensions with a factor per element of each row.
static bool isFullTable(Value table, RankedTensorType xType) {
  auto type = dyn_cast<RankedTensorType>(table.getType());
  if (!type || type.getElementType() != xType.getElementType() || type.getRank() < 2 ||
      type.getRank() > xType.getRank())
    return false;
  ArrayRef<int64_t> shape = type.getShape();
  return shape.take_back(2) == xType.getShape().take_back(2) &&
         llvm::all_of(shape.drop_back(2), [](int64_t d) { return d == 1; });
}

/// A full table (isFullTable) as the rank-2 [S, D] table kiln.rope takes.
static Value asRank2(RewriterBase &rewriter, Location loc, Value table) {
  auto type = cast<RankedTensorType>(table.getType());
  if (type.getRank() == 2)
    return table;
  auto rows = RankedTensorType::get(type.getShape().take_back(2), type.getElementType());
  return ReshapeOp::create(rewriter, loc, rows, table);
}

FailureOr<RopeOp> kiln::fuseRope(RewriterBase &rewriter, AddOp root) {
  for (auto [cosTerm, sinTerm] :
       {std::pair(root.getLhs(), root.getRhs()), std::pair(root.getRhs(), root.getLhs())}) {
    Value rotated, sin;
    if (!matchEitherOrder<MulOp>(sinTerm, rotated, sin, [](Value v) { return bool(matchRotateHalf(v)); }))
      continue;
    Value x = matchRotateHalf(rotated), cos, same;
    // A cos table of ones (position 0 alone) has been folded away: the term is x itself.
    bool unitCos = cosTerm == x;
    if (!unitCos && !matchEitherOrder<MulOp>(cosTerm, same, cos, [&](Value v) { return v == x; }))
      continue;
    auto type = cast<RankedTensorType>(x.getType());
    if (root.getType() != type || type.getRank() < 2 || type.getShape().back() % 2)
      continue;
    DenseElementsAttr sinHalf = halfTable(sin, type);
    DenseElementsAttr cosHalf =
        unitCos && sinHalf ? DenseElementsAttr::get(sinHalf.getType(), rewriter.getFloatAttr(type.getElementType(), 1.0))
                           : halfTable(cos, type);
    Location loc = root.getLoc();
    rewriter.setInsertionPoint(root);
    Value cosValue, sinValue;
    if (cosHalf && sinHalf) {
      cosValue = ConstantOp::create(rewriter, loc, cosHalf.getType(), cosHalf);
      sinValue = ConstantOp::create(rewriter, loc, sinHalf.getType(), sinHalf);
    } else if (!unitCos && isFullTable(cos, type) && isFullTable(sin, type)) {
      cosValue = asRank2(rewriter, loc, cos);
      sinValue = asRank2(rewriter, loc, sin);
    } else {
      continue;
    }
    auto rope = RopeOp::create(rewriter, loc, type, x, cosValue, sinValue, /*interleaved=*/false,
                               /*seq_dim=*/IntegerAttr());
    replaceAndEraseDead(rewriter, root, rope);
    return rope;
  }
  return rewriter.notifyMatchFailure(root, "not x * cos + rotate_half(x) * sin with [.., S, D] tables");
}

namespace {
struct KilnFuseRopePass : kiln::impl::KilnFuseRopeBase<KilnFuseRopePass> {
  void runOnOperation() override {
    forEachInProgramOrder<AddOp>(getOperation(),
                                 [](IRRewriter &rewriter, Operation *op) { (void)fuseRope(rewriter, cast<AddOp>(op)); });
  }
};
} // namespace
