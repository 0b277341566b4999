//===- TargetOption.h - The kiln Target enum as a command-line value -*- C++ -*-===//
//
// Pass options, pipeline options and kilnc's --target take a Target by its name. llvm::cl parses the name once,
// where the option is read, and refuses any other, naming the option and the value; everything after holds the
// enum.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_TARGETOPTION_H
#define KILN_DIALECT_KILN_TARGETOPTION_H

#include "Dialect/Kiln/KilnDialect.h"

#include "llvm/Support/CommandLine.h"

/// The GPU targets by name, as clEnumValN entries.
#define KILN_GPU_TARGET_NAMES                                                                                  \
  clEnumValN(::mlir::kiln::Target::Sm80, "sm_80", "NVIDIA 8.x GPUs (A100 and later): mma.sync, cp.async"),     \
      clEnumValN(::mlir::kiln::Target::Sm90a, "sm_90a", "NVIDIA H100 and H200: wgmma, TMA")
/// The values of an option of type mlir::kiln::Target that takes every target.
#define KILN_TARGET_VALUES                                                                                     \
  ::llvm::cl::values(clEnumValN(::mlir::kiln::Target::Host, "host", "the CPU host backend"), KILN_GPU_TARGET_NAMES)
/// The values of an option of type mlir::kiln::Target that takes a GPU target.
#define KILN_GPU_TARGET_VALUES ::llvm::cl::values(KILN_GPU_TARGET_NAMES)

#endif // KILN_DIALECT_KILN_TARGETOPTION_H
