"""ONNX operators as kiln IR: one function per operator, folding to numpy when every input is a constant.

Why one table: the importer's job per node is always the same — constant inputs fold (shape arithmetic, masks,
rotary tables, weight transposes never reach the program), anything else becomes kiln ops whose types are worked
out here, so that a shape error names the ONNX node instead of surfacing later as a verifier message on
anonymous IR. ``OPS`` maps an operator to its emitter; ``SCHEMAS`` records the newest revision of each operator
an emitter follows (the signature changes between opsets 13 and the newest: Reduce* axes and Split sizes as
inputs, Split's num_outputs, Dropout's training_mode, ...).
"""

import math

import numpy as np

from .. import trace
from .values import ELEMENTS, Const, FrontendError, Weight

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

def binary(kind, fold):
    """The emitter of a broadcasting binary op: ``fold`` on two constants, else ``kiln.<kind>`` on two floats or
    two integers of one type (kiln.div truncates integers toward zero, as ONNX's Div does)."""
    def op(ctx, a, b):
        if isinstance(a, Const) and isinstance(b, Const):
            return [Const(fold(a.array, b.array))]
        a, b = ctx.same_type(a, b)
        return [_emit_binary(ctx, kind, a, b)]
    return op


def _emit_binary(ctx, kind, a, b):
    if a.element == "i1":
        raise FrontendError(f"{ctx.node.describe()}: arithmetic on bool tensors; kiln computes it on floats and "
                            f"int32/int64")
    try:
        shape = np.broadcast_shapes(_shape(a), _shape(b))
    except ValueError:
        raise FrontendError(f"{ctx.node.describe()}: shapes {_shape(a)} and {_shape(b)} do not broadcast") from None
    out = trace.tensor_type(shape, a.element)
    return ctx.emit(f"kiln.{kind} {a.name}, {b.name} : {a.type}, {b.type} -> {out}", shape, a.element)


def _cast_to(ctx, value, element):
    """A tensor (or constant) as a tensor of ``element``."""
    if isinstance(value, Const) and not isinstance(value, Weight):
        return ctx.tensor(Const(value.array.astype(trace.DTYPES[element])))
    value = ctx.tensor(value)
    if value.element == element:
        return value
    out = trace.tensor_type(value.shape, element)
    return ctx.emit(f"kiln.cast {value.name} : {value.type} to {out}", value.shape, element)


def _holds_exactly(value, element):
    """Whether ``value`` is a float constant (not a weight) whose every value ``element`` holds exactly (a
    square's 2.0 in bf16)."""
    if not isinstance(value, Const) or isinstance(value, Weight) or value.array.dtype.kind not in "fV":
        return False
    array = value.array.astype(np.float64)
    return bool(np.array_equal(array.astype(trace.DTYPES[element]).astype(np.float64), array, equal_nan=True))


def _element_of(value):
    """A value's kiln element type, None for a constant of a type kiln lacks (float64 among them)."""
    return ELEMENTS.get(value.array.dtype) if isinstance(value, Const) else value.element


def _is_float(value):
    return value.array.dtype.kind in "fV" if isinstance(value, Const) else value.element in _FLOATS


#: The largest exponent an f32 holds exactly with its parity (2^24): past it, a negative base's sign is lost.
_EXACT_F32_INTEGER = 2 ** 24


