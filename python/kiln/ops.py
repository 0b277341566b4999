"""Ready-made kernels on numpy arrays: kiln.ops.matmul, attention, softmax, rms_norm, layer_norm, rope.

Each call writes the kiln IR of one op for the shapes and dtypes it is given (matmul's bias and activation as
separate ops, which the fusion pass folds into the matmul's epilogue), compiles it through ``kiln.compile``
(cached in memory, so a repeated signature goes straight to the run) and runs it. Arguments are checked here,
before any IR exists, so a mistake is a Python exception that names the argument.
"""

import numpy as np

from .compiler import DTYPES, compile

#: Activations kiln.ops.matmul fuses, as the kiln op (and its attribute) each one becomes.
ACTIVATIONS = {"relu": "kiln.relu", "silu": "kiln.silu", "gelu": "kiln.gelu", "gelu_tanh": "kiln.gelu"}
_ELEMENT_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def _tensor_type(shape, element):
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def _float(value):
    return f"{float(value):.9e}"


def _check_arrays(op, dtype=None, **arrays):
    """Checks that every array is a floating numpy array of one dtype; returns that dtype's kiln name."""
    for name, array in arrays.items():
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{op}: '{name}' must be a numpy array, got {type(array).__name__}")
        if _ELEMENT_NAMES.get(array.dtype) not in ("f32", "f16", "bf16"):
            raise TypeError(f"{op}: '{name}' has dtype {array.dtype}; expected float32, float16 or bfloat16")
        if dtype is None:
            dtype, first = array.dtype, name
        elif array.dtype != dtype:
            raise TypeError(f"{op}: '{name}' has dtype {array.dtype} but '{first}' has {dtype}")
    return _ELEMENT_NAMES[dtype]


def _run(args, lines, result_type, result="%r"):
    """Builds `func.func @op(args) -> result_type { lines; return result }`, compiles it and runs it."""
    params = ", ".join(f"%{name}: {type_}" for name, (_, type_) in args.items())
    body = "".join(f"  {line}\n" for line in lines)
    source = f"func.func @op({params}) -> {result_type} {{\n{body}  return {result} : {result_type}\n}}\n"
    return compile(source)(*[array for array, _ in args.values()])


def matmul(a, b, *, bias=None, activation=None):
    """``activation(a @ b + bias)`` with numpy batch broadcasting; a: [..., M, K], b: [..., K, N], bias: [N]."""
    arrays = {"a": a, "b": b} if bias is None else {"a": a, "b": b, "bias": bias}
    element = _check_arrays("matmul", **arrays)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: 'a' and 'b' need rank >= 2, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: 'a' has K={a.shape[-1]} (shape {a.shape}) but 'b' has K={b.shape[-2]} "
                         f"(shape {b.shape})")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: the batch dims of 'a' {a.shape[:-2]} and 'b' {b.shape[:-2]} do not broadcast")
    n = b.shape[-1]
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"matmul: 'bias' has shape {bias.shape}, expected ({n},)")
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"matmul: unknown activation '{activation}' (one of {', '.join(ACTIVATIONS)})")
    out = _tensor_type(batch + (a.shape[-2], n), element)
    args = {name: (array, _tensor_type(array.shape, element)) for name, array in arrays.items()}
    lines, value = [f"%r = kiln.matmul %a, %b : {args['a'][1]}, {args['b'][1]} -> {out}"], "%r"
    if bias is not None:
        lines += [f"%biased = kiln.add {value}, %bias : {out}, {args['bias'][1]} -> {out}"]
        value = "%biased"
    if activation is not None:
        suffix = " approximate(tanh)" if activation == "gelu_tanh" else ""
        lines += [f"%activated = {ACTIVATIONS[activation]} {value}{suffix} : {out}"]
        value = "%activated"
    return _run(args, lines, out, result=value)


