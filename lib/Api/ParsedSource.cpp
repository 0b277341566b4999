//===- ParsedSource.cpp - Kiln IR text parsed for the API ------------------===//
//
// Parsing with captured diagnostics and the shared thread pool; see ParsedSource.h.
//
//===----------------------------------------------------------------------===//

#include "ParsedSource.h"

#include "Api/Compiler.h"

#include "llvm/Support/ThreadPool.h"

using namespace kiln::api;

/// One thread pool for every program's context.
static llvm::ThreadPoolInterface &sharedThreadPool() {
  static llvm::DefaultThreadPool pool;
  return pool;
}

ParsedSource::ParsedSource(const std::string &source)
    : input(source, "<kiln source>", diagnosticStream, &sharedThreadPool()) {
  if (!input.module())
    throw CompileError("invalid kiln IR:\n" + takeDiagnostics());
}

std::string ParsedSource::takeDiagnostics() {
  std::string text = diagnosticText.empty() ? std::string("(no diagnostic was emitted)") : diagnosticText;
  diagnosticText.clear();
  return text;
}

std::string kiln::api::printModule(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}
