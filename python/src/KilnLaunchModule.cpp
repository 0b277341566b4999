//===- KilnLaunchModule.cpp - The _kiln_launch Python extension ------------===//
//
// One run of a compiled program from Python in one C call. A cached @kiln.jit call is a handful of torch calls
// and the run, and through ctypes the run spent more time converting its arguments than the runtime spent
// launching. A PlanRunner holds the loaded plan (the runtime's kiln_plan, which executes it: kernels, sizes,
// tensor maps, output copies) and, called with the device addresses of the inputs and of the scratch buffers
// torch allocated and the stream, builds the two address arrays on the stack (so two threads can run at once)
// and calls the runtime's kiln_plan_run_with_buffers with the GIL released, as ctypes did. It reaches the
// runtime through the function addresses kiln/runtime.py resolved in the library it loaded, so runs and every
// other runtime call go to the same copy (KILN_RUNTIME may name another): this module links neither the runtime
// nor CUDA nor MLIR. A package without it (one built for another Python) runs plans through ctypes.
//
//===----------------------------------------------------------------------===//

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace {

/// kiln_plan_run_with_buffers and kiln_last_error of runtime/include/kiln/runtime.h.
using RunFunction = int (*)(void *plan, const uint64_t *inputs, const uint64_t *buffers, void *stream);
using LastErrorFunction = const char *(*)();

/// Addresses a run keeps on the stack; a plan with more inputs or buffers takes them from the heap.
constexpr Py_ssize_t kStackAddresses = 64;

/// A loaded plan; calling it runs the plan.
struct PlanRunner {
  PyObject_HEAD
  RunFunction run;
  LastErrorFunction lastError;
  void *plan;
  Py_ssize_t inputs;
  Py_ssize_t buffers;
  PyObject *owner; ///< what keeps the plan loaded while the runner lives (kiln.runtime.Plan), or null
};

/// `value` as an unsigned integer of at most `limit`; false with a Python exception naming `what` otherwise.
bool toUnsigned(PyObject *value, unsigned long long limit, const char *what, unsigned long long &result) {
  result = PyLong_AsUnsignedLongLong(value);
  if (result == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "PlanRunner: %s must be an int from 0 to %llu", what, limit);
    return false;
  }
  if (result > limit) {
    PyErr_Format(PyExc_ValueError, "PlanRunner: %s must be at most %llu", what, limit);
    return false;
  }
  return true;
}

/// PlanRunner(run_function, last_error_function, plan, inputs, buffers, owner=None): the two runtime functions'
/// and the plan handle's addresses as ints, how many input and buffer addresses a run takes, and the object
/// that frees the plan when it goes (held until the runner goes). Everything is checked before the runner
/// takes any of it, and a runner is set up once.
int runnerInit(PyObject *object, PyObject *args, PyObject *kwargs) {
  auto *self = reinterpret_cast<PlanRunner *>(object);
  if (self->run) {
    PyErr_SetString(PyExc_TypeError, "PlanRunner: already initialised");
    return -1;
  }
  static const char *keywords[] = {"run_function", "last_error_function", "plan", "inputs", "buffers", "owner",
                                   nullptr};
  PyObject *runObject, *lastErrorObject, *planObject, *inputsObject, *buffersObject, *owner = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO|O", const_cast<char **>(keywords), &runObject,
                                   &lastErrorObject, &planObject, &inputsObject, &buffersObject, &owner))
    return -1;
  unsigned long long run, lastError, plan, inputs, buffers;
  if (!toUnsigned(runObject, UINTPTR_MAX, "the run function", run) ||
      !toUnsigned(lastErrorObject, UINTPTR_MAX, "the error function", lastError) ||
      !toUnsigned(planObject, UINTPTR_MAX, "the plan", plan) ||
      !toUnsigned(inputsObject, 1 << 20, "the input count", inputs) ||
      !toUnsigned(buffersObject, 1 << 20, "the buffer count", buffers))
    return -1;
  if (!run || !lastError || !plan) {
    PyErr_SetString(PyExc_ValueError, "PlanRunner: the run function, error function and plan must be non-null");
    return -1;
  }
  self->inputs = static_cast<Py_ssize_t>(inputs);
  self->buffers = static_cast<Py_ssize_t>(buffers);
  self->lastError = reinterpret_cast<LastErrorFunction>(static_cast<uintptr_t>(lastError));
  self->plan = reinterpret_cast<void *>(static_cast<uintptr_t>(plan));
  self->run = reinterpret_cast<RunFunction>(static_cast<uintptr_t>(run));
  Py_XINCREF(owner);
  self->owner = owner;
  return 0;
}

