"""Converters from aten nodes to kiln IR, for the torch.compile backend (kiln/torch_backend.py).

Why: what the backend hands Kiln is decided by converting each aten node through Kiln's tracer (kiln/trace.py),
one converter per aten op. Keeping the converters apart from the partitioning and running of the backend makes
each aten op's meaning in kiln ops one small function, read and extended in one place. A converter raises
Unsupported for what Kiln does not express, and every converted result is checked against the shape and dtype
torch recorded for the node, so a node whose conversion would differ stays in torch.
"""

import math
import operator

import torch
import torch.fx
from torch.fx.operator_schemas import normalize_function

from . import trace

aten = torch.ops.aten

ELEMENTS = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
             torch.int32: "i32", torch.bool: "i1"}


class Unsupported(Exception):
    """A node (or an argument of it) that Kiln does not express; the node stays in torch."""


# ----------------------------------------------------------------------------------------------------------------
# Converters: one aten op to kiln ops. Each takes the node and its arguments by name, with every tensor argument
# already a kiln Tensor, and returns a Tensor (or a tuple with None where Kiln has no value, e.g. a logsumexp).
# ----------------------------------------------------------------------------------------------------------------

def recorded(node):
    """What torch recorded for the node's result: a fake tensor, or a tuple of them."""
    return node.meta.get("val")


def _out_shape(node):
    return tuple(int(d) for d in recorded(node).shape)


def _out_element(node):
    element = ELEMENTS.get(recorded(node).dtype)
    if element is None:
        raise Unsupported(f"dtype {recorded(node).dtype}")
    return element


def _floats_as(node, *values):
    """The tensor operands cast to the node's result element type (torch's type promotion computes there)."""
    element = _out_element(node)
    return [trace.cast(v, element) if isinstance(v, trace.Tensor) and v.element != element else v for v in values]


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unsupported(f"a {type(value).__name__} operand")
    return value


def _operand(value):
    return value if isinstance(value, trace.Tensor) else _number(value)


def _scaled(value, alpha):
    return value if alpha == 1 else value * _number(alpha)


def _add(node, a):
    x, y = _floats_as(node, _operand(a["input"]), _operand(a["other"]))
    return x + _scaled(y, a.get("alpha", 1))


def _sub(node, a):
    x, y = _floats_as(node, _operand(a["input"]), _operand(a["other"]))
    return x - _scaled(y, a.get("alpha", 1))


def _rsub(node, a):
    x, y = _floats_as(node, _operand(a["input"]), _operand(a["other"]))
    return y - _scaled(x, a.get("alpha", 1))


def _mul(node, a):
    x, y = _floats_as(node, _operand(a["input"]), _operand(a["other"]))
    return x * y


def _div(node, a):
    x, y = _floats_as(node, _operand(a["input"]), _operand(a["other"]))
    rounding = a.get("rounding_mode")
    if rounding is None:
        return x / y
    if rounding not in ("trunc", "floor"):
        raise Unsupported(f"div with rounding mode {rounding!r}")
    return (trace.trunc_divide if rounding == "trunc" else trace.floor_divide)(x, y)


def _floor_divide(node, a):
    return trace.floor_divide(*_floats_as(node, _operand(a["input"]), _operand(a["other"])))


def _unary(function):
    return lambda node, a: function(_floats_as(node, a["input"])[0])


def _pow(node, a):
    base, exponent = _floats_as(node, _operand(a["input"]), _operand(a["exponent"]))
    if not isinstance(base, trace.Tensor):
        raise Unsupported("pow of a number")
    if isinstance(exponent, trace.Tensor):
        return trace.power(base, exponent)
    special = {1: lambda x: x, 2: lambda x: x * x, 3: lambda x: x * x * x, 0.5: trace.sqrt, -0.5: trace.rsqrt,
               -1: trace.reciprocal}
    return special[exponent](base) if exponent in special else trace.power(base, exponent)


def _gelu(node, a):
    return trace.gelu(a["input"], a.get("approximate", "none"))


def _reduction(kind):
    def convert(node, a):
        x = a["input"]
        if a.get("dtype") is not None:
            x = trace.cast(x, ELEMENTS.get(a["dtype"], "unsupported"))
        dims = a.get("dim")
        axes = list(range(x.ndim)) if not dims else [dims] if isinstance(dims, int) else list(dims)
        return trace.reduce(kind, x, axes, bool(a.get("keepdim", False)))
    return convert


