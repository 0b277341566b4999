"""GPT-2-style and Llama-style Transformer blocks as ONNX graphs, written node by node as exporters write them,
with float64 numpy references.

Why by hand: the build machine and CI have onnx and onnxruntime but no torch, so the frontend's tests need ONNX
graphs that exist without an exporter. These follow what torch.onnx emits for the blocks in
examples/torch_blocks.py — norms and GELU written out, RoPE as slice/neg/concat, GQA as unsqueeze/expand/reshape,
the causal mask computed from Range/Less, attention as MatMul/Div/Add/Softmax/MatMul — so they exercise the
same import and fusion paths as a real export. ``python3 examples/onnx_blocks.py out/ [bfloat16]`` writes both as
files (the Llama block in the given type).
"""

import math
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
_DTYPES = {"float32": (np.float32, TensorProto.FLOAT), "float16": (np.float16, TensorProto.FLOAT16),
           "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16)}


class _Builder:
    """Nodes, initializers and unique names for one graph."""

    def __init__(self, prefix):
        self.nodes, self.inits, self.prefix, self.count = [], [], prefix, 0

    def name(self, hint):
        self.count += 1
        return f"/{self.prefix}/{hint}_{self.count}"

    def op(self, op_type, inputs, hint=None, outputs=1, **attrs):
        node_name = self.name(hint or op_type)
        outs = [f"{node_name}_out{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=node_name, **attrs))
        return outs[0] if outputs == 1 else outs

    def init(self, hint, array):
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, values):
        return self.init("const", np.asarray(values, dtype=np.int64))

    def scalar(self, value, dtype=np.float32):
        return self.op("Constant", [], "Constant", value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))

    def model(self, inputs, outputs):
        graph = helper.make_graph(self.nodes, self.prefix, inputs, outputs, self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                 producer_name="kiln-examples")


def _rms_norm(b, x, weight, eps):
    sq = b.op("Pow", [x, b.scalar(2.0)], "Pow")
    mean = b.op("ReduceMean", [sq, b.ints([-1])], "ReduceMean", keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [mean, b.scalar(eps)], "Add")], "Sqrt")
    normed = b.op("Mul", [x, b.op("Reciprocal", [std], "Reciprocal")], "Mul")
    return normed if weight is None else b.op("Mul", [weight, normed], "Mul")


def _layer_norm_written(b, x, weight, bias, eps, dtype=np.float32):
    mean = b.op("ReduceMean", [x, b.ints([-1])], "ReduceMean", keepdims=1)
    centered = b.op("Sub", [x, mean], "Sub")
    var = b.op("ReduceMean", [b.op("Pow", [centered, b.scalar(2.0, dtype)], "Pow"), b.ints([-1])], "ReduceMean",
               keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.scalar(eps, dtype)], "Add")], "Sqrt")
    return b.op("Add", [b.op("Mul", [b.op("Div", [centered, std], "Div"), weight], "Mul"), bias], "Add")


def _heads(b, x, batch, seq, heads, dim):
    shaped = b.op("Reshape", [x, b.ints([batch, seq, heads, dim])], "Reshape")
    return b.op("Transpose", [shaped], "Transpose", perm=[0, 2, 1, 3])


def _merge_heads(b, x, batch, seq, width):
    return b.op("Reshape", [b.op("Transpose", [x], "Transpose", perm=[0, 2, 1, 3]), b.ints([batch, seq, width])],
                "Reshape")


def _causal_additive(b, seq):
    """-inf above the diagonal, 0 elsewhere, computed as exporters do: Range, Unsqueeze, Less, Where."""
    rows = b.op("Range", [b.scalar(0, np.int64), b.scalar(seq, np.int64), b.scalar(1, np.int64)], "Range")
    cols = b.op("Unsqueeze", [rows, b.ints([0])], "Unsqueeze")
    rows2 = b.op("Unsqueeze", [rows, b.ints([1])], "Unsqueeze")
    upper = b.op("Less", [rows2, cols], "Less")
    return b.op("Where", [upper, b.scalar(-np.inf), b.scalar(0.0)], "Where")


