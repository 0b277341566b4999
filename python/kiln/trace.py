"""Tracing: Python functions on symbolic tensors written out as kiln IR.

Inside a ``@kiln.jit`` function the arguments are ``Tensor``s: they carry a shape and an element type, and every
operation on them (``kiln.matmul``, ``kiln.attention``, arithmetic operators, activations, norms) checks its
arguments and appends one kiln op to the function being traced. Each check names the op and the argument at
fault, so a mistake is a Python exception before any IR exists; what the checks let through is verified again
by the dialect when the traced text is compiled.
"""

import math
import numbers

import numpy as np

from . import mods
from .compiler import DTYPES

_ELEMENT_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_FLOATS = ("f32", "f16", "bf16")
_GRAPHS = []  # the functions being traced, innermost last


def tensor_type(shape, element):
    """``tensor<2x3xf32>`` for shape (2, 3) and element "f32"."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def float_literal(value):
    """A float in a form MLIR's parser accepts ("1.000000000e-06")."""
    return f"{float(value):.9e}"


class Graph:
    """The body of one function being traced: its arguments and the kiln ops appended so far."""

    def __init__(self):
        self.lines = []
        self.count = 0

    def emit(self, text, shape, element, results=1):
        """Appends ``%vN = text`` and returns its result as a Tensor, or a tuple of ``results`` Tensors of the
        same shape and element type (``%vN#0``, ...) when the op has several."""
        name = f"%v{self.count}"
        self.count += 1
        if results == 1:
            self.lines.append(f"{name} = {text}")
            return Tensor(self, name, shape, element)
        self.lines.append(f"{name}:{results} = {text}")
        return tuple(Tensor(self, f"{name}#{i}", shape, element) for i in range(results))

    def __enter__(self):
        _GRAPHS.append(self)
        return self

    def __exit__(self, *exc):
        _GRAPHS.pop()


class Tensor:
    """A value of the function being traced: an SSA name, a shape and an element type."""

    def __init__(self, graph, name, shape, element):
        self.graph, self.name, self.shape, self.element = graph, name, tuple(shape), element

    @property
    def dtype(self):
        return DTYPES[self.element]

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def type(self):
        return tensor_type(self.shape, self.element)

    def __repr__(self):
        return f"kiln.Tensor({self.name}: {self.type})"

    def __add__(self, other):
        return _binary("add", self, other)

    def __radd__(self, other):
        return _binary("add", other, self)

    def __sub__(self, other):
        return _binary("sub", self, other)

    def __rsub__(self, other):
        return _binary("sub", other, self)

    def __mul__(self, other):
        return _binary("mul", self, other)

    def __rmul__(self, other):
        return _binary("mul", other, self)

    def __truediv__(self, other):
        return _binary("div", self, other)

    def __rtruediv__(self, other):
        return _binary("div", other, self)

    def __neg__(self):
        return _unary("neg", self)

    def __floordiv__(self, other):
        return floor_divide(self, other)

    def __rfloordiv__(self, other):
        return floor_divide(other, self)

    def __mod__(self, other):
        return _binary("remainder", self, other)

    def __rmod__(self, other):
        return _binary("remainder", other, self)

    # Comparisons give bool tensors. == and != stay Python's identity (a Tensor is a dict key): use equal() and
    # not_equal().
    def __lt__(self, other):
        return compare("lt", self, other)

    def __le__(self, other):
        return compare("le", self, other)

    def __gt__(self, other):
        return compare("gt", self, other)

    def __ge__(self, other):
        return compare("ge", self, other)

    def __bool__(self):
        raise TypeError(f"{self!r} has no truth value while tracing (its values exist only when the program runs): "
                        f"choose elementwise with kiln.where, not if/and/or/max")

    def __matmul__(self, other):
        return matmul(self, other)


#: The traced ops kiln.ops also runs on arrays.
_ON_ARRAYS = ("matmul", "attention", "softmax", "rms_norm", "layer_norm", "rope", "paged_attention", "append_kv")


def _graph(op):
    if not _GRAPHS:
        elsewhere = f"; on numpy arrays use kiln.ops.{op}" if op in _ON_ARRAYS else ""
        raise RuntimeError(f"kiln.{op} builds IR inside a @kiln.jit function{elsewhere}")
    return _GRAPHS[-1]


def check_floats(op, **tensors):
    """Checks that the tensors share one floating element type and returns it."""
    _graph(op)
    element = first = None
    for name, tensor in tensors.items():
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{op}: '{name}' must be a tensor argument of the jitted function, got "
                            f"{type(tensor).__name__}")
        if tensor.element not in _FLOATS:
            raise TypeError(f"{op}: '{name}' has dtype {tensor.dtype}; expected float32, float16 or bfloat16")
        if element is None:
            element, first = tensor.element, name
        elif tensor.element != element:
            raise TypeError(f"{op}: '{name}' has dtype {tensor.dtype} but '{first}' has {DTYPES[element]}")
    return element


#: The integer element types arithmetic takes (wrapping; see kiln.div for its rounding).
_INTEGERS = ("i32", "i64")


