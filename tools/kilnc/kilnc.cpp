//===- kilnc.cpp - Kiln's ahead-of-time compiler driver ---------------------===//
//
// kilnc in.mlir --target=sm_90a -o outdir [--emit=kiln|tiled|gpu|llvm|ptx|cubin]
//
// Compiles a kiln module for a GPU and writes the kernels (kernels.ptx, and kernels.<target>.cubin when ptxas
// is found) with manifest.json: for each kernel its name, parameters (buffers in order, shape, dtype), launch
// grid and block, dynamic shared memory, config, and ptxas' registers and spills; for each public function its
// run plan (RunPlan.h) with constants in files beside it. --emit stops at a
// stage and prints its IR instead. Errors name the op and the stage that failed.
//
//===----------------------------------------------------------------------===//

#include "Dialect/Kiln/KilnOps.h"
#include "Host/HostTensor.h"
#include "Pipelines/InputModule.h"
#include "Pipelines/Pipelines.h"
#include "RunPlan.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"

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

/// Runs one stage; on failure its diagnostics have been printed, and the stage is named.
static bool runStage(ModuleOp module, StringRef stage, llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  if (succeeded(pm.run(module)))
    return true;
  llvm::errs() << "kilnc: error: the " << stage << " stage failed (see the diagnostics above)\n";
  return false;
}

/// libdevice from the CUDA toolkit, if there is one: CUDA_HOME, CUDA_PATH, or /usr/local/cuda.
static std::string findLibdevice() {
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(variable)) {
      std::string path = std::string(root) + "/nvvm/libdevice/libdevice.10.bc";
      if (llvm::sys::fs::exists(path))
        return path;
    }
  std::string fallback = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  return llvm::sys::fs::exists(fallback) ? fallback : std::string();
}

/// ptxas on PATH or in the CUDA toolkit.
static std::optional<std::string> findPtxas() {
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  for (const char *candidate : {"/usr/local/cuda/bin/ptxas"})
    if (llvm::sys::fs::can_execute(candidate))
      return std::string(candidate);
  return std::nullopt;
}

static llvm::json::Array jsonArray(ArrayRef<int64_t> values) {
  llvm::json::Array array;
  for (int64_t v : values)
    array.push_back(v);
  return array;
}

/// One manifest entry per kernel function carrying kiln.gpu_kernel.
static llvm::json::Array describeKernels(ModuleOp module) {
  llvm::json::Array kernels;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto launch = func->getAttrOfType<DictionaryAttr>("kiln.launch");
    if (!launch)
      continue;
    llvm::json::Array params;
    FunctionType type = func.getFunctionType();
    unsigned numInputs = type.getNumInputs() - type.getNumResults();
    for (auto [index, argType] : llvm::enumerate(type.getInputs())) {
      auto tensor = cast<RankedTensorType>(argType);
      std::optional<ElementKind> kind = elementKindOf(tensor.getElementType());
      params.push_back(llvm::json::Object{
          {"name", index < numInputs ? ("in" + llvm::Twine(index)).str() : std::string("out")},
          {"role", index < numInputs ? "input" : "output"},
          {"shape", jsonArray(tensor.getShape())},
          {"dtype", kind ? elementName(*kind).str() : std::string("unknown")}});
    }
    llvm::json::Object entry{{"name", func.getSymName().str()},
                             {"params", std::move(params)},
                             {"grid", jsonArray(cast<DenseI64ArrayAttr>(launch.get("grid")).asArrayRef())},
                             {"block", jsonArray(cast<DenseI64ArrayAttr>(launch.get("block")).asArrayRef())},
                             {"dynamic_shared_bytes",
                              cast<IntegerAttr>(launch.get("dynamic_shared_bytes")).getInt()}};
    func.walk([&](Operation *op) {
      if (ConfigAttr config = getConfig(op)) {
        entry["op"] = op->getName().getStringRef().str();
        entry["config"] = llvm::json::Object{{"tile", jsonArray(config.getTile())},
                                             {"warps", config.getWarps()},
                                             {"stages", config.getStages()},
                                             {"lowering", config.getLowering().str()}};
      }
    });
    kernels.push_back(std::move(entry));
  }
  return kernels;
}

/// The PTX text of the module's gpu.binary (one object for the target).
static FailureOr<std::string> extractPtx(ModuleOp module) {
  std::string ptx;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects())
      ptx += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  });
  if (ptx.empty())
    return failure();
  return ptx;
}

