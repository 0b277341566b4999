//===- KilnModule.cpp - The _kiln Python extension --------------------------===//
//
// The native half of the `kiln` package: it parses kiln IR, runs the same pipeline builders as kiln-opt, kilnc
// and kiln-run, executes host-compiled programs on numpy buffers, and compiles GPU kernels and their manifest
// (Driver/GpuCompiler.h) for the Python runtime to launch. Every MLIR diagnostic is captured into
// the text of a Python exception, so a bad input never reaches stderr alone and never aborts the interpreter.
// Type checking of user arrays lives in Python (kiln/compiler.py), where argument names are known.
//
//===----------------------------------------------------------------------===//

#include "Driver/GpuCompiler.h"
#include "Host/HostExecutable.h"
#include "Pipelines/InputModule.h"
#include "Pipelines/Pipelines.h"
#include "Transforms/Transforms.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

namespace py = pybind11;
using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Raised (as kiln.CompileError) when IR is malformed or a pipeline fails; the message carries the diagnostics.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One thread pool for every program's context: a context would otherwise start its own threads, and a process
/// that compiles many signatures would keep two per program alive.
static llvm::ThreadPoolInterface &sharedThreadPool() {
  static llvm::DefaultThreadPool pool;
  return pool;
}

/// A kiln module parsed from text, with the stages of the host pipeline it can be shown at and a compiled
/// executable of its entry function.
class HostProgram {
public:
  HostProgram(const std::string &source, const std::string &entry)
      : input(source, "<kiln source>", diagnosticStream, &sharedThreadPool()) {
    ModuleOp module = input.module();
    if (!module)
      throw CompileError("invalid kiln IR:\n" + takeDiagnostics());
    if (entry.empty()) {
      llvm::Expected<std::string> found = HostExecutable::defaultEntry(module);
      if (!found)
        throw CompileError(llvm::toString(found.takeError()) + "; pass entry=NAME");
      entryName = *found;
    } else {
      entryName = entry;
    }
    HostPipelineOptions options;
    auto compiled = HostExecutable::compile(module, entryName, options);
    if (failed(compiled))
      throw CompileError("compiling '" + entryName + "' for the host failed:\n" + takeDiagnostics());
    executable = std::move(*compiled);
  }

  /// The module printed after `stage`: kiln (as parsed), fused, tiled, loops or llvm.
  std::string ir(const std::string &stage) {
    if (stage == "kiln")
      return print(input.module());
    OwningOpRef<ModuleOp> copy = input.module().clone();
    PassManager pm(&input.getContext());
    LogicalResult built = success();
    HostPipelineOptions hostOptions;
    if (stage == "fused") {
      buildFusionPipeline(pm);
    } else if (stage == "tiled") {
      buildKernelPipeline(pm, KernelPipelineOptions());
    } else if (stage == "loops") {
      built = buildHostLoopsPipeline(pm, hostOptions);
    } else if (stage == "llvm") {
      built = buildHostPipeline(pm, hostOptions);
    } else {
      throw py::value_error("unknown stage '" + stage + "' (host stages: kiln, fused, tiled, loops, llvm)");
    }
    if (failed(built) || failed(pm.run(*copy)))
      throw CompileError("the '" + stage + "' stage failed:\n" + takeDiagnostics());
    return print(*copy);
  }

  /// Signatures as (dtype name, shape) pairs.
  static py::list describe(llvm::ArrayRef<TensorSignature> signatures) {
    py::list list;
    for (const TensorSignature &signature : signatures)
      list.append(py::make_tuple(elementName(signature.kind).str(),
                                 std::vector<int64_t>(signature.shape.begin(), signature.shape.end())));
    return list;
  }
  py::list inputs() const { return describe(executable->inputs()); }
  py::list outputs() const { return describe(executable->outputs()); }
  const std::string &entry() const { return entryName; }

  /// Runs the entry on C-contiguous arrays already checked against `inputs()`; returns one array per output,
  /// as raw bytes for Python to view with the right dtype.
  py::list run(const std::vector<py::array> &arrays) const {
    std::vector<HostTensor> tensors;
    llvm::ArrayRef<TensorSignature> signatures = executable->inputs();
    if (arrays.size() != signatures.size())
      throw py::value_error("expected " + std::to_string(signatures.size()) + " arrays, got " +
                            std::to_string(arrays.size()));
    for (size_t i = 0; i < arrays.size(); ++i) {
      HostTensor tensor = HostTensor::zeros(signatures[i].kind, signatures[i].shape);
      if (static_cast<size_t>(arrays[i].nbytes()) != tensor.bytes.size())
        throw py::value_error("argument " + std::to_string(i) + " has " + std::to_string(arrays[i].nbytes()) +
                              " bytes, expected " + std::to_string(tensor.bytes.size()));
      std::memcpy(tensor.bytes.data(), arrays[i].data(), tensor.bytes.size());
      tensors.push_back(std::move(tensor));
    }
    llvm::Expected<std::vector<HostTensor>> results = [&] {
      py::gil_scoped_release release;
      return executable->run(tensors);
    }();
    if (!results)
      throw py::value_error(llvm::toString(results.takeError()));
    py::list list;
    for (HostTensor &result : *results)
      list.append(py::bytes(reinterpret_cast<const char *>(result.bytes.data()), result.bytes.size()));
    return list;
  }

private:
  static std::string print(ModuleOp op) {
    std::string text;
    llvm::raw_string_ostream os(text);
    op.print(os);
    return text;
  }
  std::string takeDiagnostics() {
    std::string text = diagnosticText.empty() ? std::string("(no diagnostic was emitted)") : diagnosticText;
    diagnosticText.clear();
    return text;
  }