def _binary(op, lhs, rhs):
    """``kiln.<op>`` of two tensors of one float or integer type, or a tensor and a Python number (which takes
    the tensor's type, exactly for integers)."""
    tensor = lhs if isinstance(lhs, Tensor) else rhs
    graph = _graph(op)
    if isinstance(tensor, Tensor) and tensor.element == "i1":
        raise TypeError(f"{op}: arithmetic on bool tensors; kiln computes it on floats and int32/int64 (use "
                        f"logical_and/or/not, or cast)")
    if isinstance(tensor, Tensor) and tensor.element in _INTEGERS:
        if op == "div":
            raise TypeError(f"div: '/' of {tensor.dtype} tensors is true division, which kiln does not compute in "
                            f"integers: use floor_divide ('//') or trunc_divide, or cast to a float type")
        (lhs, rhs), element = _same_element(op, ("lhs", "rhs"), (lhs, rhs))
        return _emit_binary(graph, op, lhs, rhs, element)
    check_floats(op, **{"lhs" if tensor is lhs else "rhs": tensor})
    if isinstance(lhs, (int, float)):
        lhs = _scalar(graph, lhs, tensor.element)
    if isinstance(rhs, (int, float)):
        rhs = _scalar(graph, rhs, tensor.element)
    element = check_floats(op, lhs=lhs, rhs=rhs)
    return _emit_binary(graph, op, lhs, rhs, element)


def _emit_binary(graph, op, lhs, rhs, element):
    try:
        shape = np.broadcast_shapes(lhs.shape, rhs.shape)
    except ValueError:
        raise ValueError(f"{op}: shapes {lhs.shape} and {rhs.shape} do not broadcast") from None
    out = tensor_type(shape, element)
    return graph.emit(f"kiln.{op} {lhs.name}, {rhs.name} : {lhs.type}, {rhs.type} -> {out}", shape, element)


