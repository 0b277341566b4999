//===- ShapeInference.h - Result shapes of kiln ops --------------*- C++ -*-===//
//
// Shape rules shared by the verifiers, the builders and the importers: numpy broadcasting and the result types
// of the ops whose result follows from their operands. Keeping them in one place means a graph built from Python
// or ONNX gets exactly the types the verifier will accept.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_SHAPEINFERENCE_H
#define KILN_DIALECT_KILN_SHAPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <variant>

namespace mlir {
namespace kiln {

/// A dimension at which two shapes fail to broadcast, counted from the right-aligned result.
struct BroadcastConflict {
  /// Index into the broadcast result shape.
  int64_t resultDim;
  /// The two sizes that disagree.
  int64_t lhsSize, rhsSize;
};

/// Broadcasts two static shapes by numpy rules. Returns the result shape, or the first conflicting dimension.
std::variant<llvm::SmallVector<int64_t>, BroadcastConflict>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// The result type of a broadcasting elementwise op on `lhs` and `rhs` (the element type of `lhs`), or a null
/// type when the shapes do not broadcast.
Type inferBroadcastType(Type lhs, Type rhs);

/// The result type of `kiln.matmul`, or a null type when the operands do not fit together.
RankedTensorType inferMatmulType(RankedTensorType lhs, RankedTensorType rhs, bool transposeLhs,
                                 bool transposeRhs, Type resultElementType);

/// Verifies an elementwise op whose operands broadcast to its single result (add, sub, mul, ...): past the
/// first `conditions` operands (a select's condition), each has the element type `valueElement` (the result's
/// when null).
LogicalResult verifyBroadcastingElementwise(Operation *op, unsigned conditions = 0, Type valueElement = {});

} // namespace kiln
} // namespace mlir

#endif // KILN_DIALECT_KILN_SHAPEINFERENCE_H