def _power(ctx, a, b):
    """Pow: the base's type is the result's; the exponent may have another (ONNX's T and T1). Two integers, or
    two floats of one type, compute as they are. A float base with another exponent type computes in f32 (the
    base widened, the result rounded back once); an integer exponent at run time only for an f32 base with
    ``|e| <= 2^24`` in a constant (beyond, f32 loses its parity, so the sign of a negative base). An integer base
    with a float exponent is refused: ONNX computes it in float64, which kiln lacks (f32 is wrong past 2^24)."""
    if isinstance(a, Const) and isinstance(b, Const):
        return [Const(_pow(a.array, b.array))]
    if isinstance(a, Const):  # a constant base takes a float exponent's type (float64 has no kiln type)
        base = ELEMENTS.get(a.array.dtype) if a.array.dtype != np.float64 else (b.element if _is_float(b) else "f32")
    else:
        base = a.element
    if base is None:
        raise FrontendError(f"{ctx.node.describe()}: input A has dtype {a.array.dtype}, which kiln has no type for")
    exponent = _element_of(b)
    if base == exponent or (base in _FLOATS and _holds_exactly(b, base)):
        return [_emit_binary(ctx, "pow", _cast_to(ctx, a, base), _cast_to(ctx, b, base))]
    if base not in _FLOATS:
        if _is_float(b):
            raise FrontendError(f"{ctx.node.describe()}: an integer base ({base}) with a float exponent is computed "
                                f"in float64, which kiln has no type for")
        return [_emit_binary(ctx, "pow", _cast_to(ctx, a, base), _cast_to(ctx, b, base))]
    if not _is_float(b):
        if not isinstance(b, Const):
            raise FrontendError(f"{ctx.node.describe()}: a float base with an integer exponent at run time ({exponent}"
                                f") is computed in float64, which kiln has no type for; an f32 exponent or a "
                                f"constant one is taken")
        if np.abs(b.array.astype(np.float64)).max(initial=0) > _EXACT_F32_INTEGER:
            raise FrontendError(f"{ctx.node.describe()}: an integer exponent past 2^24 is not exact in f32")
    wide = _emit_binary(ctx, "pow", _cast_to(ctx, a, "f32"), _cast_to(ctx, b, "f32"))
    return [_cast_to(ctx, wide, base)]


def _variadic(kind, fold):
    """Max and Min take one or more inputs: a chain of the binary op."""
    pairwise = binary(kind, fold)

    def op(ctx, first, *rest):
        result = first
        for other in rest:
            (result,) = pairwise(ctx, result, other)
        return [result]
    return op


def _int_div(a, b):
    if np.issubdtype(np.asarray(a).dtype, np.integer):
        return np.fix(np.asarray(a) / np.asarray(b)).astype(np.result_type(a, b))
    return np.asarray(a / b, dtype=np.result_type(a, b))


