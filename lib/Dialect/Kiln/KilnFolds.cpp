//===- KilnFolds.cpp - Folds of the kiln ops -------------------------------===//
//
// Local simplifications that are exact: identities (transpose by the identity, reshape to the same type, ...),
// collapsing chains (transpose of transpose, reshape of reshape, widening-then-narrowing casts), constant
// reshapes and slices of constants. Anything that could change a result bit (x + 0 with -0.0, narrowing casts) is left alone.
//
//===----------------------------------------------------------------------===//

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::kiln;

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

/// True when `value` is a constant splat equal to 1.0.
static bool isSplatOne(Attribute value) {
  auto splat = dyn_cast_if_present<SplatElementsAttr>(value);
  return splat && isa<FloatType>(splat.getElementType()) && splat.getSplatValue<APFloat>().isExactlyValue(1.0);
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOne(adaptor.getRhs()) && getLhs().getType() == getType())
    return getLhs();
  if (isSplatOne(adaptor.getLhs()) && getRhs().getType() == getType())
    return getRhs();
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOne(adaptor.getRhs()) && getLhs().getType() == getType())
    return getLhs();
  return {};
}

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

/// Width in bits of a float type, 0 for anything else.
static unsigned floatWidth(Type type) {
  auto floatType = dyn_cast<FloatType>(type);
  return floatType ? floatType.getWidth() : 0;
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // x -> wider float -> x's type is exact: every value of x survives the round trip.
  if (auto inner = getInput().getDefiningOp<CastOp>()) {
    Type original = inner.getInput().getType().getElementType();
    Type middle = inner.getType().getElementType();
    if (inner.getInput().getType() == getType() && floatWidth(original) == 16 && middle.isF32())
      return inner.getInput();
  }
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> permutation = getPermutation();
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size())))
    return getInput();
  // transpose(transpose(x, inner), outer) == transpose(x, inner[outer[i]]).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t entry : permutation)
      composed.push_back(inner.getPermutation()[entry]);
    getInputMutable().assign(inner.getInput());
    setPermutation(composed);
    return getResult();
  }
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto splat = dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1 && getInputs().front().getType() == getType())
    return getInputs().front();
  return {};
}

/// The elements of `dense` that `slice` reads, copied from its raw bytes (byte-sized elements; i1 is packed
/// bits, left alone).
static Attribute sliceConstant(SliceOp slice, DenseElementsAttr dense) {
  if (dense.isSplat())
    return SplatElementsAttr::get(slice.getType(), dense.getSplatValue<Attribute>());
  int64_t bits = dense.getElementType().getIntOrFloatBitWidth();
  if (bits % 8)
    return {};
  int64_t bytes = bits / 8;
  ArrayRef<int64_t> input = slice.getInput().getType().getShape(), result = slice.getType().getShape();
  ArrayRef<int64_t> offsets = slice.getOffsets(), strides = slice.getStrides();
  int64_t rank = input.size();
  SmallVector<int64_t> inputStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    inputStrides[d] = inputStrides[d + 1] * input[d + 1];
  ArrayRef<char> raw = dense.getRawData();
  SmallVector<char> data;
  data.reserve(slice.getType().getNumElements() * bytes);
  SmallVector<int64_t> index(rank, 0);
  for (int64_t n = 0, count = slice.getType().getNumElements(); n < count; ++n) {
    int64_t at = 0;
    for (int64_t d = 0; d < rank; ++d)
      at += (offsets[d] + index[d] * strides[d]) * inputStrides[d];
    data.append(raw.begin() + at * bytes, raw.begin() + (at + 1) * bytes);
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == result[d]; --d)
      index[d] = 0;
  }
  return DenseElementsAttr::getFromRawBuffer(slice.getType(), data);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() && llvm::all_of(getOffsets(), [](int64_t o) { return o == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return sliceConstant(*this, dense);
  return {};
}
