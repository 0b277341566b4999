//===- Passes.h - Kiln transformation passes ---------------------*- C++ -*-===//
//
// Declares Kiln's passes (generated from Passes.td) and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PASSES_H
#define KILN_TRANSFORMS_PASSES_H

#include "Dialect/Kiln/KilnDialect.h"

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace kiln {

#define GEN_PASS_DECL
#include "Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Transforms/Passes.h.inc"

} // namespace kiln
} // namespace mlir

#endif // KILN_TRANSFORMS_PASSES_H
