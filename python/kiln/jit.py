"""@kiln.jit: trace a Python function into kiln IR on its first call, compile it once per signature.

The signature is the dtype and shape of every array argument plus the value of every other argument (None,
bool, int, float or str: these are baked into the IR, as Triton's constexprs are). The first call with a new
signature traces the function on symbolic tensors (kiln/trace.py), compiles the traced module through
``kiln.compile`` and keeps the program; later calls whose arguments have the same types go straight to the run
(for CUDA tensors the cache key holds dtype, shape, GPU and contiguity, so nothing is checked again). numpy
arrays run on the CPU host backend; torch CUDA tensors on the GPU, for the target their device's compute
capability calls for (sm_90a on Hopper, sm_80 on Ampere and later), unless ``target`` names one.
"""

import functools
import inspect
import re
import sys

import numpy as np

from . import trace
from .gpu import TORCH_DTYPES, GpuProgram
from .compiler import compile

_STATIC_TYPES = (type(None), bool, int, float, str)
_TORCH_ELEMENTS = {f"torch.{name}": element for element, name in TORCH_DTYPES.items()}


def _is_torch_tensor(value):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _constant_key(value):
    """A constant as a cache key: its type and value, a float by its bit pattern (``float.hex``), since 0.0 ==
    -0.0 would share one program between them and a NaN, equal to nothing, would never hit."""
    return (type(value), value.hex() if isinstance(value, float) else value)


def _argument_key(value):
    """What a cached call must match of one argument, cheaply: dtype and shape of an array (and the GPU of a
    tensor, and whether it is contiguous and 16-byte aligned), the type and value of a constant; None for anything
    else (the full path then checks and reports it), ndarray subclasses such as masked arrays included."""
    if _is_torch_tensor(value):
        if not value.is_cuda:
            return None
        return (value.dtype, value.shape, value.get_device(), value.is_contiguous() and value.data_ptr() % 16 == 0)
    if isinstance(value, _STATIC_TYPES):
        return _constant_key(value)
    if type(value) is np.ndarray:
        return (value.dtype, value.shape)
    return None


def _fast_key(args, kwargs):
    """The key of a call's argument types; a key holding None is never stored, so such a call takes the full
    path."""
    key = [_argument_key(a) for a in args]
    for name, value in kwargs.items():
        key.append(name)
        key.append(_argument_key(value))
    return tuple(key)


