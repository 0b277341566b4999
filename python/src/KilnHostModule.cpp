//===- KilnHostModule.cpp - The _kiln_host Python extension ----------------===//
//
// The host half of the `kiln` package, bound over Api/HostProgram.h: a kiln program compiled for the CPU and run
// on numpy buffers. A module of its own because the host executor needs the MLIR runner utilities at run time,
// which the packed GPU JIT does not carry; its failures raise the same kiln.CompileError as the compiler's, and a
// buffer the host cannot allocate a MemoryError naming it.
//
//===----------------------------------------------------------------------===//

#include "Api/Compiler.h"
#include "Api/HostProgram.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace kiln::api;

namespace {

/// Signatures as (dtype name, shape) pairs.
py::list describe(const std::vector<TensorDesc> &descs) {
  py::list list;
  for (const TensorDesc &desc : descs)
    list.append(py::make_tuple(desc.dtype, desc.shape));
  return list;
}

/// Runs `program` on C-contiguous arrays (dtypes and shapes checked in Python); returns each output as bytes.
py::list runOnArrays(const HostProgram &program, const std::vector<py::array> &arrays) {
  std::vector<BufferView> buffers;
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (!(arrays[i].flags() & py::array::c_style))
      throw py::value_error("argument " + std::to_string(i) + " is not a C-contiguous array");
    buffers.push_back({arrays[i].data(), static_cast<size_t>(arrays[i].nbytes())});
  }
  std::vector<std::string> results;
  {
    py::gil_scoped_release release;
    results = program.run(buffers);
  }
  py::list list;
  for (const std::string &result : results)
    list.append(py::bytes(result));
  return list;
}

} // namespace

PYBIND11_MODULE(_kiln_host, m) {
  m.doc() = "Kiln's CPU host backend";
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error)
        std::rethrow_exception(error);
    } catch (const CompileError &compileError) {
      static py::handle type = py::object(py::module_::import("kiln._kiln").attr("CompileError")).release();
      PyErr_SetString(type.ptr(), compileError.what());
    } catch (const OutOfMemory &outOfMemory) {
      PyErr_SetString(PyExc_MemoryError, outOfMemory.what());
    }
  });
  py::class_<HostProgram>(m, "HostProgram")
      .def(py::init<const std::string &, const std::string &>(), py::arg("source"), py::arg("entry") = "",
           py::call_guard<py::gil_scoped_release>())
      // `ir` keeps the GIL: it runs passes in the program's own context, which two threads must not share.
      .def("ir", &HostProgram::ir, py::arg("stage"))
      .def_property_readonly("inputs", [](const HostProgram &p) { return describe(p.inputs()); })
      .def_property_readonly("outputs", [](const HostProgram &p) { return describe(p.outputs()); })
      .def_property_readonly("entry", &HostProgram::entry)
      .def("run", &runOnArrays, py::arg("arrays"));
}
