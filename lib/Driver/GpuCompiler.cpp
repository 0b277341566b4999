//===- GpuCompiler.cpp - kiln IR to GPU kernels, a manifest and run plans --===//
//
// The stages kilnc runs, as functions, so that the Python extension compiles for the GPU the same way: the
// kernel pipeline, NVVM lowering, PTX from LLVM's NVPTX backend, a cubin from ptxas when it is installed (the
// runtime falls back to the driver's PTX JIT otherwise), and manifest.json with each kernel's launch and
// ptxas' register and spill report.
//
//===----------------------------------------------------------------------===//

#include "Driver/GpuCompiler.h"

#include "Dialect/Kiln/KilnOps.h"
#include "Driver/RunPlan.h"
#include "Host/HostTensor.h"
#include "Pipelines/Pipelines.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mlir::kiln;

std::string kiln::findLibdevice() {
  if (const char *path = std::getenv("KILN_LIBDEVICE"); path && llvm::sys::fs::exists(path))
    return path;
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(variable)) {
      std::string path = std::string(root) + "/nvvm/libdevice/libdevice.10.bc";
      if (llvm::sys::fs::exists(path))
        return path;
    }
  std::string fallback = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  return llvm::sys::fs::exists(fallback) ? fallback : std::string();
}

std::optional<std::string> kiln::findPtxas() {
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  for (const char *candidate : {"/usr/local/cuda/bin/ptxas"})
    if (llvm::sys::fs::can_execute(candidate))
      return std::string(candidate);
  return std::nullopt;
}

/// Runs one stage; on failure names it in `error` (its diagnostics went to the context's handler).
static LogicalResult runStage(ModuleOp module, llvm::StringRef stage, std::string &error,
                              llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  if (succeeded(pm.run(module)))
    return success();
  error = ("the " + stage + " stage failed (see the diagnostics above)").str();
  return failure();
}

/// Fills pipeline options for `chip` (they are not copyable).
static void setNvvmOptions(NvvmPipelineOptions &options, llvm::StringRef chip) {
  options.chip = chip.str();
  options.libdevice = findLibdevice();
}

FailureOr<SmallVector<Operation *>> kiln::fuseAndListTunableKernels(ModuleOp module, std::string &error) {
  if (failed(runStage(module, "fusion", error, [](OpPassManager &pm) { buildFusionPipeline(pm); })))
    return failure();
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<MatmulOp, AttentionOp>(op))
      ops.push_back(op);
  });
  return ops;
}

LogicalResult kiln::runGpuKernelStage(ModuleOp module, llvm::StringRef chip, std::string &error) {
  if (chip != "sm_80" && chip != "sm_90a") {
    error = ("unsupported GPU target '" + chip + "' (expected sm_80 or sm_90a)").str();
    return failure();
  }
  NvvmPipelineOptions options;
  setNvvmOptions(options, chip);
  return runStage(module, "kernel", error, [&](OpPassManager &pm) { buildGpuKernelPipeline(pm, options); });
}

LogicalResult kiln::runNvvmLowering(ModuleOp module, llvm::StringRef chip, std::string &error) {
  NvvmPipelineOptions options;
  setNvvmOptions(options, chip);
  return runStage(module, "NVVM lowering", error, [&](OpPassManager &pm) { buildNvvmLoweringPipeline(pm, options); });
}

FailureOr<std::string> kiln::emitPtx(ModuleOp module, std::string &error) {
  if (failed(runStage(module, "PTX emission", error, [&](OpPassManager &pm) {
        GpuModuleToBinaryPassOptions binaryOptions;
        binaryOptions.compilationTarget = "isa";
        pm.addPass(createGpuModuleToBinaryPass(binaryOptions));
      })))
    return failure();
  std::string ptx;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects())
      ptx += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  });
  if (ptx.empty()) {
    error = "the module has no GPU kernels to emit (no public function computes anything)";
    return failure();
  }
  return ptx;
}

static llvm::json::Array jsonArray(ArrayRef<int64_t> values) {
  llvm::json::Array array;
  for (int64_t v : values)
    array.push_back(v);
  return array;
}

llvm::json::Array kiln::describeKernels(ModuleOp module) {
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
    // The kernel op and its config; a grouped kernel (kiln-group-kernels) runs several ops of one kind and lists
    // every member's config in order.
    llvm::json::Array configs;
    for (Operation &op : func.getBody().front()) {
      if (!isa<KilnDialect>(op.getDialect()))
        continue;
      entry["op"] = op.getName().getStringRef().str();
      ConfigAttr config = getConfig(&op);
      configs.push_back(config ? llvm::json::Value(llvm::json::Object{{"tile", jsonArray(config.getTile())},
                                                                      {"warps", config.getWarps()},
                                                                      {"stages", config.getStages()},
                                                                      {"lowering", config.getLowering().str()}})
                               : llvm::json::Value(nullptr));
    }
    if (!configs.empty() && configs.front().getAsObject())
      entry["config"] = configs.front();
    if (configs.size() > 1) {
      entry["group"] = static_cast<int64_t>(configs.size());
      entry["configs"] = std::move(configs);
    }
    kernels.push_back(std::move(entry));
  }
  return kernels;
}

