//===- FuseRope.cpp - The kiln-fuse-rope pass ------------------------------===//
//
// Rotary embeddings as Llama-style modules write them: x * cos + rotate_half(x) * sin, where rotate_half is
// concat(-x[..., D/2:], x[..., :D/2]) and cos/sin are [S, D] tables whose two halves repeat the same [S, D/2]
// frequencies. Written out that is two slices, a negation, a concat, two products and a sum, each a kernel; as a
// kiln.rope it is one row kernel. Constant tables (after the importer folded their computation) whose halves
// repeat give the rope its [S, D/2] tables; runtime tables (a model's inputs, as torch.compile graphs pass them),
// whose halves nothing proves equal, give it the [S, D] tables themselves, a factor per element, which computes
// the written-out formula exactly. The halves spelling (gpt-fast's decode layer and others) rotates the two
// halves of x by [.., D/2] tables and concatenates them, concat(a * cos - b * sin, a * sin + b * cos); its
// tables are the rope's [S, D/2] tables once the one dimension they vary along (the positions: a decode step's
// batch rows) is known. The pairs spelling (gpt-fast's apply_rotary_emb: x viewed as [.., D/2, 2], each pair
// (x0, x1) rotated and the results stacked and flattened back, in f32 around bf16 values) is the interleaved
// kiln.rope, of the narrow values where the f32 was only a widening and a rounding back.
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

/// The dimension of x (`xType`, [.., D] of rank r) that `table` ([.., D/2], rank <= r, broadcasting to x's halves)
/// varies along: the positions; r - 2 where it varies along none and x has one row there. nullopt when it varies
/// along more than one dimension or is not of that form.
static std::optional<int64_t> tablePositionDim(Value table, RankedTensorType xType) {
  auto type = cast<RankedTensorType>(table.getType());
  int64_t rank = xType.getRank(), half = xType.getShape().back() / 2, lead = rank - type.getRank();
  if (lead < 0 || type.getShape().back() != half || type.getElementType() != xType.getElementType())
    return std::nullopt;
  std::optional<int64_t> varying;
  for (int64_t d = 0; d + 1 < type.getRank(); ++d) {
    if (type.getDimSize(d) == 1)
      continue;
    if (varying || type.getDimSize(d) != xType.getDimSize(d + lead))
      return std::nullopt;
    varying = d + lead;
  }
  if (!varying && xType.getDimSize(rank - 2) != 1)
    return std::nullopt;
  return varying.value_or(rank - 2);
}

/// `source` (the table's elements in the table's order) as the [S, D/2] rows kiln.rope takes, S being x's size
/// along `positionDim`.
static Value tableRows(RewriterBase &rewriter, Location loc, Value source, RankedTensorType xType,
                       int64_t positionDim) {
  auto rows = RankedTensorType::get({xType.getDimSize(positionDim), xType.getShape().back() / 2},
                                    xType.getElementType());
  return source.getType() == rows ? source : ReshapeOp::create(rewriter, loc, rows, source).getResult();
}

FailureOr<RopeOp> kiln::fuseHalvesRope(RewriterBase &rewriter, ConcatOp root) {
  auto type = cast<RankedTensorType>(root.getType());
  int64_t rank = type.getRank(), dim = rank ? type.getShape().back() : 0, half = dim / 2;
  if (root.getInputs().size() != 2 || rank < 2 || dim % 2 || static_cast<int64_t>(root.getAxis()) != rank - 1)
    return rewriter.notifyMatchFailure(root, "not a concat of two halves along the last dimension");
  auto difference = root.getInputs()[0].getDefiningOp<SubOp>();
  auto sum = root.getInputs()[1].getDefiningOp<AddOp>();
  if (!difference || !sum)
    return rewriter.notifyMatchFailure(root, "not concat(. - ., . + .)");
  Value x, cos, sin, a, b;
  auto firstHalf = [&](Value v) { return isLastDimSlice(v, x, 0, half); };
  auto secondHalf = [&](Value v) { return isLastDimSlice(v, x, half, half); };
  // a * cos - b * sin, then a * sin + b * cos with the same tables (the sum's terms in either order).
  if (!matchEitherOrder<MulOp>(difference.getLhs(), a, cos, firstHalf) ||
      !matchEitherOrder<MulOp>(difference.getRhs(), b, sin, secondHalf))
    return rewriter.notifyMatchFailure(root, "the first half is not a * cos - b * sin");
  bool matched = false;
  for (auto [sinTerm, cosTerm] : {std::pair(sum.getLhs(), sum.getRhs()), std::pair(sum.getRhs(), sum.getLhs())}) {
    Value half0, half1, sinAgain, cosAgain;
    if (matchEitherOrder<MulOp>(sinTerm, half0, sinAgain, firstHalf) && sinAgain == sin &&
        matchEitherOrder<MulOp>(cosTerm, half1, cosAgain, secondHalf) && cosAgain == cos)
      matched = true;
  }
  SmallVector<int64_t> halfShape(type.getShape());
  halfShape.back() = half;
  auto halfType = RankedTensorType::get(halfShape, type.getElementType());
  if (!matched || x.getType() != type ||
      llvm::any_of(ValueRange{difference.getLhs(), difference.getRhs(), sum.getLhs(), sum.getRhs()},
                   [&](Value term) { return term.getType() != halfType; }))
    return rewriter.notifyMatchFailure(root, "the second half is not a * sin + b * cos with the same tables");
  std::optional<int64_t> positionDim = tablePositionDim(cos, type);
  if (!positionDim || tablePositionDim(sin, type) != positionDim)
    return rewriter.notifyMatchFailure(root, "the tables vary along more than the positions");
  Location loc = root.getLoc();
  rewriter.setInsertionPoint(root);
  IntegerAttr seqDim = *positionDim == rank - 2 ? IntegerAttr() : rewriter.getI64IntegerAttr(*positionDim);
  auto rope = RopeOp::create(rewriter, loc, type, x, tableRows(rewriter, loc, cos, type, *positionDim),
                             tableRows(rewriter, loc, sin, type, *positionDim), /*interleaved=*/false, seqDim);
  replaceAndEraseDead(rewriter, root, rope);
  return rope;
}