def _softmax(node, a):
    x = a["input"]
    if a.get("half_to_float") or a.get("dtype") is not None:
        x = trace.cast(x, _out_element(node))
    return trace.softmax(x, a["dim"])


def _norm_operands(a):
    """A norm's input and weight (ones where it has none); norms over more than the last dimension stay in torch."""
    x = a["input"]
    if len(a["normalized_shape"]) != 1:
        raise Unsupported("a norm over more than the last dimension")
    weight = a.get("weight")
    if weight is None:
        weight = trace.constant(1.0, x.element, (x.shape[-1],))
    return x, weight


def _layer_norm(node, a):
    x, weight = _norm_operands(a)
    y = trace.layer_norm(x, weight, a.get("bias"), a["eps"])
    return (y, None, None) if node.target is aten.native_layer_norm.default else y


def _rms_norm(node, a):
    x, weight = _norm_operands(a)
    eps = a.get("eps")
    if eps is None:
        eps = torch.finfo(recorded(node.args[0]).dtype).eps
    y = trace.rms_norm(x, weight, eps)
    return (y, None) if node.target is aten._fused_rms_norm.default else y


def _attention(node, a):
    """Every scaled_dot_product_attention spelling: its output, with None for the statistics it also returns."""
    q, k, v = a["query"], a["key"], a["value"]
    if a.get("dropout_p", 0.0) != 0.0:
        raise Unsupported("attention with dropout")
    causal = bool(a.get("is_causal", False))
    if causal and q.ndim == 4 and q.shape[2] != k.shape[2]:
        raise Unsupported("torch's causal mask is aligned top-left where seq_q != seq_k, Kiln's bottom-right")
    # The fused spellings take no enable_gqa: torch hands them different head counts only once SDPA allowed them.
    if q.ndim == 4 and q.shape[1] != k.shape[1] and not a.get("enable_gqa", not _takes_enable_gqa(node.target)):
        raise Unsupported("different head counts without enable_gqa")
    k_source, v_source = getattr(k, "gqa_source", None), getattr(v, "gqa_source", None)
    if k_source is not None and v_source is not None and k_source.shape[1] == v_source.shape[1]:
        k, v = k_source, v_source  # the expansion becomes dead code; Kiln groups the query heads itself
    mask = a.get("attn_mask", a.get("attn_bias"))
    mask_mod = None
    keep = None if mask is None else mask if mask.element == "i1" else getattr(mask, "selects_keys", None)
    if keep is not None:
        mask_mod, mask = _table_mask_mod(keep), None
    elif mask is not None:
        mask = trace.cast(mask, q.element)
    out = trace.attention(q, k, v, causal=causal, scale=a.get("scale"), mask=mask, mask_mod=mask_mod,
                          fp32_precision=_fp32_precision(q))
    results = ATTENTION_RESULTS[node.target]
    return out if results == 1 else (out,) + (None,) * (results - 1)


def _takes_enable_gqa(target):
    """Whether an attention spelling's schema has enable_gqa (scaled_dot_product_attention and the math one do;
    the backends' fused kernels, such as _scaled_dot_product_flash_attention_for_cpu, take GQA's head counts as
    they come)."""
    return any(argument.name == "enable_gqa" for argument in target._schema.arguments)


def _table_mask_mod(keep):
    """A boolean attn_mask (true: attend) as a mask_mod that reads it, its dims of one element broadcast: no
    kernel turns it into an additive bias, and a decode step's mask that is the same for every head leaves the
    attention free to pack the query heads of a KV head into one tile (kiln-pack-gqa-decode)."""
    if keep.ndim > 4:
        raise Unsupported(f"an attention mask of rank {keep.ndim}")

    def mask_mod(b, h, q, kv):  # keep is the mods' table of it when traced
        positions = (b, h, q, kv)[4 - len(keep.shape):]
        return keep[tuple(p if extent != 1 else 0 for p, extent in zip(positions, keep.shape))]
    return mask_mod