#: The values an integer element type holds.
_INTEGER_RANGES = {"i1": (0, 1), "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1)}


def _scalar(graph, value, element):
    """A Python number or bool as a rank-0 constant of ``element``; a TypeError when the type cannot hold it
    exactly (0.5 against integers, 2 against bools: numpy would promote, kiln does not)."""
    if element in _FLOATS:
        return constant(float(value), element)
    low, high = _INTEGER_RANGES[element]
    if not (float(value).is_integer() and low <= value <= high):
        raise TypeError(f"{value!r} is not a value of the {element} tensor it meets (numpy would promote the "
                        f"tensor; kiln does not)")
    literal = ("true" if value else "false") if element == "i1" else str(int(value))
    return graph.emit(f"kiln.constant dense<{literal}> : {tensor_type((), element)}", (), element)


def _same_element(op, names, values):
    """The values (Tensors or Python numbers, at least one a Tensor) as Tensors of one element type, any of
    kiln's (a number takes the tensors' type), and that type."""
    graph = _graph(op)
    tensors = [v for v in values if isinstance(v, Tensor)]
    if not tensors:
        raise TypeError(f"{op}: needs at least one tensor among {', '.join(names)}")
    element = tensors[0].element
    result = []
    for name, value in zip(names, values):
        if isinstance(value, (bool, numbers.Number, np.bool_, np.number)):
            value = _scalar(graph, value, element)
        elif not isinstance(value, Tensor):
            raise TypeError(f"{op}: '{name}' must be a tensor or a number, got {type(value).__name__}")
        elif value.element != element:
            raise TypeError(f"{op}: '{name}' has dtype {value.dtype} but the other operand has {DTYPES[element]}")
        result.append(value)
    return result, element


def _broadcast_shape(op, *tensors):
    try:
        return np.broadcast_shapes(*(t.shape for t in tensors))
    except ValueError:
        shapes = " and ".join(str(t.shape) for t in tensors)
        raise ValueError(f"{op}: shapes {shapes} do not broadcast") from None


#: kiln.compare's predicates.
PREDICATES = ("lt", "le", "gt", "ge", "eq", "ne")


def compare(predicate, lhs, rhs):
    """``lhs <predicate> rhs`` elementwise as a bool tensor: ``predicate`` one of lt, le, gt, ge, eq, ne; the
    operands share an element type (float, integer or bool; a Python number takes the tensor's) and broadcast.
    Floats compare as numpy does: a NaN makes every predicate false but ne."""
    if predicate not in PREDICATES:
        raise ValueError(f"compare: unknown predicate {predicate!r} ({', '.join(PREDICATES)})")
    (lhs, rhs), _ = _same_element("compare", ("lhs", "rhs"), (lhs, rhs))
    shape = _broadcast_shape("compare", lhs, rhs)
    return lhs.graph.emit(f"kiln.compare {predicate} {lhs.name}, {rhs.name} : {lhs.type}, {rhs.type} -> "
                          f"{tensor_type(shape, 'i1')}", shape, "i1")


def equal(lhs, rhs):
    return compare("eq", lhs, rhs)


def not_equal(lhs, rhs):
    return compare("ne", lhs, rhs)


def _check_bool(op, **tensors):
    for name, tensor in tensors.items():
        if not isinstance(tensor, Tensor) or tensor.element != "i1":
            raise TypeError(f"{op}: '{name}' must be a bool tensor")


def logical_not(x):
    _check_bool("logical_not", x=x)
    return compare("eq", x, False)


def logical_and(a, b):
    _check_bool("logical_and", a=a, b=b)
    return select(a, b, False)


def logical_or(a, b):
    _check_bool("logical_or", a=a, b=b)
    return select(a, True, b)


def logical_xor(a, b):
    _check_bool("logical_xor", a=a, b=b)
    return compare("ne", a, b)


def fmod(a, b):
    """The remainder of truncated division, with the sign of ``a`` (C's fmod, torch.fmod)."""
    return _binary("fmod", a, b)


def remainder(a, b):
    """The remainder of floored division, with the sign of ``b`` (Python's %, torch.remainder)."""
    return _binary("remainder", a, b)


def trunc_divide(a, b):
    """The quotient rounded toward zero (torch.div with rounding_mode="trunc", C's integer division); on
    integers a zero divisor gives 0."""
    (a, b), element = _same_element("trunc_divide", ("a", "b"), (a, b))
    if element in _INTEGERS:
        return _emit_binary(a.graph, "div", a, b, element)
    quotient = _binary("div", a, b)
    return select(compare("lt", quotient, 0), ceil(quotient), floor(quotient))


def floor_divide(a, b):
    """The quotient rounded down (Python's //, torch.floor_divide); on integers a zero divisor gives 0, on floats
    a / b (torch's inf or NaN)."""
    (a, b), element = _same_element("floor_divide", ("a", "b"), (a, b))
    rest = fmod(a, b)
    moved = logical_and(not_equal(rest, 0), not_equal(compare("lt", b, 0), compare("lt", rest, 0)))
    if element in _INTEGERS:
        # The truncated quotient, one less where the remainder's sign differs from the divisor's (a - a % b
        # would wrap near the type's limits).
        quotient = _emit_binary(a.graph, "div", a, b, element)
        return select(moved, quotient - 1, quotient)
    # Python's float floor division, which torch follows: floor(a / b) would round 1 // 0.1 up to 10, not 9.
    # The exact remainder fixes the quotient instead, then a quotient within half of an integer snaps to it; a
    # zero takes the sign of a / b.
    quotient = (a - rest) / b
    quotient = select(moved, quotient - 1, quotient)
    whole = floor(quotient)
    whole = select(compare("gt", quotient - whole, 0.5), whole + 1, whole)
    whole = select(equal(whole, 0), (a / b) * 0.0, whole)
    return select(equal(b, 0), a / b, whole)


def _unary(op, x, suffix=""):
    if op in ("neg", "abs") and isinstance(x, Tensor) and x.element in _INTEGERS:  # wrapping, as numpy's
        return _graph(op).emit(f"kiln.{op} {x.name} : {x.type}", x.shape, x.element)
    check_floats(op, x=x)
    return _graph(op).emit(f"kiln.{op} {x.name}{suffix} : {x.type}", x.shape, x.element)


def relu(x):
    return _unary("relu", x)


def silu(x):
    return _unary("silu", x)


def sigmoid(x):
    return _unary("sigmoid", x)


def exp(x):
    if isinstance(x, mods.Scalar):
        return mods.unary("exp", x)
    return _unary("exp", x)


def tanh(x):
    if isinstance(x, mods.Scalar):
        return mods.unary("tanh", x)
    return _unary("tanh", x)


def gelu(x, approximate="none"):
    """GELU, exact (``approximate="none"``) or with the tanh approximation (``"tanh"``)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _unary("gelu", x, " approximate(tanh)" if approximate == "tanh" else "")


#: Activations matmul fuses, by name.
ACTIVATIONS = {"relu": relu, "silu": silu, "gelu": gelu, "gelu_tanh": lambda x: gelu(x, "tanh")}


def check_fp32_precision(op, fp32_precision, element):
    """Checks an op's ``fp32_precision``: None, or "tf32" / "ieee" with f32 operands."""
    if fp32_precision not in (None, "tf32", "ieee"):
        raise ValueError(f"{op}: fp32_precision must be 'tf32' or 'ieee', got {fp32_precision!r}")
    if fp32_precision is not None and element != "f32":
        raise ValueError(f"{op}: fp32_precision applies to f32 operands, got {element}")


def matmul(a, b, *, bias=None, activation=None, fp32_precision=None, transpose_b=False):
    """``activation(a @ b + bias)`` with numpy batch broadcasting; a: [..., M, K], b: [..., K, N], bias: [N].
    ``fp32_precision`` (f32 operands): "tf32" (the default) multiplies on a GPU's TF32 tensor cores, "ieee" to
    f32 accuracy (3xTF32, about a third of the speed); the host backend multiplies in f32 either way.
    ``transpose_b``: b is [..., N, K] (a linear layer's weight) and is read transposed, with no copy."""
    tensors = {"a": a, "b": b} if bias is None else {"a": a, "b": b, "bias": bias}
    element = check_floats("matmul", **tensors)
    check_fp32_precision("matmul", fp32_precision, element)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: 'a' and 'b' need rank >= 2, got shapes {a.shape} and {b.shape}")
    k_axis, n_axis = (-1, -2) if transpose_b else (-2, -1)
    if a.shape[-1] != b.shape[k_axis]:
        raise ValueError(f"matmul: 'a' has K={a.shape[-1]} (shape {a.shape}) but 'b' has K={b.shape[k_axis]} "
                         f"(shape {b.shape}{', read transposed' if transpose_b else ''})")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: the batch dims of 'a' {a.shape[:-2]} and 'b' {b.shape[:-2]} do not broadcast") \
            from None
    n = b.shape[n_axis]
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"matmul: 'bias' has shape {bias.shape}, expected ({n},)")
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"matmul: unknown activation '{activation}' (one of {', '.join(ACTIVATIONS)})")
    shape = batch + (a.shape[-2], n)
    precision = f' {{fp32_precision = "{fp32_precision}"}}' if fp32_precision else ""
    flag = " transpose_rhs" if transpose_b else ""
    out = a.graph.emit(f"kiln.matmul {a.name}, {b.name}{flag}{precision} : {a.type}, {b.type} -> "
                       f"{tensor_type(shape, element)}", shape, element)
    if bias is not None:
        out = out + bias
    return ACTIVATIONS[activation](out) if activation is not None else out


