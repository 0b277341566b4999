"""torch.compile(model, backend="kiln"): aten graphs partitioned between Kiln and torch.

Why: Kiln's users write PyTorch, and torch.compile is how PyTorch hands a model to a compiler. Dynamo captures
the model's graph; aot_autograd lowers it to an inference aten graph; this backend converts the aten nodes Kiln
can express straight into kiln IR through Kiln's own tracer (kiln/trace.py: no ONNX on this path), lets torch's
CapabilityBasedPartitioner group them into the largest partitions, compiles each partition for the tensors'
device (the host backend for CPU tensors, the GPU target of the device's chip for CUDA tensors) and leaves every
other node to torch. Whether a node is supported is decided by converting it: a node the tracer refuses, or
whose converted result differs in shape or dtype from what torch recorded, stays in torch, and a partition whose
compile fails runs in torch whole, so an unsupported model runs slower but never wrongly.

    import kiln.torch_backend  # registers the backend (an installed package registers it by entry point)
    fast = torch.compile(model, backend="kiln", dynamic=False)

Shapes are static per compile: torch.compile's guards recompile for a new shape, and Kiln's program and kernel
caches make those compiles cheap. A graph dynamo made dynamic is specialised per input shape at run time.
"""

import math
import operator
import warnings

import torch
import torch.fx
from torch.fx.operator_schemas import normalize_function
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import trace
from .compiler import compile as kiln_compile
from .gpu import chip_for
from .torch_ops import _host, _torch

__all__ = ["kiln_backend", "reports", "KilnPartition", "GraphReport"]

aten = torch.ops.aten
_ELEMENTS = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
             torch.int32: "i32", torch.bool: "i1"}
_REPORTS = []


class Unsupported(Exception):
    """A node (or an argument of it) that Kiln does not express; the node stays in torch."""


# ----------------------------------------------------------------------------------------------------------------
# Converters: one aten op to kiln ops. Each takes the node and its arguments by name, with every tensor argument
# already a kiln Tensor, and returns a Tensor (or a tuple with None where Kiln has no value, e.g. a logsumexp).
# ----------------------------------------------------------------------------------------------------------------

def _meta(node):
    return node.meta.get("val")


def _out_shape(node):
    return tuple(int(d) for d in _meta(node).shape)


def _out_element(node):
    element = _ELEMENTS.get(_meta(node).dtype)
    if element is None:
        raise Unsupported(f"dtype {_meta(node).dtype}")
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
    if a.get("rounding_mode") is not None:
        raise Unsupported("div with a rounding mode")
    x, y = _floats_as(node, _operand(a["input"]), _operand(a["other"]))
    return x / y


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
            x = trace.cast(x, _ELEMENTS.get(a["dtype"], "unsupported"))
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
        eps = torch.finfo(_meta(node.args[0]).dtype).eps
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
    if q.ndim == 4 and q.shape[1] != k.shape[1] and not a.get("enable_gqa", False):
        raise Unsupported("different head counts without enable_gqa")
    k_source, v_source = getattr(k, "gqa_source", None), getattr(v, "gqa_source", None)
    if k_source is not None and v_source is not None and k_source.shape[1] == v_source.shape[1]:
        k, v = k_source, v_source  # the expansion becomes dead code; Kiln groups the query heads itself
    mask = a.get("attn_mask", a.get("attn_bias"))
    if mask is not None:
        if mask.element == "i1":
            zero, minus = trace.constant(0.0, q.element), trace.constant(-math.inf, q.element)
            mask = trace.select(mask, zero, minus)
        else:
            mask = trace.cast(mask, q.element)
    out = trace.attention(q, k, v, causal=causal, scale=a.get("scale"), mask=mask)
    results = {aten.scaled_dot_product_attention.default: 1, aten._scaled_dot_product_attention_math.default: 2,
               aten._scaled_dot_product_flash_attention_for_cpu.default: 2,
               aten._scaled_dot_product_efficient_attention.default: 4,
               aten._scaled_dot_product_flash_attention.default: 9,
               aten._scaled_dot_product_cudnn_attention.default: 9}[node.target]
    return out if results == 1 else (out,) + (None,) * (results - 1)


def _weight(b):
    """``b`` as the matmul takes it: a 2-D transpose of a [N, K] matrix (nn.Linear's weight.t()) is read as that
    matrix, transposed by the GEMM's loads instead of a copy on every call."""
    source = getattr(b, "transposed_from", None)
    return (source, True) if source is not None else (b, False)


