//===- InputModule.cpp - A kiln module read from a file by a tool ----------===//
//
// Registration, file opening, diagnostics and parsing in the order every tool needs them.
//
//===----------------------------------------------------------------------===//

#include "Pipelines/InputModule.h"

#include "Pipelines/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

using namespace mlir;
using namespace mlir::kiln;

InputModule::InputModule(StringRef path) {
  DialectRegistry registry;
  registerKilnDialects(registry);
  registerKilnPasses();
  context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  auto file = openInputFile(path, &error);
  if (!file)
    return;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  diagnostics = std::make_unique<SourceMgrDiagnosticHandler>(sourceMgr, context.get());
  parsed = parseSourceFile<ModuleOp>(sourceMgr, context.get());
  if (parsed && failed(verify(*parsed)))
    parsed = nullptr;
}
