//===- Registration.cpp - Everything a Kiln tool registers -----------------===//
//
// Kiln's programs pass through most of upstream MLIR (tensor/linalg/bufferization for the host backend,
// gpu/nvgpu/nvvm for the GPU backend, llvm at the end), and its pipelines need the interface models
// (bufferization, convert-to-llvm, inlining) those dialects attach. Registering all of upstream keeps every tool
// able to replay every stage; the tools link libMLIR.so, so this costs no binary size.
//
//===----------------------------------------------------------------------===//

#include "Pipelines/Registration.h"

#include "Conversion/Passes.h"
#include "Dialect/Kiln/KilnDialect.h"
#include "Pipelines/Pipelines.h"
#include "Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

using namespace mlir;

void kiln::registerKilnDialects(DialectRegistry &registry) {
  registry.insert<kiln::KilnDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // Serialising gpu.modules to PTX translates them to LLVM IR in process.
  mlir::registerAllToLLVMIRTranslations(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

void kiln::registerKilnPasses() {
  static bool registered = false;
  if (registered)
    return;
  registered = true;
  mlir::registerAllPasses();
  kiln::registerKilnConversionPasses();
  kiln::registerKilnTransformsPasses();
  kiln::registerKilnPipelines();
}