def attention(q, k, v, *, causal=False, scale=None, mask=None, score_mod=None, mask_mod=None, tables=None,
              nondecreasing=None, fp32_precision=None):
    """Scaled dot-product attention on [B, H, S, D]; GQA/MQA when k and v have fewer heads than q; ``causal``
    aligned bottom-right when seq_q != seq_k; ``mask`` additive, broadcastable to [B, H, Sq, Sk]; ``score_mod``
    and ``mask_mod`` as torch's flex_attention takes them (kiln/mods.py), reading the tensors they close over.
    ``tables`` maps (by id) a value the mods close over to the tensor that stands for it (kiln.ops passes arrays
    that way), and ``nondecreasing`` gives the positions of the promised tables among them (by default those
    mask_mod's promise names: kiln.ops passes the positions of the call being traced, whose tables may be new
    arrays behind the same closure). ``fp32_precision`` (f32 q, k, v) as matmul takes it: "tf32" (the default)
    multiplies q k^T and P v on a GPU's TF32 tensor cores, "ieee" to f32 accuracy (3xTF32)."""
    tensors = {"q": q, "k": k, "v": v} if mask is None else {"q": q, "k": k, "v": v, "mask": mask}
    element = check_floats("attention", **tensors)
    check_fp32_precision("attention", fp32_precision, element)
    for name in ("q", "k", "v"):
        if tensors[name].ndim != 4:
            raise ValueError(f"attention: '{name}' must be [B, H, S, D], got shape {tensors[name].shape}")
    (b, hq, sq, d), (bk, hk, sk, dk) = q.shape, k.shape
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"attention: 'k' {k.shape} and 'v' {v.shape} differ in batch, heads or sequence")
    if d != dk:
        raise ValueError(f"attention: head dim of 'q' is {d} but of 'k' is {dk}")
    for name in ("q", "v"):
        if tensors[name].shape[3] == 0:
            raise ValueError(f"attention: '{name}' has head dim 0 (dim 3, shape {tensors[name].shape}); it must be "
                             f"positive")
    if sk == 0:  # every query row would take a softmax over no scores
        raise ValueError(f"attention: 'k' has sequence length 0 (dim 2, shape {k.shape}); each query needs at least "
                         f"one key to attend to")
    if bk != b:
        raise ValueError(f"attention: batch of 'q' is {b} but of 'k' is {bk}")
    if hk == 0 or hq % hk:
        raise ValueError(f"attention: {hq} query heads cannot share {hk} key/value heads (not a divisor)")
    if not isinstance(causal, bool):
        raise TypeError(f"attention: 'causal' must be True or False, got {causal!r}")
    if causal and sq > sk:
        raise ValueError(f"attention: causal attention aligns the mask bottom-right and needs seq_q <= seq_k, got "
                         f"seq_q = {sq} (from 'q') and seq_k = {sk} (from 'k')")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"attention: 'scale' must be a number, got {type(scale).__name__}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"attention: 'scale' must be a finite positive number, got {scale}")
    full = (b, hq, sq, sk)
    if mask is not None and (mask.ndim > 4 or _broadcasts_to(mask.shape, full) is False):
        raise ValueError(f"attention: 'mask' of shape {mask.shape} does not broadcast to {full}")
    shape = (b, hq, sq, v.shape[3])
    masked = f" mask({mask.name} : {mask.type})" if mask is not None else ""
    flags = " causal" if causal else ""
    found = mod_values(score_mod, mask_mod)
    flags += mod_regions(q.graph, score_mod, mask_mod, tables or {}, found)
    attributes = [f"scale = {float_literal(scale)} : f32"] if scale is not None else []
    promised = mods.nondecreasing_positions(mask_mod, found) if nondecreasing is None else nondecreasing
    if promised:
        attributes.append(f"nondecreasing_tables = array<i64: {', '.join(map(str, promised))}>")
    if fp32_precision:
        attributes.append(f'fp32_precision = "{fp32_precision}"')
    flags += f" {{{', '.join(attributes)}}}" if attributes else ""
    return q.graph.emit(f"kiln.attention {q.name}, {k.name}, {v.name}{masked}{flags} : {q.type}, {k.type}, "
                        f"{v.type} -> {tensor_type(shape, element)}", shape, element)


