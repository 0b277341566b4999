//===- ShapeInference.cpp - Result shapes of kiln ops ---------------------===//
//
// Numpy broadcasting and the matmul result rule, used by verifiers, builders and importers alike so that they
// can never disagree about what shape an op produces.
//
//===----------------------------------------------------------------------===//

#include "Dialect/Kiln/ShapeInference.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::kiln;

std::variant<SmallVector<int64_t>, BroadcastConflict>
kiln::broadcastShapes(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Walk from the right; a missing dimension acts as 1.
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1)
      return BroadcastConflict{static_cast<int64_t>(rank - 1 - i), l, r};
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

Type kiln::inferBroadcastType(Type lhs, Type rhs) {
  auto lhsType = dyn_cast<RankedTensorType>(lhs);
  auto rhsType = dyn_cast<RankedTensorType>(rhs);
  if (!lhsType || !rhsType)
    return {};
  auto shape = broadcastShapes(lhsType.getShape(), rhsType.getShape());
  if (auto *dims = std::get_if<SmallVector<int64_t>>(&shape))
    return RankedTensorType::get(*dims, lhsType.getElementType());
  return {};
}

RankedTensorType kiln::inferMatmulType(RankedTensorType lhs, RankedTensorType rhs, bool transposeLhs,
                                       bool transposeRhs, Type resultElementType) {
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return {};
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  int64_t m = transposeLhs ? l[l.size() - 1] : l[l.size() - 2];
  int64_t kl = transposeLhs ? l[l.size() - 2] : l[l.size() - 1];
  int64_t kr = transposeRhs ? r[r.size() - 1] : r[r.size() - 2];
  int64_t n = transposeRhs ? r[r.size() - 2] : r[r.size() - 1];
  if (kl != kr)
    return {};
  auto batch = broadcastShapes(l.drop_back(2), r.drop_back(2));
  auto *dims = std::get_if<SmallVector<int64_t>>(&batch);
  if (!dims)
    return {};
  SmallVector<int64_t> shape(*dims);
  shape.push_back(m);
  shape.push_back(n);
  return RankedTensorType::get(shape, resultElementType);
}

LogicalResult kiln::verifyBroadcastingElementwise(Operation *op, unsigned conditions, Type valueElement) {
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  bool ofResult = !valueElement;
  if (ofResult)
    valueElement = resultType.getElementType();
  SmallVector<int64_t> shape;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    auto type = cast<RankedTensorType>(operand.getType());
    // The conditions' type (i1) is the op's own constraint.
    if (index >= conditions && type.getElementType() != valueElement)
      return op->emitOpError() << "operand #" << index << " element type " << type.getElementType()
                               << " differs from " << (ofResult ? "the result element type " : "operand #0's, ")
                               << valueElement;
    auto merged = broadcastShapes(shape, type.getShape());
    if (auto *conflict = std::get_if<BroadcastConflict>(&merged))
      return op->emitOpError() << "operand #" << index << " does not broadcast: size " << conflict->rhsSize
                               << " meets size " << conflict->lhsSize << " at broadcast dimension "
                               << conflict->resultDim;
    shape = std::get<SmallVector<int64_t>>(merged);
  }
  if (resultType.getShape() != ArrayRef<int64_t>(shape))
    return op->emitOpError() << "result type " << resultType << " does not match the broadcast shape "
                             << RankedTensorType::get(shape, resultType.getElementType());
  return success();
}
