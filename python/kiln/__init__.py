"""Kiln: fused attention and GEMM kernels from an MLIR compiler, driven from Python.

``kiln.compile(source)`` turns kiln IR text into a callable program; on the host target it runs on numpy arrays
through the CPU backend (the same fused, tiled program the GPU backend starts from). ``kiln.ops`` has
ready-made kernels (matmul with bias and activation, attention, softmax, norms, rope) on numpy arrays.
"""

from . import ops
from .compiler import CompileError, Program, compile

__all__ = ["CompileError", "Program", "compile", "ops"]