def _pow(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu" and b.dtype.kind in "fV":
        return np.power(a, b.astype(np.float64)).astype(a.dtype)
    return np.power(a, b.astype(a.dtype))


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


def _broadcast(ctx, *values):
    try:
        return np.broadcast_shapes(*(_shape(v) for v in values))
    except ValueError:
        shapes = ", ".join(str(_shape(v)) for v in values)
        raise FrontendError(f"{ctx.node.describe()}: shapes {shapes} do not broadcast") from None


def _select(ctx, cond, a, b):
    """``kiln.select`` of two tensors of one type (any of kiln's) under a bool condition."""
    cond = ctx.tensor(cond)
    if cond.element != "i1":
        raise FrontendError(f"{ctx.node.describe()}: the condition must be bool, got {cond.element}")
    shape = _broadcast(ctx, cond, a, b)
    out = trace.tensor_type(shape, a.element)
    return ctx.emit(f"kiln.select {cond.name}, {a.name}, {b.name} : {cond.type}, {a.type}, {b.type} -> {out}",
                    shape, a.element)


def _where(ctx, cond, a, b):
    if all(isinstance(v, Const) for v in (cond, a, b)):
        return [Const(np.where(cond.array, a.array, b.array))]
    a, b = ctx.same_type(a, b, ("input X", "input Y"))
    return [_select(ctx, cond, a, b)]


def _compare(predicate, fold):
    """The emitter of a broadcasting comparison (Equal, Less, ...): ``fold`` on two constants, else
    ``kiln.compare`` on two operands of one type."""
    def op(ctx, a, b):
        if isinstance(a, Const) and isinstance(b, Const):
            return [Const(fold(a.array, b.array))]
        a, b = ctx.same_type(a, b)
        shape = _broadcast(ctx, a, b)
        return [ctx.emit(f"kiln.compare {predicate} {a.name}, {b.name} : {a.type}, {b.type} -> "
                         f"{trace.tensor_type(shape, 'i1')}", shape, "i1")]
    return op


def _bools(ctx, *values):
    tensors = [ctx.tensor(v) for v in values]
    for index, tensor in enumerate(tensors):
        if tensor.element != "i1":
            raise FrontendError(f"{ctx.node.describe()}: input {index} must be bool, got {tensor.element}")
    return tensors


def _bool_constant(ctx, value):
    return ctx.tensor(Const(np.asarray(value, dtype=bool)))


def _not(ctx, x):
    if isinstance(x, Const):
        return [Const(np.logical_not(x.array))]
    (x,) = _bools(ctx, x)
    return _compare("eq", None)(ctx, x, _bool_constant(ctx, False))


def _and(ctx, a, b):
    if isinstance(a, Const) and isinstance(b, Const):
        return [Const(np.logical_and(a.array, b.array))]
    a, b = _bools(ctx, a, b)
    return [_select(ctx, a, b, _bool_constant(ctx, False))]  # a ? b : false


def _or(ctx, a, b):
    if isinstance(a, Const) and isinstance(b, Const):
        return [Const(np.logical_or(a.array, b.array))]
    a, b = _bools(ctx, a, b)
    return [_select(ctx, a, _bool_constant(ctx, True), b)]  # a ? true : b


def _folded_cast(array, dtype):
    """``array`` as ``dtype`` the way kiln.cast converts at run time: a float to a signed integer saturates (NaN
    to 0, beyond the range to its ends), where numpy's conversion is undefined."""
    array = np.asarray(array)
    if array.dtype.kind not in "fV" or dtype.kind != "i":
        return array.astype(dtype)
    info, wide = np.iinfo(dtype), array.astype(np.float64)
    limit = 2.0 ** (info.bits - 1)
    result = np.zeros(wide.shape, dtype)  # NaN stays 0
    inside = (wide >= -limit) & (wide < limit)
    result[inside] = np.trunc(wide[inside]).astype(dtype)
    result[wide >= limit], result[wide < -limit] = info.max, info.min
    return result


def _cast(ctx, x):
    from onnx import helper
    to = ctx.attr("to")
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(to))
    if to == 16:  # bfloat16, which older onnx releases give as uint16
        import ml_dtypes
        dtype = np.dtype(ml_dtypes.bfloat16)
    elif dtype.type.__module__.startswith("ml_dtypes"):
        # 8-, 6-, 4- and 2-bit types: their saturation and rounding modes are not numpy's conversions.
        raise FrontendError(f"{ctx.node.describe()}: a cast to {helper.tensor_dtype_to_string(to)} (attribute 'to') "
                            f"is not supported; kiln has no such type")
    if isinstance(x, Const):
        return [Const(_folded_cast(x.array, dtype))]
    element = ELEMENTS.get(dtype)
    # kiln.cast converts as ONNX does: to bool, any nonzero value (NaN too) is true; from bool, 0 or 1.
    if element is None:
        raise FrontendError(f"{ctx.node.describe()}: a cast of a runtime tensor from {x.element} to {dtype} is not "
                            f"supported (float32, float16, bfloat16, int32, int64 and bool only)")
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
    if a.ndim == 0 or b.ndim == 0:
        raise FrontendError(f"{ctx.node.describe()}: scalar operands are not supported (shapes {a.shape}, {b.shape})")
    # numpy's rule for 1-D operands: a row vector on the left, a column vector on the right, dropped afterwards.
    if a.ndim == 1 or b.ndim == 1:
        rows = reshape_to(ctx, a, (1,) + a.shape) if a.ndim == 1 else a
        columns = reshape_to(ctx, b, b.shape + (1,)) if b.ndim == 1 else b
        (y,) = _matmul(ctx, rows, columns)
        shape = y.shape[:-2] + (y.shape[-2:-1] if a.ndim > 1 else ()) + (y.shape[-1:] if b.ndim > 1 else ())
        return [reshape_to(ctx, y, shape)]
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
        a = transpose_to(ctx, a, [1, 0])
    if ctx.attr("transB", 0):
        b = transpose_to(ctx, b, [1, 0])
    (y,) = _matmul(ctx, a, b)
    if alpha != 1.0:
        (y,) = binary("mul", np.multiply)(ctx, y, Const(np.asarray(alpha, dtype=_dtype_of(ctx, y))))
    if c is not None:
        if beta != 1.0:
            (c,) = binary("mul", np.multiply)(ctx, c, Const(np.asarray(beta, dtype=_dtype_of(ctx, c))))
        (y,) = binary("add", np.add)(ctx, y, c)
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
        # Axes are an input from opset 13 for ReduceSum and from 18 for the others.
        if ctx.opset >= 18 or kind == "sum":
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
        if kind in _EMPTY_REDUCTIONS and any(x.shape[a] == 0 for a in axes):
            # Over no elements the result is the reduction's identity, whatever the input holds.
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
            return [Const(np.full(shape, _EMPTY_REDUCTIONS[kind], trace.DTYPES[x.element]))]
        return [reduce_to(ctx, kind, ctx.float_tensor(x, "data"), axes, keep)]
    return op


