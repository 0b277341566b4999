//===- kiln-opt.cpp - Kiln's pass-pipeline driver --------------------------===//
//
// mlir-opt with Kiln's dialects, passes and named pipelines: every stage of the compiler replays as one
// command, which is what the lit suite and bug reports are built on.
//
//===----------------------------------------------------------------------===//

#include "Pipelines/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::kiln::registerKilnDialects(registry);
  mlir::kiln::registerKilnPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