#: The scaled_dot_product_attention spellings of aten graphs, with the number of results each returns.
ATTENTION_RESULTS = {aten.scaled_dot_product_attention.default: 1, aten._scaled_dot_product_attention_math.default: 2,
                     aten._scaled_dot_product_flash_attention_for_cpu.default: 2,
                     aten._scaled_dot_product_efficient_attention.default: 4,
                     aten._scaled_dot_product_flash_attention.default: 9,
                     aten._scaled_dot_product_cudnn_attention.default: 9}


def _weight(b):
    """``b`` as the matmul takes it: a 2-D transpose of a [N, K] matrix (nn.Linear's weight.t()) is read as that
    matrix, transposed by the GEMM's loads instead of a copy on every call."""
    source = getattr(b, "transposed_from", None)
    return (source, True) if source is not None else (b, False)


def torch_fp32_precision():
    """How torch multiplies f32 matrices on a GPU: "ieee" (f32 accuracy; torch's default, allow_tf32 off) or
    "tf32" where torch allows TF32. torch's CUDA matmul setting (``torch.backends.cuda.matmul.fp32_precision``,
    which the legacy ``allow_tf32`` and ``set_float32_matmul_precision`` set too) says which; "none" (never set)
    leaves the legacy default, and ``torch.get_float32_matmul_precision()`` raises once the generic new setting has
    been used, so it is read only then."""
    precision = getattr(torch.backends.cuda.matmul, "fp32_precision", "none")
    if precision in ("ieee", "tf32"):
        return precision
    return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def _fp32_precision(a):
    """An f32 matmul's (or attention's products') precision as torch would multiply it (torch_fp32_precision);
    None for other element types."""
    return torch_fp32_precision() if a.element == "f32" else None


def _matrix(node, a, b, bias=None):
    if a.ndim < 2 or b.ndim < 2:
        raise Unsupported("a matmul of a vector")
    b, transposed = _weight(b)
    return trace.matmul(a, b, bias=bias, transpose_b=transposed, fp32_precision=_fp32_precision(a))


def _mm(node, a):
    return _matrix(node, a["input"], a["mat2"])


def _addmm(node, a):
    bias, alpha = _scaled(a["input"], a.get("beta", 1)), a.get("alpha", 1)
    if alpha == 1 and bias.shape == (a["mat2"].shape[-1],):
        return _matrix(node, a["mat1"], a["mat2"], bias=bias)  # the bias in the matmul's epilogue
    return _scaled(_matrix(node, a["mat1"], a["mat2"]), alpha) + bias


def _baddbmm(node, a):
    return _scaled(_matrix(node, a["batch1"], a["batch2"]), a.get("alpha", 1)) + _scaled(a["input"], a.get("beta", 1))


def _linear(node, a):
    w = a["weight"]
    if w.ndim != 2:
        raise Unsupported("a linear weight that is not a matrix")
    return trace.matmul(a["input"], w, bias=a.get("bias"), transpose_b=True, fp32_precision=_fp32_precision(w))


def _t(node, a):
    x = a["input"]
    if x.ndim < 2:
        return x
    return _transposed(x, [1, 0])


def _transposed(x, perm):
    """trace.transpose, noting on a matrix's transpose what it transposes (a matmul then reads that, _weight)."""
    y = trace.transpose(x, perm)
    if perm == [1, 0]:
        y.transposed_from = x
    return y


def _transpose(node, a):
    x = a["input"]
    perm = list(range(x.ndim))
    d0, d1 = a["dim0"] % x.ndim, a["dim1"] % x.ndim
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return x if d0 == d1 else _transposed(x, perm)


def _permute(node, a):
    x = a["input"]
    return _transposed(x, [d % x.ndim for d in a["dims"]])


def _reshape(node, a):
    x = a["input"]
    shape = _out_shape(node)
    if shape == x.shape:
        return x
    y = trace.reshape(x, shape)
    # GQA's expansion (repeat_interleave, or expand + reshape): [B, H, S, D] -> [B, H, 1, S, D], broadcast to
    # [B, H, n, S, D], then [B, H * n, S, D]. Each step is noted on its result, so that an attention reading the
    # last one reads the [B, H, S, D] tensor instead, as Kiln's GQA does from the head counts.
    source = getattr(x, "gqa_expanded", None)
    if source is not None and shape == (source.shape[0], x.shape[1] * x.shape[2]) + source.shape[2:]:
        y.gqa_source = source
    if x.ndim == 4 and shape == x.shape[:2] + (1,) + x.shape[2:]:
        y.gqa_unsqueezed = x
    return y


