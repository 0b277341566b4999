//===- Compiler.cpp - Kiln's compiler behind a plain C++ interface ---------===//
//
// The GPU compiler and the target-independent stages for the Python extension (see Api/Compiler.h): each call
// parses its source into a fresh context, runs the same pipeline builders as kiln-opt and kilnc, and turns a
// failure into a CompileError that carries the diagnostics.
//
//===----------------------------------------------------------------------===//

#include "Api/Compiler.h"

#include "ParsedSource.h"

#include "Dialect/Kiln/KilnDialect.h"
#include "Driver/ConfigJson.h"
#include "Driver/GpuCompiler.h"
#include "Pipelines/Pipelines.h"
#include "Transforms/Transforms.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::kiln;

namespace kiln {
namespace api {

std::string sourceIr(const std::string &source, const std::string &stage) {
  ParsedSource parsed(source);
  if (stage == "kiln")
    return printModule(parsed.module());
  PassManager pm(&parsed.context());
  if (stage == "fused")
    buildFusionPipeline(pm);
  else if (stage == "tiled")
    buildKernelPipeline(pm, KernelPipelineOptions());
  else
    throw InvalidArgument("unknown stage '" + stage + "' (target-independent stages: kiln, fused, tiled)");
  if (failed(pm.run(parsed.module())))
    throw CompileError("the '" + stage + "' stage failed:\n" + parsed.takeDiagnostics());
  return printModule(parsed.module());
}

std::vector<std::string> targetNames() {
  std::vector<std::string> names;
  for (uint32_t value = 0; value <= getMaxEnumValForTarget(); ++value)
    if (std::optional<Target> target = symbolizeTarget(value))
      names.push_back(stringifyTarget(*target).str());
  return names;
}

/// The GPU target named `chip`, or InvalidArgument: where the API parses the name, once per call.
static Target gpuTarget(const std::string &chip) {
  std::optional<Target> target = symbolizeTarget(chip);
  if (!target || *target == Target::Host) {
    std::string names;
    for (const std::string &name : targetNames())
      names += (names.empty() ? "" : ", ") + name;
    throw InvalidArgument("unsupported target '" + chip + "' for a GPU compile (Kiln's targets: " + names + ")");
  }
  return *target;
}

std::string gpuIr(const std::string &source, const std::string &chip, const std::string &stage) {
  if (stage != "gpu" && stage != "llvm")
    throw InvalidArgument("unknown stage '" + stage + "' (GPU stages: gpu, llvm)");
  Target target = gpuTarget(chip);
  ParsedSource parsed(source);
  std::string error;
  ModuleOp module = parsed.module();
  if (failed(runGpuKernelStage(module, target, error)) ||
      (stage == "llvm" && failed(runNvvmLowering(module, target, error))))
    throw CompileError("the '" + stage + "' stage for " + chip + " failed: " + error + "\n" + parsed.takeDiagnostics());
  return printModule(module);
}

/// The tunable kernel ops of the fused `parsed` module.
static SmallVector<Operation *> listTunable(ParsedSource &parsed) {
  std::string error;
  FailureOr<SmallVector<Operation *>> ops = fuseAndListTunableKernels(parsed.module(), error);
  if (failed(ops))
    throw CompileError(error + "\n" + parsed.takeDiagnostics());
  return *ops;
}

std::string tunableKernels(const std::string &source, const std::string &chip) {
  Target target = gpuTarget(chip);
  ParsedSource parsed(source);
  llvm::json::Array kernels;
  for (Operation *op : listTunable(parsed))
    kernels.push_back(llvm::json::Object{{"op", op->getName().getStringRef().str()},
                                         {"config", configToJson(getDefaultConfig(op, target))}});
  return llvm::formatv("{0}", llvm::json::Value(std::move(kernels))).str();
}

void compileGpu(const std::string &source, const std::string &chip, const std::string &outputDir,
                const std::string &configs, const PtxAssembler &assembler, const std::string &kernelCacheDir) {
  Target target = gpuTarget(chip);
  ParsedSource parsed(source);
  if (!configs.empty()) {
    llvm::Expected<llvm::json::Value> pinned = llvm::json::parse(configs);
    const llvm::json::Array *list = pinned ? pinned->getAsArray() : nullptr;
    if (!list) {
      std::string why = pinned ? "not an array" : llvm::toString(pinned.takeError());
      throw InvalidArgument("configs must be a JSON array of configs or nulls (" + why + ")");
    }
    SmallVector<Operation *> ops = listTunable(parsed);
    if (ops.size() != list->size())
      throw InvalidArgument("configs has " + std::to_string(list->size()) + " entries but the program has " +
                            std::to_string(ops.size()) + " tunable kernels");
    for (auto [op, config] : llvm::zip(ops, *list)) {
      if (config.kind() == llvm::json::Value::Null)
        continue;
      auto emitError = [op = op] { return op->emitError("invalid config: "); };
      ConfigAttr attr = configFromJson(config, op->getContext(), emitError);
      if (!attr)
        throw CompileError("invalid kernel config:\n" + parsed.takeDiagnostics());
      op->setAttr(kConfigAttrName, attr);
    }
  }
  std::string error;
  if (failed(compileForGpu(parsed.module(), target, outputDir, error, assembler, kernelCacheDir)))
    throw CompileError("compiling for " + chip + " failed: " + error + "\n" + parsed.takeDiagnostics());
}

} // namespace api
} // namespace kiln