void runnerDealloc(PyObject *object) {
  Py_XDECREF(reinterpret_cast<PlanRunner *>(object)->owner);
  Py_TYPE(object)->tp_free(object);
}

/// Reads `count` addresses (ints) of `sequence` into `values`; false with a Python exception otherwise.
bool readAddresses(PyObject *sequence, Py_ssize_t count, const char *what, uint64_t *values) {
  if (PySequence_Fast_GET_SIZE(sequence) != count) {
    PyErr_Format(PyExc_TypeError, "the plan takes %zd %s addresses, got %zd", count, what,
                 PySequence_Fast_GET_SIZE(sequence));
    return false;
  }
  PyObject **items = PySequence_Fast_ITEMS(sequence);
  for (Py_ssize_t i = 0; i < count; ++i) {
    values[i] = PyLong_AsUnsignedLongLong(items[i]);
    if (values[i] == static_cast<uint64_t>(-1) && PyErr_Occurred())
      return false;
  }
  return true;
}

/// runner(inputs, buffers, stream): runs the plan over the device addresses (ints) of its inputs and scratch
/// buffers on the stream (a raw CUstream as an int; 0 or None for the default stream). Raises RuntimeError
/// with the runtime's message when the run fails.
PyObject *runnerCall(PyObject *object, PyObject *args, PyObject *kwargs) {
  auto *self = reinterpret_cast<PlanRunner *>(object);
  if (!self->run) {
    PyErr_SetString(PyExc_RuntimeError, "the PlanRunner was not initialised");
    return nullptr;
  }
  PyObject *inputObject = nullptr, *bufferObject = nullptr, *stream = nullptr;
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "a run takes (inputs, buffers, stream), no keywords");
    return nullptr;
  }
  if (!PyArg_UnpackTuple(args, "run", 3, 3, &inputObject, &bufferObject, &stream))
    return nullptr;
  void *streamHandle = nullptr;
  if (stream != Py_None) {
    streamHandle = PyLong_AsVoidPtr(stream);
    if (!streamHandle && PyErr_Occurred())
      return nullptr;
  }
  PyObject *inputs = PySequence_Fast(inputObject, "a run takes a list of input addresses");
  if (!inputs)
    return nullptr;
  PyObject *buffers = PySequence_Fast(bufferObject, "a run takes a list of buffer addresses");
  if (!buffers) {
    Py_DECREF(inputs);
    return nullptr;
  }
  uint64_t stackValues[kStackAddresses];
  Py_ssize_t total = self->inputs + self->buffers;
  uint64_t *values = total > kStackAddresses ? PyMem_New(uint64_t, total) : stackValues;
  bool ok = values && readAddresses(inputs, self->inputs, "input", values) &&
            readAddresses(buffers, self->buffers, "buffer", values + self->inputs);
  if (!values)
    PyErr_NoMemory();
  Py_DECREF(inputs);
  Py_DECREF(buffers);
  int status = 0;
  if (ok) {
    Py_BEGIN_ALLOW_THREADS;
    status = self->run(self->plan, values, values + self->inputs, streamHandle);
    Py_END_ALLOW_THREADS;
  }
  if (values != stackValues)
    PyMem_Free(values);
  if (!ok)
    return nullptr;
  if (status != 0) {
    const char *message = self->lastError();
    PyErr_Format(PyExc_RuntimeError, "running the plan: %s", message ? message : "failed (no message)");
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyTypeObject runnerType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef launchModule = {PyModuleDef_HEAD_INIT, "_kiln_launch",
                            "Plan runs through the Kiln runtime in one C call", -1};

} // namespace

// Exported whatever the build's default visibility (Python 3.8's PyMODINIT_FUNC does not say so itself).
extern "C" __attribute__((visibility("default"))) PyObject *PyInit__kiln_launch() {
  runnerType.tp_name = "kiln._kiln_launch.PlanRunner";
  runnerType.tp_basicsize = sizeof(PlanRunner);
  runnerType.tp_flags = Py_TPFLAGS_DEFAULT;
  runnerType.tp_doc = "PlanRunner(run_function, last_error_function, plan, inputs, buffers, owner=None); call it "
                      "with (input_addresses, buffer_addresses, stream) to run the plan";
  runnerType.tp_dealloc = runnerDealloc;
  runnerType.tp_new = PyType_GenericNew;
  runnerType.tp_init = runnerInit;
  runnerType.tp_call = runnerCall;
  if (PyType_Ready(&runnerType) < 0)
    return nullptr;
  PyObject *module = PyModule_Create(&launchModule);
  if (!module)
    return nullptr;
  Py_INCREF(&runnerType);
  if (PyModule_AddObject(module, "PlanRunner", reinterpret_cast<PyObject *>(&runnerType)) < 0) {
    Py_DECREF(&runnerType);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
