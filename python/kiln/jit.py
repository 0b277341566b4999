"""@kiln.jit: trace a Python function into kiln IR on its first call, compile it once per signature.

The signature is the dtype and shape of every array argument plus the value of every other argument (None,
bool, int, float or str: these are baked into the IR, as Triton's constexprs are). The first call with a new
signature traces the function on symbolic tensors (kiln/trace.py), compiles the traced module through
``kiln.compile`` (fusion, tiling, the host backend) and keeps the program; later calls with that signature check
their arrays and go straight to the run.
"""

import functools
import inspect

import numpy as np

from . import trace
from .compiler import compile

_STATIC_TYPES = (type(None), bool, int, float, str)


class JitFunction:
    """A Python function compiled per signature; call it with numpy arrays."""

    def __init__(self, fn, target="host"):
        self.fn, self.target = fn, target
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self.programs = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.name}: {error}") from None
        bound.apply_defaults()
        key, arrays = self._signature_of(bound.arguments)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self._compile(bound.arguments)
        return program(*arrays)

    def source(self, *args, **kwargs):
        """The kiln IR traced for these arguments (without compiling it)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        self._signature_of(bound.arguments)
        return self._trace(bound.arguments)

    def _signature_of(self, arguments):
        key, arrays = [], []
        for name, value in arguments.items():
            if isinstance(value, np.ndarray):
                if trace.element_name(value.dtype) is None:
                    raise TypeError(f"{self.name}: '{name}' has dtype {value.dtype}; kiln takes float32, float16, "
                                    f"bfloat16, int64, int32 and bool")
                key.append((name, value.dtype.str, value.shape))
                arrays.append(value)
            elif isinstance(value, _STATIC_TYPES):
                key.append((name, type(value).__name__, value))
            else:
                raise TypeError(f"{self.name}: '{name}' must be a numpy array or a constant (None, bool, int, float, "
                                f"str), got {type(value).__name__}")
        return tuple(key), arrays

    def _trace(self, arguments):
        with trace.Graph() as graph:
            values, params = {}, []
            for name, value in arguments.items():
                if isinstance(value, np.ndarray):
                    tensor = trace.Tensor(graph, f"%{name}", value.shape, trace.element_name(value.dtype))
                    params.append(f"{tensor.name}: {tensor.type}")
                    values[name] = tensor
                else:
                    values[name] = value
            result = self.fn(**values)
        results = result if isinstance(result, tuple) else (result,)
        if not results or not all(isinstance(r, trace.Tensor) for r in results):
            raise TypeError(f"{self.name}: a jitted function must return a tensor or a tuple of tensors computed "
                            f"from its array arguments, got {type(result).__name__}")
        types = ", ".join(r.type for r in results)
        body = "".join(f"  {line}\n" for line in graph.lines)
        return (f"func.func @{self.name}({', '.join(params)}) -> ({types}) {{\n{body}"
                f"  return {', '.join(r.name for r in results)} : {types}\n}}\n")

    def _compile(self, arguments):
        return compile(self._trace(arguments), target=self.target)


def jit(fn=None, *, target="host"):
    """Decorator: ``@kiln.jit`` or ``@kiln.jit(target="host")``."""
    if fn is None:
        return lambda f: JitFunction(f, target)
    return JitFunction(fn, target)
