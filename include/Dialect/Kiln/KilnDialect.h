//===- KilnDialect.h - The kiln dialect --------------------------*- C++ -*-===//
//
// Declares the kiln dialect class and its enums and attributes. Include KilnOps.h for the ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_KILNDIALECT_H
#define KILN_DIALECT_KILN_KILNDIALECT_H

#include "mlir/IR/Dialect.h"

#include "Dialect/Kiln/KilnDialect.h.inc"
#include "Dialect/Kiln/KilnEnums.h.inc"

#endif // KILN_DIALECT_KILN_KILNDIALECT_H
