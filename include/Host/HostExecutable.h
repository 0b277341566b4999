//===- HostExecutable.h - Kiln programs compiled for the CPU -----*- C++ -*-===//
//
// Compiles one entry function of a kiln module with the host pipeline and runs it with the MLIR
// ExecutionEngine on HostTensors. This is the CPU backend behind kiln-run and the Python API: the same tiled
// program the GPU backend starts from, executed on the host so every transform is checked numerically.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_HOST_HOSTEXECUTABLE_H
#define KILN_HOST_HOSTEXECUTABLE_H

#include "Host/HostTensor.h"
#include "Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace mlir {
class ExecutionEngine;

namespace kiln {

/// Shape and element type of one argument or result.
struct TensorSignature {
  ElementKind kind;
  llvm::SmallVector<int64_t> shape;
};

/// A compiled entry function, ready to run.
class HostExecutable {
public:
  ~HostExecutable();

  /// Compiles `entry` of `module` (left unchanged) through the host pipeline. Diagnostics go to the context's
  /// handler; failure means they have been reported.
  static FailureOr<std::unique_ptr<HostExecutable>> compile(ModuleOp module, llvm::StringRef entry,
                                                            const HostPipelineOptions &options);

  /// The one public function of `module` that has a body, or an error saying why there is none to pick.
  static llvm::Expected<std::string> defaultEntry(ModuleOp module);

  /// The entry's arguments and results.
  llvm::ArrayRef<TensorSignature> inputs() const { return inputSignatures; }
  llvm::ArrayRef<TensorSignature> outputs() const { return outputSignatures; }

  /// Runs the entry on `inputs` (checked against the signature) and returns its results. A buffer the host
  /// cannot allocate (a result, a copy of an input, or an intermediate of the JIT code) stops the run with an
  /// error of code std::errc::not_enough_memory that names it, its op's location and its size.
  llvm::Expected<std::vector<HostTensor>> run(llvm::ArrayRef<HostTensor> inputs) const;

  /// What the JIT code allocates at one of its allocation sites, for the error when the host cannot.
  struct AllocationSite {
    std::string where; ///< the op's location ("big.mlir:2:8: "), or ""
    std::string op;    ///< the op's name ("'kiln.broadcast'"), or ""
    /// Each result of the op: its type and bytes (-1 and "" for one that is no host tensor).
    llvm::SmallVector<std::pair<std::string, int64_t>> results;
  };

private:
  HostExecutable() = default;

  std::unique_ptr<ExecutionEngine> engine;
  std::string entryName;
  std::string entryLocation; ///< where the entry is defined ("big.mlir:1:1: "), or ""
  llvm::SmallVector<TensorSignature> inputSignatures, outputSignatures;
  std::vector<AllocationSite> allocationSites;
};

} // namespace kiln
} // namespace mlir

#endif // KILN_HOST_HOSTEXECUTABLE_H
