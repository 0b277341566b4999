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

/// One kernel's strategy: output tile, warps per block, pipeline stages and the kernel that runs it
/// (#kiln.config): "mma_sync" (sm_80 and sm_90a) or "wgmma" (matmuls and attention on sm_90a).
struct KernelConfig {
  std::vector<int64_t> tile;
  int64_t warps = 0;
  int64_t stages = 0;
  std::string lowering = "mma_sync";
};

/// A tunable kernel (a matmul or an attention) and the config the target would give it by default.
struct TunableKernel {
  std::string opName;
  KernelConfig defaultConfig;
};

/// The names of the targets Kiln compiles for (the dialect's Target enum): "host", then the GPU targets.
std::vector<std::string> targetNames();

/// The module printed after a target-independent stage: "kiln" (as parsed), "fused" or "tiled".
std::string sourceIr(const std::string &source, const std::string &stage);

/// The module after the GPU kernel stage ("gpu") or after NVVM lowering ("llvm") for `chip`.
std::string gpuIr(const std::string &source, const std::string &chip, const std::string &stage);

/// The tunable kernels of `source`, in kernel order, with the default config for `chip` (sm_80 or sm_90a).
std::vector<TunableKernel> tunableKernels(const std::string &source, const std::string &chip);

/// Assembles PTX into a cubin in process (the Python JIT passes the CUDA driver's JIT when the GPU matches the
/// target); Api/PtxAssembler.h says what it may answer.
using PtxAssembler = KilnPtxAssembler;

/// Compiles `source` for `chip` into `outputDir` exactly as kilnc does: per kernel a .ptx and a cubin (from
/// `assembler` when given, called from the compile's worker threads, one kernel per call; from ptxas, when it is
/// installed, otherwise or when the assembler fails, whose reason the manifest then keeps as
/// "in_process_assembly_failed"), constant files and manifest.json; an interrupted assembler ends it with a
/// CompileError and no manifest. `configs`, when given,
/// has one entry per tunable kernel; an empty entry keeps that kernel's default. A non-empty `kernelCacheDir`
/// is the kernel cache the compile reads compiled kernel modules from and stores its own in
/// (Driver/KernelCache.h).
void compileGpu(const std::string &source, const std::string &chip, const std::string &outputDir,
                const std::vector<std::optional<KernelConfig>> *configs = nullptr,
                const PtxAssembler &assembler = nullptr, const std::string &kernelCacheDir = "");

} // namespace api
} // namespace kiln

#endif // KILN_API_COMPILER_H