#: What a reduction over no elements gives (a mean over none is 0 / 0, left to the compiler to refuse).
_EMPTY_REDUCTIONS = {"sum": 0.0, "max": -np.inf, "min": np.inf}


def reduce_to(ctx, kind, x, axes, keep):
    """``kiln.reduce`` of a tensor over sorted, non-negative axes."""
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    flag = " keep_dims" if keep else ""
    return ctx.emit(f"kiln.reduce {kind} {x.name} axes [{', '.join(map(str, axes))}]{flag} : {x.type} -> "
                    f"{trace.tensor_type(shape, x.element)}", shape, x.element)


def _norm_operands(ctx, x, weights, names):
    """The normalised axes (``axis`` to the last), X as [..., N] over them and each weight broadcast to them and
    flattened to [N]: kiln's norms work on the last axis, and the flattening makes ONNX's multi-axis
    normalisation one of those. Kiln's norms compute their statistics in f32, which is stash_type 1."""
    stash = ctx.attr("stash_type", 1)
    if stash != 1:
        raise FrontendError(f"{ctx.node.describe()}: stash_type {stash} is not supported (kiln normalises in float32, "
                            f"stash_type 1)")
    x = ctx.float_tensor(x, "X")
    axis = _axis(ctx.attr("axis", -1), x.ndim, ctx.node)
    inner = x.shape[axis:]
    size = math.prod(inner)
    out = [reshape_to(ctx, x, x.shape[:axis] + (size,))]
    for name, w in zip(names, weights):
        if w is None:
            continue
        try:
            fits = tuple(np.broadcast_shapes(_shape(w), inner)) == inner
        except ValueError:
            fits = False
        if not fits:
            raise FrontendError(f"{ctx.node.describe()}: {name} has shape {tuple(_shape(w))}, which does not "
                                f"broadcast to the normalised shape {inner}")
        if isinstance(w, Const):
            w = Const(np.broadcast_to(w.array, inner).astype(trace.DTYPES[x.element]))
        else:
            (w,) = _expand(ctx, ctx.tensor(w), Const(np.asarray(inner)))
        w = ctx.tensor(reshape_to(ctx, w, (size,)))
        if w.element != x.element:
            raise FrontendError(f"{ctx.node.describe()}: {name} is {w.element} but X is {x.element}")
        out.append(w)
    return axis, out