class JitFunction:
    """A Python function compiled per signature; call it with numpy arrays."""

    def __init__(self, fn, target=None):
        self.fn, self.target = fn, target
        self.name = fn.__name__
        # The IR symbol: a lambda's "<lambda>" (or any name that is not an identifier) spelt with underscores.
        self.symbol = re.sub(r"[^A-Za-z0-9_]", "_", self.name)
        self.signature = inspect.signature(fn)
        self.programs = {}
        self._fast = {}  # the argument types as passed -> (its runner, where each array argument sits)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        fast = _fast_key(args, kwargs)
        hit = self._fast.get(fast)
        if hit is not None:
            run, positions = hit
            return run([args[p] if isinstance(p, int) else kwargs[p] for p in positions])
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.name}: {error}") from None
        bound.apply_defaults()
        key, arrays, target, elements = self._signature_of(bound.arguments)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = compile(self._trace(bound.arguments, elements), target=target)
        result = program(*arrays)
        if None not in fast:
            # Where each array argument sits in the call; an array that came from a default is not in the call,
            # so such signatures always take the full path.
            names, positions = list(self.signature.parameters), []
            for name in elements:
                position = names.index(name)
                if position < len(args):
                    positions.append(position)
                elif name in kwargs:
                    positions.append(name)
                else:
                    break
            else:
                self._fast[fast] = (self._runner(program, arrays), positions)
        return result

    @staticmethod
    def _runner(program, arrays):
        """What a cache hit calls with the array arguments: a GPU program runs them unchecked (the key holds
        their dtypes, shapes, GPU, contiguity and alignment), a host program as usual."""
        if isinstance(program, GpuProgram) and arrays:
            torch, index = sys.modules["torch"], arrays[0].get_device()
            return lambda tensors: program.run_checked(torch, tensors, index)
        return lambda arrays: program(*arrays)

    def source(self, *args, **kwargs):
        """The kiln IR traced for these arguments (without compiling it)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        elements = self._signature_of(bound.arguments)[3]
        return self._trace(bound.arguments, elements)

    def _target_for(self, cuda_tensors):
        if not cuda_tensors:
            if self.target not in (None, "host"):
                raise TypeError(f"{self.name}: target {self.target} takes torch CUDA tensors, got numpy arrays")
            return "host"
        if self.target == "host":
            raise TypeError(f"{self.name}: target host takes numpy arrays, got torch CUDA tensors")
        if self.target is not None:
            return self.target
        import torch
        from .gpu import chip_for
        capability = torch.cuda.get_device_capability(cuda_tensors[0].device)
        chip = chip_for(capability)
        if chip is None:
            raise RuntimeError(f"{self.name}: Kiln has no GPU target for compute capability "
                               f"{capability[0]}.{capability[1]} (it needs 8.0 or later)")
        return chip

    def _signature_of(self, arguments):
        key, arrays, numpy_arrays, cuda_tensors, elements = [], [], [], [], {}
        for name, value in arguments.items():
            if isinstance(value, np.ma.MaskedArray):
                raise TypeError(f"{self.name}: '{name}' is a numpy masked array; kiln would ignore its mask, so "
                                f"pass a plain array (numpy.ma.getdata, or filled() with the value masked "
                                f"entries should take)")
            if isinstance(value, np.ndarray):
                element = trace.element_name(value.dtype)
                if element is None:
                    raise TypeError(f"{self.name}: '{name}' has dtype {value.dtype}; kiln takes float32, float16, "
                                    f"bfloat16, int64, int32 and bool")
                key.append((name, value.dtype.str, value.shape))
                numpy_arrays.append(value)
            elif _is_torch_tensor(value):
                element = _TORCH_ELEMENTS.get(str(value.dtype))
                if element is None:
                    raise TypeError(f"{self.name}: '{name}' has dtype {value.dtype}; kiln takes float32, float16, "
                                    f"bfloat16, int64, int32 and bool")
                if not value.is_cuda:
                    raise TypeError(f"{self.name}: '{name}' is a CPU torch tensor; pass a numpy array for the host "
                                    f"backend or a CUDA tensor for the GPU")
                key.append((name, str(value.dtype), tuple(value.shape), str(value.device)))
                cuda_tensors.append(value)
            elif isinstance(value, _STATIC_TYPES):
                key.append((name,) + _constant_key(value))
                continue
            else:
                raise TypeError(f"{self.name}: '{name}' must be a numpy array, a torch CUDA tensor or a constant "
                                f"(None, bool, int, float, str), got {type(value).__name__}")
            elements[name] = (tuple(value.shape), element)
            arrays.append(value)
        if numpy_arrays and cuda_tensors:
            raise TypeError(f"{self.name}: numpy arrays and torch CUDA tensors cannot be mixed in one call")
        target = self._target_for(cuda_tensors)
        return tuple(key) + (target,), arrays, target, elements

    def _trace(self, arguments, elements):
        with trace.Graph() as graph:
            values, params = {}, []
            for name, value in arguments.items():
                if name in elements:
                    shape, element = elements[name]
                    tensor = trace.Tensor(graph, f"%{name}", shape, element)
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
        return (f"func.func @{self.symbol}({', '.join(params)}) -> ({types}) {{\n{body}"
                f"  return {', '.join(r.name for r in results)} : {types}\n}}\n")


def jit(fn=None, *, target=None):
    """Decorator: ``@kiln.jit`` (numpy -> host, CUDA tensors -> their GPU) or ``@kiln.jit(target="sm_90a")``."""
    if fn is None:
        return lambda f: JitFunction(f, target)
    return JitFunction(fn, target)
