//===- KilnModule.cpp - The _kiln Python extension --------------------------===//
//
// The compiler half of the `kiln` package, bound over Api/Compiler.h: GPU compilation into a folder of kernels
// and a manifest (for the Python runtime to launch), the tunable kernels and their default configs (JSON,
// as the manifest writes configs), and the IR
// at every stage. It includes no MLIR header, so it builds on a machine that has only that header and the
// standalone libkiln_compiler.so (the wheel's). Failures arrive as kiln.CompileError carrying the MLIR
// diagnostics, or ValueError for a bad argument; nothing reaches stderr alone and nothing aborts.
//
//===----------------------------------------------------------------------===//

#include "Api/Compiler.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>
#include <memory>
#include <optional>

namespace py = pybind11;
using namespace kiln::api;

namespace {

/// An interrupt (KeyboardInterrupt, SystemExit: no Exception) raised inside the Python assembler, kept to be
/// raised again once the compile returns; written and read with the GIL held.
using Interruption = std::shared_ptr<std::optional<py::error_already_set>>;

/// A Python assembler, ptx (bytes) -> (cubin bytes, log str), as the compiler calls it: with the GIL held, and
/// with any Python exception turned into a failure whose log is the exception's message. An interrupt (Ctrl-C
/// reaches the assembler when it runs on the main thread) is not the assembler failing: it goes to
/// `interrupted`, and the compile stops.
PtxAssembler wrapAssembler(const py::object &assembler, const Interruption &interrupted) {
  if (assembler.is_none())
    return nullptr;
  return [assembler, interrupted](const std::string &ptx, std::string &cubin, std::string &log) {
    py::gil_scoped_acquire gil;
    try {
      py::tuple result = assembler(py::bytes(ptx));
      cubin = result[0].cast<std::string>();
      log = result[1].cast<std::string>();
      return KilnPtxAssembly::Assembled;
    } catch (py::error_already_set &error) {
      try {
        log = py::str(error.value()).cast<std::string>();
      } catch (py::error_already_set &) { // an exception whose str() raises in turn
        log = "the assembler raised an exception whose message could not be read";
      }
      if (error.matches(PyExc_Exception))
        return KilnPtxAssembly::Failed;
      if (!*interrupted)
        *interrupted = error;
      return KilnPtxAssembly::Interrupted;
    } catch (const std::exception &error) {
      log = error.what();
      return KilnPtxAssembly::Failed;
    }
  };
}

/// compileGpu with the configs as Python gives them: "" for none, or a JSON array with one config object (its
/// manifest form) or null per kernel; the in-process assembler, or None for ptxas; and the kernel cache's folder
/// ("" for none). An interrupt inside the assembler ends the compile and is raised again once it has returned,
/// instead of the compile's error.
void compileGpuFromPython(const std::string &source, const std::string &chip, const std::string &outputDir,
                          const std::string &configs, const py::object &assembler, const std::string &kernelCache) {
  auto interrupted = std::make_shared<std::optional<py::error_already_set>>();
  PtxAssembler inProcess = wrapAssembler(assembler, interrupted);
  std::exception_ptr failure;
  {
    py::gil_scoped_release release;
    try {
      compileGpu(source, chip, outputDir, configs, inProcess, kernelCache);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (*interrupted)
    throw **interrupted;
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's native compiler";
  py::register_exception<CompileError>(m, "CompileError", PyExc_RuntimeError);
  m.def("compile_gpu", &compileGpuFromPython, py::arg("source"), py::arg("chip"), py::arg("output_dir"),
        py::arg("configs") = "", py::arg("assembler") = py::none(), py::arg("kernel_cache") = "");
  m.def("tunable_kernels", &tunableKernels, py::arg("source"), py::arg("chip"),
        py::call_guard<py::gil_scoped_release>());
  m.def("gpu_ir", &gpuIr, py::arg("source"), py::arg("chip"), py::arg("stage"),
        py::call_guard<py::gil_scoped_release>());
  m.def("targets", &targetNames);
  m.def("source_ir", &sourceIr, py::arg("source"), py::arg("stage"), py::call_guard<py::gil_scoped_release>());
}
