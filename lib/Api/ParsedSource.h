//===- ParsedSource.h - Kiln IR text parsed for the API -*- C++ -*-----------===//
//
// Every API entry point starts from kiln IR text: this parses it into a context of its own whose diagnostics are
// captured as text for the exception that reports a failure, and whose passes run on one process-wide thread
// pool (a context would otherwise start its own threads for every program compiled).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_API_PARSEDSOURCE_H
#define KILN_LIB_API_PARSEDSOURCE_H

#include "Pipelines/InputModule.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace kiln {
namespace api {

/// A kiln module parsed into its own context; throws CompileError when the text is not valid kiln IR.
class ParsedSource {
public:
  explicit ParsedSource(const std::string &source);

  /// The parsed module.
  mlir::ModuleOp module() { return input.module(); }
  /// The context it lives in.
  mlir::MLIRContext &context() { return input.getContext(); }
  /// The diagnostics emitted since the last call, or a note that there were none.
  std::string takeDiagnostics();

private:
  std::string diagnosticText;
  llvm::raw_string_ostream diagnosticStream{diagnosticText};
  mlir::kiln::InputModule input;
};

/// `module` printed as text.
std::string printModule(mlir::ModuleOp module);

} // namespace api
} // namespace kiln

#endif // KILN_LIB_API_PARSEDSOURCE_H
