//===- Registration.cpp - Everything a Kiln tool registers -----------------===//
//
// The dialects a Kiln program passes through (kiln -> tensor/arith/math/scf -> memref/vector -> gpu/nvgpu/nvvm
// -> llvm) and the passes that move between them.
//
//===----------------------------------------------------------------------===//

#include "Pipelines/Registration.h"

#include "Dialect/Kiln/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::registerKilnDialects(DialectRegistry &registry) {
  registry.insert<kiln::KilnDialect, arith::ArithDialect, func::FuncDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect, tensor::TensorDialect, vector::VectorDialect>();
}

void kiln::registerKilnPasses() {
  static bool registered = false;
  if (registered)
    return;
  registered = true;
  mlir::registerTransformsPasses();
}