def _matrix(node, a, b, bias=None):
    if a.ndim < 2 or b.ndim < 2:
        raise Unsupported("a matmul of a vector")
    b, transposed = _weight(b)
    return trace.matmul(a, b, bias=bias, transpose_b=transposed)


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
    return trace.matmul(a["input"], w, bias=a.get("bias"), transpose_b=True)


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
    if device is not None and torch.device(device) != _meta(node.args[0]).device:
        raise Unsupported("a copy to another device")
    dtype = a.get("dtype")
    return x if dtype is None else trace.cast(x, _ELEMENTS.get(dtype, "unsupported"))


def _cat(node, a):
    tensors = [t for t in a["tensors"] if not (t.ndim == 1 and t.shape[0] == 0)]  # torch skips empty 1-d
    return trace.concat(_floats_as(node, *tensors), a.get("dim", 0))


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


def _where(node, a):
    on_true, on_false = _floats_as(node, _operand(a["input"]), _operand(a["other"]))
    if not isinstance(on_true, trace.Tensor):
        on_true = trace.constant(on_true, _out_element(node))
    if not isinstance(on_false, trace.Tensor):
        on_false = trace.constant(on_false, _out_element(node))
    return trace.select(a["condition"], on_true, on_false)


def _getitem(node, a):
    value = a["args"][0][a["args"][1]]
    if value is None:
        raise Unsupported("a result Kiln does not compute")
    return value


_CONVERTERS = {
    aten.add.Tensor: _add, aten.add.Scalar: _add, aten.sub.Tensor: _sub, aten.sub.Scalar: _sub,
    aten.rsub.Scalar: _rsub, aten.rsub.Tensor: _rsub, aten.mul.Tensor: _mul, aten.mul.Scalar: _mul,
    aten.div.Tensor: _div, aten.div.Scalar: _div,
    aten.neg.default: _unary(lambda x: -x), aten.exp.default: _unary(trace.exp),
    aten.log.default: _unary(trace.log), aten.sqrt.default: _unary(trace.sqrt),
    aten.rsqrt.default: _unary(trace.rsqrt), aten.reciprocal.default: _unary(trace.reciprocal),
    aten.abs.default: _unary(trace.absolute), aten.tanh.default: _unary(trace.tanh),
    aten.sigmoid.default: _unary(trace.sigmoid), aten.relu.default: _unary(trace.relu),
    aten.silu.default: _unary(trace.silu), aten.erf.default: _unary(trace.erf), aten.gelu.default: _gelu,
    aten.pow.Tensor_Scalar: _pow, aten.pow.Tensor_Tensor: _pow,
    aten.maximum.default: lambda n, a: trace.maximum(*_floats_as(n, a["input"], a["other"])),
    aten.minimum.default: lambda n, a: trace.minimum(*_floats_as(n, a["input"], a["other"])),
    aten.mean.dim: _reduction("mean"), aten.mean.default: _reduction("mean"),
    aten.sum.dim_IntList: _reduction("sum"), aten.sum.default: _reduction("sum"),
    aten.amax.default: _reduction("max"), aten.amin.default: _reduction("min"),
    aten._softmax.default: _softmax, aten.softmax.int: _softmax,
    aten.native_layer_norm.default: _layer_norm, aten.layer_norm.default: _layer_norm,
    aten.rms_norm.default: _rms_norm, aten._fused_rms_norm.default: _rms_norm,
    aten.scaled_dot_product_attention.default: _attention,
    aten._scaled_dot_product_attention_math.default: _attention,
    aten._scaled_dot_product_flash_attention_for_cpu.default: _attention,
    aten._scaled_dot_product_flash_attention.default: _attention,
    aten._scaled_dot_product_efficient_attention.default: _attention,
    aten._scaled_dot_product_cudnn_attention.default: _attention,
    aten.mm.default: _mm, aten.bmm.default: _mm, aten.matmul.default:
        lambda n, a: _matrix(n, a["input"], a["other"]),
    aten.addmm.default: _addmm, aten.baddbmm.default: _baddbmm, aten.linear.default: _linear,
    aten.t.default: _t, aten.transpose.int: _transpose, aten.permute.default: _permute,
    aten.view.default: _reshape, aten._unsafe_view.default: _reshape, aten.reshape.default: _reshape,
    aten.unsqueeze.default: _reshape, aten.squeeze.dim: _reshape, aten.squeeze.dims: _reshape,
    aten.squeeze.default: _reshape, aten.flatten.using_ints: _reshape, aten.expand.default: _expand,
    aten.clone.default: _identity, aten.alias.default: _identity, aten.detach.default: _identity,
    aten.contiguous.default: _identity, aten.lift_fresh_copy.default: _identity, aten._to_copy.default: _to_copy,
    aten.cat.default: _cat, aten.slice.Tensor: _slice, aten.select.int: _select, aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split, aten.where.self: _where, operator.getitem: _getitem,
}
#: Ops that move or relabel data without computing: a partition of these alone is not worth a Kiln program.
_DATA_MOVEMENT = {aten.t.default, aten.transpose.int, aten.permute.default, aten.view.default,
                  aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default, aten.squeeze.dim,
                  aten.squeeze.dims, aten.squeeze.default, aten.flatten.using_ints, aten.expand.default,
                  aten.clone.default, aten.alias.default, aten.detach.default, aten.contiguous.default,
                  aten.lift_fresh_copy.default, aten._to_copy.default, aten.cat.default, aten.slice.Tensor,
                  aten.select.int, aten.split.Tensor, aten.split_with_sizes.default, operator.getitem}


