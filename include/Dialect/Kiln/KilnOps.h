//===- KilnOps.h - Operations of the kiln dialect ----------------*- C++ -*-===//
//
// Declares the generated op classes of the kiln dialect together with the shape helpers their verifiers and
// builders share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_KILNOPS_H
#define KILN_DIALECT_KILN_KILNOPS_H

#include "Dialect/Kiln/KilnDialect.h"
#include "Dialect/Kiln/ShapeInference.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "Dialect/Kiln/KilnOps.h.inc"

namespace mlir {
namespace kiln {

/// The byte offset into its operand of an op a run plan holds as a view of the operand's bytes, with no kernel:
/// 0 for a reshape; a slice's when it takes one contiguous run of its input starting at a multiple of 16 bytes
/// (the alignment of the kernels' 16-byte and TMA loads). nullopt for any other op.
std::optional<int64_t> planViewOffset(Operation *op);

/// True when `op` is a view in a run plan (planViewOffset has a value).
inline bool isPlanView(Operation *op) { return planViewOffset(op).has_value(); }

/// The value whose bytes `value` shares: through plan views to the first value that is not one's result.
Value viewedStorage(Value value);

/// Verifies an op's `fp32_precision`: absent, or "tf32" / "ieee" where `element`, the type of the operands
/// `operands` names (for the message), is f32.
LogicalResult verifyFp32Precision(Operation *op, std::optional<StringRef> precision, Type element,
                                  StringRef operands);

} // namespace kiln
} // namespace mlir

#endif // KILN_DIALECT_KILN_KILNOPS_H
