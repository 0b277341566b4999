"""The kernel runtime from Python: libkiln_runtime (a C API over the CUDA driver) through ctypes.

Why ctypes and not the extension: the runtime is what ships next to compiled kernels — it needs neither MLIR nor
a C++ build for the Python at hand, so a machine without the compiler (the GPU machine) can still load and launch
Kiln's kernels. The library sits inside the package (the build copies it there); ``KILN_RUNTIME`` names another.
Every failing call raises ``RuntimeError`` with the runtime's message (the CUDA error name, or "no driver").
Launches go through the package's _kiln_launch module, one C call each, when it was built for this Python, and
through ctypes otherwise (a package carried to a machine with another Python).
"""

import ctypes
import os
import threading
from pathlib import Path

try:
    from ._kiln_launch import Launcher as _NativeLauncher
except ImportError:
    _NativeLauncher = None

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
        # Declared so that a launch passes plain ints (addresses, the stream) without wrapping each one.
        lib.kiln_kernel_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                           ctypes.c_void_p, ctypes.c_void_p]
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

    def assemble(self, ptx):
        """PTX (bytes) to a cubin for this GPU through the driver's JIT, in process: (cubin bytes, the JIT's
        verbose log, which reports registers and spills per kernel as ptxas -v does)."""
        cubin, size, log = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
        check(self.lib.kiln_assemble_ptx(self.handle, ptx, ctypes.c_size_t(len(ptx)), ctypes.byref(cubin),
                                         ctypes.byref(size), ctypes.byref(log)), "assembling the PTX")
        try:
            return ctypes.string_at(cubin, size.value), ctypes.string_at(log).decode(errors="replace")
        finally:
            self.lib.kiln_buffer_free(cubin)
            self.lib.kiln_buffer_free(log)

    def kernel(self, module, name, params=0, tensor_maps=(), dependent_launch=False):
        """The kernel ``name`` of ``module``; with ``tensor_maps`` (the manifest's specs), each launch appends one
        TMA descriptor per spec, built from the address in parameter ``buffer``, after its ``params`` values; with
        ``dependent_launch`` (a kernel that waits for its predecessor itself) launches overlap the previous
        kernel of the stream."""
        kernel = ctypes.c_void_p()
        check(self.lib.kiln_module_get_kernel(module, name.encode(), ctypes.byref(kernel)), f"kernel '{name}'")
        if tensor_maps:
            specs = (TensorMapSpec * len(tensor_maps))(*[TensorMapSpec.of(m) for m in tensor_maps])
            check(self.lib.kiln_kernel_set_tensor_maps(kernel, params, len(tensor_maps), specs),
                  f"kernel '{name}'")
        if dependent_launch:
            check(self.lib.kiln_kernel_set_dependent_launch(kernel, 1), f"kernel '{name}'")
        return kernel

    def manifest_kernel(self, module, entry):
        """The kernel of manifest ``entry`` in ``module``: its buffers and sizes are what a launch passes, its
        ``tensor_maps`` (if any) what the runtime appends, and ``dependent_launch`` how it is launched."""
        params = len(entry["params"]) + len(entry.get("sizes", []))
        return self.kernel(module, entry["function"], params, entry.get("tensor_maps", ()),
                           entry.get("dependent_launch", False))


class TensorMapSpec(ctypes.Structure):
    """kiln_tensor_map_spec of runtime.h."""
    _fields_ = [("buffer", ctypes.c_int), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("swizzle_bytes", ctypes.c_int), ("dims", ctypes.c_uint64 * 5), ("strides", ctypes.c_uint64 * 4),
                ("box", ctypes.c_uint32 * 5)]

    @classmethod
    def of(cls, spec):
        """From a manifest entry: buffer, dtype ("f16" or "bf16"), dims, strides (bytes), box, swizzle."""
        if spec["dtype"] not in ("f16", "bf16") or not 1 <= len(spec["dims"]) <= 5:
            raise ValueError(f"unsupported tensor map {spec}: dtype must be f16 or bf16, with 1 to 5 dims")
        return cls(spec["buffer"], 1 if spec["dtype"] == "bf16" else 0, len(spec["dims"]), spec["swizzle"],
                   (ctypes.c_uint64 * 5)(*spec["dims"]), (ctypes.c_uint64 * 4)(*spec["strides"]),
                   (ctypes.c_uint32 * 5)(*spec["box"]))


def device(ordinal=0):
    """The runtime's handle on GPU ``ordinal`` (opened once per process)."""
    if ordinal not in _DEVICES:
        _DEVICES[ordinal] = Device(ordinal)
    return _DEVICES[ordinal]


def launcher(kernel, launch, count):
    """What launches ``kernel`` (a handle from ``Device.kernel``) with the manifest's ``launch`` (grid, block,
    dynamic_shared_bytes): called as ``launcher(values, stream)`` with ``count`` 64-bit parameter values, the
    device addresses of the buffers and then the kernel's ``sizes``."""
    if _NativeLauncher is None:
        return Launch(kernel, launch, count)
    lib = _library()
    address = lambda function: ctypes.cast(function, ctypes.c_void_p).value
    return _NativeLauncher(address(lib.kiln_kernel_launch), address(lib.kiln_last_error), kernel.value,
                           tuple(launch["grid"]), tuple(launch["block"]), launch["dynamic_shared_bytes"], count)


class Launch:
    """One kernel launch with its argument block built once: a call fills in the device addresses of this call's
    tensors and issues the kernel (the driver copies the arguments at launch, so the block can be reused). A lock
    keeps two threads from filling the block at once (ctypes releases the GIL during the launch)."""

    def __init__(self, kernel, launch, count):
        self.cells = (ctypes.c_uint64 * count)()
        base = ctypes.addressof(self.cells)
        self.args = (ctypes.c_void_p * count)(*[base + 8 * i for i in range(count)])
        self.grid = (ctypes.c_uint * 3)(*launch["grid"])
        self.block = (ctypes.c_uint * 3)(*launch["block"])
        self.kernel = kernel
        # What every call passes, as plain ints (the arrays above stay alive with this object).
        self._fixed = (kernel.value, ctypes.addressof(self.grid), ctypes.addressof(self.block),
                       launch["dynamic_shared_bytes"])
        self._args = ctypes.addressof(self.args)
        self._launch = _library().kiln_kernel_launch
        self.lock = threading.Lock()

    def __call__(self, pointers, stream):
        with self.lock:
            self.cells[:] = pointers
            status = self._launch(*self._fixed, stream, self._args)
        if status != 0:
            check(status, "kiln_kernel_launch")
