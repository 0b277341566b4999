"""ONNX operators as kiln IR: one function per operator, folding to numpy when every input is a constant.

Why one table: the importer's job per node is always the same — constant inputs fold (shape arithmetic, masks,
rotary tables, weight transposes never reach the program), anything else becomes kiln ops whose types are worked
out here, so that a shape error names the ONNX node instead of surfacing later as a verifier message on
anonymous IR. ``OPS`` maps an operator to its emitter; ``FOLD_ONLY`` lists operators accepted only on constants.
"""

import math

import numpy as np

from .. import trace
from .values import Const, FrontendError

_FLOATS = ("f32", "f16", "bf16")
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _shape(value):
    return tuple(value.shape)


def _axis(axis, rank, node):
    if not -rank <= axis < max(rank, 1):
        raise FrontendError(f"{node.describe()}: axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _ints(ctx, value, what):
    """A constant integer input (shape, axes, starts, ...) as a list of Python ints."""
    if not isinstance(value, Const):
        raise FrontendError(f"{ctx.node.describe()}: {what} must be a constant (computed from shapes or "
                            f"initializers), but it depends on a graph input")
    return [int(v) for v in np.asarray(value.array).reshape(-1)]


# --- elementwise -----------------------------------------------------------------------------------------------

def _binary(kind, fold):
    def op(ctx, a, b):
        if isinstance(a, Const) and isinstance(b, Const):
            return [Const(fold(a.array, b.array))]
        a, b = ctx.same_float(a, b)
        try:
            shape = np.broadcast_shapes(_shape(a), _shape(b))
        except ValueError:
            raise FrontendError(f"{ctx.node.describe()}: shapes {_shape(a)} and {_shape(b)} do not broadcast") \
                from None
        out = trace.tensor_type(shape, a.element)
        return [ctx.emit(f"kiln.{kind} {a.name}, {b.name} : {a.type}, {b.type} -> {out}", shape, a.element)]
    return op


def _int_div(a, b):
    if np.issubdtype(np.asarray(a).dtype, np.integer):
        return np.fix(np.asarray(a) / np.asarray(b)).astype(np.result_type(a, b))
    return np.asarray(a / b, dtype=np.result_type(a, b))


def _pow(a, b):
    return np.power(a, np.asarray(b).astype(np.asarray(a).dtype))


def _unary(kind, fold, suffix=""):
    def op(ctx, x):
        if isinstance(x, Const):
            return [Const(np.asarray(fold(x.array.astype(np.float64)), dtype=x.array.dtype))]
        x = ctx.float_tensor(x, "input")
        return [ctx.emit(f"kiln.{kind} {x.name}{suffix} : {x.type}", x.shape, x.element)]
    return op


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(ctx, x):
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise FrontendError(f"{ctx.node.describe()}: unknown approximate '{approximate}'")
    if isinstance(x, Const):
        v = x.array.astype(np.float64)
        if approximate == "tanh":
            r = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
        else:
            r = 0.5 * v * (1 + _erf(v / math.sqrt(2)))
        return [Const(r.astype(x.array.dtype))]
    suffix = " approximate(tanh)" if approximate == "tanh" else ""
    return _unary("gelu", None, suffix)(ctx, x)


def _where(ctx, cond, a, b):
    if all(isinstance(v, Const) for v in (cond, a, b)):
        return [Const(np.where(cond.array, a.array, b.array))]
    a, b = ctx.same_float(a, b)
    cond = ctx.tensor(cond)
    if cond.element != "i1":
        raise FrontendError(f"{ctx.node.describe()}: the condition must be bool, got {cond.element}")
    try:
        shape = np.broadcast_shapes(_shape(cond), _shape(a), _shape(b))
    except ValueError:
        raise FrontendError(f"{ctx.node.describe()}: shapes {_shape(cond)}, {_shape(a)} and {_shape(b)} do not "
                            f"broadcast") from None
    out = trace.tensor_type(shape, a.element)
    return [ctx.emit(f"kiln.select {cond.name}, {a.name}, {b.name} : {cond.type}, {a.type}, {b.type} -> {out}",
                     shape, a.element)]


def _cast(ctx, x):
    from onnx import helper
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(ctx.attr("to")))
    if dtype == np.dtype(np.uint16) and ctx.attr("to") == 16:  # bfloat16 travels as uint16 in onnx's tables
        import ml_dtypes
        dtype = np.dtype(ml_dtypes.bfloat16)
    if isinstance(x, Const):
        return [Const(x.array.astype(dtype))]
    from .values import ELEMENTS
    element = ELEMENTS.get(dtype)
    if element not in _FLOATS or x.element not in _FLOATS:
        raise FrontendError(f"{ctx.node.describe()}: a cast of a runtime tensor from {x.element} to {dtype} is not "
                            f"supported (float to float only)")
    x = ctx.tensor(x)
    if element == x.element:
        return [x]
    out = trace.tensor_type(x.shape, element)
    return [ctx.emit(f"kiln.cast {x.name} : {x.type} to {out}", x.shape, element)]


