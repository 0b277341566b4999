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

#endif // KILN_DIALECT_KILN_KILNOPS_H
