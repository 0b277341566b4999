//===- GpuCompiler.h - kiln IR to GPU kernels, a manifest and run plans --*- C++ -*-===//
//
// The GPU half of Kiln's driver, shared by kilnc and the Python extension: the kernel stage (outlining,
// configs, kiln-to-gpu), NVVM lowering, PTX emission, ptxas, and the manifest that describes every kernel and
// every public function's run plan. Stages report failures as MLIR diagnostics on the module's context and name
// themselves in `error`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DRIVER_GPUCOMPILER_H
#define KILN_DRIVER_GPUCOMPILER_H

#include "Api/PtxAssembler.h"
#include "Dialect/Kiln/KilnDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <optional>
#include <string>

namespace mlir {
namespace kiln {

/// libdevice: KILN_LIBDEVICE, else from the CUDA toolkit (CUDA_HOME, CUDA_PATH or /usr/local/cuda), or "" when
/// there is none.
std::string findLibdevice();

/// ptxas on PATH or in /usr/local/cuda/bin.
std::optional<std::string> findPtxas();

/// Runs the kernel stage for `chip` (sm_80 or sm_90a): kernels outlined, configured and written as gpu.func
/// kernels beside their host functions. A zero-size tensor, or a kernel whose grid or block no GPU launches, is
/// an error at its op naming it.
LogicalResult runGpuKernelStage(ModuleOp module, Target chip, std::string &error);

/// Lowers the kernels of a module after the kernel stage to the NVVM/LLVM dialects.
LogicalResult runNvvmLowering(ModuleOp module, Target chip, std::string &error);

/// The PTX of one gpu.module (one kernel, after kiln-split-kernel-modules).
struct KernelModulePtx {
  std::string name; ///< the gpu.module's symbol, which names its files
  std::string ptx;
  int64_t microseconds = 0; ///< how long LLVM took to emit it (translation, libdevice, optimiser, NVPTX backend)
};

/// Emits the PTX of every gpu.module of a lowered module through LLVM's NVPTX backend, the modules in parallel
/// on the context's threads, in module order.
FailureOr<SmallVector<KernelModulePtx>> emitPtx(ModuleOp module, std::string &error);

/// One manifest entry per kernel of a module after the kernel stage: name, parameters, launch, config.
llvm::json::Array describeKernels(ModuleOp module);

/// Runs the fusion stage on `module` and returns the ops that become tunable kernels (matmuls and attentions),
/// in kernel order: what the autotuner attaches a #kiln.config to before the rest of the compile.
FailureOr<SmallVector<Operation *>> fuseAndListTunableKernels(ModuleOp module, std::string &error);

/// Assembles PTX into a cubin in process (Api/PtxAssembler.h).
using PtxAssembler = KilnPtxAssembler;

/// The whole compile of a kiln module (modified in place) for `chip` into `outputDir`: for each kernel module
/// <module>.ptx and <module>.<chip>.cubin (from `assembler` when given, else, or when it fails, from ptxas when
/// it is found), lowered, emitted and assembled in parallel; the run plans' constant files; and manifest.json,
/// whose kernel entries name their "ptx" and "cubin" files (its "assembler" names what made the cubins). An
/// assembler that reports an interrupt stops the compile: no module is assembled after it, no manifest written.
/// With a `kernelCacheDir` (Driver/KernelCache.h; one directory per build of the compiler), a kernel module
/// compiled before by any program is taken from there instead of being lowered, emitted and assembled again, and
/// every module compiled here that the assembler of choice made a cubin of is stored there; the manifest's kernel
/// entries then say "kernel_cache": "hit" or "miss", and a cache that could not be written (read-only, full) is
/// no failure: the manifest's "kernel_cache_failed" says why. A file of the compile's own that cannot be written
/// is an error naming it.
LogicalResult compileForGpu(ModuleOp module, Target chip, llvm::StringRef outputDir, std::string &error,
                            const PtxAssembler &assembler = nullptr, llvm::StringRef kernelCacheDir = {});

/// compileForGpu into the folder `outputDir` as a whole: the compile writes into a staging folder (inside
/// `outputDir` when it exists, else beside it), which becomes `outputDir`, or whose files replace an earlier
/// compile's there (the manifest last), only once every file is written. A failed compile leaves `outputDir` as
/// it was and removes the staging folder; `onStaging` is told its path before anything is written there, so that
/// a tool can remove it when interrupted.
LogicalResult compileForGpuFolder(ModuleOp module, Target chip, llvm::StringRef outputDir,
                                  std::string &error, llvm::function_ref<void(llvm::StringRef)> onStaging = {});

} // namespace kiln
} // namespace mlir

#endif // KILN_DRIVER_GPUCOMPILER_H