def _named_arguments(node):
    """The node's arguments by schema name, ``self`` named ``input`` as torch.fx names it (getitem's as
    ``args``)."""
    if node.target is operator.getitem:
        return {"args": list(node.args)}
    normalized = normalize_function(node.target, tuple(node.args), dict(node.kwargs),
                                    normalize_to_only_use_kwargs=True)
    if normalized is None:
        raise Unsupported(f"arguments of {node.target} that match no schema")
    return dict(normalized.kwargs)


def _convert(node, values):
    """The kiln values of ``node``, given the kiln values of the nodes it reads (``values``)."""
    converter = _CONVERTERS.get(node.target)
    if converter is None:
        raise Unsupported(f"no converter for {node.target}")
    arguments = torch.fx.node.map_arg(_named_arguments(node), lambda n: values[n])
    result = converter(node, arguments)
    _check_result(node, result)
    return result


def _check_result(node, result):
    """Checks the converted value against what torch recorded for the node: shape and dtype of each tensor."""
    meta = _meta(node)
    pairs = zip(result, meta) if isinstance(result, tuple) else [(result, meta)]
    if isinstance(result, tuple) != isinstance(meta, (tuple, list)):
        raise Unsupported("a result structure that differs from torch's")
    for value, expected in pairs:
        if value is None:
            continue
        if not isinstance(value, trace.Tensor) or not isinstance(expected, torch.Tensor):
            raise Unsupported("a result that is not a tensor")
        if value.shape != tuple(expected.shape) or value.element != _ELEMENTS.get(expected.dtype):
            raise Unsupported(f"the converted {value.type} differs from torch's {expected.dtype} "
                              f"{tuple(expected.shape)}")


# ----------------------------------------------------------------------------------------------------------------
# What Kiln supports: a node is supported when converting it on placeholders of its inputs succeeds.
# ----------------------------------------------------------------------------------------------------------------

def _static_tensor(value):
    """The (shape, element) of a fake tensor whose shape is static and dtype one Kiln has, else None."""
    if not isinstance(value, torch.Tensor) or value.dtype not in _ELEMENTS or value.layout != torch.strided:
        return None
    if not all(isinstance(d, int) for d in value.shape):
        return None
    return tuple(value.shape), _ELEMENTS[value.dtype]


def _computed(node):
    """The fake tensors of the node's results that Kiln computes: all of a split's, the first of the other
    multi-result ops (an attention's output, a norm's normalised value; statistics and RNG state are not)."""
    meta = _meta(node)
    if not isinstance(meta, (tuple, list)):
        return [meta]
    return list(meta) if node.target in (aten.split.Tensor, aten.split_with_sizes.default) else [meta[0]]


def _devices(node):
    """The devices of the node's tensor inputs and results."""
    return {value.device for n in node.all_input_nodes + [node] for value in _computed(n)
            if isinstance(value, torch.Tensor)}