def mod_values(score_mod, mask_mod):
    """What the mods read, in the order of the mod operands: traced tensors, or arrays that a ``tables`` mapping
    stands tensors in for (none without mods)."""
    for name, fn in (("score_mod", score_mod), ("mask_mod", mask_mod)):
        if fn is not None and not callable(fn):
            raise TypeError(f"attention: '{name}' must be a function, got {type(fn).__name__}")
    if score_mod is None and mask_mod is None:
        return []
    return mods.captured((score_mod, mask_mod), mods.table_kinds(Tensor))


def mod_regions(graph, score_mod, mask_mod, tables, found=None):
    """The mod operands and the score_mod / mask_mod regions of an attention, as text (the ONNX importer writes
    Attention's softcap with it too); ``found``: mod_values(score_mod, mask_mod), when the caller has it."""
    found = mod_values(score_mod, mask_mod) if found is None else found
    if score_mod is None and mask_mod is None:
        return ""
    pairs = [(value, tables.get(id(value), value)) for value in found]
    for _, operand in pairs:
        if not isinstance(operand, Tensor):
            raise TypeError(f"attention: a score_mod or mask_mod reads a {type(operand).__name__}; tables must be "
                            f"arguments of the jitted function or arrays passed to kiln.ops.attention")
    operands = [operand for _, operand in pairs]
    prefix = f"r{graph.count}"
    text = ""
    if operands:
        text += f" mod_operands({', '.join(t.name for t in operands)} : {', '.join(t.type for t in operands)})"
    if score_mod is not None:
        text += " score_mod " + mods.trace_region(score_mod, "score", f"{prefix}s", pairs)
    if mask_mod is not None:
        text += " mask_mod " + mods.trace_region(mask_mod, "mask", f"{prefix}m", pairs)
    return text


#: Rows per page the paged KV cache ops take (kiln.paged_attention, kiln.append_kv).
PAGE_SIZES = (16, 256)


def check_i32(op, **tensors):
    """Checks that the tensors (block tables, lengths, positions) are int32."""
    for name, tensor in tensors.items():
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{op}: '{name}' must be a tensor argument of the jitted function, got "
                            f"{type(tensor).__name__}")
        if tensor.element != "i32":
            raise TypeError(f"{op}: '{name}' has dtype {tensor.dtype}; expected int32")


def _check_caches(op, k_cache, v_cache):
    """Checks a [num_pages, page_size, kv_heads, head_dim] cache pair."""
    if k_cache.ndim != 4:
        raise ValueError(f"{op}: 'k_cache' must be [num_pages, page_size, kv_heads, head_dim], got shape "
                         f"{k_cache.shape}")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"{op}: 'v_cache' has shape {v_cache.shape} but 'k_cache' has {k_cache.shape}")
    num_pages, page_size, heads, dim = k_cache.shape
    if num_pages == 0:
        raise ValueError(f"{op}: 'k_cache' has no pages (dim 0 is 0)")
    if not PAGE_SIZES[0] <= page_size <= PAGE_SIZES[1]:
        raise ValueError(f"{op}: 'k_cache' has page size {page_size} (dim 1); it must be in "
                         f"[{PAGE_SIZES[0]}, {PAGE_SIZES[1]}]")
    if heads == 0 or dim == 0:
        raise ValueError(f"{op}: 'k_cache' has shape {k_cache.shape}; kv_heads and head_dim must be positive")


def _check_tables(op, block_table, lengths_name, lengths, batch, page_size):
    """Checks block_table [batch, max_pages] and a [batch] lengths/positions vector; returns the table's
    capacity in keys per sequence."""
    if block_table.ndim != 2 or block_table.shape[0] != batch or block_table.shape[1] == 0:
        raise ValueError(f"{op}: 'block_table' must be [batch, max_pages] with batch {batch} and max_pages > 0, got "
                         f"shape {block_table.shape}")
    if lengths.shape != (batch,):
        raise ValueError(f"{op}: '{lengths_name}' must have shape ({batch},) (one per sequence), got "
                         f"{lengths.shape}")
    return block_table.shape[1] * page_size