def _epsilon(ctx):
    """The node's `epsilon` attribute (default 1e-5), which the norms need finite and non-negative."""
    eps = ctx.attr("epsilon", 1e-5)
    if not np.isfinite(eps) or eps < 0:
        raise FrontendError(f"{ctx.node.describe()}: epsilon must be finite and non-negative, got {eps}")
    return eps


def _layer_norm(ctx, x, scale, bias=None):
    eps = _epsilon(ctx)
    axis, values = _norm_operands(ctx, x, (scale, bias), ("Scale", "B"))
    operands = ", ".join(v.name for v in values)
    types = ", ".join(v.type for v in values)
    flat = values[0]
    y = ctx.emit(f"kiln.layer_norm {operands} epsilon {trace.float_literal(eps)} : {types}", flat.shape,
                 flat.element)
    results = [reshape_to(ctx, y, _shape(x))]
    if any(ctx.node.proto.output[1:]):
        results += _norm_statistics(ctx, ctx.tensor(x), axis, eps)
    return results


def _norm_statistics(ctx, x, axis, eps):
    """LayerNormalization's optional Mean and InvStdDev outputs, in f32 (stash_type 1) with the normalised axes
    kept as 1."""
    if x.element != "f32":
        x = ctx.emit(f"kiln.cast {x.name} : {x.type} to {trace.tensor_type(x.shape, 'f32')}", x.shape, "f32")
    axes = list(range(axis, x.ndim))
    mean = reduce_to(ctx, "mean", x, axes, keep=True)
    (centered,) = binary("sub", np.subtract)(ctx, x, mean)
    (square,) = binary("mul", np.multiply)(ctx, centered, centered)
    variance = reduce_to(ctx, "mean", square, axes, keep=True)
    (shifted,) = binary("add", np.add)(ctx, variance, Const(np.float32(eps)))
    inverse = ctx.emit(f"kiln.rsqrt {shifted.name} : {shifted.type}", shifted.shape, shifted.element)
    return [mean, inverse]


def _rms_norm(ctx, x, scale):
    eps = trace.float_literal(_epsilon(ctx))
    _, (flat, w) = _norm_operands(ctx, x, (scale,), ("scale",))
    y = ctx.emit(f"kiln.rms_norm {flat.name}, {w.name} epsilon {eps} : {flat.type}, {w.type}", flat.shape,
                 flat.element)
    return [reshape_to(ctx, y, _shape(x))]


# --- data movement ---------------------------------------------------------------------------------------------

def reshape_to(ctx, x, shape):
    """``x`` with a new shape of the same size: folded, or ``kiln.reshape`` (nothing when the shape is x's)."""
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
    return [reshape_to(ctx, x, dims)]


def _unsqueeze(ctx, x, axes=None):
    axes = _ints(ctx, axes, "axes") if ctx.opset >= 13 else ctx.attr("axes")
    rank = len(_shape(x)) + len(axes)
    axes = sorted(_axis(a, rank, ctx.node) for a in axes)
    shape = list(_shape(x))
    for a in axes:
        shape.insert(a, 1)
    return [reshape_to(ctx, x, shape)]


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
    return [reshape_to(ctx, x, [d for i, d in enumerate(source) if i not in axes])]


def _flatten(ctx, x):
    source = _shape(x)
    axis = ctx.attr("axis", 1)
    axis = axis + len(source) if axis < 0 else axis
    if not 0 <= axis <= len(source):
        raise FrontendError(f"{ctx.node.describe()}: axis {ctx.attr('axis', 1)} is out of range for rank {len(source)}")
    return [reshape_to(ctx, x, (math.prod(source[:axis]), math.prod(source[axis:])))]


def transpose_to(ctx, x, perm):
    """``x`` with its dimensions permuted: folded, or ``kiln.transpose`` (nothing for the identity)."""
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
    return [transpose_to(ctx, x, perm)]


