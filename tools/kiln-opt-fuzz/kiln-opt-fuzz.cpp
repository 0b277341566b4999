//===- kiln-opt-fuzz.cpp - libFuzzer target over what kiln-opt does with text -===//
//
// Kiln's passes take IR that users, exporters and bug reports write: text it must reject with a diagnostic, never
// with a crash. This target feeds each input to what kiln-opt does with a file: parse it (kiln, func, arith,
// tensor and the other registered dialects), verify it and, when it is valid, run one named pipeline on it,
// with every diagnostic swallowed (an error is a fine outcome; a crash, a sanitizer report or a hang is not).
// KILN_FUZZ_PIPELINE picks the pipeline (scripts/fuzz.sh runs each in turn): "verify" (parse and verify only),
// "kernel", "host", "gpu-sm80" or "gpu-sm90a" (kiln-gpu-kernel-pipeline for that chip); unset is "kernel".
//
//===----------------------------------------------------------------------===//

#include "Pipelines/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;

/// The textual pipeline KILN_FUZZ_PIPELINE names, or "" for parse-and-verify only.
static std::string selectedPipeline() {
  const char *name = std::getenv("KILN_FUZZ_PIPELINE");
  llvm::StringRef choice = name ? name : "kernel";
  if (choice == "verify")
    return "";
  if (choice == "kernel")
    return "builtin.module(kiln-kernel-pipeline)";
  if (choice == "host")
    return "builtin.module(kiln-host-pipeline)";
  if (choice == "gpu-sm80")
    return "builtin.module(kiln-gpu-kernel-pipeline{chip=sm_80})";
  if (choice == "gpu-sm90a")
    return "builtin.module(kiln-gpu-kernel-pipeline{chip=sm_90a})";
  llvm::errs() << "kiln-opt-fuzz: KILN_FUZZ_PIPELINE must be verify, kernel, host, gpu-sm80 or gpu-sm90a, got '"
               << choice << "'\n";
  std::exit(2);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static DialectRegistry *registry = [] {
    auto *created = new DialectRegistry();
    kiln::registerKilnDialects(*created);
    kiln::registerKilnPasses();
    return created;
  }();
  static const std::string pipeline = selectedPipeline();
  MLIRContext context(*registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler swallow(&context, [](Diagnostic &) { return success(); });
  // MLIR's lexer reads up to a terminating NUL, as a file's buffer has one: libFuzzer's bytes do not.
  const std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module || failed(verify(*module)) || pipeline.empty())
    return 0;
  PassManager passes(&context);
  if (failed(parsePassPipeline(pipeline, passes))) {
    llvm::errs() << "kiln-opt-fuzz: cannot parse the pipeline " << pipeline << "\n";
    std::abort();
  }
  (void)passes.run(*module);
  return 0;
}