def _rotate_half(b, x, dim):
    lo = b.op("Slice", [x, b.ints([0]), b.ints([dim // 2]), b.ints([-1])], "Slice")
    hi = b.op("Slice", [x, b.ints([dim // 2]), b.ints([2 ** 62]), b.ints([-1])], "Slice")
    return b.op("Concat", [b.op("Neg", [hi], "Neg"), lo], "Concat", axis=-1)


def _rope_tables(seq, dim, theta=10000.0):
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    freqs = np.outer(np.arange(seq, dtype=np.float64), inv)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb), np.sin(emb)


def llama_block(batch=2, seq=24, hidden=128, heads=4, kv_heads=2, mlp=352, eps=1e-6, seed=0, dtype="float32"):
    """A Llama-style block (RMSNorm, RoPE, GQA, causal attention, SwiGLU) as an ONNX model and its weights, in
    ``dtype`` ("float32", "float16" or "bfloat16"; the norms are then computed in f32 between casts, as Llama's
    modules do)."""
    rng = np.random.default_rng(seed)
    dim, group = hidden // heads, heads // kv_heads
    w = {
        "norm1": 1.0 + 0.1 * rng.standard_normal(hidden), "norm2": 1.0 + 0.1 * rng.standard_normal(hidden),
        "wq": rng.standard_normal((hidden, heads * dim)) / math.sqrt(hidden),
        "wk": rng.standard_normal((hidden, kv_heads * dim)) / math.sqrt(hidden),
        "wv": rng.standard_normal((hidden, kv_heads * dim)) / math.sqrt(hidden),
        "wo": rng.standard_normal((heads * dim, hidden)) / math.sqrt(hidden),
        "wg": rng.standard_normal((hidden, mlp)) / math.sqrt(hidden),
        "wu": rng.standard_normal((hidden, mlp)) / math.sqrt(hidden),
        "wd": rng.standard_normal((mlp, hidden)) / math.sqrt(mlp),
    }
    cos, sin = _rope_tables(seq, dim)
    np_dtype, onnx_type = _DTYPES[dtype]
    b = _Builder("llama")
    ids = {k: b.init(k, v.astype(np_dtype)) for k, v in w.items()}
    cos_t = b.op("Unsqueeze", [b.init("cos", cos.astype(np_dtype)), b.ints([0, 1])], "Unsqueeze")
    sin_t = b.op("Unsqueeze", [b.init("sin", sin.astype(np_dtype)), b.ints([0, 1])], "Unsqueeze")

    def norm(t, weight):
        if dtype == "float32":
            return _rms_norm(b, t, weight, eps)
        wide = b.op("Cast", [t], "Cast", to=TensorProto.FLOAT)
        normed = _rms_norm(b, wide, None, eps)
        return b.op("Mul", [weight, b.op("Cast", [normed], "Cast", to=onnx_type)], "Mul")

    h = norm("x", ids["norm1"])
    q = _heads(b, b.op("MatMul", [h, ids["wq"]], "MatMul"), batch, seq, heads, dim)
    k = _heads(b, b.op("MatMul", [h, ids["wk"]], "MatMul"), batch, seq, kv_heads, dim)
    v = _heads(b, b.op("MatMul", [h, ids["wv"]], "MatMul"), batch, seq, kv_heads, dim)

    def rope(t):
        return b.op("Add", [b.op("Mul", [t, cos_t], "Mul"), b.op("Mul", [_rotate_half(b, t, dim), sin_t], "Mul")],
                    "Add")

    def expand(t):
        t = b.op("Unsqueeze", [t, b.ints([2])], "Unsqueeze")
        t = b.op("Expand", [t, b.ints([batch, kv_heads, group, seq, dim])], "Expand")
        return b.op("Reshape", [t, b.ints([batch, heads, seq, dim])], "Reshape")

    q, k = rope(q), expand(rope(k))
    v = expand(v)
    scores = b.op("MatMul", [q, b.op("Transpose", [k], "Transpose", perm=[0, 1, 3, 2])], "MatMul")
    scores = b.op("Div", [scores, b.scalar(math.sqrt(dim), np_dtype)], "Div")
    scores = b.op("Add", [scores, b.op("Cast", [_causal_additive(b, seq)], "Cast", to=onnx_type)], "Add")
    attn = b.op("MatMul", [b.op("Softmax", [scores], "Softmax", axis=-1), v], "MatMul")
    x1 = b.op("Add", ["x", b.op("MatMul", [_merge_heads(b, attn, batch, seq, heads * dim), ids["wo"]], "MatMul")],
              "Add")
    h2 = norm(x1, ids["norm2"])
    gate = b.op("MatMul", [h2, ids["wg"]], "MatMul")
    silu = b.op("Mul", [gate, b.op("Sigmoid", [gate], "Sigmoid")], "Mul")
    up = b.op("MatMul", [h2, ids["wu"]], "MatMul")
    down = b.op("MatMul", [b.op("Mul", [silu, up], "Mul"), ids["wd"]], "MatMul")
    b.op("Add", [x1, down], "Add")
    out = b.nodes[-1].output[0]
    model = b.model([helper.make_tensor_value_info("x", onnx_type, [batch, seq, hidden])],
                    [helper.make_tensor_value_info(out, onnx_type, [batch, seq, hidden])])
    config = dict(batch=batch, seq=seq, hidden=hidden, heads=heads, kv_heads=kv_heads, eps=eps, dtype=dtype)
    return model, {k: v.astype(np_dtype).astype(np.float64) for k, v in w.items()}, config


def llama_reference(x, w, config):
    """The Llama-style block in float64 numpy."""
    batch, seq, hidden = x.shape
    heads, kv_heads, eps = config["heads"], config["kv_heads"], config["eps"]
    dim = hidden // heads
    cos, sin = (t.astype(np.float32).astype(np.float64) for t in _rope_tables(seq, dim))

    def rms(t, g):
        return t / np.sqrt((t * t).mean(-1, keepdims=True) + eps) * g

    def heads_of(t, n):
        return t.reshape(batch, seq, n, dim).transpose(0, 2, 1, 3)

    def rope(t):
        rot = np.concatenate([-t[..., dim // 2:], t[..., :dim // 2]], axis=-1)
        return t * cos + rot * sin

    h = rms(x, w["norm1"])
    q = rope(heads_of(h @ w["wq"], heads))
    k = np.repeat(rope(heads_of(h @ w["wk"], kv_heads)), heads // kv_heads, axis=1)
    v = np.repeat(heads_of(h @ w["wv"], kv_heads), heads // kv_heads, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dim)
    s = np.where(np.triu(np.ones((seq, seq), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    x1 = x + (p @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden) @ w["wo"]
    h2 = rms(x1, w["norm2"])
    g = h2 @ w["wg"]
    return x1 + ((g / (1 + np.exp(-g))) * (h2 @ w["wu"])) @ w["wd"]


def gpt2_block(batch=2, seq=20, hidden=96, heads=4, layer_norm_op=False, eps=1e-5, seed=0, dtype="float32"):
    """A GPT-2-style block (LayerNorm, fused qkv projection split three ways, causal attention with a boolean
    mask and -1e9 fill, tanh GELU written out) as an ONNX model and its weights, in ``dtype`` ("float32",
    "float16" or "bfloat16": weights, activations and constants alike, as a model converted with .to(dtype))."""
    rng = np.random.default_rng(seed)
    dim = hidden // heads
    w = {
        "ln1_g": 1.0 + 0.1 * rng.standard_normal(hidden), "ln1_b": 0.1 * rng.standard_normal(hidden),
        "ln2_g": 1.0 + 0.1 * rng.standard_normal(hidden), "ln2_b": 0.1 * rng.standard_normal(hidden),
        "w_attn": rng.standard_normal((hidden, 3 * hidden)) / math.sqrt(hidden),
        "b_attn": 0.1 * rng.standard_normal(3 * hidden),
        "w_proj": rng.standard_normal((hidden, hidden)) / math.sqrt(hidden), "b_proj": 0.1 * rng.standard_normal(hidden),
        "w_fc": rng.standard_normal((hidden, 4 * hidden)) / math.sqrt(hidden),
        "b_fc": 0.1 * rng.standard_normal(4 * hidden),
        "w_out": rng.standard_normal((4 * hidden, hidden)) / math.sqrt(4 * hidden),
        "b_out": 0.1 * rng.standard_normal(hidden),
    }
    np_dtype, onnx_type = _DTYPES[dtype]
    b = _Builder("gpt2")
    ids = {k: b.init(k, v.astype(np_dtype)) for k, v in w.items()}

    def norm(x, g, bias):
        if layer_norm_op:
            return b.op("LayerNormalization", [x, g, bias], "LayerNormalization", axis=-1, epsilon=eps)
        return _layer_norm_written(b, x, g, bias, eps, np_dtype)

    h = norm("x", ids["ln1_g"], ids["ln1_b"])
    qkv = b.op("Add", [b.op("MatMul", [h, ids["w_attn"]], "MatMul"), ids["b_attn"]], "Add")
    q, k, v = b.op("Split", [qkv, b.ints([hidden] * 3)], "Split", outputs=3, axis=2)
    q, k, v = (_heads(b, t, batch, seq, heads, dim) for t in (q, k, v))
    scores = b.op("MatMul", [q, b.op("Transpose", [k], "Transpose", perm=[0, 1, 3, 2])], "MatMul")
    scores = b.op("Mul", [scores, b.scalar(1.0 / math.sqrt(dim), np_dtype)], "Mul")
    keep = b.init("bias", np.tril(np.ones((seq, seq), bool)).reshape(1, 1, seq, seq))
    fill = max(-1e9, float(ml_dtypes.finfo(np_dtype).min))  # f16 has no -1e9: its lowest value, as torch uses
    scores = b.op("Where", [keep, scores, b.scalar(fill, np_dtype)], "Where")
    attn = b.op("MatMul", [b.op("Softmax", [scores], "Softmax", axis=-1), v], "MatMul")
    proj = b.op("Add", [b.op("MatMul", [_merge_heads(b, attn, batch, seq, hidden), ids["w_proj"]], "MatMul"),
                        ids["b_proj"]], "Add")
    x1 = b.op("Add", ["x", proj], "Add")
    h2 = norm(x1, ids["ln2_g"], ids["ln2_b"])
    fc = b.op("Add", [b.op("MatMul", [h2, ids["w_fc"]], "MatMul"), ids["b_fc"]], "Add")
    cube = b.op("Pow", [fc, b.scalar(3.0, np_dtype)], "Pow")
    inner = b.op("Add", [fc, b.op("Mul", [b.scalar(0.044715, np_dtype), cube], "Mul")], "Add")
    tanh = b.op("Tanh", [b.op("Mul", [b.scalar(math.sqrt(2.0 / math.pi), np_dtype), inner], "Mul")], "Tanh")
    gelu = b.op("Mul", [b.op("Mul", [b.scalar(0.5, np_dtype), fc], "Mul"),
                        b.op("Add", [b.scalar(1.0, np_dtype), tanh], "Add")], "Mul")
    out = b.op("Add", [b.op("MatMul", [gelu, ids["w_out"]], "MatMul"), ids["b_out"]], "Add")
    b.op("Add", [x1, out], "Add")
    final = b.nodes[-1].output[0]
    model = b.model([helper.make_tensor_value_info("x", onnx_type, [batch, seq, hidden])],
                    [helper.make_tensor_value_info(final, onnx_type, [batch, seq, hidden])])
    config = dict(batch=batch, seq=seq, hidden=hidden, heads=heads, eps=eps, dtype=dtype)
    return model, {k: v.astype(np_dtype).astype(np.float64) for k, v in w.items()}, config


def gpt2_reference(x, w, config):
    """The GPT-2-style block in float64 numpy."""
    batch, seq, hidden = x.shape
    heads, eps = config["heads"], config["eps"]
    dim = hidden // heads

    def ln(t, g, bias):
        m = t.mean(-1, keepdims=True)
        return (t - m) / np.sqrt(((t - m) ** 2).mean(-1, keepdims=True) + eps) * g + bias

    def heads_of(t):
        return t.reshape(batch, seq, heads, dim).transpose(0, 2, 1, 3)

    qkv = ln(x, w["ln1_g"], w["ln1_b"]) @ w["w_attn"] + w["b_attn"]
    q, k, v = (heads_of(t) for t in np.split(qkv, 3, axis=-1))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dim)
    s = np.where(np.tril(np.ones((seq, seq), bool)), s, -1e9)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    x1 = x + (p @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden) @ w["w_proj"] + w["b_proj"]
    f = ln(x1, w["ln2_g"], w["ln2_b"]) @ w["w_fc"] + w["b_fc"]
    g = 0.5 * f * (1 + np.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)))
    return x1 + g @ w["w_out"] + w["b_out"]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    dtype = sys.argv[2] if len(sys.argv) > 2 else "float32"
    out.mkdir(parents=True, exist_ok=True)
    for name, (model, _, _) in (("llama_block", llama_block(dtype=dtype)), ("gpt2_block", gpt2_block())):
        onnx.checker.check_model(model)
        onnx.save(model, out / f"{name}.onnx")
        print(f"wrote {out / name}.onnx ({len(model.graph.node)} nodes)")