def _expand(ctx, x, shape):
    target = _ints(ctx, shape, "shape")
    try:
        out = tuple(np.broadcast_shapes(_shape(x), tuple(target)))
    except ValueError:
        raise FrontendError(f"{ctx.node.describe()}: {_shape(x)} does not expand to {target}") from None
    if isinstance(x, Const):
        return [Const(np.broadcast_to(x.array, out).copy())]
    x = reshape_to(ctx, x, (1,) * (len(out) - len(_shape(x))) + _shape(x))
    if x.shape == out:
        return [x]
    return [ctx.emit(f"kiln.broadcast {x.name} : {x.type} -> {trace.tensor_type(out, x.element)}", out, x.element)]


def _concat(ctx, *inputs):
    # Empty inputs add nothing (torch emits empty 1-D ones; a Split may leave an empty part).
    inputs = [v for v in inputs if math.prod(_shape(v))]
    if not inputs:
        raise FrontendError(f"{ctx.node.describe()}: every input is empty")
    return [concat(ctx, inputs, ctx.attr("axis"))]


def concat(ctx, inputs, axis):
    """The values joined along ``axis``: folded, or one ``kiln.concat``."""
    axis = _axis(axis, len(_shape(inputs[0])), ctx.node)
    if all(isinstance(v, Const) for v in inputs):
        return Const(np.concatenate([v.array for v in inputs], axis=axis))
    tensors = [ctx.tensor(v) for v in inputs]
    first = next(t for t in tensors)
    for t in tensors:
        if t.element != first.element or t.ndim != first.ndim or \
                any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise FrontendError(f"{ctx.node.describe()}: inputs {[v.shape for v in tensors]} do not concatenate "
                                f"along axis {axis}")
    if len(tensors) == 1:
        return tensors[0]
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    return ctx.emit(f"kiln.concat {', '.join(t.name for t in tensors)} axis {axis} : "
                    f"{', '.join(t.type for t in tensors)} -> {trace.tensor_type(shape, first.element)}",
                    shape, first.element)


