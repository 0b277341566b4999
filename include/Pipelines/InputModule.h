//===- InputModule.h - A kiln module read from a file by a tool --*- C++ -*-===//
//
// What every Kiln tool and the Python extension do first: a context with Kiln's dialects, the input (a file, stdin
// or text in memory), a diagnostic handler that prints file:line:col for as long as the module lives, and the
// parsed, verified module. Shared so that the front doors cannot drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PIPELINES_INPUTMODULE_H
#define KILN_PIPELINES_INPUTMODULE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

namespace llvm {
class ThreadPoolInterface;
} // namespace llvm
#include <string>

namespace mlir {
namespace kiln {

/// A parsed and verified kiln module, with the context and diagnostics it lives in.
class InputModule {
public:
  /// Reads `path` ("-" for stdin). When this fails, the diagnostics have been printed (or `openError()` says
  /// why the file could not be opened) and `module()` is null.
  explicit InputModule(llvm::StringRef path);
  /// Parses `source` (named `bufferName` in diagnostics). Every diagnostic of the context, then and later, goes
  /// to `diagnostics`; the context runs its passes on `threads` when given instead of starting its own.
  InputModule(llvm::StringRef source, llvm::StringRef bufferName, llvm::raw_ostream &diagnostics,
              llvm::ThreadPoolInterface *threads = nullptr);

  /// The module, or null when reading, parsing or verifying failed.
  ModuleOp module() { return parsed ? *parsed : ModuleOp(); }
  /// The context the module lives in.
  MLIRContext &getContext() { return *context; }
  /// Why the file could not be opened, or empty.
  const std::string &openError() const { return error; }

private:
  /// Creates the context and parses `buffer`, reporting to `diagnostics`.
  void parse(std::unique_ptr<llvm::MemoryBuffer> buffer, llvm::raw_ostream &diagnostics,
             llvm::ThreadPoolInterface *threads);

  std::unique_ptr<MLIRContext> context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<SourceMgrDiagnosticHandler> diagnostics;
  OwningOpRef<ModuleOp> parsed;
  std::string error;
};

} // namespace kiln
} // namespace mlir

#endif // KILN_PIPELINES_INPUTMODULE_H
