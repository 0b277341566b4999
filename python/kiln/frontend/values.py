"""Values of an imported graph: compile-time constants and symbolic tensors, and how constants become kiln IR.

An importer folds everything it can: shape arithmetic, mask and rotary tables, weight transposes are numpy
arrays (``Const``) until an op needs them as tensors of the program, at which point they are written as
``kiln.constant`` (hex-encoded, so large weights parse fast) or, when weights are kept out of the IR, as function
arguments (``Weight``). Everything else is a ``trace.Tensor`` of the function being built.
"""

import numpy as np

from .. import trace
from ..compiler import DTYPES

#: kiln element type of each numpy dtype a tensor of the program may have.
ELEMENTS = {dtype: name for name, dtype in DTYPES.items()}


class FrontendError(ValueError):
    """A model Kiln cannot import: the message names the node, input or file at fault."""


class Const:
    """A compile-time value: a numpy array (shape arithmetic, tables, weights)."""

    def __init__(self, array):
        self.array = np.asarray(array)

    @property
    def shape(self):
        return self.array.shape

    @property
    def element(self):
        return ELEMENTS.get(self.array.dtype)


class Weight(Const):
    """An initializer that becomes a function argument when the program reads it (weights kept out of the IR).
    Its data, when the file holds it, still serves constant folding."""

    def __init__(self, name, array, shape, dtype):
        super().__init__(array if array is not None else np.zeros((0,), dtype))
        self.name, self.weight_shape, self.dtype, self.has_data = name, tuple(shape), np.dtype(dtype), array is not None

    @property
    def shape(self):
        return self.weight_shape

    @property
    def element(self):
        return ELEMENTS.get(self.dtype)


def constant_text(array, element):
    """``kiln.constant ...`` for a numpy array: a splat literal, or hex-encoded little-endian data."""
    shape_type = trace.tensor_type(array.shape, element)
    flat = array.reshape(-1)
    if flat.size and (flat == flat[0]).all() and not (element.startswith("f") and np.isnan(flat[0].astype(np.float32))):
        value = flat[0]
        if element == "i1":
            literal = "true" if bool(value) else "false"
        elif element.startswith("i"):
            literal = str(int(value))
        else:
            literal = _float_literal(float(value), element)
        return f"kiln.constant dense<{literal}> : {shape_type}"
    if element == "i1":
        body = ", ".join("true" if v else "false" for v in flat)
        return f"kiln.constant dense<{_nest(body, array.shape)}> : {shape_type}"
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    return f'kiln.constant dense<"0x{data.hex().upper()}"> : {shape_type}'


#: Bit patterns of -inf and +inf per float type (MLIR reads a hex float literal as the type's bits).
_INFINITIES = {"f32": ("0xFF800000", "0x7F800000"), "f16": ("0xFC00", "0x7C00"), "bf16": ("0xFF80", "0x7F80")}


def _float_literal(value, element):
    if np.isinf(value):
        return _INFINITIES[element][0 if value < 0 else 1]
    return trace.float_literal(value)


def _nest(body, shape):
    """A flat list literal; MLIR accepts a flat list only for rank 1, so rank > 1 bool tables are written nested."""
    if len(shape) <= 1:
        return f"[{body}]"
    values = body.split(", ")
    def nest(vals, dims):
        if len(dims) == 1:
            return "[" + ", ".join(vals) + "]"
        step = len(vals) // dims[0]
        return "[" + ", ".join(nest(vals[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])) + "]"
    return nest(values, list(shape))
