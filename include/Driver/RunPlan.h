//===- RunPlan.h - The host plan of a compiled module, as data ---*- C++ -*-===//
//
// After kiln-outline-kernels, each public function is a plan: buffers, kernel calls in order, views and
// constants. kilnc writes it into the manifest so that a runtime can execute the whole graph without MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DRIVER_RUNPLAN_H
#define KILN_DRIVER_RUNPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

namespace mlir {
namespace kiln {

/// Describes every public function of `module` as a run plan: values (inputs, buffers, views of other values,
/// constants written as raw little-endian files into `outputDir`), steps (kernel launches naming their argument
/// values, destinations last) and outputs. Fails with a diagnostic on an op a plan cannot hold.
FailureOr<llvm::json::Array> describeRunPlans(ModuleOp module, llvm::StringRef outputDir);

} // namespace kiln
} // namespace mlir

#endif // KILN_DRIVER_RUNPLAN_H
