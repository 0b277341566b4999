//===- kilnc.cpp - Kiln's ahead-of-time compiler driver ---------------------===//
//
// kilnc in.mlir --target=sm_90a -o outdir [--emit=kiln|tiled|gpu|llvm|ptx|cubin]
//
// Compiles a kiln module for a GPU and writes the kernels (kernels.ptx, and kernels.<target>.cubin when ptxas
// is found) with manifest.json: for each kernel its name, parameters (buffers in order, shape, dtype), launch
// grid and block, dynamic shared memory, config, and ptxas' registers and spills; for each public function its
// run plan (Driver/RunPlan.h) with constants in files beside it. --emit stops at a stage and prints its IR
// instead. Errors name the op and the stage that failed. The stages live in Driver/GpuCompiler.h, shared with
// the Python extension.
//
//===----------------------------------------------------------------------===//

#include "Driver/GpuCompiler.h"
#include "Pipelines/InputModule.h"
#include "Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::kiln;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::init("-"));
static cl::opt<std::string> target("target", cl::desc("GPU target: sm_80 or sm_90a"), cl::init("sm_90a"));
static cl::opt<std::string> outputDir("o", cl::desc("Output directory for kernels and manifest"), cl::init("."));
static cl::opt<std::string> emit("emit", cl::desc("Stop at a stage and print it: kiln, tiled, gpu, llvm, ptx, cubin"),
                                 cl::init("cubin"));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "kilnc: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Kiln ahead-of-time compiler: kiln IR to GPU kernels and a manifest\n");
  static const char *const stages[] = {"kiln", "tiled", "gpu", "llvm", "ptx", "cubin"};
  if (!llvm::is_contained(stages, emit.getValue()))
    return fail("unknown --emit=" + emit + " (expected kiln, tiled, gpu, llvm, ptx or cubin)");
  if (target != "sm_80" && target != "sm_90a")
    return fail("unsupported --target=" + target + " (expected sm_80 or sm_90a)");

  InputModule input(inputFile);
  if (!input.openError().empty())
    return fail(input.openError());
  if (!input.module())
    return 1;
  ModuleOp module = input.module();

  std::string error;
  if (emit == "tiled") {
    KernelPipelineOptions kernelOptions;
    kernelOptions.target = target;
    PassManager pm(module.getContext());
    buildKernelPipeline(pm, kernelOptions);
    if (failed(pm.run(module)))
      return fail("the tiling stage failed (see the diagnostics above)");
    module.print(llvm::outs());
    return 0;
  }
  if (emit == "cubin") {
    if (failed(compileForGpu(module, target, outputDir, error)))
      return fail(error);
    SmallString<256> ptxPath(outputDir), manifestPath(outputDir);
    llvm::sys::path::append(ptxPath, "kernels.ptx");
    llvm::sys::path::append(manifestPath, "manifest.json");
    llvm::outs() << "kilnc: wrote " << ptxPath << " and " << manifestPath << "\n";
    return 0;
  }
  if (failed(runGpuKernelStage(module, target, error)))
    return fail(error);
  if (emit == "kiln" || emit == "gpu") {
    module.print(llvm::outs());
    return 0;
  }
  if (failed(runNvvmLowering(module, target, error)))
    return fail(error);
  if (emit == "llvm") {
    module.print(llvm::outs());
    return 0;
  }
  FailureOr<std::string> ptx = emitPtx(module, error);
  if (failed(ptx))
    return fail(error);
  llvm::outs() << *ptx;
  return 0;
}