def slice_window(ctx, x, offsets, sizes, strides):
    """The strided window of ``x`` at ``offsets`` with ``sizes`` elements per dimension: folded, or ``kiln.slice``.
    An empty window is a constant: there is nothing in it to compute."""
    if not isinstance(x, Const) and not math.prod(sizes):
        return Const(np.zeros(sizes, trace.DTYPES[x.element]))
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
    backwards = []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _axis(axis, len(source), ctx.node)
        if step == 0:
            raise FrontendError(f"{ctx.node.describe()}: step 0 on axis {axis}")
        begin, stop, _ = slice(start, end, step).indices(source[axis])
        if step < 0:
            backwards.append((axis, range(begin, stop, step)))
            continue
        offsets[axis], strides[axis] = begin, step
        sizes[axis] = max(0, -(-(stop - begin) // step))
    y = slice_window(ctx, x, offsets, sizes, strides)
    # kiln.slice strides forwards only: an axis read backwards is a gather of the positions it visits.
    for axis, positions in backwards:
        y = take(ctx, y, Const(np.asarray(positions, dtype=np.int64)), axis)
    return [y]


def _split(ctx, x, split=None):
    source = _shape(x)
    axis = _axis(ctx.attr("axis", 0), len(source), ctx.node)
    outputs = len(ctx.node.proto.output)
    if ctx.attr("num_outputs", outputs) != outputs:  # the attribute arrived in opset 18
        raise FrontendError(f"{ctx.node.describe()}: num_outputs {ctx.attr('num_outputs')} but the node has "
                            f"{outputs} outputs")
    if split is not None:
        sizes = _ints(ctx, split, "split")
    else:
        # Equal parts; from opset 18 the last may be smaller.
        chunk = -(-source[axis] // outputs)
        sizes = [min(chunk, source[axis] - i * chunk) for i in range(outputs)]
    if sum(sizes) != source[axis] or len(sizes) != outputs:
        raise FrontendError(f"{ctx.node.describe()}: split {sizes} does not cover axis {axis} of {source}")
    results, offset = [], 0
    for size in sizes:
        offsets = [offset if i == axis else 0 for i in range(len(source))]
        window = [size if i == axis else d for i, d in enumerate(source)]
        results.append(slice_window(ctx, x, offsets, window, [1] * len(source)))
        offset += size
    return results


def _gather(ctx, data, indices):
    return [take(ctx, data, indices, ctx.attr("axis", 0))]


def take(ctx, data, indices, axis):
    """``data`` indexed along ``axis`` by ``indices`` (numpy's take): folded, a slice for one constant index, or
    ``kiln.gather``."""
    source = _shape(data)
    axis = _axis(axis, len(source), ctx.node)
    if isinstance(indices, Const) and not isinstance(data, Const) and not indices.array.size:
        shape = source[:axis] + indices.array.shape + source[axis + 1:]
        return Const(np.zeros(shape, trace.DTYPES[data.element]))
    if isinstance(data, Const) and isinstance(indices, Const):
        return Const(np.take(data.array, indices.array, axis=axis))
    if isinstance(indices, Const) and indices.array.ndim == 0:
        # One index: a slice of width 1 with the axis dropped.
        index = int(indices.array)
        if not -source[axis] <= index < source[axis]:
            raise FrontendError(f"{ctx.node.describe()}: index {index} is out of range for axis {axis} of size "
                                f"{source[axis]}")
        index %= source[axis]
        window = [1 if i == axis else d for i, d in enumerate(source)]
        sliced = slice_window(ctx, data, [index if i == axis else 0 for i in range(len(source))], window,
                               [1] * len(source))
        return reshape_to(ctx, sliced, [d for i, d in enumerate(source) if i != axis])
    table, index = ctx.tensor(data), ctx.tensor(indices)
    if index.element not in ("i64", "i32"):
        raise FrontendError(f"{ctx.node.describe()}: indices must be int64 or int32, got {index.element}")
    shape = source[:axis] + index.shape + source[axis + 1:]
    return ctx.emit(f"kiln.gather {table.name}[{index.name}] axis {axis} : {table.type}, {index.type} -> "
                    f"{trace.tensor_type(shape, table.element)}", shape, table.element)


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


def _identity(ctx, x):
    return [x]


def _dropout(ctx, x, ratio=None, training_mode=None):
    """Inference: the input unchanged and an all-true mask. A graph that trains (training_mode true, or computed
    at run time) is refused: what it drops is random."""
    if training_mode is not None and (not isinstance(training_mode, Const) or bool(training_mode.array)):
        raise FrontendError(f"{ctx.node.describe()}: training_mode (input 2) must be a constant false; kiln imports "
                            f"inference graphs")
    return [x, Const(np.ones(_shape(x), dtype=bool))]


def _range(ctx, start, limit, delta):
    s, l, d = (ctx.const(v, name).array for v, name in ((start, "start"), (limit, "limit"), (delta, "delta")))
    dtype = np.asarray(s).dtype
    # Opset 27's stash_type 1 (the default) computes a float16/bfloat16 range in float32.
    work = np.float32 if dtype.itemsize == 2 and dtype.kind in "fV" and ctx.attr("stash_type", 1) == 1 else dtype
    s, l, d = (np.asarray(v).astype(work) for v in (s, l, d))
    count = max(int(np.ceil((l - s) / d)), 0)
    return [Const((s + np.arange(count).astype(work) * d).astype(dtype))]


def _mod(ctx, a, b):
    """Mod: truncated (fmod = 1, the sign of A) or floored (the sign of B) remainder, of floats or integers (a
    zero divisor gives 0)."""
    truncated = ctx.attr("fmod", 0)
    fold = np.fmod if truncated else np.mod
    floats = [v for v in (a, b) if (v.array.dtype.kind in "fV" if isinstance(v, Const) else v.element in _FLOATS)]
    if floats and not truncated and ctx.opset < 28:
        raise FrontendError(f"{ctx.node.describe()}: a float Mod needs attribute fmod = 1 before opset 28 (this "
                            f"model's opset is {ctx.opset})")
    return binary("fmod" if truncated else "remainder", fold)(ctx, a, b)


def _trilu(ctx, x, k=None):
    """Trilu: the elements on and above (upper = 1) or on and below the k-th diagonal of the last two
    dimensions; at run time a select under the constant triangle."""
    offset = int(ctx.const(k, "k").array) if k is not None else 0
    triangle = np.triu if ctx.attr("upper", 1) else np.tril
    if len(_shape(x)) < 2:
        raise FrontendError(f"{ctx.node.describe()}: the input must have at least 2 dimensions, got shape "
                            f"{_shape(x)}")
    if isinstance(x, Const):
        return [Const(triangle(x.array, offset))]
    x = ctx.tensor(x)
    keep = triangle(np.ones(x.shape[-2:], dtype=bool), offset)
    zero = ctx.tensor(Const(np.zeros((), dtype=trace.DTYPES[x.element])))
    return [_select(ctx, Const(keep), x, zero)]


OPS = {
    "Add": binary("add", np.add),
    "Sub": binary("sub", np.subtract),
    "Mul": binary("mul", np.multiply),
    "Div": binary("div", _int_div),
    "Pow": _power,
    "Max": _variadic("max", np.maximum),
    "Min": _variadic("min", np.minimum),
    "Sqrt": _unary("sqrt", np.sqrt),
    "Reciprocal": _unary("reciprocal", lambda x: 1.0 / x),
    "Neg": _unary("neg", np.negative),
    "Exp": _unary("exp", np.exp),
    "Log": _unary("log", np.log),
    "Abs": _unary("abs", np.abs),
    "Tanh": _unary("tanh", np.tanh),
    "Erf": _unary("erf", _erf),
    "Sin": _unary("sin", np.sin),
    "Cos": _unary("cos", np.cos),
    "Floor": _unary("floor", np.floor),
    "Ceil": _unary("ceil", np.ceil),
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
    "Dropout": _dropout,
    "Range": _range,
    "Trilu": _trilu,
    "Equal": _compare("eq", np.equal),
    "Less": _compare("lt", np.less),
    "LessOrEqual": _compare("le", np.less_equal),
    "Greater": _compare("gt", np.greater),
    "GreaterOrEqual": _compare("ge", np.greater_equal),
    "Not": _not,
    "And": _and,
    "Or": _or,
    "Mod": _mod,
}

#: The newest revision (schema ``since_version``) of each default-domain operator its emitter follows; revisions
#: between opset 13's and these add only types, or changes the emitter reads by opset.
SCHEMAS = {
    "Abs": 13, "Add": 14, "And": 7, "Cast": 28, "Ceil": 13, "Concat": 13, "Constant": 25, "ConstantOfShape": 25,
    "Cos": 22, "Div": 14, "Dropout": 22, "Equal": 19, "Erf": 13, "Exp": 13, "Expand": 13, "Flatten": 25,
    "Floor": 13, "Gather": 13, "Gelu": 20, "Gemm": 13, "Greater": 13, "GreaterOrEqual": 16, "Identity": 25,
    "LayerNormalization": 17, "Less": 13, "LessOrEqual": 16, "Log": 13, "MatMul": 13, "Max": 13, "Min": 13,
    "Mod": 28, "Mul": 14, "Neg": 13, "Not": 1, "Or": 7, "Pow": 15, "RMSNormalization": 23, "Range": 27,
    "Reciprocal": 13, "ReduceMax": 20, "ReduceMean": 18, "ReduceMin": 20, "ReduceSum": 13, "Relu": 14,
    "Reshape": 25, "Shape": 25, "Sigmoid": 13, "Sin": 22, "Size": 25, "Slice": 13, "Softmax": 13, "Split": 18,
    "Sqrt": 13, "Squeeze": 25, "Sub": 14, "Tanh": 13, "Transpose": 25, "Trilu": 14, "Unsqueeze": 25, "Where": 16,
}