# --- contractions and rows -------------------------------------------------------------------------------------

def _matmul(ctx, a, b):
    if isinstance(a, Const) and isinstance(b, Const):
        return [Const(np.matmul(a.array, b.array))]
    a, b = ctx.same_float(a, b)
    if a.ndim < 2 or b.ndim < 2:
        raise FrontendError(f"{ctx.node.describe()}: 1-D operands are not supported (shapes {a.shape}, {b.shape})")
    if a.shape[-1] != b.shape[-2]:
        raise FrontendError(f"{ctx.node.describe()}: inner dimensions differ: {a.shape} @ {b.shape}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise FrontendError(f"{ctx.node.describe()}: batch dims of {a.shape} and {b.shape} do not broadcast") \
            from None
    shape = tuple(batch) + (a.shape[-2], b.shape[-1])
    out = trace.tensor_type(shape, a.element)
    return [ctx.emit(f"kiln.matmul {a.name}, {b.name} : {a.type}, {b.type} -> {out}", shape, a.element)]


def _gemm(ctx, a, b, c=None):
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    if ctx.attr("transA", 0):
        a = _transpose_to(ctx, a, [1, 0])
    if ctx.attr("transB", 0):
        b = _transpose_to(ctx, b, [1, 0])
    (y,) = _matmul(ctx, a, b)
    if alpha != 1.0:
        (y,) = _binary("mul", np.multiply)(ctx, y, Const(np.asarray(alpha, dtype=_dtype_of(ctx, y))))
    if c is not None:
        if beta != 1.0:
            (c,) = _binary("mul", np.multiply)(ctx, c, Const(np.asarray(beta, dtype=_dtype_of(ctx, c))))
        (y,) = _binary("add", np.add)(ctx, y, c)
    return [y]


def _dtype_of(ctx, value):
    from ..compiler import DTYPES
    return value.array.dtype if isinstance(value, Const) else DTYPES[value.element]


def _softmax(ctx, x):
    axis = ctx.attr("axis", -1 if ctx.opset >= 13 else 1)
    if isinstance(x, Const):
        v = x.array.astype(np.float64)
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return [Const((e / e.sum(axis=axis, keepdims=True)).astype(x.array.dtype))]
    x = ctx.float_tensor(x, "input")
    axis = _axis(axis, x.ndim, ctx.node)
    return [ctx.emit(f"kiln.softmax {x.name} axis {axis} : {x.type}", x.shape, x.element)]


def _reduce(kind, fold):
    def op(ctx, x, axes=None):
        if ctx.opset >= 18 or (kind == "sum" and ctx.opset >= 13):
            axes = _ints(ctx, axes, "axes") if axes is not None else None
        else:
            axes = ctx.attr("axes", None)
        keep = bool(ctx.attr("keepdims", 1))
        rank = len(_shape(x))
        if not axes:
            if ctx.attr("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(rank))
        axes = sorted({_axis(a, rank, ctx.node) for a in axes})
        if isinstance(x, Const):
            return [Const(fold(x.array, axis=tuple(axes), keepdims=keep).astype(x.array.dtype))]
        x = ctx.float_tensor(x, "data")
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
        flag = " keep_dims" if keep else ""
        return [ctx.emit(f"kiln.reduce {kind} {x.name} axes [{', '.join(map(str, axes))}]{flag} : {x.type} -> "
                         f"{trace.tensor_type(shape, x.element)}", shape, x.element)]
    return op


def _norm_operands(ctx, x, weights, names):
    x = ctx.float_tensor(x, "X")
    out = [x]
    for name, w in zip(names, weights):
        if w is None:
            continue
        if tuple(_shape(w)) != (x.shape[-1],):
            raise FrontendError(f"{ctx.node.describe()}: {name} has shape {tuple(_shape(w))}, expected "
                                f"({x.shape[-1]},) (normalisation over the last axis only)")
        w = ctx.tensor(w, like=x)
        if w.element != x.element:
            raise FrontendError(f"{ctx.node.describe()}: {name} is {w.element} but X is {x.element}")
        out.append(w)
    return out


def _check_last_axis(ctx, x):
    axis = ctx.attr("axis", -1)
    if _axis(axis, len(_shape(x)), ctx.node) != len(_shape(x)) - 1:
        raise FrontendError(f"{ctx.node.describe()}: normalisation over axis {axis} is not supported (last axis only)")
    if any(ctx.node.proto.output[1:]):
        raise FrontendError(f"{ctx.node.describe()}: the Mean/InvStdDev outputs are not supported")


def _layer_norm(ctx, x, scale, bias=None):
    _check_last_axis(ctx, x)
    eps = trace.float_literal(ctx.attr("epsilon", 1e-5))
    values = _norm_operands(ctx, x, (scale, bias), ("Scale", "B"))
    x = values[0]
    operands = ", ".join(v.name for v in values)
    types = ", ".join(v.type for v in values)
    return [ctx.emit(f"kiln.layer_norm {operands} epsilon {eps} : {types}", x.shape, x.element)]


def _rms_norm(ctx, x, scale):
    _check_last_axis(ctx, x)
    eps = trace.float_literal(ctx.attr("epsilon", 1e-5))
    x, w = _norm_operands(ctx, x, (scale,), ("scale",))
    return [ctx.emit(f"kiln.rms_norm {x.name}, {w.name} epsilon {eps} : {x.type}, {w.type}", x.shape, x.element)]


# --- data movement ---------------------------------------------------------------------------------------------

def _reshape_to(ctx, x, shape):
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != math.prod(_shape(x)):
        raise FrontendError(f"{ctx.node.describe()}: cannot reshape {_shape(x)} to {shape}")
    if isinstance(x, Const):
        return Const(x.array.reshape(shape))
    x = ctx.tensor(x)
    if shape == x.shape:
        return x
    return ctx.emit(f"kiln.reshape {x.name} : {x.type} -> {trace.tensor_type(shape, x.element)}", shape, x.element)


def _reshape(ctx, x, shape):
    target = _ints(ctx, shape, "shape")
    allow_zero = ctx.attr("allowzero", 0)
    source = _shape(x)
    dims = [source[i] if d == 0 and not allow_zero else d for i, d in enumerate(target)]
    if dims.count(-1) > 1:
        raise FrontendError(f"{ctx.node.describe()}: more than one -1 in shape {target}")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or math.prod(source) % known:
            raise FrontendError(f"{ctx.node.describe()}: cannot reshape {source} to {target}")
        dims[dims.index(-1)] = math.prod(source) // known
    return [_reshape_to(ctx, x, dims)]


def _unsqueeze(ctx, x, axes=None):
    axes = _ints(ctx, axes, "axes") if ctx.opset >= 13 else ctx.attr("axes")
    rank = len(_shape(x)) + len(axes)
    axes = sorted(_axis(a, rank, ctx.node) for a in axes)
    shape = list(_shape(x))
    for a in axes:
        shape.insert(a, 1)
    return [_reshape_to(ctx, x, shape)]


def _squeeze(ctx, x, axes=None):
    if ctx.opset >= 13:
        axes = _ints(ctx, axes, "axes") if axes is not None else None
    else:
        axes = ctx.attr("axes", None)
    source = _shape(x)
    if axes is None:
        axes = [i for i, d in enumerate(source) if d == 1]
    axes = {_axis(a, len(source), ctx.node) for a in axes}
    if any(source[a] != 1 for a in axes):
        raise FrontendError(f"{ctx.node.describe()}: cannot squeeze a dimension that is not 1 (shape {source})")
    return [_reshape_to(ctx, x, [d for i, d in enumerate(source) if i not in axes])]


def _flatten(ctx, x):
    source = _shape(x)
    axis = ctx.attr("axis", 1)
    axis = axis + len(source) if axis < 0 else axis
    if not 0 <= axis <= len(source):
        raise FrontendError(f"{ctx.node.describe()}: axis {ctx.attr('axis', 1)} is out of range for rank {len(source)}")
    return [_reshape_to(ctx, x, (math.prod(source[:axis]), math.prod(source[axis:])))]


def _transpose_to(ctx, x, perm):
    if isinstance(x, Const):
        return Const(np.transpose(x.array, perm))
    x = ctx.tensor(x)
    if list(perm) == list(range(x.ndim)):
        return x
    shape = tuple(x.shape[p] for p in perm)
    return ctx.emit(f"kiln.transpose {x.name} [{', '.join(map(str, perm))}] : {x.type} -> "
                    f"{trace.tensor_type(shape, x.element)}", shape, x.element)


def _transpose(ctx, x):
    rank = len(_shape(x))
    perm = ctx.attr("perm", list(reversed(range(rank))))
    if sorted(perm) != list(range(rank)):
        raise FrontendError(f"{ctx.node.describe()}: perm {perm} is not a permutation of {rank} dims")
    return [_transpose_to(ctx, x, perm)]


def _expand(ctx, x, shape):
    target = _ints(ctx, shape, "shape")
    try:
        out = tuple(np.broadcast_shapes(_shape(x), tuple(target)))
    except ValueError:
        raise FrontendError(f"{ctx.node.describe()}: {_shape(x)} does not expand to {target}") from None
    if isinstance(x, Const):
        return [Const(np.broadcast_to(x.array, out).copy())]
    x = _reshape_to(ctx, x, (1,) * (len(out) - len(_shape(x))) + _shape(x))
    if x.shape == out:
        return [x]
    return [ctx.emit(f"kiln.broadcast {x.name} : {x.type} -> {trace.tensor_type(out, x.element)}", out, x.element)]


def _concat(ctx, *inputs):
    inputs = [v for v in inputs if math.prod(_shape(v)) or len(_shape(v)) != 1]  # torch emits empty 1-D inputs
    if not inputs:
        raise FrontendError(f"{ctx.node.describe()}: every input is empty")
    axis = _axis(ctx.attr("axis"), len(_shape(inputs[0])), ctx.node)
    if all(isinstance(v, Const) for v in inputs):
        return [Const(np.concatenate([v.array for v in inputs], axis=axis))]
    tensors = [ctx.tensor(v) for v in inputs]
    first = next(t for t in tensors)
    for t in tensors:
        if t.element != first.element or t.ndim != first.ndim or \
                any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise FrontendError(f"{ctx.node.describe()}: inputs {[v.shape for v in tensors]} do not concatenate "
                                f"along axis {axis}")
    if len(tensors) == 1:
        return [tensors[0]]
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    return [ctx.emit(f"kiln.concat {', '.join(t.name for t in tensors)} axis {axis} : "
                     f"{', '.join(t.type for t in tensors)} -> {trace.tensor_type(shape, first.element)}",
                     shape, first.element)]


def _slice_window(ctx, x, offsets, sizes, strides):
    if isinstance(x, Const):
        index = tuple(slice(o, o + n * s, s) for o, n, s in zip(offsets, sizes, strides))
        return Const(x.array[index])
    x = ctx.tensor(x)
    if list(sizes) == list(x.shape):
        return x
    return ctx.emit(f"kiln.slice {x.name} offsets [{', '.join(map(str, offsets))}] strides "
                    f"[{', '.join(map(str, strides))}] : {x.type} -> {trace.tensor_type(sizes, x.element)}",
                    tuple(sizes), x.element)


def _slice(ctx, x, starts, ends, axes=None, steps=None):
    source = _shape(x)
    starts, ends = _ints(ctx, starts, "starts"), _ints(ctx, ends, "ends")
    axes = _ints(ctx, axes, "axes") if axes is not None else list(range(len(starts)))
    steps = _ints(ctx, steps, "steps") if steps is not None else [1] * len(starts)
    offsets, sizes, strides = [0] * len(source), list(source), [1] * len(source)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _axis(axis, len(source), ctx.node)
        if step <= 0:
            raise FrontendError(f"{ctx.node.describe()}: step {step} on axis {axis} is not supported (positive only)")
        begin, stop, _ = slice(start, end, step).indices(source[axis])
        offsets[axis], strides[axis] = begin, step
        sizes[axis] = max(0, -(-(stop - begin) // step))
    if any(n == 0 for n in sizes):
        raise FrontendError(f"{ctx.node.describe()}: the slice of {source} is empty")
    return [_slice_window(ctx, x, offsets, sizes, strides)]


def _split(ctx, x, split=None):
    source = _shape(x)
    axis = _axis(ctx.attr("axis", 0), len(source), ctx.node)
    outputs = len(ctx.node.proto.output)
    if split is not None:
        sizes = _ints(ctx, split, "split")
    elif ctx.attr("split", None) is not None:
        sizes = ctx.attr("split")
    else:
        chunk = -(-source[axis] // outputs)
        sizes = [min(chunk, source[axis] - i * chunk) for i in range(outputs)]
    if sum(sizes) != source[axis] or len(sizes) != outputs:
        raise FrontendError(f"{ctx.node.describe()}: split {sizes} does not cover axis {axis} of {source}")
    results, offset = [], 0
    for size in sizes:
        offsets = [offset if i == axis else 0 for i in range(len(source))]
        window = [size if i == axis else d for i, d in enumerate(source)]
        results.append(_slice_window(ctx, x, offsets, window, [1] * len(source)))
        offset += size
    return results


def _gather(ctx, data, indices):
    source = _shape(data)
    axis = _axis(ctx.attr("axis", 0), len(source), ctx.node)
    if isinstance(data, Const) and isinstance(indices, Const):
        return [Const(np.take(data.array, indices.array, axis=axis))]
    if isinstance(indices, Const) and indices.array.ndim == 0:
        # One index: a slice of width 1 with the axis dropped.
        index = int(indices.array)
        if not -source[axis] <= index < source[axis]:
            raise FrontendError(f"{ctx.node.describe()}: index {index} is out of range for axis {axis} of size "
                                f"{source[axis]}")
        index %= source[axis]
        window = [1 if i == axis else d for i, d in enumerate(source)]
        sliced = _slice_window(ctx, data, [index if i == axis else 0 for i in range(len(source))], window,
                               [1] * len(source))
        return [_reshape_to(ctx, sliced, [d for i, d in enumerate(source) if i != axis])]
    table, index = ctx.tensor(data), ctx.tensor(indices)
    if index.element not in ("i64", "i32"):
        raise FrontendError(f"{ctx.node.describe()}: indices must be int64 or int32, got {index.element}")
    shape = source[:axis] + index.shape + source[axis + 1:]
    return [ctx.emit(f"kiln.gather {table.name}[{index.name}] axis {axis} : {table.type}, {index.type} -> "
                     f"{trace.tensor_type(shape, table.element)}", shape, table.element)]


# --- constants and shapes (fold only) ------------------------------------------------------------------------------

def _constant(ctx):
    attrs = ctx.node.attributes
    if "value" in attrs:
        return [Const(ctx.tensor_proto_array(attrs["value"]))]
    for name, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                        ("value_ints", np.int64)):
        if name in attrs:
            return [Const(np.asarray(attrs[name], dtype=dtype))]
    raise FrontendError(f"{ctx.node.describe()}: unsupported Constant attribute {sorted(attrs)}")


def _constant_of_shape(ctx, shape):
    dims = _ints(ctx, shape, "shape")
    value = ctx.node.attributes.get("value")
    fill = ctx.tensor_proto_array(value).reshape(-1)[0] if value is not None else np.float32(0)
    return [Const(np.full(dims, fill, dtype=np.asarray(fill).dtype))]


def _shape_of(ctx, x):
    dims = list(_shape(x))
    start, end = ctx.attr("start", 0), ctx.attr("end", len(dims))
    return [Const(np.asarray(dims[slice(start, end)], dtype=np.int64))]


def _size(ctx, x):
    return [Const(np.asarray(math.prod(_shape(x)), dtype=np.int64))]


def _identity(ctx, x, *rest):
    return [x]


def _range(ctx, start, limit, delta):
    s, l, d = (ctx.const(v, name).array for v, name in ((start, "start"), (limit, "limit"), (delta, "delta")))
    return [Const(np.arange(s, l, d, dtype=np.asarray(s).dtype))]


def _trilu(ctx, x, k=None):
    x = ctx.const(x, "input")
    offset = int(ctx.const(k, "k").array) if k is not None else 0
    fn = np.triu if ctx.attr("upper", 1) else np.tril
    return [Const(fn(x.array, offset))]


def _fold(fn):
    def op(ctx, *values):
        arrays = [ctx.const(v, f"input {i}").array for i, v in enumerate(values)]
        return [Const(fn(*arrays))]
    return op


def _fold_float(fn):
    return _fold(lambda x: np.asarray(fn(x.astype(np.float64)), dtype=x.dtype))


OPS = {
    "Add": _binary("add", np.add),
    "Sub": _binary("sub", np.subtract),
    "Mul": _binary("mul", np.multiply),
    "Div": _binary("div", _int_div),
    "Pow": _binary("pow", _pow),
    "Max": _binary("max", np.maximum),
    "Min": _binary("min", np.minimum),
    "Sqrt": _unary("sqrt", np.sqrt),
    "Reciprocal": _unary("reciprocal", lambda x: 1.0 / x),
    "Neg": _unary("neg", np.negative),
    "Exp": _unary("exp", np.exp),
    "Log": _unary("log", np.log),
    "Abs": _unary("abs", np.abs),
    "Tanh": _unary("tanh", np.tanh),
    "Erf": _unary("erf", _erf),
    "Sigmoid": _unary("sigmoid", _sigmoid),
    "Relu": _unary("relu", lambda x: np.maximum(x, 0)),
    "Gelu": _gelu,
    "Where": _where,
    "Cast": _cast,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Softmax": _softmax,
    "ReduceMean": _reduce("mean", np.mean),
    "ReduceSum": _reduce("sum", np.sum),
    "ReduceMax": _reduce("max", np.max),
    "ReduceMin": _reduce("min", np.min),
    "LayerNormalization": _layer_norm,
    "SimplifiedLayerNormalization": _rms_norm,
    "RMSNormalization": _rms_norm,
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Flatten": _flatten,
    "Transpose": _transpose,
    "Expand": _expand,
    "Concat": _concat,
    "Slice": _slice,
    "Split": _split,
    "Gather": _gather,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Shape": _shape_of,
    "Size": _size,
    "Identity": _identity,
    "Dropout": _identity,
    "Range": _range,
    "Trilu": _trilu,
    "Equal": _fold(np.equal),
    "Less": _fold(np.less),
    "LessOrEqual": _fold(np.less_equal),
    "Greater": _fold(np.greater),
    "GreaterOrEqual": _fold(np.greater_equal),
    "Not": _fold(np.logical_not),
    "And": _fold(np.logical_and),
    "Or": _fold(np.logical_or),
    "Mod": _fold(np.mod),
    "Cos": _fold_float(np.cos),
    "Sin": _fold_float(np.sin),
    "Floor": _fold_float(np.floor),
    "Ceil": _fold_float(np.ceil),
}

#: Operators accepted only when every input is a constant (they build masks, tables and shapes).
FOLD_ONLY = {"Range", "Trilu", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or",
             "Mod", "Cos", "Sin", "Floor", "Ceil", "ConstantOfShape"}