class KilnSupport(OperatorSupportBase):
    """The partitioner's question, answered by a trial conversion of the node alone."""

    def is_node_supported(self, submodules, node):
        if node.op != "call_function" or node.target not in _CONVERTERS:
            return False
        if len(_devices(node)) != 1 or not _users_are_converted(node):
            return False
        with trace.Graph() as graph:
            values = {}
            for i, n in enumerate(node.all_input_nodes):
                meta = _meta(n)
                if isinstance(meta, (tuple, list)):  # getitem of a multi-result node: each converted
                    specs = [_static_tensor(m) for m in meta]
                    values[n] = tuple(None if s is None else trace.Tensor(graph, f"%t{i}_{j}", *s)
                                      for j, s in enumerate(specs))
                    continue
                spec = _static_tensor(meta)
                if spec is None:
                    return False
                values[n] = trace.Tensor(graph, f"%t{i}", *spec)
            try:
                _convert(node, values)
            except (Unsupported, TypeError, ValueError, KeyError, IndexError, RuntimeError):
                return False
        return True


def _users_are_converted(node):
    """A node with several results is supported only if every result read is one Kiln computes (a logsumexp or a
    layer norm's statistics read by another node would be missing)."""
    if not isinstance(_meta(node), (tuple, list)):
        return True
    probe = {aten.native_layer_norm.default: {0}, aten._fused_rms_norm.default: {0}}
    wanted = probe.get(node.target)
    if wanted is None and node.target in (aten.split.Tensor, aten.split_with_sizes.default):
        return all(user.target is operator.getitem for user in node.users)
    if wanted is None:
        wanted = {0}  # the attention spellings: the output alone
    return all(user.target is operator.getitem and user.args[1] in wanted for user in node.users)


# ----------------------------------------------------------------------------------------------------------------
# Partitions: traced into one kiln function each, compiled for their device, run in place of the torch nodes.
# ----------------------------------------------------------------------------------------------------------------

def _target_for(device):
    """The Kiln target of a torch device, or None when Kiln has none for it."""
    if device.type == "cpu":
        return "host"
    if device.type == "cuda":
        return chip_for(torch.cuda.get_device_capability(device))
    return None


