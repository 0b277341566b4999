//===- Compiler.h - Kiln's compiler behind a plain C++ interface -*- C++ -*--===//
//
// The compiler as the Python extension sees it: strings in, strings out, standard exceptions for every failure.
// No MLIR or LLVM type appears here, so the extension can be built against this header alone on a machine that
// has no MLIR (the GPU machine links the packed libkiln_compiler.so, which holds the MLIR and LLVM parts). The
// host executor has its own header (Api/HostProgram.h): the packed GPU JIT leaves it out.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_API_COMPILER_H
#define KILN_API_COMPILER_H

#include "Api/PtxAssembler.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {
namespace api {

/// Malformed kiln IR or a failing pipeline; the message carries the MLIR diagnostics.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A bad argument that is not IR: an unknown stage or target, a config list of the wrong length.
struct InvalidArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// The names of the targets Kiln compiles for (the dialect's Target enum): "host", then the GPU targets.
std::vector<std::string> targetNames();

/// The module printed after a target-independent stage: "kiln" (as parsed), "fused" or "tiled".
std::string sourceIr(const std::string &source, const std::string &stage);

/// The module after the GPU kernel stage ("gpu") or after NVVM lowering ("llvm") for `chip`.
std::string gpuIr(const std::string &source, const std::string &chip, const std::string &stage);

/// The tunable kernels (matmuls and attentions) of `source`, in kernel order, each with the config `chip` gives
/// it by default, as JSON: [{"op": "kiln.matmul", "config": {...}}, ...] (a config in its manifest form,
/// Driver/ConfigJson.h).
std::string tunableKernels(const std::string &source, const std::string &chip);

/// Assembles PTX into a cubin in process (the Python JIT passes the CUDA driver's JIT when the GPU matches the
/// target); Api/PtxAssembler.h says what it may answer.
using PtxAssembler = KilnPtxAssembler;

/// Compiles `source` for `chip` into `outputDir` exactly as kilnc does: per kernel a .ptx and a cubin (from
/// `assembler` when given, called from the compile's worker threads, one kernel per call; from ptxas, when it is
/// installed, otherwise or when the assembler fails, whose reason the manifest then keeps as
/// "in_process_assembly_failed"), constant files and manifest.json; an interrupted assembler ends it with a
/// CompileError and no manifest. `configs`, when not empty, is a JSON array with one entry per tunable kernel:
/// a config in its manifest form, or null to keep that kernel's default. A non-empty `kernelCacheDir`
/// is the kernel cache the compile reads compiled kernel modules from and stores its own in
/// (Driver/KernelCache.h).
void compileGpu(const std::string &source, const std::string &chip, const std::string &outputDir,
                const std::string &configs = "",
                const PtxAssembler &assembler = nullptr, const std::string &kernelCacheDir = "");

} // namespace api
} // namespace kiln

#endif // KILN_API_COMPILER_H
