"""kiln.compile: kiln IR text to a callable program, for the CPU host backend or a GPU.

Argument checking happens here, where the names of the entry's arguments are known, so that every mistake is a
Python exception naming the argument at fault; the native extension (``_kiln``) parses, runs the pipelines and
executes, and turns MLIR diagnostics into ``CompileError`` messages. GPU programs go through the disk cache
(kiln/cache.py): a program found there loads without the extension, so a machine with only the runtime can run
what another compiled.
"""

import functools
import json
import warnings

import ml_dtypes
import numpy as np

from . import cache
from .config import Config
from .extensions import native, native_host
from .gpu import GpuProgram, ManifestError, driver_assembler

try:
    from ._kiln import CompileError
except ImportError:  # no compiler for this Python: cached GPU programs still run
    class CompileError(RuntimeError):
        """Malformed kiln IR or a failing pipeline (the message carries the MLIR diagnostics)."""


#: numpy dtype of each element type the host backend supports.
DTYPES = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i1": np.dtype(np.bool_),
}

def check_target(target):
    """Refuses a target Kiln has no backend for, naming those it has (the dialect's Target enum, which the
    compiler parses the name into), before an expensive step that would otherwise fail only at the compile.
    ``compile`` leaves the check to the compiler, so that a program in the disk cache loads without it."""
    names = native().targets()
    if target not in names:
        raise ValueError(f"unsupported target '{target}' (Kiln's targets: {', '.join(names)})")


class Program:
    """A compiled entry function: call it with numpy arrays, read its IR at any stage with ``ir(stage)``."""

    def __init__(self, native):
        self._native = native
        self.entry = native.entry
        self.inputs = [(DTYPES[dtype], tuple(shape)) for dtype, shape in native.inputs]
        self.outputs = [(DTYPES[dtype], tuple(shape)) for dtype, shape in native.outputs]

    def ir(self, stage="kiln"):
        """The module after ``stage``: kiln, fused, tiled, loops or llvm."""
        return self._native.ir(stage)

    def __call__(self, *arrays):
        if len(arrays) != len(self.inputs):
            raise TypeError(f"'{self.entry}' takes {len(self.inputs)} arguments, got {len(arrays)}")
        checked = [self._check(i, array) for i, array in enumerate(arrays)]
        # A buffer the host cannot allocate is a MemoryError naming it (a result, an argument's copy or an
        # intermediate, with its op's location and size).
        outputs = self._native.run(checked)
        results = [
            np.frombuffer(data, dtype=dtype).reshape(shape).copy()
            for data, (dtype, shape) in zip(outputs, self.outputs)
        ]
        return results[0] if len(results) == 1 else tuple(results)

    def _check(self, index, array):
        dtype, shape = self.inputs[index]
        name = f"argument {index} of '{self.entry}'"
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{name} must be a numpy array, got {type(array).__name__}")
        if array.dtype != dtype:
            raise TypeError(f"{name} has dtype {array.dtype}, expected {dtype}")
        if array.shape != shape:
            raise ValueError(f"{name} has shape {array.shape}, expected {shape}")
        return np.ascontiguousarray(array)


def compile(source, target="host", entry=None, configs=None):
    """Compiles kiln IR text for ``target`` and returns a callable program.

    ``target="host"`` gives a ``Program`` on numpy arrays (the CPU backend); ``"sm_80"`` or ``"sm_90a"`` a
    ``GpuProgram`` on torch CUDA tensors, with ``.ptx``, ``.manifest`` and ``.kernels``. ``entry`` names the
    function to run; by default the module's only public function. Malformed IR or a failing pipeline raises
    ``CompileError`` carrying the MLIR diagnostics. Programs are cached in memory by (source, target, entry), and
    GPU programs on disk too (``KILN_CACHE_DIR``). ``configs`` (GPU targets; what ``kiln.autotune`` finds) pins
    the #kiln.config of each tunable kernel: one ``kiln.Config`` (or a (tile, warps, stages[, lowering])
    tuple) or None per kernel, in kernel order; the lowering is "mma_sync" (the default) or, for matmuls and attention (head dims 64/128) on
    sm_90a, "wgmma".
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be kiln IR text (str), got {type(source).__name__}")
    if not isinstance(target, str):
        raise TypeError(f"target must be a target's name (str), got {type(target).__name__}")
    if configs is not None and target == "host":
        raise ValueError("configs pin GPU kernel strategies; the host target has none to pin")
    pinned = None if configs is None or all(c is None for c in configs) else json.dumps(
        [None if c is None else Config.of(c).as_json() for c in configs])
    return _compile_cached(source, target, entry or "", pinned)


@functools.lru_cache(maxsize=256)
def _compile_cached(source, target, entry, configs=None):
    if target == "host":
        return Program(native_host().HostProgram(source, entry))
    entry_key = cache.key(source + (f"\0configs={configs}" if configs else ""), target, entry)
    folder = cache.lookup(entry_key)
    if folder is not None:
        try:
            return GpuProgram(folder, entry or None, source)
        except ManifestError:  # sealed, but not a manifest this Kiln runs (edited by hand): built again
            cache.discard(folder)
    # The cubin from the driver's in-process JIT when the GPU is the target's (ptxas if that fails).
    assembler = driver_assembler(target)
    kernels = str(cache.kernel_directory() or "")
    try:
        folder = cache.store(entry_key, lambda staging: native().compile_gpu(source, target, staging, configs or "",
                                                                            assembler, kernels))
    except OSError as error:  # the program cache's own files (a full disk): the compile failed, named
        raise CompileError(str(error)) from None
    program = GpuProgram(folder, entry or None, source)
    if "kernel_cache_failed" in program.manifest:
        warnings.warn(f"the kiln kernel cache {kernels} cannot be written ({program.manifest['kernel_cache_failed']})"
                      f": its kernels were compiled without it", cache.CacheWarning, stacklevel=3)
    return program