/// Adds ptxas' per-kernel report (registers, spill stores and loads) to the manifest's kernel entries.
static void attachPtxasReport(llvm::json::Array &kernels, StringRef log) {
  StringRef current;
  SmallVector<StringRef> lines;
  log.split(lines, '\n');
  for (StringRef line : lines) {
    if (size_t at = line.find("Compiling entry function '"); at != StringRef::npos) {
      current = line.drop_front(at + strlen("Compiling entry function '")).take_until([](char c) { return c == '\''; });
      continue;
    }
    for (llvm::json::Value &value : kernels) {
      llvm::json::Object &kernel = *value.getAsObject();
      if (kernel.getString("name") != current)
        continue;
      int64_t number = 0;
      if (size_t at = line.find("Used "); at != StringRef::npos &&
                                          !line.drop_front(at + 5).take_until([](char c) { return c == ' '; })
                                               .getAsInteger(10, number))
        kernel["registers"] = number;
      if (size_t at = line.find(" bytes spill stores"); at != StringRef::npos) {
        StringRef before = line.take_front(at).rtrim();
        StringRef stores = before.drop_front(before.find_last_of(' ') + 1);
        if (!stores.getAsInteger(10, number))
          kernel["spill_stores"] = number;
        size_t loadsAt = line.find(" bytes spill loads");
        StringRef head = line.take_front(loadsAt).rtrim();
        if (loadsAt != StringRef::npos && !head.drop_front(head.find_last_of(' ') + 1).getAsInteger(10, number))
          kernel["spill_loads"] = number;
      }
    }
  }
}

static bool writeFile(StringRef path, StringRef contents) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file) {
    llvm::errs() << "kilnc: error: " << error << "\n";
    return false;
  }
  file->os() << contents;
  file->keep();
  return true;
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

  NvvmPipelineOptions options;
  options.chip = target;
  options.libdevice = findLibdevice();
  if (emit == "tiled") {
    KernelPipelineOptions kernelOptions;
    kernelOptions.target = target;
    if (!runStage(module, "tiling", [&](OpPassManager &pm) { buildKernelPipeline(pm, kernelOptions); }))
      return 1;
    module.print(llvm::outs());
    return 0;
  }
  if (!runStage(module, "kernel", [&](OpPassManager &pm) { buildGpuKernelPipeline(pm, options); }))
    return 1;
  if (emit == "kiln" || emit == "gpu") {
    module.print(llvm::outs());
    return 0;
  }
  llvm::json::Array kernels = describeKernels(module);
  bool writesFiles = emit == "cubin";
  if (writesFiles)
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return fail("cannot create " + outputDir + ": " + ec.message());
  FailureOr<llvm::json::Array> plans =
      writesFiles ? describeRunPlans(module, outputDir) : FailureOr<llvm::json::Array>(llvm::json::Array());
  if (failed(plans))
    return fail("the run plan stage failed (see the diagnostics above)");
  if (!runStage(module, "NVVM lowering", [&](OpPassManager &pm) { buildNvvmLoweringPipeline(pm, options); }))
    return 1;
  if (emit == "llvm") {
    module.print(llvm::outs());
    return 0;
  }
  if (!runStage(module, "PTX emission", [&](OpPassManager &pm) {
        GpuModuleToBinaryPassOptions binaryOptions;
        binaryOptions.compilationTarget = "isa";
        pm.addPass(createGpuModuleToBinaryPass(binaryOptions));
      }))
    return 1;
  FailureOr<std::string> ptx = extractPtx(module);
  if (failed(ptx))
    return fail("the module has no GPU kernels to emit (no kiln.matmul kernel found)");
  if (emit == "ptx") {
    llvm::outs() << *ptx;
    return 0;
  }

  SmallString<256> ptxPath(outputDir);
  llvm::sys::path::append(ptxPath, "kernels.ptx");
  if (!writeFile(ptxPath, *ptx))
    return 1;
  llvm::json::Object manifest{{"target", target.getValue()},
                              {"ptx", "kernels.ptx"},
                              {"abi", "parameters are device pointers to row-major buffers, in order"},
                              {"kernels", std::move(kernels)},
                              {"plans", std::move(*plans)}};
  if (std::optional<std::string> ptxas = findPtxas()) {
    SmallString<256> cubinPath(outputDir), logPath(outputDir);
    llvm::sys::path::append(cubinPath, "kernels." + target + ".cubin");
    llvm::sys::path::append(logPath, "ptxas.log");
    std::string arch = "-arch=" + target;
    SmallVector<StringRef> args{*ptxas, arch, "-v", "-O3", ptxPath, "-o", cubinPath};
    std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath), StringRef(logPath)};
    std::string message;
    int status = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 0, 0, &message);
    auto log = llvm::MemoryBuffer::getFile(logPath);
    if (status != 0)
      return fail("ptxas failed on " + ptxPath + ": " + (log ? (*log)->getBuffer() : StringRef(message)));
    manifest["cubin"] = "kernels." + target.getValue() + ".cubin";
    manifest["ptxas"] = log ? (*log)->getBuffer().str() : std::string();
    if (log)
      attachPtxasReport(*manifest.getArray("kernels"), (*log)->getBuffer());
  } else {
    manifest["cubin"] = nullptr;
    manifest["ptxas"] = "ptxas not found: the runtime JIT-compiles kernels.ptx through the driver";
  }
  SmallString<256> manifestPath(outputDir);
  llvm::sys::path::append(manifestPath, "manifest.json");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  if (!writeFile(manifestPath, text))
    return 1;
  llvm::outs() << "kilnc: wrote " << ptxPath << " and " << manifestPath << "\n";
  return 0;
}
