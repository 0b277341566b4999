"""@kiln.jit: trace a Python function into kiln IR on its first call, compile it once per signature.

The signature is the dtype and shape of every array argument plus the value of every other argument (None,
bool, int, float or str: these are baked into the IR, as Triton's constexprs are). The first call with a new
signature traces the function on symbolic tensors (kiln/trace.py), compiles the traced module through
``kiln.compile`` and keeps the program; later calls with that signature check their arrays and go straight to
the run. numpy arrays run on the CPU host backend; torch CUDA tensors on the GPU, for the target their device's
compute capability calls for (sm_90a on Hopper, sm_80 on Ampere and later), unless ``target`` names one.
"""

import functools
import inspect
import sys

import numpy as np

from . import trace
from .gpu import TORCH_DTYPES
from .compiler import compile

_STATIC_TYPES = (type(None), bool, int, float, str)
_TORCH_ELEMENTS = {f"torch.{name}": element for element, name in TORCH_DTYPES.items()}
_GPU_TARGETS = ("sm_80", "sm_90a")


def _is_torch_tensor(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "is_cuda")


def _argument_key(value):
    """What a cached call must match of one argument, cheaply: dtype, shape (and device) of an array, the type
    and value of a constant; None for anything else (the full path then checks and reports it)."""
    if isinstance(value, np.ndarray):
        return (value.dtype, value.shape)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return (value.dtype, value.shape, value.device) if value.is_cuda else None
    if isinstance(value, _STATIC_TYPES):
        return (type(value), value)
    return None


def _fast_key(args, kwargs):
    keys = [_argument_key(a) for a in args]
    keys += [(name, _argument_key(v)) for name, v in sorted(kwargs.items())]
    if any(k is None or (isinstance(k, tuple) and len(k) == 2 and isinstance(k[0], str) and k[1] is None)
           for k in keys):
        return None
    return (len(args), tuple(keys))


class JitFunction:
    """A Python function compiled per signature; call it with numpy arrays."""

    def __init__(self, fn, target=None):
        self.fn, self.target = fn, target
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        self.programs = {}
        self._fast = {}  # the argument types as passed -> (program, where each array argument sits)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        fast = _fast_key(args, kwargs)
        hit = self._fast.get(fast) if fast is not None else None
        if hit is not None:
            program, positions = hit
            return program(*[args[p] if isinstance(p, int) else kwargs[p] for p in positions])
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.name}: {error}") from None
        bound.apply_defaults()
        key, arrays, target, elements = self._signature_of(bound.arguments)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = compile(self._trace(bound.arguments, elements), target=target)
        if fast is not None:
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
                self._fast[fast] = (program, positions)
        return program(*arrays)

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
                key.append((name, type(value).__name__, value))
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
        return (f"func.func @{self.name}({', '.join(params)}) -> ({types}) {{\n{body}"
                f"  return {', '.join(r.name for r in results)} : {types}\n}}\n")


def jit(fn=None, *, target=None):
    """Decorator: ``@kiln.jit`` (numpy -> host, CUDA tensors -> their GPU) or ``@kiln.jit(target="sm_90a")``."""
    if fn is None:
        return lambda f: JitFunction(f, target)
    return JitFunction(fn, target)