def paged_attention(q, k_cache, v_cache, block_table, seq_lens, *, scale=None, fp32_precision=None):
    """Attention of each sequence's ``Sq`` newest tokens ``q`` [B, Hq, Sq, D] over its keys in the paged caches
    [num_pages, page_size, Hkv, D], found through ``block_table`` [B, max_pages] (int32), ``seq_lens`` [B] (int32)
    long; causal bottom-right within each sequence. ``fp32_precision`` as attention takes it."""
    op = "paged_attention"
    element = check_floats(op, q=q, k_cache=k_cache, v_cache=v_cache)
    check_fp32_precision(op, fp32_precision, element)
    check_i32(op, block_table=block_table, seq_lens=seq_lens)
    if q.ndim != 4:
        raise ValueError(f"{op}: 'q' must be [B, H, S, D], got shape {q.shape}")
    _check_caches(op, k_cache, v_cache)
    batch, heads, seq_q, dim = q.shape
    _, page_size, kv_heads, cache_dim = k_cache.shape
    if cache_dim != dim:
        raise ValueError(f"{op}: head dim of 'q' is {dim} but of 'k_cache' is {cache_dim}")
    if heads % kv_heads:
        raise ValueError(f"{op}: {heads} query heads cannot share {kv_heads} key/value heads (not a divisor)")
    capacity = _check_tables(op, block_table, "seq_lens", seq_lens, batch, page_size)
    if seq_q > capacity:
        raise ValueError(f"{op}: 'q' has {seq_q} new tokens per sequence but 'block_table' holds {capacity} keys "
                         f"per sequence (max_pages * page_size)")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"{op}: 'scale' must be a number, got {type(scale).__name__}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"{op}: 'scale' must be a finite positive number, got {scale}")
    attributes = [f"scale = {float_literal(scale)} : f32"] if scale is not None else []
    if fp32_precision:
        attributes.append(f'fp32_precision = "{fp32_precision}"')
    flags = f" {{{', '.join(attributes)}}}" if attributes else ""
    tensors = (q, k_cache, v_cache, block_table, seq_lens)
    return q.graph.emit(f"kiln.paged_attention {', '.join(t.name for t in tensors)}{flags} : "
                        f"{', '.join(t.type for t in tensors)} -> {q.type}", q.shape, element)


def append_kv(k_cache, v_cache, k, v, block_table, positions):
    """``(k_cache, v_cache)`` with the rows ``k``, ``v`` [B, Hkv, S_new, D] written at positions
    ``positions[b] + s`` of each sequence, in the pages ``block_table`` [B, max_pages] names (int32)."""
    op = "append_kv"
    element = check_floats(op, k_cache=k_cache, v_cache=v_cache, k=k, v=v)
    check_i32(op, block_table=block_table, positions=positions)
    _check_caches(op, k_cache, v_cache)
    if k.ndim != 4:
        raise ValueError(f"{op}: 'k' must be [B, kv_heads, S_new, D], got shape {k.shape}")
    if v.shape != k.shape:
        raise ValueError(f"{op}: 'v' has shape {v.shape} but 'k' has {k.shape}")
    _, page_size, kv_heads, dim = k_cache.shape
    if k.shape[1] != kv_heads or k.shape[3] != dim:
        raise ValueError(f"{op}: 'k' has {k.shape[1]} heads of dim {k.shape[3]} but 'k_cache' holds {kv_heads} "
                         f"of dim {dim}")
    capacity = _check_tables(op, block_table, "positions", positions, k.shape[0], page_size)
    if k.shape[2] > capacity:
        raise ValueError(f"{op}: 'k' has {k.shape[2]} new tokens per sequence but 'block_table' holds {capacity} "
                         f"keys per sequence (max_pages * page_size)")
    tensors = (k_cache, v_cache, k, v, block_table, positions)
    return k_cache.graph.emit(f"kiln.append_kv {', '.join(t.name for t in tensors)} : "
                              f"{', '.join(t.type for t in tensors)} -> {k_cache.type}, {v_cache.type}",
                              k_cache.shape, element, results=2)


def _broadcasts_to(shape, full):
    try:
        return np.broadcast_shapes(shape, full) == full
    except ValueError:
        return False


def softmax(x, axis=-1):
    """Softmax of ``x`` along ``axis``."""
    check_floats("softmax", x=x)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"softmax: axis {axis} is out of range for 'x' of rank {x.ndim}")
    if x.shape[axis] == 0:
        raise ValueError(f"softmax: 'x' has size 0 along axis {axis % x.ndim} (shape {x.shape}); softmax needs at "
                         f"least one element to normalise over")
    return x.graph.emit(f"kiln.softmax {x.name} axis {axis % x.ndim} : {x.type}", x.shape, x.element)


def _check_norm_input(op, x):
    if x.ndim == 0:
        raise ValueError(f"{op}: 'x' must have rank >= 1 to normalise its last dimension, got a scalar")
    if x.shape[-1] == 0:
        raise ValueError(f"{op}: 'x' has size 0 in its last dimension (dim {x.ndim - 1}, shape {x.shape}); there is "
                         f"nothing to normalise over")


def _check_norm_weight(op, x, name, weight):
    if weight is not None and weight.shape != (x.shape[-1],):
        raise ValueError(f"{op}: '{name}' has shape {weight.shape}, expected ({x.shape[-1]},)")


def rms_norm(x, weight, eps=1e-6):
    """``x / sqrt(mean(x^2, -1) + eps) * weight`` over the last dimension."""
    check_floats("rms_norm", x=x, weight=weight)
    _check_norm_input("rms_norm", x)
    _check_norm_weight("rms_norm", x, "weight", weight)
    return x.graph.emit(f"kiln.rms_norm {x.name}, {weight.name} epsilon {float_literal(eps)} : {x.type}, "
                        f"{weight.type}", x.shape, x.element)