def _expand(node, a):
    x = a["input"]
    y = trace.broadcast(x, _out_shape(node))
    source = getattr(x, "gqa_unsqueezed", None)
    if source is not None and y.shape[:2] + y.shape[3:] == x.shape[:2] + x.shape[3:]:
        y.gqa_expanded = source
    return y


def _identity(node, a):
    return a["input"]


def _to_copy(node, a):
    x = a["input"]
    device = a.get("device")
    if device is not None and torch.device(device) != recorded(node.args[0]).device:
        raise Unsupported("a copy to another device")
    dtype = a.get("dtype")
    return x if dtype is None else trace.cast(x, ELEMENTS.get(dtype, "unsupported"))


def _cat(node, a):
    tensors = [t for t in a["tensors"] if not (t.ndim == 1 and t.shape[0] == 0)]  # torch skips empty 1-d
    return trace.concat(_floats_as(node, *tensors), a.get("dim", 0))


def _stack(node, a):
    """torch.stack as a concat of the tensors, each given a dimension of one element at ``dim``."""
    tensors = _floats_as(node, *a["tensors"])
    dim = a.get("dim", 0) % (tensors[0].ndim + 1)
    return trace.concat([trace.reshape(t, t.shape[:dim] + (1,) + t.shape[dim:]) for t in tensors], dim)


