"""kiln.compile: kiln IR text to a callable program.

Argument checking happens here, where the names of the entry's arguments are known, so that every mistake is a
Python exception naming the argument at fault; the native extension (``_kiln``) parses, runs the pipelines and
executes, and turns MLIR diagnostics into ``CompileError`` messages.
"""

import functools

import ml_dtypes
import numpy as np

from . import _kiln

CompileError = _kiln.CompileError

#: numpy dtype of each element type the host backend supports.
DTYPES = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i1": np.dtype(np.bool_),
}

#: Targets kiln.compile accepts.
TARGETS = ("host",)


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
        results = [
            np.frombuffer(data, dtype=dtype).reshape(shape).copy()
            for data, (dtype, shape) in zip(self._native.run(checked), self.outputs)
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


def compile(source, target="host", entry=None):
    """Compiles kiln IR text for ``target`` and returns a callable ``Program``.

    ``entry`` names the function to run; by default the module's only public function. Malformed IR or a failing
    pipeline raises ``CompileError`` carrying the MLIR diagnostics. Programs are cached in memory by
    (source, target, entry): compiling the same text again returns the same program.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be kiln IR text (str), got {type(source).__name__}")
    if target not in TARGETS:
        raise ValueError(f"unsupported target '{target}' (from Python: {', '.join(TARGETS)})")
    return _compile_cached(source, target, entry or "")


@functools.lru_cache(maxsize=256)
def _compile_cached(source, target, entry):
    return Program(_kiln.HostProgram(source, entry))
