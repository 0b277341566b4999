//===- KilnLaunchModule.cpp - The _kiln_launch Python extension ------------===//
//
// One kernel launch from Python in one C call. A cached @kiln.jit call is a handful of torch calls and the
// launches, and through ctypes each launch spent more time converting its arguments and locking a shared
// argument block than the driver spent launching. A Launcher holds what never changes (kernel, grid, block,
// shared memory) and, called with the device addresses and the stream, builds the argument block on the stack
// (so two threads can launch at once) and calls the runtime's kiln_kernel_launch with the GIL released, as
// ctypes did. It reaches the runtime through the function addresses kiln/runtime.py resolved in the library it
// loaded, so launches and every other runtime call go to the same copy (KILN_RUNTIME may name another): this
// module links neither the runtime nor CUDA nor MLIR. A package without it (one built for another Python)
// launches through ctypes.
//
//===----------------------------------------------------------------------===//

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <memory>

namespace {

/// kiln_kernel_launch and kiln_last_error of runtime/include/kiln/runtime.h.
using LaunchFunction = int (*)(void *kernel, const unsigned grid[3], const unsigned block[3],
                               unsigned dynamicSharedBytes, void *stream, void **args);
using LastErrorFunction = const char *(*)();

/// Kernel parameters a launch keeps on the stack; a kernel with more takes them from the heap.
constexpr Py_ssize_t kStackArguments = 32;

/// A kernel with its launch shape; calling it launches the kernel.
struct Launcher {
  PyObject_HEAD
  LaunchFunction launch;
  LastErrorFunction lastError;
  void *kernel;
  unsigned grid[3];
  unsigned block[3];
  unsigned dynamicSharedBytes;
  Py_ssize_t count;
};

/// Launcher(launch_function, last_error_function, kernel, grid, block, dynamic_shared_bytes, count): the two
/// runtime functions' and the kernel handle's addresses as ints, grid and block as 3-tuples.
int launcherInit(PyObject *object, PyObject *args, PyObject *kwargs) {
  auto *self = reinterpret_cast<Launcher *>(object);
  static const char *keywords[] = {"launch_function", "last_error_function", "kernel", "grid", "block",
                                   "dynamic_shared_bytes", "count", nullptr};
  unsigned long long launch = 0, lastError = 0, kernel = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KKK(III)(III)In", const_cast<char **>(keywords), &launch,
                                   &lastError, &kernel, &self->grid[0], &self->grid[1], &self->grid[2],
                                   &self->block[0], &self->block[1], &self->block[2], &self->dynamicSharedBytes,
                                   &self->count))
    return -1;
  if (!launch || !lastError || !kernel) {
    PyErr_SetString(PyExc_ValueError, "Launcher: the launch function, error function and kernel must be non-null");
    return -1;
  }
  if (self->count < 0) {
    PyErr_SetString(PyExc_ValueError, "Launcher: the argument count must not be negative");
    return -1;
  }
  self->launch = reinterpret_cast<LaunchFunction>(static_cast<uintptr_t>(launch));
  self->lastError = reinterpret_cast<LastErrorFunction>(static_cast<uintptr_t>(lastError));
  self->kernel = reinterpret_cast<void *>(static_cast<uintptr_t>(kernel));
  return 0;
}

/// launcher(addresses, stream): launches the kernel with one device address (an int) per parameter on the
/// stream (a raw CUstream as an int; 0 or None for the default stream). Raises RuntimeError with the runtime's
/// message when the launch fails.
PyObject *launcherCall(PyObject *object, PyObject *args, PyObject *kwargs) {
  auto *self = reinterpret_cast<Launcher *>(object);
  if (!self->launch) {
    PyErr_SetString(PyExc_RuntimeError, "the Launcher was not initialised");
    return nullptr;
  }
  PyObject *addresses = nullptr, *stream = nullptr;
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "a launch takes (addresses, stream), no keywords");
    return nullptr;
  }
  if (!PyArg_UnpackTuple(args, "launch", 2, 2, &addresses, &stream))
    return nullptr;
  PyObject *sequence = PySequence_Fast(addresses, "a launch takes a list of device addresses");
  if (!sequence)
    return nullptr;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
  if (count != self->count) {
    Py_DECREF(sequence);
    PyErr_Format(PyExc_TypeError, "the kernel takes %zd device addresses, got %zd", self->count, count);
    return nullptr;
  }
  uint64_t stackValues[kStackArguments];
  void *stackPointers[kStackArguments];
  std::unique_ptr<uint64_t[]> heapValues;
  std::unique_ptr<void *[]> heapPointers;
  uint64_t *values = stackValues;
  void **pointers = stackPointers;
  if (count > kStackArguments) {
    heapValues.reset(new uint64_t[count]);
    heapPointers.reset(new void *[count]);
    values = heapValues.get();
    pointers = heapPointers.get();
  }
  PyObject **items = PySequence_Fast_ITEMS(sequence);
  for (Py_ssize_t i = 0; i < count; ++i) {
    values[i] = PyLong_AsUnsignedLongLong(items[i]);
    if (values[i] == static_cast<uint64_t>(-1) && PyErr_Occurred()) {
      Py_DECREF(sequence);
      return nullptr;
    }
    pointers[i] = &values[i];
  }
  Py_DECREF(sequence);
  void *streamHandle = nullptr;
  if (stream != Py_None) {
    streamHandle = PyLong_AsVoidPtr(stream);
    if (!streamHandle && PyErr_Occurred())
      return nullptr;
  }
  int status;
  Py_BEGIN_ALLOW_THREADS;
  status = self->launch(self->kernel, self->grid, self->block, self->dynamicSharedBytes, streamHandle, pointers);
  Py_END_ALLOW_THREADS;
  if (status != 0) {
    PyErr_Format(PyExc_RuntimeError, "kiln_kernel_launch: %s", self->lastError());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyTypeObject launcherType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef launchModule = {PyModuleDef_HEAD_INIT, "_kiln_launch",
                            "Kernel launches through the Kiln runtime in one C call", -1};

} // namespace

PyMODINIT_FUNC PyInit__kiln_launch() {
  launcherType.tp_name = "kiln._kiln_launch.Launcher";
  launcherType.tp_basicsize = sizeof(Launcher);
  launcherType.tp_flags = Py_TPFLAGS_DEFAULT;
  launcherType.tp_doc = "Launcher(launch_function, last_error_function, kernel, grid, block, "
                        "dynamic_shared_bytes, count); call it with (addresses, stream) to launch the kernel";
  launcherType.tp_new = PyType_GenericNew;
  launcherType.tp_init = launcherInit;
  launcherType.tp_call = launcherCall;
  if (PyType_Ready(&launcherType) < 0)
    return nullptr;
  PyObject *module = PyModule_Create(&launchModule);
  if (!module)
    return nullptr;
  Py_INCREF(&launcherType);
  if (PyModule_AddObject(module, "Launcher", reinterpret_cast<PyObject *>(&launcherType)) < 0) {
    Py_DECREF(&launcherType);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