def _slice_window(x, dim, start, end, step):
    """The (offsets, sizes, strides) of ``x[start:end:step]`` along ``dim``, as Python clamps them."""
    dim %= x.ndim
    start, end, step = slice(start, end, step).indices(x.shape[dim])
    size = max(0, -(-(end - start) // step))
    offsets, sizes, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    offsets[dim], sizes[dim], strides[dim] = start, size, step
    return offsets, sizes, strides


def _slice(node, a):
    x = a["input"]
    return trace.strided_slice(x, *_slice_window(x, a.get("dim", 0), a.get("start"), a.get("end"), a.get("step", 1)))


def _select(node, a):
    x, index = a["input"], a["index"]
    dim = a["dim"] % x.ndim
    index %= x.shape[dim]
    part = trace.strided_slice(x, *_slice_window(x, dim, index, index + 1, 1))
    return trace.reshape(part, _out_shape(node))


def _split(node, a):
    x, dim = a["input"], a.get("dim", 0) % a["input"].ndim
    sizes = a.get("split_sizes", a.get("split_size"))
    if isinstance(sizes, int):
        sizes = [min(sizes, x.shape[dim] - start) for start in range(0, x.shape[dim], sizes)]
    parts, start = [], 0
    for size in sizes:
        parts.append(trace.strided_slice(x, *_slice_window(x, dim, start, start + size, 1)))
        start += size
    return tuple(parts)


def _as_result_type(node, *values):
    """The operands of a select in the node's result element type: float tensors cast (torch's promotion), numbers
    as constants of it; an integer or bool tensor of another type stays in torch."""
    element = _out_element(node)
    result = []
    for value in values:
        if not isinstance(value, trace.Tensor):
            value = trace.constant(_number(value), element) if element in ("f32", "f16", "bf16") else value
        elif value.element != element:
            if element not in ("f32", "f16", "bf16") or value.element not in ("f32", "f16", "bf16"):
                raise Unsupported(f"a select of {value.element} into {element}")
            value = trace.cast(value, element)
        result.append(value)
    return result


def _where(node, a):
    on_true, on_false = _as_result_type(node, _operand(a["input"]), _operand(a["other"]))
    result = trace.select(a["condition"], on_true, on_false)
    if (getattr(on_true, "constant_value", None), getattr(on_false, "constant_value", None)) == (0.0, -math.inf):
        result.selects_keys = a["condition"]  # an attention mask as torch decomposes a boolean one
    return result


def _scalar_tensor(node, a):
    """A number made a 0-d tensor (torch's decompositions write a boolean mask's 0 and -inf so): a constant,
    its value noted for the attention that may read it."""
    value = _number(a["s"])
    result = trace.constant(value, _out_element(node))
    result.constant_value = float(value)
    return result


def _masked_fill(node, a):
    fill, x = _as_result_type(node, _operand(a["value"]), a["input"])
    return trace.select(a["mask"], fill, x)


def _comparison(predicate):
    """aten.lt/le/gt/ge/eq/ne (.Tensor and .Scalar): operands of one element type, or a tensor and a number it
    holds exactly; mixed types (which torch promotes) stay in torch."""
    def convert(node, a):
        x, y = a["input"], _operand(a["other"])
        if isinstance(x, trace.Tensor) and isinstance(y, trace.Tensor) and x.element != y.element:
            raise Unsupported(f"a comparison of {x.element} with {y.element}")
        if isinstance(y, float) and x.element not in ("f32", "f16", "bf16"):
            raise Unsupported(f"a comparison of {x.element} with a float, which torch makes in floats")
        return trace.compare(predicate, x, y)
    return convert


def _remainder(function):
    return lambda node, a: function(*_floats_as(node, a["input"], _operand(a["other"])))


def _logical(function):
    return lambda node, a: function(*(a[name] for name in ("input", "other") if name in a))


def _getitem(node, a):
    value = a["args"][0][a["args"][1]]
    if value is None:
        raise Unsupported("a result Kiln does not compute")
    return value


CONVERTERS = {
    aten.add.Tensor: _add, aten.add.Scalar: _add, aten.sub.Tensor: _sub, aten.sub.Scalar: _sub,
    aten.rsub.Scalar: _rsub, aten.rsub.Tensor: _rsub, aten.mul.Tensor: _mul, aten.mul.Scalar: _mul,
    aten.div.Tensor: _div, aten.div.Scalar: _div, aten.div.Tensor_mode: _div, aten.div.Scalar_mode: _div,
    aten.neg.default: _unary(lambda x: -x), aten.exp.default: _unary(trace.exp),
    aten.log.default: _unary(trace.log), aten.sqrt.default: _unary(trace.sqrt),
    aten.rsqrt.default: _unary(trace.rsqrt), aten.reciprocal.default: _unary(trace.reciprocal),
    aten.abs.default: _unary(trace.absolute), aten.tanh.default: _unary(trace.tanh),
    aten.sigmoid.default: _unary(trace.sigmoid), aten.relu.default: _unary(trace.relu),
    aten.silu.default: _unary(trace.silu), aten.erf.default: _unary(trace.erf), aten.gelu.default: _gelu,
    aten.sin.default: _unary(trace.sin), aten.cos.default: _unary(trace.cos),
    aten.floor.default: _unary(trace.floor), aten.ceil.default: _unary(trace.ceil),
    aten.pow.Tensor_Scalar: _pow, aten.pow.Tensor_Tensor: _pow,
    aten.maximum.default: lambda n, a: trace.maximum(*_floats_as(n, a["input"], a["other"])),
    aten.minimum.default: lambda n, a: trace.minimum(*_floats_as(n, a["input"], a["other"])),
    aten.mean.dim: _reduction("mean"), aten.mean.default: _reduction("mean"),
    aten.sum.dim_IntList: _reduction("sum"), aten.sum.default: _reduction("sum"),
    aten.amax.default: _reduction("max"), aten.amin.default: _reduction("min"),
    aten._softmax.default: _softmax, aten.softmax.int: _softmax,
    aten.native_layer_norm.default: _layer_norm, aten.layer_norm.default: _layer_norm,
    aten.rms_norm.default: _rms_norm, aten._fused_rms_norm.default: _rms_norm,
    aten.mm.default: _mm, aten.bmm.default: _mm, aten.matmul.default:
        lambda n, a: _matrix(n, a["input"], a["other"]),
    aten.addmm.default: _addmm, aten.baddbmm.default: _baddbmm, aten.linear.default: _linear,
    aten.t.default: _t, aten.transpose.int: _transpose, aten.permute.default: _permute,
    aten.view.default: _reshape, aten._unsafe_view.default: _reshape, aten.reshape.default: _reshape,
    aten.unsqueeze.default: _reshape, aten.squeeze.dim: _reshape, aten.squeeze.dims: _reshape,
    aten.squeeze.default: _reshape, aten.flatten.using_ints: _reshape, aten.expand.default: _expand,
    aten.clone.default: _identity, aten.alias.default: _identity, aten.detach.default: _identity,
    aten.contiguous.default: _identity, aten.lift_fresh_copy.default: _identity, aten._to_copy.default: _to_copy,
    aten.cat.default: _cat, aten.stack.default: _stack, aten.slice.Tensor: _slice, aten.select.int: _select, aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split, aten.where.self: _where, operator.getitem: _getitem,
    aten.scalar_tensor.default: _scalar_tensor, aten.masked_fill.Scalar: _masked_fill, aten.masked_fill.Tensor: _masked_fill,
    aten.lt.Tensor: _comparison("lt"), aten.lt.Scalar: _comparison("lt"),
    aten.le.Tensor: _comparison("le"), aten.le.Scalar: _comparison("le"),
    aten.gt.Tensor: _comparison("gt"), aten.gt.Scalar: _comparison("gt"),
    aten.ge.Tensor: _comparison("ge"), aten.ge.Scalar: _comparison("ge"),
    aten.eq.Tensor: _comparison("eq"), aten.eq.Scalar: _comparison("eq"),
    aten.ne.Tensor: _comparison("ne"), aten.ne.Scalar: _comparison("ne"),
    aten.floor_divide.default: _floor_divide, aten.floor_divide.Scalar: _floor_divide,
    aten.fmod.Tensor: _remainder(trace.fmod), aten.fmod.Scalar: _remainder(trace.fmod),
    aten.remainder.Tensor: _remainder(trace.remainder), aten.remainder.Scalar: _remainder(trace.remainder),
    aten.logical_not.default: _logical(trace.logical_not), aten.logical_and.default: _logical(trace.logical_and),
    aten.logical_or.default: _logical(trace.logical_or), aten.logical_xor.default: _logical(trace.logical_xor),
    **{target: _attention for target in ATTENTION_RESULTS},
}
#: Ops that move or relabel data without computing: a partition of these alone is not worth a Kiln program.
DATA_MOVEMENT = {aten.t.default, aten.transpose.int, aten.permute.default, aten.view.default,
                  aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default, aten.squeeze.dim,
                  aten.squeeze.dims, aten.squeeze.default, aten.flatten.using_ints, aten.expand.default,
                  aten.clone.default, aten.alias.default, aten.detach.default, aten.contiguous.default,
                  aten.lift_fresh_copy.default, aten._to_copy.default, aten.cat.default, aten.slice.Tensor,
                  aten.select.int, aten.split.Tensor, aten.split_with_sizes.default, operator.getitem}


def named_arguments(node):
    """The node's arguments by schema name, ``self`` named ``input`` as torch.fx names it (getitem's as
    ``args``)."""
    if node.target is operator.getitem:
        return {"args": list(node.args)}
    normalized = normalize_function(node.target, tuple(node.args), dict(node.kwargs),
                                    normalize_to_only_use_kwargs=True)
    if normalized is None:
        raise Unsupported(f"arguments of {node.target} that match no schema")
    return dict(normalized.kwargs)


def convert(node, values):
    """The kiln values of ``node``, given the kiln values of the nodes it reads (``values``)."""
    converter = CONVERTERS.get(node.target)
    if converter is None:
        raise Unsupported(f"no converter for {node.target}")
    arguments = torch.fx.node.map_arg(named_arguments(node), lambda n: values[n])
    result = converter(node, arguments)
    _check_result(node, result)
    return result


def _check_result(node, result):
    """Checks the converted value against what torch recorded for the node: shape and dtype of each tensor."""
    meta = recorded(node)
    pairs = zip(result, meta) if isinstance(result, tuple) else [(result, meta)]
    if isinstance(result, tuple) != isinstance(meta, (tuple, list)):
        raise Unsupported("a result structure that differs from torch's")
    for value, expected in pairs:
        if value is None:
            continue
        if not isinstance(value, trace.Tensor) or not isinstance(expected, torch.Tensor):
            raise Unsupported("a result that is not a tensor")
        if value.shape != tuple(expected.shape) or value.element != ELEMENTS.get(expected.dtype):
            raise Unsupported(f"the converted {value.type} differs from torch's {expected.dtype} "
                              f"{tuple(expected.shape)}")
