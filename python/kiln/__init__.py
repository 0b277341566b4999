"""Kiln: fused attention and GEMM kernels from an MLIR compiler, driven from Python.

``kiln.compile(source)`` turns kiln IR text into a callable program; on the host target it runs on numpy arrays
through the CPU backend (the same fused, tiled program the GPU backend starts from). ``@kiln.jit`` traces a
Python function written with the ops below into kiln IR on its first call and compiles it once per signature.
``kiln.ops`` has the same ops ready-made on numpy arrays. ``kiln.compile(source, target="sm_90a")`` compiles for
the GPU (programs on torch CUDA tensors, kept in the disk cache); ``kiln.load(folder)`` runs what kilnc wrote.
"""

from . import ops
from .autotune import autotune
from .compiler import CompileError, Program, compile
from .config import Config
from .gpu import GpuProgram, load
from .jit import JitFunction, jit
from .trace import (Tensor, append_kv, attention, cast, equal, exp, floor_divide, fmod, gelu, layer_norm, logical_and,
                    logical_not, logical_or, matmul, maximum, minimum, not_equal, paged_attention, power, relu,
                    remainder, reshape, rms_norm, rope, sigmoid, silu, softmax, tanh, transpose, trunc_divide, where)

__all__ = ["CompileError", "Config", "GpuProgram", "JitFunction", "Program", "Tensor", "append_kv", "attention",
           "autotune", "cast", "compile", "equal", "exp", "floor_divide", "fmod", "gelu", "jit", "layer_norm", "load",
           "logical_and", "logical_not", "logical_or", "matmul", "maximum", "minimum", "not_equal", "ops",
           "paged_attention", "power", "relu", "remainder", "reshape", "rms_norm", "rope", "sigmoid", "silu",
           "softmax", "tanh", "transpose", "trunc_divide", "where"]