def attention(q, k, v, *, causal=False, scale=None, mask=None):
    """Scaled dot-product attention on [B, H, S, D]; GQA/MQA when k and v have fewer heads than q; ``causal``
    aligned bottom-right when seq_q != seq_k; ``mask`` additive, broadcastable to [B, H, Sq, Sk]."""
    arrays = {"q": q, "k": k, "v": v} if mask is None else {"q": q, "k": k, "v": v, "mask": mask}
    element = _check_arrays("attention", **arrays)
    for name in ("q", "k", "v"):
        if arrays[name].ndim != 4:
            raise ValueError(f"attention: '{name}' must be [B, H, S, D], got shape {arrays[name].shape}")
    (b, hq, sq, d), (bk, hk, sk, dk) = q.shape, k.shape
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"attention: 'k' {k.shape} and 'v' {v.shape} differ in batch, heads or sequence")
    if d != dk:
        raise ValueError(f"attention: head dim of 'q' is {d} but of 'k' is {dk}")
    if bk != b:
        raise ValueError(f"attention: batch of 'q' is {b} but of 'k' is {bk}")
    if hk == 0 or hq % hk:
        raise ValueError(f"attention: {hq} query heads cannot share {hk} key/value heads (not a divisor)")
    if mask is not None:
        try:
            if np.broadcast_shapes(mask.shape, (b, hq, sq, sk)) != (b, hq, sq, sk):
                raise ValueError
        except ValueError:
            raise ValueError(f"attention: 'mask' of shape {mask.shape} does not broadcast to {(b, hq, sq, sk)}")
    out = _tensor_type((b, hq, sq, v.shape[3]), element)
    args = {name: (array, _tensor_type(array.shape, element)) for name, array in arrays.items()}
    masked = f" mask(%mask : {args['mask'][1]})" if mask is not None else ""
    flags = (" causal" if causal else "") + (f" {{scale = {_float(scale)} : f32}}" if scale is not None else "")
    types = ", ".join(args[name][1] for name in ("q", "k", "v"))
    return _run(args, [f"%r = kiln.attention %q, %k, %v{masked}{flags} : {types} -> {out}"], out)


def softmax(x, axis=-1):
    """Softmax of ``x`` along ``axis``."""
    element = _check_arrays("softmax", x=x)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"softmax: axis {axis} is out of range for 'x' of rank {x.ndim}")
    type_ = _tensor_type(x.shape, element)
    return _run({"x": (x, type_)}, [f"%r = kiln.softmax %x axis {axis % x.ndim} : {type_}"], type_)


def _check_norm_weight(op, x, name, weight):
    if weight is not None and weight.shape != (x.shape[-1],):
        raise ValueError(f"{op}: '{name}' has shape {weight.shape}, expected ({x.shape[-1]},)")


def rms_norm(x, weight, eps=1e-6):
    """``x / sqrt(mean(x^2, -1) + eps) * weight`` over the last dimension."""
    element = _check_arrays("rms_norm", x=x, weight=weight)
    _check_norm_weight("rms_norm", x, "weight", weight)
    x_type, w_type = _tensor_type(x.shape, element), _tensor_type(weight.shape, element)
    return _run({"x": (x, x_type), "weight": (weight, w_type)},
                [f"%r = kiln.rms_norm %x, %weight epsilon {_float(eps)} : {x_type}, {w_type}"], x_type)


def layer_norm(x, weight, bias=None, eps=1e-5):
    """Layer normalisation over the last dimension, times ``weight``, plus ``bias`` when given."""
    arrays = {"x": x, "weight": weight} if bias is None else {"x": x, "weight": weight, "bias": bias}
    element = _check_arrays("layer_norm", **arrays)
    _check_norm_weight("layer_norm", x, "weight", weight)
    _check_norm_weight("layer_norm", x, "bias", bias)
    args = {name: (array, _tensor_type(array.shape, element)) for name, array in arrays.items()}
    operands = ", ".join(f"%{name}" for name in arrays)
    types = ", ".join(type_ for _, type_ in args.values())
    return _run(args, [f"%r = kiln.layer_norm {operands} epsilon {_float(eps)} : {types}"], args["x"][1])


def rope(x, cos, sin, *, interleaved=False):
    """Rotary embedding of ``x`` [..., S, D] by ``cos``, ``sin`` [S, D/2] (rotate-half, or GPT-J interleaved)."""
    element = _check_arrays("rope", x=x, cos=cos, sin=sin)
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"rope: 'x' must be [..., S, D] with D even, got shape {x.shape}")
    expected = (x.shape[-2], x.shape[-1] // 2)
    for name, table in (("cos", cos), ("sin", sin)):
        if table.shape != expected:
            raise ValueError(f"rope: '{name}' has shape {table.shape}, expected {expected}")
    args = {name: (array, _tensor_type(array.shape, element)) for name, array in (("x", x), ("cos", cos), ("sin", sin))}
    types = ", ".join(type_ for _, type_ in args.values())
    flag = " interleaved" if interleaved else ""
    return _run(args, [f"%r = kiln.rope %x, %cos, %sin{flag} : {types}"], args["x"][1])
