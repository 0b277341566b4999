"""The kernel runtime from Python: libkiln_runtime (a C API over the CUDA driver) through ctypes.

Why ctypes and not the extension: the runtime is what ships next to compiled kernels — it needs neither MLIR nor
a C++ build for the Python at hand, so a machine without the compiler (the GPU machine) can still load and launch
Kiln's kernels. The library sits inside the package (the build copies it there); ``KILN_RUNTIME`` names another.
Every failing call raises ``RuntimeError`` with the runtime's message (the CUDA error name, or "no driver").
"""

import ctypes
import os
import threading
from pathlib import Path

_LIBRARY = None
_DEVICES = {}


def _library():
    global _LIBRARY
    if _LIBRARY is None:
        path = os.environ.get("KILN_RUNTIME") or str(Path(__file__).with_name("libkiln_runtime.so"))
        if not Path(path).is_file():
            raise RuntimeError(f"the Kiln runtime library is missing ({path}); build the project or set KILN_RUNTIME")
        lib = ctypes.CDLL(path)
        lib.kiln_last_error.restype = ctypes.c_char_p
        _LIBRARY = lib
    return _LIBRARY


def check(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: {_library().kiln_last_error().decode()}")


class Device:
    """One GPU opened through the runtime; modules loaded on it stay loaded while it lives."""

    def __init__(self, ordinal):
        self.lib = _library()
        self.handle = ctypes.c_void_p()
        check(self.lib.kiln_device_open(ordinal, ctypes.byref(self.handle)), f"opening GPU {ordinal}")
        major, minor, sms = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        check(self.lib.kiln_device_info(self.handle, ctypes.byref(major), ctypes.byref(minor), ctypes.byref(sms)),
              "kiln_device_info")
        self.capability, self.multiprocessors = (major.value, minor.value), sms.value

    def load(self, image):
        """Loads a cubin or PTX image (bytes); returns the module handle."""
        module = ctypes.c_void_p()
        check(self.lib.kiln_module_load_data(self.handle, image, ctypes.c_size_t(len(image)), ctypes.byref(module)),
              "loading the kernels")
        return module

    def kernel(self, module, name):
        kernel = ctypes.c_void_p()
        check(self.lib.kiln_module_get_kernel(module, name.encode(), ctypes.byref(kernel)), f"kernel '{name}'")
        return kernel


def device(ordinal=0):
    """The runtime's handle on GPU ``ordinal`` (opened once per process)."""
    if ordinal not in _DEVICES:
        _DEVICES[ordinal] = Device(ordinal)
    return _DEVICES[ordinal]


class Launch:
    """One kernel launch with its argument block built once: a call fills in the device addresses of this call's
    tensors and issues the kernel (the driver copies the arguments at launch, so the block can be reused). A lock
    keeps two threads from filling the block at once (ctypes releases the GIL during the launch)."""

    def __init__(self, kernel, launch, count):
        self.lib = _library()
        self.kernel = kernel
        self.cells = (ctypes.c_uint64 * count)()
        base = ctypes.addressof(self.cells)
        self.args = (ctypes.c_void_p * count)(*[base + 8 * i for i in range(count)])
        self.grid = (ctypes.c_uint * 3)(*launch["grid"])
        self.block = (ctypes.c_uint * 3)(*launch["block"])
        self.shared = ctypes.c_uint(launch["dynamic_shared_bytes"])
        self.lock = threading.Lock()

    def __call__(self, pointers, stream):
        cells = self.cells
        with self.lock:
            for index, pointer in enumerate(pointers):
                cells[index] = pointer
            status = self.lib.kiln_kernel_launch(self.kernel, self.grid, self.block, self.shared,
                                                 ctypes.c_void_p(stream), self.args)
        if status != 0:
            check(status, "kiln_kernel_launch")