/// The pairs tensor P ([.., D/2, 2]) when `value` is element `which` (0 or 1) of its pairs (P's last dimension
/// sliced at `which` and dropped); null otherwise.
static Value pairsOf(Value value, int64_t which) {
  auto dropped = value.getDefiningOp<ReshapeOp>();
  auto slice = dropped ? dropped.getInput().getDefiningOp<SliceOp>() : SliceOp();
  Value pairs;
  if (!slice || slice.getType().getShape().back() != 1 || slice.getInput().getType().getShape().back() != 2 ||
      dropped.getType().getShape() != slice.getType().getShape().drop_back() ||
      !isLastDimSlice(slice.getResult(), pairs, which, 1))
    return {};
  return pairs;
}

/// The dimensions of `shape` other than 1: two shapes with the same ones order their elements alike.
static SmallVector<int64_t> nonUnitDims(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> dims;
  llvm::copy_if(shape, std::back_inserter(dims), [](int64_t d) { return d != 1; });
  return dims;
}

/// Where `table` is element `which` of the pairs stacked from two tensors (torch.stack([cos, sin], -1), viewed
/// with unit dimensions added or dropped), that tensor, whose elements are the table's in the table's order (so
/// that no kernel stacks and slices them apart again); else `table`.
static Value stackedPart(Value table) {
  auto dropped = table.getDefiningOp<ReshapeOp>();
  auto slice = dropped ? dropped.getInput().getDefiningOp<SliceOp>() : SliceOp();
  Value pairs;
  if (!slice || slice.getType().getShape().back() != 1 ||
      nonUnitDims(dropped.getType().getShape()) != nonUnitDims(slice.getType().getShape()))
    return table;
  int64_t which = slice.getOffsets().back();
  if (!isLastDimSlice(slice.getResult(), pairs, which, 1))
    return table;
  while (auto view = pairs.getDefiningOp<ReshapeOp>()) {
    if (nonUnitDims(view.getInput().getType().getShape()) != nonUnitDims(view.getType().getShape()))
      return table;
    pairs = view.getInput();
  }
  auto stack = pairs.getDefiningOp<ConcatOp>();
  auto pairType = cast<RankedTensorType>(pairs.getType());
  if (!stack || stack.getInputs().size() != 2 || static_cast<int64_t>(stack.getAxis()) != pairType.getRank() - 1 ||
      pairType.getShape().back() != 2)
    return table;
  Value part = stack.getInputs()[which];
  if (nonUnitDims(cast<RankedTensorType>(part.getType()).getShape()) !=
      nonUnitDims(cast<RankedTensorType>(table.getType()).getShape()))
    return table;
  return part;
}

