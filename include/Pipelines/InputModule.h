//===- InputModule.h - A kiln module read from a file by a tool --*- C++ -*-===//
//
// What every Kiln tool does first: a context with Kiln's dialects, the input file (or stdin), a diagnostic
// handler that prints file:line:col, and the parsed, verified module. Shared so the tools cannot drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PIPELINES_INPUTMODULE_H
#define KILN_PIPELINES_INPUTMODULE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <string>

namespace mlir {
namespace kiln {

/// A parsed and verified kiln module, with the context and diagnostics it lives in.
class InputModule {
public:
  /// Reads `path` ("-" for stdin). When this fails, the diagnostics have been printed (or `openError()` says
  /// why the file could not be opened) and `module()` is null.
  explicit InputModule(llvm::StringRef path);

  /// The module, or null when reading, parsing or verifying failed.
  ModuleOp module() { return parsed ? *parsed : ModuleOp(); }
  /// The context the module lives in.
  MLIRContext &getContext() { return *context; }
  /// Why the file could not be opened, or empty.
  const std::string &openError() const { return error; }

private:
  std::unique_ptr<MLIRContext> context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<SourceMgrDiagnosticHandler> diagnostics;
  OwningOpRef<ModuleOp> parsed;
  std::string error;
};

} // namespace kiln
} // namespace mlir

#endif // KILN_PIPELINES_INPUTMODULE_H
