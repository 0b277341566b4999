//===- Passes.h - Kiln conversion passes -------------------------*- C++ -*-===//
//
// Declares the conversion passes out of the kiln dialect and their pattern entry points.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_PASSES_H
#define KILN_CONVERSION_PASSES_H

#include "Dialect/Kiln/TargetOption.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;

namespace kiln {

/// Adds the patterns that lower every kiln op to linalg/tensor/arith.
void populateKilnToLinalgPatterns(RewritePatternSet &patterns);

#define GEN_PASS_DECL
#include "Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Conversion/Passes.h.inc"

} // namespace kiln
} // namespace mlir

#endif // KILN_CONVERSION_PASSES_H