FailureOr<RopeOp> kiln::fusePairsRope(RewriterBase &rewriter, ReshapeOp root) {
  // root: a view of concat(first[.., D/2, 1], second[.., D/2, 1]) along the last dimension, [.., D/2, 2].
  auto concat = root.getInput().getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2)
    return rewriter.notifyMatchFailure(root, "not a view of a concat of two parts");
  RankedTensorType pairType = cast<RankedTensorType>(concat.getType());
  int64_t rank = pairType.getRank() - 1;
  if (rank < 2 || pairType.getShape().back() != 2 || static_cast<int64_t>(concat.getAxis()) != rank)
    return rewriter.notifyMatchFailure(root, "not [.., D/2, 2] pairs");
  SmallVector<int64_t> flatShape(pairType.getShape().drop_back());
  flatShape.back() *= 2;
  auto unstacked = [](Value part) -> Value {
    auto reshape = part.getDefiningOp<ReshapeOp>();
    return reshape ? reshape.getInput() : Value();
  };
  Value firstPart = unstacked(concat.getInputs()[0]), secondPart = unstacked(concat.getInputs()[1]);
  auto difference = firstPart ? firstPart.getDefiningOp<SubOp>() : SubOp();
  auto sum = secondPart ? secondPart.getDefiningOp<AddOp>() : AddOp();
  if (!difference || !sum)
    return rewriter.notifyMatchFailure(root, "the pairs are not (. - ., . + .)");
  // x0 * cos - x1 * sin, then x1 * cos + x0 * sin (the sum's terms and the products in either order), x0 and x1
  // the elements of one pairs tensor of the concat's shape.
  Value pairs, cos, sin, even, odd;
  auto element = [&](int64_t which) {
    return [&, which](Value v) {
      Value of = pairsOf(v, which);
      if (!of || (pairs && of != pairs) || of.getType() != pairType)
        return false;
      pairs = of;
      return true;
    };
  };
  if (!matchEitherOrder<MulOp>(difference.getLhs(), even, cos, element(0)) ||
      !matchEitherOrder<MulOp>(difference.getRhs(), odd, sin, element(1)))
    return rewriter.notifyMatchFailure(root, "the first of each pair is not x0 * cos - x1 * sin");
  bool matched = false;
  for (auto [cosTerm, sinTerm] : {std::pair(sum.getLhs(), sum.getRhs()), std::pair(sum.getRhs(), sum.getLhs())}) {
    Value a, b, cosAgain, sinAgain;
    matched = matched || (matchEitherOrder<MulOp>(cosTerm, a, cosAgain, element(1)) && cosAgain == cos &&
                          matchEitherOrder<MulOp>(sinTerm, b, sinAgain, element(0)) && sinAgain == sin);
  }
  if (!matched || difference.getType() != sum.getType() ||
      cast<RankedTensorType>(difference.getType()).getShape() != pairType.getShape().drop_back())
    return rewriter.notifyMatchFailure(root, "the second of each pair is not x1 * cos + x0 * sin of the same x");
  // A rotation computed in f32 of bf16/f16 values and rounded back (gpt-fast's x.float() ... type_as(x)) is the
  // rope of the narrow values: kiln.rope computes in f32 and rounds once.
  Location loc = root.getLoc();
  Operation *replaced = root;
  Value rotated = pairs, cosTable = cos, sinTable = sin;
  if (root->hasOneUse())
    if (auto narrowing = dyn_cast<CastOp>(*root->getUsers().begin())) {
      Type narrow = narrowing.getType().getElementType();
      bool halfFloat = narrow.isBF16() || narrow.isF16();
      auto view = pairs.getDefiningOp<ReshapeOp>();
      Value narrowX = view ? widenedFrom(view.getInput(), narrow) : Value();
      Value narrowCos = widenedFrom(cos, narrow), narrowSin = widenedFrom(sin, narrow);
      if (halfFloat && narrowX && narrowCos && narrowSin) {
        rotated = narrowX, cosTable = narrowCos, sinTable = narrowSin;
        replaced = narrowing;
      }
    }
  auto ropeType = RankedTensorType::get(flatShape, cast<RankedTensorType>(rotated.getType()).getElementType());
  std::optional<int64_t> positionDim = tablePositionDim(cosTable, ropeType);
  if (!positionDim || tablePositionDim(sinTable, ropeType) != positionDim)
    return rewriter.notifyMatchFailure(root, "the tables vary along more than the positions");
  rewriter.setInsertionPoint(replaced);
  if (auto view = rotated.getDefiningOp<ReshapeOp>(); view && view.getInput().getType() == ropeType)
    rotated = view.getInput(); // the pairs viewed back as the x they were viewed from
  Value x = rotated.getType() == ropeType ? rotated : ReshapeOp::create(rewriter, loc, ropeType, rotated).getResult();
  IntegerAttr seqDim = *positionDim == rank - 2 ? IntegerAttr() : rewriter.getI64IntegerAttr(*positionDim);
  auto rope = RopeOp::create(rewriter, loc, ropeType, x,
                             tableRows(rewriter, loc, stackedPart(cosTable), ropeType, *positionDim),
                             tableRows(rewriter, loc, stackedPart(sinTable), ropeType, *positionDim),
                             /*interleaved=*/true, seqDim);
  Type resultType = replaced->getResult(0).getType();
  Value result = resultType == ropeType ? rope.getResult()
                                        : ReshapeOp::create(rewriter, loc, resultType, rope.getResult()).getResult();
  replaceAndEraseDead(rewriter, replaced, result);
  return rope;
}

namespace {
struct KilnFuseRopePass : kiln::impl::KilnFuseRopeBase<KilnFuseRopePass> {
  void runOnOperation() override {
    forEachInProgramOrder<AddOp, ConcatOp, ReshapeOp>(getOperation(), [](IRRewriter &rewriter, Operation *op) {
      if (auto add = dyn_cast<AddOp>(op))
        (void)fuseRope(rewriter, add);
      else if (auto concat = dyn_cast<ConcatOp>(op))
        (void)fuseHalvesRope(rewriter, concat);
      else
        (void)fusePairsRope(rewriter, cast<ReshapeOp>(op));
    });
  }
};
} // namespace
