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
  auto file = openInputFile(path, &error);
  if (file)
    parse(std::move(file), llvm::errs(), /*threads=*/nullptr);
}

InputModule::InputModule(StringRef source, StringRef bufferName, llvm::raw_ostream &diagnostics,
                         llvm::ThreadPoolInterface *threads) {
  parse(llvm::MemoryBuffer::getMemBufferCopy(source, bufferName), diagnostics, threads);
}

void InputModule::parse(std::unique_ptr<llvm::MemoryBuffer> buffer, llvm::raw_ostream &diagnosticStream,
                        llvm::ThreadPoolInterface *threads) {
  DialectRegistry registry;
  registerKilnDialects(registry);
  registerKilnPasses();
  context = std::make_unique<MLIRContext>(registry, threads ? MLIRContext::Threading::DISABLED
                                                            : MLIRContext::Threading::ENABLED);
  if (threads)
    context->setThreadPool(*threads);
  // An error names the op at its source line; the whole op printed under it (MLIR's default) would bury it in
  // the lowered IR of a kernel (kiln-opt keeps the default for those debugging a pass).
  context->printOpOnDiagnostic(false);
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  diagnostics = std::make_unique<SourceMgrDiagnosticHandler>(sourceMgr, context.get(), diagnosticStream);
  parsed = parseSourceFile<ModuleOp>(sourceMgr, context.get());
  if (parsed && failed(verify(*parsed)))
    parsed = nullptr;
}