/// Adds ptxas' per-kernel report (registers, spill stores and loads) to the manifest's kernel entries.
static void attachPtxasReport(llvm::json::Array &kernels, llvm::StringRef log) {
  llvm::StringRef current;
  SmallVector<llvm::StringRef> lines;
  log.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (size_t at = line.find("Compiling entry function '"); at != llvm::StringRef::npos) {
      current = line.drop_front(at + strlen("Compiling entry function '")).take_until([](char c) { return c == '\''; });
      continue;
    }
    for (llvm::json::Value &value : kernels) {
      llvm::json::Object &kernel = *value.getAsObject();
      if (kernel.getString("name") != current)
        continue;
      int64_t number = 0;
      if (size_t at = line.find("Used "); at != llvm::StringRef::npos &&
                                          !line.drop_front(at + 5).take_until([](char c) { return c == ' '; })
                                               .getAsInteger(10, number))
        kernel["registers"] = number;
      if (size_t at = line.find(" bytes spill stores"); at != llvm::StringRef::npos) {
        llvm::StringRef before = line.take_front(at).rtrim();
        llvm::StringRef stores = before.drop_front(before.find_last_of(' ') + 1);
        if (!stores.getAsInteger(10, number))
          kernel["spill_stores"] = number;
        size_t loadsAt = line.find(" bytes spill loads");
        llvm::StringRef head = line.take_front(loadsAt).rtrim();
        if (loadsAt != llvm::StringRef::npos && !head.drop_front(head.find_last_of(' ') + 1).getAsInteger(10, number))
          kernel["spill_loads"] = number;
      }
    }
  }
}

static LogicalResult writeFile(llvm::StringRef path, llvm::StringRef contents, std::string &error) {
  auto file = openOutputFile(path, &error);
  if (!file)
    return failure();
  file->os() << contents;
  file->keep();
  return success();
}

/// Writes the cubin of `ptxPath` to `cubinPath` with ptxas (-O3, -v) and returns its log; nothing when ptxas is
/// not installed.
static FailureOr<std::optional<std::string>> assembleWithPtxas(llvm::StringRef ptxPath, llvm::StringRef chip,
                                                              llvm::StringRef cubinPath, llvm::StringRef outputDir,
                                                              std::string &error) {
  std::optional<std::string> ptxas = findPtxas();
  if (!ptxas)
    return std::optional<std::string>();
  SmallString<256> logPath(outputDir);
  llvm::sys::path::append(logPath, "ptxas.log");
  std::string arch = ("-arch=" + chip).str();
  SmallVector<llvm::StringRef> args{*ptxas, arch, "-v", "-O3", ptxPath, "-o", cubinPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(logPath), llvm::StringRef(logPath)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 0, 0, &message);
  auto log = llvm::MemoryBuffer::getFile(logPath);
  (void)llvm::sys::fs::remove(logPath);
  if (status != 0) {
    error = ("ptxas failed on " + ptxPath + ": " + (log ? (*log)->getBuffer() : llvm::StringRef(message))).str();
    return failure();
  }
  return std::optional<std::string>(log ? (*log)->getBuffer().str() : std::string());
}

LogicalResult kiln::compileForGpu(ModuleOp module, llvm::StringRef chip, llvm::StringRef outputDir,
                                  std::string &error, const PtxAssembler &assembler) {
  if (failed(runGpuKernelStage(module, chip, error)))
    return failure();
  llvm::json::Array kernels = describeKernels(module);
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
    error = ("cannot create " + outputDir + ": " + ec.message()).str();
    return failure();
  }
  FailureOr<llvm::json::Array> plans = describeRunPlans(module, outputDir);
  if (failed(plans)) {
    error = "the run plan stage failed (see the diagnostics above)";
    return failure();
  }
  if (failed(runNvvmLowering(module, chip, error)))
    return failure();
  FailureOr<std::string> ptx = emitPtx(module, error);
  if (failed(ptx))
    return failure();

  SmallString<256> ptxPath(outputDir);
  llvm::sys::path::append(ptxPath, "kernels.ptx");
  if (failed(writeFile(ptxPath, *ptx, error)))
    return failure();
  llvm::json::Object manifest{{"target", chip.str()},
                              {"ptx", "kernels.ptx"},
                              {"abi", "parameters are device pointers to row-major buffers, in order"},
                              {"kernels", std::move(kernels)},
                              {"plans", std::move(*plans)}};
  // The cubin: from the in-process assembler when there is one, else (or when it fails) from ptxas.
  std::string cubinName = ("kernels." + chip + ".cubin").str();
  SmallString<256> cubinPath(outputDir);
  llvm::sys::path::append(cubinPath, cubinName);
  std::optional<std::string> log;
  if (assembler) {
    std::string cubin, assemblerLog;
    if (assembler(*ptx, cubin, assemblerLog)) {
      if (failed(writeFile(cubinPath, cubin, error)))
        return failure();
      log = std::move(assemblerLog);
      manifest["assembler"] = "the CUDA driver's JIT";
    } else {
      manifest["in_process_assembly_failed"] = assemblerLog;
    }
  }
  if (!log) {
    FailureOr<std::optional<std::string>> ptxasLog = assembleWithPtxas(ptxPath, chip, cubinPath, outputDir, error);
    if (failed(ptxasLog))
      return failure();
    log = *ptxasLog;
    if (log)
      manifest["assembler"] = "ptxas";
  }
  if (log) {
    manifest["cubin"] = cubinName;
    manifest["ptxas"] = *log;
    attachPtxasReport(*manifest.getArray("kernels"), *log);
  } else {
    manifest["cubin"] = nullptr;
    manifest["ptxas"] = "ptxas not found: the runtime JIT-compiles kernels.ptx through the driver";
  }
  SmallString<256> manifestPath(outputDir);
  llvm::sys::path::append(manifestPath, "manifest.json");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  return writeFile(manifestPath, text, error);
}