def layer_norm(x, weight, bias=None, eps=1e-5):
    """Layer normalisation over the last dimension, times ``weight``, plus ``bias`` when given."""
    tensors = {"x": x, "weight": weight} if bias is None else {"x": x, "weight": weight, "bias": bias}
    check_floats("layer_norm", **tensors)
    _check_norm_input("layer_norm", x)
    _check_norm_weight("layer_norm", x, "weight", weight)
    _check_norm_weight("layer_norm", x, "bias", bias)
    operands = ", ".join(t.name for t in tensors.values())
    types = ", ".join(t.type for t in tensors.values())
    return x.graph.emit(f"kiln.layer_norm {operands} epsilon {float_literal(eps)} : {types}", x.shape, x.element)


def rope(x, cos, sin, *, interleaved=False, seq_dim=None):
    """Rotary embedding of ``x`` [..., S, D] by ``cos``, ``sin`` [S, D/2] (rotate-half, or GPT-J interleaved),
    or by full [S, D] tables, a factor per element (``x * cos + rotate_half(x) * sin`` exactly).
    ``seq_dim`` names another dimension of ``x`` as the positions: a decode step's q [B, H, D] with
    ``seq_dim=0`` takes the table rows of each sequence's position."""
    check_floats("rope", x=x, cos=cos, sin=sin)
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"rope: 'x' must be [..., S, D] with D even, got shape {x.shape}")
    if seq_dim is not None and (isinstance(seq_dim, bool) or not isinstance(seq_dim, int)
                                or not 0 <= seq_dim < x.ndim - 1):
        raise ValueError(f"rope: 'seq_dim' must be a dimension of 'x' before the last (0 to {x.ndim - 2}), got "
                         f"{seq_dim!r}")
    position_dim = x.ndim - 2 if seq_dim is None else seq_dim
    half, full = (x.shape[position_dim], x.shape[-1] // 2), (x.shape[position_dim], x.shape[-1])
    if cos.shape not in (half, full):
        raise ValueError(f"rope: 'cos' has shape {cos.shape}, expected {half} or {full}")
    if sin.shape != cos.shape:
        raise ValueError(f"rope: 'sin' has shape {sin.shape}, expected that of 'cos', {cos.shape}")
    flag = " interleaved" if interleaved else ""
    if seq_dim is not None:
        flag += f" {{seq_dim = {seq_dim} : i64}}"
    return x.graph.emit(f"kiln.rope {x.name}, {cos.name}, {sin.name}{flag} : {x.type}, {cos.type}, {sin.type}",
                        x.shape, x.element)


def transpose(x, permutation):
    """``x`` with its dimensions permuted."""
    if sorted(permutation) != list(range(x.ndim)):
        raise ValueError(f"transpose: {list(permutation)} is not a permutation of the {x.ndim} dims of 'x'")
    shape = tuple(x.shape[p] for p in permutation)
    perm = ", ".join(str(p) for p in permutation)
    return x.graph.emit(f"kiln.transpose {x.name} [{perm}] : {x.type} -> {tensor_type(shape, x.element)}",
                        shape, x.element)


def reshape(x, shape):
    """``x`` with a new shape of the same element count."""
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != math.prod(x.shape):
        raise ValueError(f"reshape: 'x' of shape {x.shape} cannot become {shape}")
    return x.graph.emit(f"kiln.reshape {x.name} : {x.type} -> {tensor_type(shape, x.element)}", shape, x.element)


def element_name(dtype):
    """The kiln element type of a numpy dtype, or None when kiln has none."""
    return _ELEMENT_NAMES.get(np.dtype(dtype))


# Data movement, reductions and the remaining elementwise ops, one kiln op each: what an exported graph (an FX
# aten graph, kiln/torch_backend.py) is written in besides the fused ops above.

def constant(value, element, shape=()):
    """A splat constant of ``shape``; infinities and NaN are written as their bit pattern (MLIR's parser takes
    no ``inf`` literal)."""
    graph = _graph("constant")
    if math.isfinite(value):
        literal = float_literal(value)
    else:
        bits = np.array([value], dtype=DTYPES[element]).view({2: np.uint16, 4: np.uint32}[DTYPES[element].itemsize])
        literal = f"0x{int(bits[0]):0{DTYPES[element].itemsize * 2}X}"
    return graph.emit(f"kiln.constant dense<{literal}> : {tensor_type(shape, element)}", shape, element)


def sqrt(x):
    return _unary("sqrt", x)


def rsqrt(x):
    return _unary("rsqrt", x)


def log(x):
    return _unary("log", x)


def erf(x):
    return _unary("erf", x)


def sin(x):
    return _unary("sin", x)


def cos(x):
    return _unary("cos", x)


def floor(x):
    return _unary("floor", x)


def ceil(x):
    return _unary("ceil", x)


def reciprocal(x):
    return _unary("reciprocal", x)


def absolute(x):
    return _unary("abs", x)


def maximum(a, b):
    """Elementwise maximum with numpy broadcasting."""
    return _binary("max", a, b)


def minimum(a, b):
    """Elementwise minimum with numpy broadcasting."""
    return _binary("min", a, b)


def power(a, b):
    """``a ** b`` elementwise with numpy broadcasting."""
    return _binary("pow", a, b)


def select(condition, on_true, on_false):
    """``condition ? on_true : on_false`` elementwise: a bool condition, two choices of one element type (a
    Python number takes the other's; both numbers are not allowed); the three shapes broadcast."""
    graph = _graph("select")
    if not isinstance(condition, Tensor) or condition.element != "i1":
        raise TypeError("select: 'condition' must be a bool tensor")
    (on_true, on_false), element = _same_element("select", ("on_true", "on_false"), (on_true, on_false))
    shape = _broadcast_shape("select", condition, on_true, on_false)
    return graph.emit(f"kiln.select {condition.name}, {on_true.name}, {on_false.name} : {condition.type}, "
                      f"{on_true.type}, {on_false.type} -> {tensor_type(shape, element)}", shape, element)


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b``: ``select`` on tensors, a traced select inside an attention's
    mods (kiln.mods.where)."""
    if isinstance(condition, mods.Scalar):
        return mods.where(condition, a, b)
    return select(condition, a, b)


def cast(x, element):
    """``x`` converted to the element type ``element``, any of kiln's ("f32", "f16", "bf16", "i32", "i64",
    "i1"): floats by one rounding, floats to integers by truncation toward zero, to bool by "not zero"."""
    _graph("cast")
    if not isinstance(x, Tensor):
        raise TypeError(f"cast: 'x' must be a tensor argument of the jitted function, got {type(x).__name__}")
    if element not in DTYPES:
        raise TypeError(f"cast: the target element type must be one of {', '.join(DTYPES)}, got {element}")
    if element == x.element:
        return x
    return x.graph.emit(f"kiln.cast {x.name} : {x.type} to {tensor_type(x.shape, element)}", x.shape, element)


def reduce(kind, x, axes, keep_dims=False):
    """``sum``, ``mean``, ``max`` or ``min`` of ``x`` over ``axes`` (negative axes count from the end)."""
    check_floats("reduce", x=x)
    if kind not in ("sum", "mean", "max", "min"):
        raise ValueError(f"reduce: unknown kind {kind!r} (sum, mean, max or min)")
    axes = sorted({a % x.ndim for a in axes}) if x.ndim else []
    if not axes or any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"reduce: needs at least one non-empty axis of 'x' (shape {x.shape}), got {axes}")
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep_dims or i not in axes)
    flag = " keep_dims" if keep_dims else ""
    return x.graph.emit(f"kiln.reduce {kind} {x.name} axes {axes}{flag} : {x.type} -> "
                        f"{tensor_type(shape, x.element)}", shape, x.element)


def broadcast(x, shape):
    """``x`` expanded to ``shape`` as numpy broadcasts it."""
    shape = tuple(int(d) for d in shape)
    if _broadcasts_to(x.shape, shape) is False or len(shape) < x.ndim:
        raise ValueError(f"broadcast: shape {x.shape} does not broadcast to {shape}")
    if shape == x.shape:
        return x
    return x.graph.emit(f"kiln.broadcast {x.name} : {x.type} -> {tensor_type(shape, x.element)}", shape, x.element)


def concat(tensors, axis):
    """The tensors joined along ``axis``; they share rank, element type and every other size."""
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("concat: expects a non-empty list of tensors")
    first = tensors[0]
    axis %= first.ndim
    for t in tensors[1:]:
        if t.element != first.element or t.ndim != first.ndim or \
                any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise ValueError(f"concat: {t.type} does not join {first.type} along axis {axis}")
    shape = first.shape[:axis] + (sum(t.shape[axis] for t in tensors),) + first.shape[axis + 1:]
    return first.graph.emit(f"kiln.concat {', '.join(t.name for t in tensors)} axis {axis} : "
                            f"{', '.join(t.type for t in tensors)} -> {tensor_type(shape, first.element)}",
                            shape, first.element)


def strided_slice(x, offsets, sizes, strides):
    """``x[offsets + i * strides]`` for ``i`` below ``sizes``, every dimension; non-empty and inside ``x``."""
    offsets, sizes, strides = (tuple(int(v) for v in values) for values in (offsets, sizes, strides))
    if not len(offsets) == len(sizes) == len(strides) == x.ndim:
        raise ValueError(f"slice: needs one offset, size and stride per dimension of 'x' (rank {x.ndim})")
    for o, n, s, d in zip(offsets, sizes, strides, x.shape):
        if o < 0 or n <= 0 or s <= 0 or o + (n - 1) * s >= d:
            raise ValueError(f"slice: offsets {offsets}, sizes {sizes}, strides {strides} leave 'x' of shape "
                             f"{x.shape}")
    if sizes == x.shape:
        return x
    return x.graph.emit(f"kiln.slice {x.name} offsets {list(offsets)} strides {list(strides)} : {x.type} -> "
                        f"{tensor_type(sizes, x.element)}", sizes, x.element)
