"""The kernel runtime from Python: libkiln_runtime (a C API over the CUDA driver) through ctypes.

Why ctypes and not the extension: the runtime is what ships next to compiled kernels — it needs neither MLIR nor
a C++ build for the Python at hand, so a machine without the compiler (the GPU machine) can still load and run
Kiln's programs. The library sits inside the package (the build copies it there); ``KILN_RUNTIME`` names another.
The runtime reads a compiled folder's manifest and executes its plan (``Plan``): this module only binds it.
Every failing call raises ``RuntimeError`` with the runtime's message (the CUDA error name, or "no driver"), or
``ManifestError`` for a manifest the runtime cannot run. Runs go through the package's _kiln_launch module, one C
call each, when it was built for this Python, and through ctypes otherwise (a package carried to a machine with
another Python).
"""

import ctypes
import os
from pathlib import Path

try:
    from ._kiln_launch import PlanRunner as _NativeRunner
except ImportError:
    _NativeRunner = None

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
        # Declared so that calls pass plain ints (handles, addresses, the stream) without wrapping each one.
        lib.kiln_plan_run_with_buffers.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                                   ctypes.c_void_p]
        for name in ("kiln_plan_target", "kiln_plan_function"):
            getattr(lib, name).restype = ctypes.c_char_p
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        for name in ("kiln_plan_num_inputs", "kiln_plan_num_outputs", "kiln_plan_num_buffers", "kiln_plan_free"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.kiln_plan_input_updated_in_place.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.kiln_plan_check_chip.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        lib.kiln_target_for_capability.restype = ctypes.c_char_p
        lib.kiln_buffer_free.argtypes = [ctypes.c_void_p]
        _LIBRARY = lib
    return _LIBRARY


def check(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: {_library().kiln_last_error().decode()}")


class Device:
    """One GPU opened through the runtime, which plans load onto (``Plan(..., device=)``)."""

    def __init__(self, ordinal):
        self.lib = _library()
        self.handle = ctypes.c_void_p()
        check(self.lib.kiln_device_open(ordinal, ctypes.byref(self.handle)), f"opening GPU {ordinal}")
        major, minor, sms = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        check(self.lib.kiln_device_info(self.handle, ctypes.byref(major), ctypes.byref(minor), ctypes.byref(sms)),
              "kiln_device_info")
        self.capability, self.multiprocessors = (major.value, minor.value), sms.value

    def load(self, image):
        """Loads a cubin or PTX image (bytes) as a module of this GPU; returns the module handle (the assemblers'
        and loaders' benchmarks time it; programs load through ``Plan``)."""
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


def device(ordinal=0):
    """The runtime's handle on GPU ``ordinal`` (opened once per process)."""
    if ordinal not in _DEVICES:
        _DEVICES[ordinal] = Device(ordinal)
    return _DEVICES[ordinal]


def target_for(capability):
    """The GPU target Kiln compiles for on a device of ``capability`` (major, minor), or None (older than 8.0)."""
    name = _library().kiln_target_for_capability(*capability)
    return name.decode() if name else None


def target_capability(target):
    """The compute capability ``target``'s cubins are built for, or None for a name that is no GPU target."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    if _library().kiln_target_capability(str(target).encode(), ctypes.byref(major), ctypes.byref(minor)):
        return None
    return major.value, minor.value


def cache_lookup(root, key):
    """Whether entry ``key`` of the cache at ``root`` is valid (anything else at its path is removed)."""
    found = ctypes.c_int()
    check(_library().kiln_cache_lookup(str(root).encode(), key.encode(), ctypes.byref(found)), "the cache")
    return bool(found.value)


def cache_stage(root, key):
    """A private staging folder for entry ``key`` of the cache at ``root``; OSError naming what cannot be written."""
    lib, staging = _library(), ctypes.c_void_p()
    if lib.kiln_cache_stage(str(root).encode(), key.encode(), ctypes.byref(staging)):
        raise OSError(lib.kiln_last_error().decode(errors="replace"))
    try:
        return ctypes.string_at(staging).decode()
    finally:
        lib.kiln_buffer_free(staging)


def cache_publish(root, key, staging):
    """Seals ``staging`` and puts it in place as entry ``key`` (another process's valid entry wins); the staging
    folder is gone afterwards. OSError naming the file that could not be written."""
    lib = _library()
    if lib.kiln_cache_publish(str(root).encode(), key.encode(), str(staging).encode()):
        raise OSError(lib.kiln_last_error().decode(errors="replace"))


def cache_discard(path):
    """Removes what is at ``path``: a folder with all it holds, or a file or symlink (not what it points at)."""
    _library().kiln_cache_discard(str(path).encode())


#: Statuses of runtime.h that say what is wrong with a compiled folder rather than with the GPU.
_NOT_FOUND, _INVALID = 5, 4


class ManifestError(ValueError):
    """A manifest.json this Kiln cannot run: damaged, edited by hand, or written by an older Kiln."""


class Plan:
    """The run plan of ``function`` (None: the only one) in a compiled ``folder``, as the runtime reads it
    (``kiln_plan_read``; ``device``: loaded on that GPU with ``kiln_plan_load``): its target, entry, inputs and
    outputs as (dtype name, shape), the inputs it updates in place, its scratch buffers' bytes, and where each
    output lives, ("input" or "buffer", index). A manifest the runtime cannot run raises ManifestError naming the
    file and the field, and a function the folder lacks a ValueError."""

    def __init__(self, folder, function=None, device=None):
        lib = self._lib = _library()
        handle = ctypes.c_void_p()
        name = function.encode() if function else None
        if device is None:
            status = lib.kiln_plan_read(str(folder).encode(), name, ctypes.byref(handle))
        else:
            status = lib.kiln_plan_load(device.handle, str(folder).encode(), name, ctypes.byref(handle))
        if status:
            message = lib.kiln_last_error().decode(errors="replace")
            if device is not None:
                raise RuntimeError(message)
            raise {_NOT_FOUND: ValueError, _INVALID: ManifestError}.get(status, RuntimeError)(message)
        self.handle = handle.value
        self.target = lib.kiln_plan_target(self.handle).decode()
        self.function = lib.kiln_plan_function(self.handle).decode()
        self.inputs = [self._tensor(0, i) for i in range(lib.kiln_plan_num_inputs(self.handle))]
        self.outputs = [self._tensor(1, i) for i in range(lib.kiln_plan_num_outputs(self.handle))]
        self.in_place = [i for i in range(len(self.inputs)) if lib.kiln_plan_input_updated_in_place(self.handle, i)]
        self.buffer_bytes = []
        for index in range(lib.kiln_plan_num_buffers(self.handle)):
            size = ctypes.c_uint64()
            check(lib.kiln_plan_buffer_bytes(ctypes.c_void_p(self.handle), index, ctypes.byref(size)), "a buffer")
            self.buffer_bytes.append(size.value)
        self.output_sources = []
        for index in range(len(self.outputs)):
            is_input, source = ctypes.c_int(), ctypes.c_int()
            check(lib.kiln_plan_output_source(ctypes.c_void_p(self.handle), index, ctypes.byref(is_input),
                                              ctypes.byref(source)), "an output")
            self.output_sources.append(("input" if is_input.value else "buffer", source.value))

    def _tensor(self, is_output, index):
        dtype, rank, shape = ctypes.c_char_p(), ctypes.c_int(), (ctypes.c_int64 * 8)()
        check(self._lib.kiln_plan_tensor_info(ctypes.c_void_p(self.handle), is_output, index, ctypes.byref(dtype),
                                              ctypes.byref(rank), shape), "kiln_plan_tensor_info")
        return dtype.value.decode(), tuple(shape[:rank.value])

    def check_chip(self, capability):
        """Raises RuntimeError naming both chips unless a GPU of ``capability`` (major, minor) runs the plan."""
        if self._lib.kiln_plan_check_chip(self.handle, *capability):
            raise RuntimeError(self._lib.kiln_last_error().decode())

    def runner(self):
        """What runs the loaded plan: called as ``runner(input_addresses, buffer_addresses, stream)``; it keeps
        this plan (and so its kernels on the GPU) alive while it lives."""
        if _NativeRunner is None:
            return _CtypesRunner(self)
        address = lambda function: ctypes.cast(function, ctypes.c_void_p).value  # noqa: E731
        return _NativeRunner(address(self._lib.kiln_plan_run_with_buffers), address(self._lib.kiln_last_error),
                             self.handle, len(self.inputs), len(self.buffer_bytes), self)

    def __del__(self):
        if getattr(self, "handle", None):
            self._lib.kiln_plan_free(self.handle)
            self.handle = None


class _CtypesRunner:
    """PlanRunner's job through ctypes, for a package whose _kiln_launch was built for another Python."""

    def __init__(self, plan):
        self.plan, self.run = plan, plan._lib.kiln_plan_run_with_buffers
        self.counts = len(plan.inputs), len(plan.buffer_bytes)

    def __call__(self, inputs, buffers, stream):
        if (len(inputs), len(buffers)) != self.counts:
            raise TypeError(f"the plan takes {self.counts[0]} input and {self.counts[1]} buffer addresses, got "
                            f"{len(inputs)} and {len(buffers)}")
        status = self.run(self.plan.handle, (ctypes.c_uint64 * max(len(inputs), 1))(*inputs),
                          (ctypes.c_uint64 * max(len(buffers), 1))(*buffers), stream)
        if status:
            check(status, "running the plan")
