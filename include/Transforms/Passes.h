//===- Passes.h - Kiln transformation passes ---------------------*- C++ -*-===//
//
// Declares Kiln's passes (generated from Passes.td) and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PASSES_H
#define KILN_TRANSFORMS_PASSES_H

#include "Dialect/Kiln/KilnDialect.h"
#include "Dialect/Kiln/TargetOption.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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
