//===- kilnc.cpp - Kiln's ahead-of-time compiler driver ---------------------===//
//
// kilnc in.mlir --target=sm_90a -o outdir [--emit=kiln|tiled|gpu|llvm|ptx|cubin]
// kilnc model.onnx --target=sm_90a -o outdir [--weights=constants|arguments]
//
// Compiles a kiln module for a GPU and writes the kernels (one <module>.ptx per kernel, and its
// <module>.<target>.cubin when ptxas is found) with manifest.json: for each kernel its name, its files,
// parameters (buffers in order, shape, dtype), launch grid and block, dynamic shared memory, config, and
// ptxas' registers and spills; for each public function its run plan (Driver/RunPlan.h) with constants in
// files beside it. --emit stops at a stage and prints its IR instead. Errors name the op and the stage that failed. The stages live in Driver/GpuCompiler.h, shared with
// the Python extension. An .onnx input is imported first by kiln.frontend (the Python importer of this build,
// run as `python3 -m kiln.frontend.cli`); its errors are kilnc's. The output folder appears, or an earlier
// compile's files in it are replaced, only once the compile has written everything: a failed or interrupted
// compile (Ctrl-C, SIGTERM) leaves it as it was and no staging folder.
//
//===----------------------------------------------------------------------===//

#include "Driver/GpuCompiler.h"
#include "Pipelines/InputModule.h"
#include "Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"

#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::kiln;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::init("-"));
static cl::opt<Target> target("target", cl::desc("GPU target: sm_80 or sm_90a"), cl::init(Target::Sm90a),
                              KILN_GPU_TARGET_VALUES);
static cl::opt<std::string> outputDir("o", cl::desc("Output directory for kernels and manifest"), cl::init("."));
static cl::opt<std::string> emit("emit", cl::desc("Stop at a stage and print it: kiln, tiled, gpu, llvm, ptx, cubin"),
                                 cl::init("cubin"));

static cl::opt<std::string> weights("weights",
                                    cl::desc("For an .onnx input: initializers as constants or as arguments"),
                                    cl::init("constants"));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "kilnc: error: " << message << "\n";
  return 1;
}

/// The staging folder of the compile under way, as a C string: the interrupt handler may not allocate.
static char stagingFolder[4096];

/// Runs on Ctrl-C or SIGTERM (LLVM's signal handler calls it): removes the staging folder, which holds files
/// only, with system calls alone (another thread may hold the allocator's lock), then ends the process as Ctrl-C
/// does.
static void removeStagingFolder() {
  int folder = open(stagingFolder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    // Listing while removing may skip entries: list again until a pass finds nothing left.
    for (bool removed = true; removed;) {
      removed = false;
      alignas(struct dirent64) char buffer[4096];
      lseek(folder, 0, SEEK_SET);
      for (ssize_t size; (size = getdents64(folder, buffer, sizeof buffer)) > 0;)
        for (ssize_t at = 0; at < size;) {
          auto *entry = reinterpret_cast<struct dirent64 *>(buffer + at);
          if (std::strcmp(entry->d_name, ".") && std::strcmp(entry->d_name, ".."))
            removed |= unlinkat(folder, entry->d_name, 0) == 0;
          at += entry->d_reclen;
        }
    }
    close(folder);
    rmdir(stagingFolder);
  }
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
}

/// Imports an ONNX model with kiln.frontend into a temporary .mlir file; returns its path, or "" after printing
/// the importer's error.
static std::string importOnnx(llvm::StringRef model) {
  llvm::SmallString<128> output, log;
  if (llvm::sys::fs::createTemporaryFile("kilnc-import", "mlir", output) ||
      llvm::sys::fs::createTemporaryFile("kilnc-import", "log", log)) {
    fail("cannot create a temporary file for the imported model");
    return "";
  }
  std::string pythonPath = std::string("PYTHONPATH=") + KILN_PYTHON_PACKAGE_ROOT;
  if (const char *existing = std::getenv("PYTHONPATH"))
    pythonPath += std::string(":") + existing;
  std::vector<std::string> environment{pythonPath};
  for (char **entry = environ; *entry; ++entry)
    if (!llvm::StringRef(*entry).starts_with("PYTHONPATH="))
      environment.push_back(*entry);
  llvm::SmallVector<llvm::StringRef> env(environment.begin(), environment.end());
  std::string weightsFlag = "--weights=" + weights;
  llvm::SmallVector<llvm::StringRef> args{KILN_PYTHON_EXECUTABLE, "-m", "kiln.frontend.cli", model, "-o", output,
                                          weightsFlag};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(KILN_PYTHON_EXECUTABLE, args, env, redirects, 0, 0, &message);
  auto text = llvm::MemoryBuffer::getFile(log);
  llvm::sys::fs::remove(log);
  if (status != 0) {
    llvm::errs() << (text ? (*text)->getBuffer() : llvm::StringRef(message));
    fail("importing " + model + " failed");
    llvm::sys::fs::remove(output);
    return "";
  }
  return output.str().str();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Kiln ahead-of-time compiler: kiln IR to GPU kernels and a manifest\n");
  static const char *const stages[] = {"kiln", "tiled", "gpu", "llvm", "ptx", "cubin"};
  if (!llvm::is_contained(stages, emit.getValue()))
    return fail("unknown --emit=" + emit + " (expected kiln, tiled, gpu, llvm, ptx or cubin)");

  std::string source = inputFile;
  bool onnx = llvm::StringRef(inputFile).ends_with(".onnx");
  if (onnx && (source = importOnnx(inputFile)).empty())
    return 1;
  InputModule input(source);
  if (onnx)
    llvm::sys::fs::remove(source);
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
    auto removeOnInterrupt = [](llvm::StringRef staging) {
      if (staging.size() >= sizeof stagingFolder)
        return;
      std::memcpy(stagingFolder, staging.data(), staging.size());
      stagingFolder[staging.size()] = '\0';
      llvm::sys::SetInterruptFunction(removeStagingFolder);
    };
    if (failed(compileForGpuFolder(module, target, outputDir, error, removeOnInterrupt)))
      return fail(error);
    SmallString<256> manifestPath(outputDir);
    llvm::sys::path::append(manifestPath, "manifest.json");
    llvm::outs() << "kilnc: wrote " << manifestPath << " and the kernels it lists\n";
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
  FailureOr<SmallVector<KernelModulePtx>> ptx = emitPtx(module, error);
  if (failed(ptx))
    return fail(error);
  for (const KernelModulePtx &kernelModule : *ptx)
    llvm::outs() << kernelModule.ptx;
  return 0;
}
