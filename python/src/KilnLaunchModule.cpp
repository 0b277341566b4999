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

#include <algorithm>
#include <cstdint>

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

/// `value` as an unsigned integer of at most `limit`; false with a Python exception naming `what` otherwise.
bool toUnsigned(PyObject *value, unsigned long long limit, const char *what, unsigned long long &result) {
  result = PyLong_AsUnsignedLongLong(value);
  if (result == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "Launcher: %s must be an int from 0 to %llu", what, limit);
    return false;
  }
  if (result > limit) {
    PyErr_Format(PyExc_ValueError, "Launcher: %s must be at most %llu", what, limit);
    return false;
  }
  return true;
}

/// A grid or block: three ints below 2^32 (the runtime rejects a zero dimension).
bool toDimensions(PyObject *value, const char *what, unsigned dimensions[3]) {
  PyObject *sequence = PySequence_Fast(value, "Launcher: grid and block must be sequences of three ints");
  if (!sequence)
    return false;
  bool ok = PySequence_Fast_GET_SIZE(sequence) == 3;
  if (!ok)
    PyErr_Format(PyExc_ValueError, "Launcher: %s must have three dimensions", what);
  for (Py_ssize_t i = 0; ok && i < 3; ++i) {
    unsigned long long dimension = 0;
    ok = toUnsigned(PySequence_Fast_GET_ITEM(sequence, i), UINT32_MAX, what, dimension);
    dimensions[i] = static_cast<unsigned>(dimension);
  }
  Py_DECREF(sequence);
  return ok;
}

/// Launcher(launch_function, last_error_function, kernel, grid, block, dynamic_shared_bytes, count): the two
/// runtime functions' and the kernel handle's addresses as ints, grid and block as 3-tuples. Everything is
/// checked before the launcher takes any of it, and a launcher is set up once.
int launcherInit(PyObject *object, PyObject *args, PyObject *kwargs) {
  auto *self = reinterpret_cast<Launcher *>(object);
  if (self->launch) {
    PyErr_SetString(PyExc_TypeError, "Launcher: already initialised");
    return -1;
  }
  static const char *keywords[] = {"launch_function", "last_error_function", "kernel", "grid", "block",
                                   "dynamic_shared_bytes", "count", nullptr};
  PyObject *launchObject, *lastErrorObject, *kernelObject, *gridObject, *blockObject, *sharedObject,
      *countObject;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOO", const_cast<char **>(keywords), &launchObject,
                                   &lastErrorObject, &kernelObject, &gridObject, &blockObject, &sharedObject,
                                   &countObject))
    return -1;
  unsigned long long launch, lastError, kernel, shared, count;
  unsigned grid[3], block[3];
  if (!toUnsigned(launchObject, UINTPTR_MAX, "the launch function", launch) ||
      !toUnsigned(lastErrorObject, UINTPTR_MAX, "the error function", lastError) ||
      !toUnsigned(kernelObject, UINTPTR_MAX, "the kernel", kernel) || !toDimensions(gridObject, "grid", grid) ||
      !toDimensions(blockObject, "block", block) ||
      !toUnsigned(sharedObject, INT32_MAX, "the dynamic shared memory", shared) ||
      !toUnsigned(countObject, PY_SSIZE_T_MAX, "the argument count", count))
    return -1;
  if (!launch || !lastError || !kernel) {
    PyErr_SetString(PyExc_ValueError, "Launcher: the launch function, error function and kernel must be non-null");
    return -1;
  }
  std::copy(grid, grid + 3, self->grid);
  std::copy(block, block + 3, self->block);
  self->dynamicSharedBytes = static_cast<unsigned>(shared);
  self->count = static_cast<Py_ssize_t>(count);
  self->lastError = reinterpret_cast<LastErrorFunction>(static_cast<uintptr_t>(lastError));
  self->kernel = reinterpret_cast<void *>(static_cast<uintptr_t>(kernel));
  self->launch = reinterpret_cast<LaunchFunction>(static_cast<uintptr_t>(launch));
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
  // A kernel with more parameters takes the two blocks from Python's allocator (released by `freeBlocks`).
  uint64_t *values = stackValues;
  void **pointers = stackPointers;
  if (count > kStackArguments) {
    values = PyMem_New(uint64_t, count);
    pointers = PyMem_New(void *, count);
    if (!values || !pointers) {
      PyMem_Free(values);
      PyMem_Free(pointers);
      Py_DECREF(sequence);
      return PyErr_NoMemory();
    }
  }
  auto freeBlocks = [&] {
    if (values != stackValues) {
      PyMem_Free(values);
      PyMem_Free(pointers);
    }
  };
  PyObject **items = PySequence_Fast_ITEMS(sequence);
  for (Py_ssize_t i = 0; i < count; ++i) {
    values[i] = PyLong_AsUnsignedLongLong(items[i]);
    if (values[i] == static_cast<uint64_t>(-1) && PyErr_Occurred()) {
      Py_DECREF(sequence);
      freeBlocks();
      return nullptr;
    }
    pointers[i] = &values[i];
  }
  Py_DECREF(sequence);
  void *streamHandle = nullptr;
  if (stream != Py_None) {
    streamHandle = PyLong_AsVoidPtr(stream);
    if (!streamHandle && PyErr_Occurred()) {
      freeBlocks();
      return nullptr;
    }
  }
  int status;
  Py_BEGIN_ALLOW_THREADS;
  status = self->launch(self->kernel, self->grid, self->block, self->dynamicSharedBytes, streamHandle, pointers);
  Py_END_ALLOW_THREADS;
  freeBlocks();
  if (status != 0) {
    const char *message = self->lastError();
    PyErr_Format(PyExc_RuntimeError, "kiln_kernel_launch: %s", message ? message : "failed (no message)");
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyTypeObject launcherType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef launchModule = {PyModuleDef_HEAD_INIT, "_kiln_launch",
                            "Kernel launches through the Kiln runtime in one C call", -1};

} // namespace

// Exported whatever the build's default visibility (Python 3.8's PyMODINIT_FUNC does not say so itself).
extern "C" __attribute__((visibility("default"))) PyObject *PyInit__kiln_launch() {
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