def trace_partition(submodule, inputs, name):
    """Kiln IR for a fused partition (a GraphModule of supported nodes), given the fake tensors of its inputs."""
    nodes = list(submodule.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    with trace.Graph() as graph:
        values, params = {}, []
        for i, (n, meta) in enumerate(zip(placeholders, inputs)):
            spec = _static_tensor(meta)
            if spec is None:
                raise Unsupported(f"input {i} of the partition is not a static tensor")
            values[n] = trace.Tensor(graph, f"%arg{i}", *spec)
            params.append(f"{values[n].name}: {values[n].type}")
        output = None
        for n in nodes:
            if n.op == "call_function":
                values[n] = _convert(n, values)
            elif n.op == "output":
                output = n.args[0]
    results = list(output) if isinstance(output, (tuple, list)) else [output]
    results = [values[r] for r in results]
    types = ", ".join(r.type for r in results)
    body = "".join(f"  {line}\n" for line in graph.lines)
    return (f"func.func @{name}({', '.join(params)}) -> ({types}) {{\n{body}"
            f"  return {', '.join(r.name for r in results)} : {types}\n}}\n")


class KilnPartition(torch.nn.Module):
    """One partition of the graph as a compiled Kiln program: numpy views on the host backend, CUDA tensors on
    the GPU (through a CUDA graph once its inputs' addresses settle, unless ``cuda_graphs`` is off)."""

    def __init__(self, name, source, program, device, nodes, tuple_output, strides, escaping, cuda_graphs):
        super().__init__()
        self.name, self.source, self.program, self.device = name, source, program, device
        self.strides = strides  # per output, the strides torch's own kernel gives it, or None where contiguous
        self.nodes = nodes  # the aten targets it replaces, in graph order
        self.tuple_output = tuple_output
        self.escaping = escaping  # output positions that may outlive the call (returned, or viewed by a result)
        self.cuda_graphs = cuda_graphs
        self.calls = 0
        self._graphed = None

    @property
    def kernels(self):
        """The GPU program's kernel launches (manifest entries), or None on the host backend."""
        return getattr(self.program, "kernels", None)

    def forward(self, *tensors):
        self.calls += 1
        if self.device.type == "cpu":
            out = self.program(*[_host(t) for t in tensors])
            outs = [_torch(o, tensors[0] if tensors else None) for o in (out if isinstance(out, tuple) else (out,))]
        else:
            outs = self._run_gpu([_aligned(t) for t in tensors])
        outs = [o if s is None else _restrided(o, s) for o, s in zip(outs, self.strides)]
        return tuple(outs) if self.tuple_output else outs[0]

    def _run_gpu(self, tensors):
        if self.cuda_graphs and not torch.cuda.is_current_stream_capturing():
            if self._graphed is None:
                self._graphed = _GraphedProgram(self.program, tensors)
                out = self.program(*tensors)  # the warm call: loads the kernels outside any capture
                return list(out) if isinstance(out, tuple) else [out]
            outs = self._graphed.run(tensors)
            return [o.clone() if i in self.escaping else o for i, o in enumerate(outs)]
        out = self.program(*tensors)
        return list(out) if isinstance(out, tuple) else [out]


def _restrided(tensor, strides):
    """``tensor`` copied into torch's layout for it: the torch nodes reading it (views) were traced for that
    layout (an attention's output, [B, S, H, D] in memory, viewed as [B, S, H * D] after a transpose)."""
    out = torch.empty_strided(tensor.shape, strides, dtype=tensor.dtype, device=tensor.device)
    return out.copy_(tensor)


def _output_strides(meta):
    """The strides torch gives a result, or None when they are the contiguous ones (nothing to copy)."""
    if meta.numel() <= 1 or meta.is_contiguous():
        return None
    return tuple(int(s) for s in meta.stride())


def _aligned(tensor):
    """A tensor as a GPU program takes it: contiguous, starting on a 16-byte boundary."""
    if tensor.is_contiguous() and tensor.data_ptr() % 16 == 0:
        return tensor
    return tensor.clone(memory_format=torch.contiguous_format)


class _GraphedProgram:
    """A GPU program replayed from a CUDA graph. Inputs whose address stayed the same since the first call
    (weights) are read where they are; the others are copied into buffers the graph reads. An input read in place
    that moves is copied from then on, and the graph captured again."""

    def __init__(self, program, first):
        self.program = program
        self.first = [t.data_ptr() for t in first]
        self.moved = set()
        self.bound = None

    def run(self, tensors):
        pointers = [t.data_ptr() for t in tensors]
        moved = {i for i, p in enumerate(pointers) if p != self.first[i]}
        if self.bound is None or not moved <= self.moved:
            self.moved |= moved
            self._capture(tensors)
        for i, staging in self.staged:
            staging.copy_(tensors[i])
        return self.bound.replay()

    def _capture(self, tensors):
        inputs = list(tensors)
        self.staged = []
        for i in sorted(self.moved):
            inputs[i] = tensors[i].clone()
            self.staged.append((i, inputs[i]))
        self.bound = self.program.bind(*inputs).capture()


def _escaping_outputs(call):
    """Positions of a partition's outputs that may outlive the call: read by the graph's output, or by a view
    (through getitem) that is. A CUDA graph's outputs are overwritten by the next replay, so only these are
    copied out."""
    def escapes(node, seen):
        for user in node.users:
            if user.op == "output":
                return True
            if user.target is operator.getitem or _is_view(user.target):
                if user not in seen and escapes(user, seen | {user}):
                    return True
        return False

    getitems = {u.args[1]: u for u in call.users if u.target is operator.getitem}
    if not getitems:
        return {0} if escapes(call, set()) else set()
    return {i for i, u in getitems.items() if escapes(u, set())}


def _is_view(target):
    schema = getattr(target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


# ----------------------------------------------------------------------------------------------------------------
# The backend.
# ----------------------------------------------------------------------------------------------------------------

class GraphReport:
    """What the backend did with one aten graph: its partitions, the kiln programs and what fell back."""

    def __init__(self):
        self.partitions = []  # KilnPartition modules now in the graph
        self.fallbacks = []  # (partition name, reason) of partitions left to torch after a failed compile
        self.torch_nodes = []  # aten targets left to torch
        self.graph = None  # the partitioned GraphModule

    @property
    def kernels(self):
        """Kernel launches of the GPU partitions (None when a partition runs on the host)."""
        counts = [p.kernels for p in self.partitions]
        return None if any(c is None for c in counts) else sum(len(c) for c in counts)

    def __repr__(self):
        return (f"GraphReport({len(self.partitions)} kiln partitions of {sum(len(p.nodes) for p in self.partitions)}"
                f" nodes, {len(self.torch_nodes)} nodes in torch, {len(self.fallbacks)} fallbacks)")


def reports():
    """The reports of the graphs compiled so far in this process, oldest first (cleared with ``.clear()``)."""
    return _REPORTS


def _partition(gm):
    """``gm`` with its supported nodes fused into submodules (``fused_N``), and those submodules' call nodes."""
    partitioner = CapabilityBasedPartitioner(gm, KilnSupport(), allows_single_node_partition=True)
    partitions = [p for p in partitioner.propose_partitions()
                  if any(n.target not in _DATA_MOVEMENT for n in p.nodes)]
    fused = partitioner.fuse_partitions(partitions, prefix="kiln_")
    calls = [n for n in fused.graph.nodes if n.op == "call_module" and n.target.startswith("kiln_")]
    return fused, calls


def _compile_partition(fused, call, options):
    """The KilnPartition for one fused submodule, or the reason it stays in torch."""
    submodule = getattr(fused, call.target)
    inputs = [_meta(a) for a in call.args]
    output = next(n for n in submodule.graph.nodes if n.op == "output").args[0]
    outputs = [_meta(n) for n in (output if isinstance(output, (tuple, list)) else [output])]
    devices = {m.device for m in inputs + outputs if isinstance(m, torch.Tensor)}
    if len(devices) != 1:
        return f"tensors on {len(devices)} devices"
    device = devices.pop()
    target = _target_for(device)
    if target is None:
        return f"no Kiln target for {device}"
    try:
        source = trace_partition(submodule, inputs, call.target)
        program = kiln_compile(source, target=target)
    except (Unsupported, ImportError, OSError, RuntimeError, TypeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    nodes = [n.target for n in submodule.graph.nodes if n.op == "call_function"]
    return KilnPartition(call.target, source, program, device, nodes, isinstance(output, (tuple, list)),
                         [_output_strides(m) for m in outputs], _escaping_outputs(call),
                         options.get("cuda_graphs", True))


def compile_graph(gm, example_inputs, options=None):
    """The aten graph ``gm`` with its Kiln partitions compiled (the forward compiler given to aot_autograd)."""
    options = options or {}
    report = GraphReport()
    fused, calls = _partition(gm)
    for call in calls:
        partition = _compile_partition(fused, call, options)
        if isinstance(partition, str):
            report.fallbacks.append((call.target, partition))
            warnings.warn(f"kiln: partition {call.target} runs in torch ({partition})", stacklevel=2)
            continue
        setattr(fused, call.target, partition)
        report.partitions.append(partition)
    report.torch_nodes = [n.target for n in fused.graph.nodes
                          if n.op == "call_function" and n.target is not operator.getitem]
    report.graph = fused
    fused.recompile()
    _REPORTS.append(report)
    return fused


def _aot_backend(options):
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def forward(gm, example_inputs):
        return make_boxed_func(compile_graph(gm, example_inputs, options).forward)

    def backward(gm, example_inputs):  # gradients stay in torch
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=forward, bw_compiler=backward)


def _symbolic(example_inputs):
    return any(isinstance(t, torch.SymInt) or isinstance(t, torch.Tensor) and
               not all(isinstance(d, int) for d in t.shape) for t in example_inputs)


class _PerShape:
    """A graph dynamo made dynamic, compiled once per concrete input shape (Kiln's programs are static)."""

    def __init__(self, gm, options):
        self.gm, self.options, self.compiled = gm, options, {}

    def __call__(self, *args):
        key = tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else a for a in args)
        function = self.compiled.get(key)
        if function is None:
            try:
                function = _aot_backend(self.options)(self.gm, list(args))
            except Exception as error:  # noqa: BLE001 - anything the specialisation meets: torch runs the graph
                warnings.warn(f"kiln: a dynamic graph runs in torch ({type(error).__name__}: {error})", stacklevel=2)
                function = self.gm.forward
            self.compiled[key] = function
        return function(*args)


def kiln_backend(gm, example_inputs, options=None, **kwargs):
    """torch.compile's backend: ``torch.compile(model, backend="kiln")``. ``options={"cuda_graphs": False}``
    launches the GPU partitions' kernels one by one instead of replaying them from CUDA graphs."""
    options = dict(options or {})
    if _symbolic(example_inputs):
        return _PerShape(gm, options)
    return _aot_backend(options)(gm, example_inputs)


def _register():
    """Registers the backend under "kiln" unless torch already knows it (through the package's entry point)."""
    from torch._dynamo import list_backends, register_backend
    if "kiln" not in list_backends(exclude_tags=()):
        register_backend(kiln_backend, name="kiln")


_register()