  std::string diagnosticText;
  llvm::raw_string_ostream diagnosticStream{diagnosticText};
  InputModule input;
  std::string entryName;
  std::unique_ptr<HostExecutable> executable;
};

/// A kiln module parsed into its own context, its diagnostics captured for the exception message.
struct ParsedSource {
  explicit ParsedSource(const std::string &source)
      : input(source, "<kiln source>", diagnosticStream, &sharedThreadPool()) {
    if (!input.module())
      throw CompileError("invalid kiln IR:\n" + diagnosticText);
  }
  std::string diagnosticText;
  llvm::raw_string_ostream diagnosticStream{diagnosticText};
  InputModule input;
};

/// One kernel's strategy as Python sees it: (tile, warps, stages).
using KernelConfig = std::tuple<std::vector<int64_t>, int64_t, int64_t>;

/// The tunable kernels (matmuls and attentions, in kernel order) of `source` and the config `chip` would give
/// each by default: a list of (op name, tile, warps, stages).
static py::list tunableKernels(const std::string &source, const std::string &chip) {
  std::optional<Target> target = parseTarget(chip);
  if (!target || *target == Target::Host)
    throw py::value_error("unsupported GPU target '" + chip + "' (expected sm_80 or sm_90a)");
  ParsedSource parsed(source);
  std::string error;
  FailureOr<SmallVector<Operation *>> ops = fuseAndListTunableKernels(parsed.input.module(), error);
  if (failed(ops))
    throw CompileError(error + "\n" + parsed.diagnosticText);
  py::list list;
  for (Operation *op : *ops) {
    ConfigAttr config = getDefaultConfig(op, *target);
    list.append(py::make_tuple(op->getName().getStringRef().str(), std::vector<int64_t>(config.getTile()),
                               config.getWarps(), config.getStages()));
  }
  return list;
}

/// Compiles kiln IR for a GPU (`chip` sm_80 or sm_90a) into `outputDir`: kernels.ptx, a cubin when ptxas is
/// installed, constant files and manifest.json, exactly as kilnc writes them. `configs`, when given, holds one
/// entry per tunable kernel (None keeps the default) and pins that kernel's #kiln.config.
static void compileGpu(const std::string &source, const std::string &chip, const std::string &outputDir,
                       const std::optional<std::vector<std::optional<KernelConfig>>> &configs) {
  ParsedSource parsed(source);
  std::string error;
  ModuleOp module = parsed.input.module();
  if (configs) {
    FailureOr<SmallVector<Operation *>> ops = fuseAndListTunableKernels(module, error);
    if (failed(ops))
      throw CompileError(error + "\n" + parsed.diagnosticText);
    if (ops->size() != configs->size())
      throw py::value_error("configs has " + std::to_string(configs->size()) + " entries but the program has " +
                            std::to_string(ops->size()) + " tunable kernels");
    for (auto [op, config] : llvm::zip(*ops, *configs)) {
      if (!config)
        continue;
      auto &[tile, warps, stages] = *config;
      auto emitError = [&] { return op->emitError("invalid config: "); };
      ConfigAttr attr = ConfigAttr::getChecked(emitError, op->getContext(), llvm::ArrayRef<int64_t>(tile), warps,
                                               stages, llvm::StringRef("mma_sync"));
      if (!attr)
        throw CompileError("invalid kernel config:\n" + parsed.diagnosticText);
      op->setAttr(kConfigAttrName, attr);
    }
  }
  LogicalResult result = [&] {
    py::gil_scoped_release release;
    return compileForGpu(module, chip, outputDir, error);
  }();
  if (failed(result))
    throw CompileError("compiling for " + chip + " failed: " + error + "\n" + parsed.diagnosticText);
}

/// The module after the GPU kernel stage ("gpu") or after NVVM lowering ("llvm") for `chip`.
static std::string gpuIr(const std::string &source, const std::string &chip, const std::string &stage) {
  if (stage != "gpu" && stage != "llvm")
    throw py::value_error("unknown stage '" + stage + "' (GPU stages: gpu, llvm)");
  ParsedSource parsed(source);
  std::string error;
  ModuleOp module = parsed.input.module();
  if (failed(runGpuKernelStage(module, chip, error)) ||
      (stage == "llvm" && failed(runNvvmLowering(module, chip, error))))
    throw CompileError("the '" + stage + "' stage for " + chip + " failed: " + error + "\n" + parsed.diagnosticText);
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

} // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's native compiler and host runtime";
  py::register_exception<CompileError>(m, "CompileError", PyExc_RuntimeError);
  py::class_<HostProgram>(m, "HostProgram")
      .def(py::init<const std::string &, const std::string &>(), py::arg("source"), py::arg("entry") = "")
      .def("ir", &HostProgram::ir, py::arg("stage"))
      .def_property_readonly("inputs", &HostProgram::inputs)
      .def_property_readonly("outputs", &HostProgram::outputs)
      .def_property_readonly("entry", &HostProgram::entry)
      .def("run", &HostProgram::run, py::arg("arrays"));
  m.def("compile_gpu", &compileGpu, py::arg("source"), py::arg("chip"), py::arg("output_dir"),
        py::arg("configs") = py::none());
  m.def("tunable_kernels", &tunableKernels, py::arg("source"), py::arg("chip"));
  m.def("gpu_ir", &gpuIr, py::arg("source"), py::arg("chip"), py::arg("stage"));
}
