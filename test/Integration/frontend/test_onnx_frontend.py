"""The ONNX frontend on the host backend: import, fusion into few kernels, end-to-end numerics, bad input.

Blocks come from two sources: examples/onnx_blocks.py (graphs written node by node as exporters write them, at
odd sizes and fresh seeds) and examples/onnx/*.torch.onnx (examples/torch_blocks.py exported by torch 2.11's
TorchScript exporter on the GPU machine). Numerics are checked against a float64 numpy reference (relative max
norm: 1e-4 for f32, 5e-3 for f16, 2e-2 for bf16) and, for f32, against onnxruntime on the same input. The
kernel-count tests pin what each block fuses into. Every bad input must raise an exception naming the file,
input or node at fault.
"""

import pathlib
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "python"), str(HERE.parents[2] / "examples")]
from numerics import BUILD_DIR, check, fresh_rng  # noqa: E402
import onnx_blocks  # noqa: E402
from kiln import frontend  # noqa: E402
from kiln.frontend import FrontendError  # noqa: E402
import kiln  # noqa: E402

EXPORTS = HERE.parents[2] / "examples" / "onnx"
TOLERANCES = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2}
NUMPY = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
LLAMA_KERNELS = ["rms_norm", "matmul", "matmul", "matmul", "rope", "rope", "attention", "matmul", "rms_norm",
                 "matmul", "matmul", "matmul"]
# On the GPU, kiln-group-kernels launches the q/k/v projections and the two ropes as one kernel each.
LLAMA_GPU_KERNELS = ["rms_norm", "matmul x3", "rope x2", "attention", "matmul", "rms_norm", "matmul", "matmul",
                     "matmul"]
# The fused qkv's constant [K, 3H] weight is cut into three (kiln-split-sliced-matmuls): three GEMMs, grouped
# into one launch on the GPU, instead of one GEMM and three slices. A weight passed as an argument is [K, 3H] at
# run time, whose columns are no contiguous run: its slices stay.
GPT2_GPU_KERNELS = ["layer_norm", "matmul x3", "attention", "matmul", "layer_norm", "matmul", "matmul"]
GPT2_GPU_ARGUMENT_KERNELS = ["layer_norm", "matmul", "slice x3", "attention", "matmul", "layer_norm", "matmul",
                             "matmul"]
GPT2_KERNELS = ["layer_norm", "matmul", "matmul", "matmul", "attention", "matmul", "layer_norm", "matmul", "matmul"]


def ort_run(model, x):
    data = model if isinstance(model, (str, pathlib.Path)) else model.SerializeToString()
    session = onnxruntime.InferenceSession(str(data) if isinstance(data, pathlib.Path) else data)
    return session.run(None, {session.get_inputs()[0].name: x})[0]


# --- numerics -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_llama_block(dtype, record_error):
    rng, seed = fresh_rng()
    model, weights, config = onnx_blocks.llama_block(batch=2, seq=13, hidden=96, heads=6, kv_heads=2, mlp=200,
                                                      seed=int(rng.integers(1 << 30)), dtype=dtype)
    compiled = frontend.from_onnx(model)
    assert [k.op for k in compiled.kernels] == LLAMA_KERNELS
    x = rng.standard_normal((2, 13, 96)).astype(NUMPY[dtype])
    out = compiled(x)
    reference = onnx_blocks.llama_reference(x.astype(np.float64), weights, config)
    check(record_error, f"llama block {dtype}", out, reference, seed, TOLERANCES[dtype])
    if dtype == "float32":
        check(record_error, "llama block f32 vs onnxruntime", out, ort_run(model, x).astype(np.float64), seed)


@pytest.mark.parametrize("layer_norm_op", [False, True], ids=["written-out", "LayerNormalization"])
def test_gpt2_block(layer_norm_op, record_error):
    rng, seed = fresh_rng()
    model, weights, config = onnx_blocks.gpt2_block(batch=3, seq=11, hidden=72, heads=3, layer_norm_op=layer_norm_op,
                                                     seed=int(rng.integers(1 << 30)))
    compiled = frontend.from_onnx(model)
    assert [k.op for k in compiled.kernels] == GPT2_KERNELS
    x = rng.standard_normal((3, 11, 72)).astype(np.float32)
    out = compiled(x)
    check(record_error, "gpt2 block f32", out, onnx_blocks.gpt2_reference(x.astype(np.float64), weights, config), seed)
    check(record_error, "gpt2 block f32 vs onnxruntime", out, ort_run(model, x).astype(np.float64), seed)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpt2_block_half_precision(dtype, record_error):
    """The block as a model converted to f16/bf16: constants rounded to the type still fuse (the tanh GELU's
    sqrt(2/pi) is 0.796875 in bf16)."""
    rng, seed = fresh_rng()
    model, weights, config = onnx_blocks.gpt2_block(batch=2, seq=11, hidden=64, heads=2,
                                                     seed=int(rng.integers(1 << 30)), dtype=dtype)
    compiled = frontend.from_onnx(model)
    assert [k.op for k in compiled.kernels] == GPT2_KERNELS
    x = rng.standard_normal((2, 11, 64)).astype(NUMPY[dtype])
    reference = onnx_blocks.gpt2_reference(x.astype(np.float64), weights, config)
    check(record_error, f"gpt2 block {dtype}", compiled(x), reference, seed, TOLERANCES[dtype])


@pytest.mark.parametrize("name, kernels", [("llama_block", LLAMA_KERNELS), ("gpt2_block", GPT2_KERNELS)])
def test_torch_exported_block(name, kernels, record_error):
    """The same blocks as torch.onnx.export (torch 2.11, TorchScript exporter, opset 18) writes them."""
    path = EXPORTS / f"{name}.torch.onnx"
    rng, seed = fresh_rng()
    compiled = frontend.from_onnx(path)
    assert [k.op for k in compiled.kernels] == kernels
    (_, dtype, shape), = compiled.imported.inputs
    x = rng.standard_normal(shape).astype(dtype)
    check(record_error, f"{name} (torch export) vs onnxruntime", compiled(x), ort_run(path, x).astype(np.float64),
          seed)


def test_weights_as_arguments_match_constants():
    model, _, _ = onnx_blocks.llama_block(batch=1, seq=7, hidden=64, heads=4, kv_heads=1, mlp=96)
    as_constants = frontend.from_onnx(model)
    as_arguments = frontend.from_onnx(model, weights="arguments")
    assert "%w0" in as_arguments.ir("imported") and "%w0" not in as_constants.ir("imported")
    assert [w[0].split("/")[-1].rsplit("_", 1)[0] for w in as_arguments.imported.weights] == \
        ["norm1", "wq", "wk", "wv", "wo", "norm2", "wg", "wu", "wd"]
    x = np.random.default_rng(3).standard_normal((1, 7, 64)).astype(np.float32)
    np.testing.assert_allclose(as_arguments(x), as_constants(x), rtol=1e-5, atol=1e-6)


def test_stages_and_named_inputs():
    model, _, _ = onnx_blocks.llama_block(batch=1, seq=5, hidden=32, heads=2, kv_heads=1, mlp=48)
    compiled = frontend.from_onnx(model)
    imported, fused = compiled.ir("imported"), compiled.ir("fused")
    assert "kiln.reduce mean" in imported and "kiln.softmax" in imported and 'loc("/llama/' in imported
    for op in ("kiln.rms_norm", "kiln.rope", "kiln.attention", "epilogue"):
        assert op in fused, op
    for op in ("kiln.softmax", "kiln.reduce", "kiln.concat", "kiln.sigmoid", "kiln.silu", "kiln.add"):
        assert op not in fused, op  # SiLU, the gate and the residuals live in matmul epilogues
    x = np.ones((1, 5, 32), np.float32)
    np.testing.assert_array_equal(compiled(x=x), compiled(x))


def test_many_distinct_scalar_constants(record_error):
    """Thirty ops, each with its own scalar: every constant must reach the program (none reused by mistake)."""
    rng, seed = fresh_rng()
    nodes, inits, previous = [], [], "x"
    for i in range(30):
        inits.append(numpy_helper.from_array(np.asarray(1.0 + 0.01 * i, np.float32), f"c{i}"))
        op = ("Mul", "Add", "Sub", "Div")[i % 4]
        nodes.append(helper.make_node(op, [previous, f"c{i}"], [f"t{i}"], name=f"op{i}"))
        previous = f"t{i}"
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    model = graph_model(nodes, [value("x", [3, 5])], [value("y", [3, 5])], inits)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    check(record_error, "30 scalar constants vs onnxruntime", frontend.from_onnx(model)(x),
          ort_run(model, x).astype(np.float64), seed)


def test_rotary_table_computed_at_run_time(record_error):
    """The rotary cos/sin as Hugging Face's Llama export computes them: int64 position ids (a graph input) cast to
    float, times the inverse frequencies, the angles concatenated, then Cos and Sin at run time, applied to x by
    rotate_half. Against onnxruntime."""
    rng, seed = fresh_rng()
    seq, dim = 37, 16
    inv_freq = (1.0 / 10000.0 ** (np.arange(0, dim, 2, dtype=np.float32) / dim)).reshape(1, 1, dim // 2)
    nodes = [
        helper.make_node("Cast", ["positions"], ["p"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["p", "last"], ["p3"]),
        helper.make_node("Mul", ["p3", "inv_freq"], ["freqs"]),
        helper.make_node("Concat", ["freqs", "freqs"], ["angles"], axis=-1),
        helper.make_node("Cos", ["angles"], ["cos"]),
        helper.make_node("Sin", ["angles"], ["sin"]),
        helper.make_node("Split", ["x", "halves"], ["x1", "x2"], axis=-1),
        helper.make_node("Neg", ["x2"], ["minus_x2"]),
        helper.make_node("Concat", ["minus_x2", "x1"], ["rotated"], axis=-1),
        helper.make_node("Mul", ["x", "cos"], ["a"]),
        helper.make_node("Mul", ["rotated", "sin"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    inits = [numpy_helper.from_array(inv_freq, "inv_freq"), numpy_helper.from_array(np.array([-1]), "last"),
             numpy_helper.from_array(np.array([dim // 2, dim // 2]), "halves")]
    model = graph_model(nodes, [value("positions", [1, seq], TensorProto.INT64), value("x", [1, seq, dim])],
                        [value("y", [1, seq, dim])], inits)
    positions = np.arange(100, 100 + seq, dtype=np.int64)[None]
    x = rng.standard_normal((1, seq, dim)).astype(np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString())
    expected = session.run(None, {"positions": positions, "x": x})[0].astype(np.float64)
    check(record_error, "runtime rotary table vs onnxruntime", frontend.from_onnx(model)(positions, x), expected,
          seed)


@pytest.mark.parametrize("mode", [0, 2, 3])
def test_attention_scores_output(record_error, mode):
    """Attention's qk_matmul_output beside its fused output: 3-D GQA inputs (6 query heads on 2 key heads), a
    past cache, the causal frontier, a boolean mask that leaves a query row without any key, and a softcap; each
    output against onnx's reference evaluator in float64 terms (f32 in, rel 1e-4 of the largest)."""
    from onnx.reference import ReferenceEvaluator
    rng, seed = fresh_rng()
    batch, q_len, past, kv_len, dim = 2, 7, 5, 7, 24
    mask = rng.random((q_len, past + kv_len)) < 0.8
    mask[3] = False  # a row no key may attend: zeros in Y and (mode 3) in the scores
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "past_k", "past_v"],
                            ["y", "present_k", "present_v", "scores"], is_causal=1, q_num_heads=6, kv_num_heads=2,
                            softcap=3.0, qk_matmul_output_mode=mode)
    model = graph_model([node], [value("q", [batch, q_len, 6 * dim]), value("k", [batch, kv_len, 2 * dim]),
                                 value("v", [batch, kv_len, 2 * dim]),
                                 value("past_k", [batch, 2, past, dim]), value("past_v", [batch, 2, past, dim])],
                        [value("y", None), value("present_k", None), value("present_v", None),
                         value("scores", None)], [numpy_helper.from_array(mask, "mask")], opset=24)
    inputs = dict(q=rng.standard_normal((batch, q_len, 6 * dim)), k=rng.standard_normal((batch, kv_len, 2 * dim)),
                  v=rng.standard_normal((batch, kv_len, 2 * dim)), past_k=rng.standard_normal((batch, 2, past, dim)),
                  past_v=rng.standard_normal((batch, 2, past, dim)))
    inputs = {name: array.astype(np.float32) for name, array in inputs.items()}
    expected = ReferenceEvaluator(model).run(None, inputs)
    results = frontend.from_onnx(model)(**inputs)
    assert len(results) == 4
    for name, actual, reference in zip(("y", "present_k", "present_v", "scores"), results, expected):
        finite = np.isfinite(reference)
        np.testing.assert_array_equal(np.isfinite(actual), finite, err_msg=name)
        check(record_error, f"Attention {name} (qk_matmul_output_mode {mode})", np.where(finite, actual, 0),
              np.where(finite, reference, 0).astype(np.float64), seed)


def test_attention_scores_output_mode_out_of_range():
    node = helper.make_node("Attention", ["q", "k", "v"], ["y", "", "", "scores"], name="attn",
                            qk_matmul_output_mode=4)
    model = graph_model([node], [value("q", [1, 2, 3, 8]), value("k", [1, 2, 3, 8]), value("v", [1, 2, 3, 8])],
                        [value("y", None), value("scores", None)], opset=24)
    with pytest.raises(FrontendError, match="Attention node 'attn': qk_matmul_output_mode 4 is not one of"):
        frontend.import_onnx(model)


@pytest.mark.parametrize("axis", [-1, -2, 0, 1, 3])
def test_flatten_axes(axis):
    model = graph_model([helper.make_node("Flatten", ["x"], ["y"], axis=axis)], [value("x", [2, 3, 4])],
                        [value("y", None)])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = frontend.from_onnx(model)(x)
    np.testing.assert_array_equal(out, ort_run(model, x))


# --- the command line -------------------------------------------------------------------------------------------------

def run_cli(*args):
    # A bare environment (the CLI must not depend on the caller's), but for a sanitizer build's runtimes.
    env = {"PYTHONPATH": str(BUILD_DIR / "python"), "PATH": "/usr/bin:/bin"}
    env.update({name: os.environ[name] for name in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")
                if name in os.environ})
    return subprocess.run([sys.executable, "-m", "kiln.frontend.cli", *args], capture_output=True, text=True,
                          env=env)


def test_cli_writes_ir(tmp_path):
    out = tmp_path / "block.mlir"
    result = run_cli(str(EXPORTS / "gpt2_block.torch.onnx"), "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert text.startswith("func.func @main(%arg0: tensor<2x20x96xf32>)") and "kiln.matmul" in text


def test_cli_reports_bad_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a model\xff\xff")
    result = run_cli(str(bad))
    assert result.returncode == 1
    assert result.stderr.startswith("kiln-import: error:") and "bad.onnx" in result.stderr


# --- bad input --------------------------------------------------------------------------------------------------------

def graph_model(nodes, inputs, outputs, inits=(), opset=18, domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets)


def value(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def test_missing_file():
    with pytest.raises(FrontendError, match="nope.onnx: no such file"):
        frontend.from_onnx("/nonexistent/nope.onnx")


def test_corrupt_file(tmp_path):
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(FrontendError, match="corrupt.onnx: not a readable ONNX model"):
        frontend.from_onnx(path)


def test_truncated_file(tmp_path):
    model, _, _ = onnx_blocks.gpt2_block(batch=1, seq=4, hidden=16, heads=2)
    data = model.SerializeToString()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(FrontendError, match="truncated.onnx"):
        frontend.from_onnx(path)


def test_serialized_bytes():
    """A model's serialized bytes import as the model does (they once reached pathlib and raised its TypeError)."""
    model = graph_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [2, 3])], [value("y", [2, 3])])
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    np.testing.assert_array_equal(frontend.from_onnx(model.SerializeToString())(x), np.maximum(x, 0))


def test_corrupt_bytes():
    with pytest.raises(FrontendError, match="<1024 bytes>: not a readable ONNX model"):
        frontend.from_onnx(bytes(range(256)) * 4)


def test_source_of_another_type():
    with pytest.raises(TypeError, match="a path, a ModelProto or its serialized bytes, got int"):
        frontend.from_onnx(42)


def test_every_unsupported_op_listed():
    model = graph_model([helper.make_node("Relu", ["x"], ["a"], name="ok"),
                         helper.make_node("LSTM", ["a"], ["b"], name="rnn"),
                         helper.make_node("Conv", ["b"], ["c"], name="conv1"),
                         helper.make_node("FancyOp", ["c"], ["y"], name="custom", domain="my.domain")],
                        [value("x", [2, 3])], [value("y", [2, 3])], domains=["my.domain"])
    with pytest.raises(FrontendError) as error:
        frontend.import_onnx(model)
    message = str(error.value)
    assert message.startswith("3 unsupported operator(s)")
    for part in ("LSTM (node 'rnn')", "Conv (node 'conv1')", "my.domain.FancyOp (node 'custom')"):
        assert part in message


def test_old_opset():
    model = graph_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [2])], [value("y", [2])], opset=11)
    with pytest.raises(FrontendError, match="opset 11 is not supported"):
        frontend.import_onnx(model)


def test_symbolic_dimension_needs_a_shape():
    model = graph_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", ["batch", 8])], [value("y", ["batch", 8])])
    with pytest.raises(FrontendError, match="input 'x' has a symbolic dimension 'batch' \\(dim 0\\)"):
        frontend.import_onnx(model)
    compiled = frontend.from_onnx(model, input_shapes={"x": (3, 8)})
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8)
    np.testing.assert_array_equal(compiled(x), np.maximum(x, 0))
    with pytest.raises(FrontendError, match="input_shapes names \\['z'\\]"):
        frontend.import_onnx(model, input_shapes={"x": (3, 8), "z": (1,)})


def test_runtime_reshape_shape():
    model = graph_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn")],
                        [value("x", [2, 3]), value("s", [2], TensorProto.INT64)], [value("y", [3, 2])])
    with pytest.raises(FrontendError, match="Reshape node 'dyn': shape must be a constant"):
        frontend.import_onnx(model)


def test_matmul_shape_mismatch():
    w = numpy_helper.from_array(np.zeros((5, 4), np.float32), "w")
    model = graph_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], [value("x", [2, 3])],
                        [value("y", [2, 4])], [w])
    with pytest.raises(FrontendError, match="MatMul node 'proj': inner dimensions differ"):
        frontend.import_onnx(model)


def test_undefined_input():
    model = graph_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")], [value("x", [2])],
                        [value("y", [2])])
    with pytest.raises(FrontendError, match="Add node 'add': input 'ghost' is not defined"):
        frontend.import_onnx(model)


@pytest.mark.parametrize("node, message", [
    (helper.make_node("Trilu", ["x", "k"], ["y"], name="upper"), "Trilu node 'upper': k must be a constant"),
    (helper.make_node("Add", ["b", "b"], ["y"], name="bools"),
     "Add node 'bools': arithmetic on bool tensors; kiln computes it on floats and int32/int64"),
    (helper.make_node("Range", ["k", "k", "k"], ["y"], name="range"), "Range node 'range': start must be a constant"),
    (helper.make_node("And", ["x", "x"], ["y"], name="and"), "And node 'and': input 0 must be bool, got f32"),
    (helper.make_node("Mod", ["x", "x"], ["y"], name="floor"),
     "Mod node 'floor': a float Mod needs attribute fmod = 1 before opset 28 \\(this model's opset is 18\\)"),
])
def test_run_time_values_it_cannot_take(node, message):
    model = graph_model([node], [value("x", [2, 2]), value("i", [2, 2], TensorProto.INT64),
                                 value("k", [], TensorProto.INT64), value("b", [2], TensorProto.BOOL)],
                        [value("y", None)])
    with pytest.raises(FrontendError, match=message):
        frontend.import_onnx(model)


def test_padding_mask_built_at_run_time(record_error):
    """A Hugging Face style mask computed in the graph from a run-time attention_mask (1 keep, 0 padding): Equal
    to 0, Or with the future (a Trilu of the scores turned bool), Not and And, Where to -inf before the softmax;
    beside it a Mod of the scores and a Greater of the mask. Every row keeps its first key. Against
    onnxruntime."""
    rng, seed = fresh_rng()
    batch, seq = 3, 29
    nodes = [
        helper.make_node("Equal", ["attention_mask", "zero"], ["padded"]),            # [B, S] bool
        helper.make_node("Unsqueeze", ["padded", "axis1"], ["padded3"]),              # [B, 1, S]
        helper.make_node("Trilu", ["scores", "one"], ["future_scores"], upper=1),     # float, run time
        helper.make_node("Cast", ["future_scores"], ["future_any"], to=TensorProto.BOOL),
        helper.make_node("Or", ["future_any", "padded3"], ["hidden"]),
        helper.make_node("Not", ["hidden"], ["shown"]),
        helper.make_node("Not", ["padded3"], ["kept"]),
        helper.make_node("And", ["shown", "kept"], ["visible"]),
        helper.make_node("Where", ["visible", "scores", "minus_inf"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("Mod", ["scores", "three"], ["remainder"], fmod=1),
        helper.make_node("Greater", ["attention_mask", "zero"], ["kept_ids"]),
        helper.make_node("Cast", ["kept_ids"], ["kept_float"], to=TensorProto.FLOAT),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array(-np.inf, np.float32), "minus_inf"),
             numpy_helper.from_array(np.array(3.0, np.float32), "three")]
    model = graph_model(nodes, [value("attention_mask", [batch, seq], TensorProto.INT64),
                                value("scores", [batch, seq, seq])],
                        [value("probs", [batch, seq, seq]), value("remainder", [batch, seq, seq]),
                         value("kept_float", [batch, seq])], inits)
    attention_mask = np.ones((batch, seq), np.int64)
    attention_mask[1, 3:6] = 0
    attention_mask[2, -7:] = 0  # right padding
    scores = (rng.standard_normal((batch, seq, seq)) * 4).astype(np.float32)
    scores[scores == 0] = 1.0  # Trilu-then-bool reads a zero as "not in the future"
    session = onnxruntime.InferenceSession(model.SerializeToString())
    expected = session.run(None, {"attention_mask": attention_mask, "scores": scores})
    probs, remainder, kept = frontend.from_onnx(model)(attention_mask, scores)
    check(record_error, "run-time padding mask vs onnxruntime", probs, expected[0].astype(np.float64), seed)
    np.testing.assert_allclose(remainder, expected[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(kept, expected[2])


def test_constant_gather_index_out_of_range():
    index = numpy_helper.from_array(np.asarray(7, np.int64), "i")
    model = graph_model([helper.make_node("Gather", ["x", "i"], ["y"], name="pick", axis=1)], [value("x", [2, 5])],
                        [value("y", [2])], [index])
    with pytest.raises(FrontendError, match="Gather node 'pick': index 7 is out of range for axis 1 of size 5"):
        frontend.import_onnx(model)


def test_layer_norm_scale_off_the_normalised_shape():
    g = numpy_helper.from_array(np.ones((3, 2), np.float32), "g")
    model = graph_model([helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln", axis=1)],
                        [value("x", [4, 2, 3])], [value("y", [4, 2, 3])], [g])
    with pytest.raises(FrontendError, match=r"LayerNormalization node 'ln': Scale has shape \(3, 2\), which does not "
                                            r"broadcast to the normalised shape \(2, 3\)"):
        frontend.import_onnx(model)


def test_mismatched_element_types():
    model = graph_model([helper.make_node("Add", ["x", "z"], ["y"], name="mixed")],
                        [value("x", [2]), value("z", [2], TensorProto.FLOAT16)], [value("y", [2])])
    with pytest.raises(FrontendError,
                       match="Add node 'mixed': input A and input B have different types \\(f32 and f16\\)"):
        frontend.import_onnx(model)


def test_unsupported_input_dtype():
    model = graph_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [2], TensorProto.DOUBLE)],
                        [value("y", [2], TensorProto.DOUBLE)])
    with pytest.raises(FrontendError, match="input 'x' has dtype float64"):
        frontend.import_onnx(model)


def test_missing_weight_data(tmp_path):
    model, _, _ = onnx_blocks.gpt2_block(batch=1, seq=4, hidden=16, heads=2)
    onnx.save(model, tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=1024)
    (tmp_path / "ext.data").unlink()
    imported = frontend.import_onnx(tmp_path / "ext.onnx", weights="arguments")
    assert any(w[3] is None for w in imported.weights)
    with pytest.raises(FrontendError, match="have no data in the file"):
        frontend.Model(imported, "host")
    with pytest.raises(FrontendError, match="cannot read its data"):
        frontend.import_onnx(tmp_path / "ext.onnx")


def test_f32_block_compiles_for_the_gpu(tmp_path, monkeypatch):
    """An f32 model's attention runs on TF32 tensor cores (m16n8k8); an unknown target is an error."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    model, _, _ = onnx_blocks.gpt2_block(batch=1, seq=4, hidden=16, heads=2)
    compiled = frontend.from_onnx(model, target="sm_90a")
    assert "attention" in [k.op for k in compiled.kernels]
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in compiled.program.ptx
    with pytest.raises(ValueError, match="unsupported target 'sm_70'"):
        frontend.from_onnx(model, target="sm_70")


def test_bf16_block_compiles_for_the_gpu(tmp_path, monkeypatch):
    """Compiled here (no GPU): the kernels and plan the H200 suite runs (test/GPU/python)."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    model, _, _ = onnx_blocks.llama_block(dtype="bfloat16")
    compiled = frontend.from_onnx(model, target="sm_90a", weights="arguments")
    assert [k.op for k in compiled.kernels] == LLAMA_GPU_KERNELS
    assert compiled.program.manifest["target"] == "sm_90a" and ".target sm_90a" in compiled.program.ptx


def test_bf16_gpt2_block_compiles_for_the_gpu(tmp_path, monkeypatch):
    """The GPT-2-style block in bf16 (head dim 32): 7 kernels, the q, k and v GEMMs in one launch; 8 with the
    weights as arguments, the three slices of the fused qkv in one launch."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    model, _, _ = onnx_blocks.gpt2_block(hidden=128, heads=4, dtype="bfloat16")
    assert [k.op for k in frontend.from_onnx(model, target="sm_90a").kernels] == GPT2_GPU_KERNELS
    compiled = frontend.from_onnx(model, target="sm_90a", weights="arguments")
    assert [k.op for k in compiled.kernels] == GPT2_GPU_ARGUMENT_KERNELS


def test_bad_calls():
    model, _, _ = onnx_blocks.gpt2_block(batch=1, seq=4, hidden=16, heads=2)
    compiled = frontend.from_onnx(model)
    x = np.zeros((1, 4, 16), np.float32)
    with pytest.raises(TypeError, match="takes 1 input\\(s\\) \\['x'\\], got 2"):
        compiled(x, x)
    with pytest.raises(TypeError, match="input 'x' has dtype float64, expected float32"):
        compiled(x.astype(np.float64))
    with pytest.raises(ValueError, match="input 'x' has shape \\(1, 4, 8\\), expected \\(1, 4, 16\\)"):
        compiled(x[..., :8])
    with pytest.raises(TypeError, match="input 'x' must be a numpy array, got list"):
        compiled([0.0] * 64)
    with pytest.raises(TypeError, match="unknown input\\(s\\) \\['y'\\]"):
        compiled(y=x)
    with pytest.raises(ValueError, match="weights must be 'constants' or 'arguments'"):
        frontend.import_onnx(model, weights="inline")


def test_onnx_fuzz_findings_are_named_errors():
    """What the ONNX mutation fuzzer (onnx_fuzz.py) found, each now a FrontendError naming the culprit: an
    element type ONNX does not define (a KeyError before), initializer dims that do not match its data, and a
    node whose operands do not broadcast (a numpy ValueError from inside the op rule)."""
    model, _, _ = onnx_blocks.gpt2_block(batch=1, seq=4, hidden=16, heads=2)
    bad_input = onnx.ModelProto()
    bad_input.CopyFrom(model)
    bad_input.graph.input[0].type.tensor_type.elem_type = 0
    with pytest.raises(FrontendError, match="input 'x' has ONNX element type 0, which is not a tensor dtype"):
        frontend.import_onnx(bad_input)
    bad_type = onnx.ModelProto()
    bad_type.CopyFrom(model)
    bad_type.graph.initializer[0].data_type = 29
    with pytest.raises(FrontendError, match=f"initializer '{bad_type.graph.initializer[0].name}' has ONNX element "
                                            "type 29"):
        frontend.import_onnx(bad_type)
    bad_dims = onnx.ModelProto()
    bad_dims.CopyFrom(model)
    init = next(i for i in bad_dims.graph.initializer if len(i.dims) == 2)
    init.dims[0] += 1
    with pytest.raises(FrontendError, match=f"initializer '{init.name}': cannot read its data"):
        frontend.import_onnx(bad_dims, weights="arguments")
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 3])
    table = onnx.numpy_helper.from_array(np.ones((2,), np.float32), "table")
    other = onnx.numpy_helper.from_array(np.ones((3,), np.float32), "other")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Add", ["table", "other"], ["t"], name="fold"),
                                    onnx.helper.make_node("Add", ["x", "t"], ["y"], name="use")],
                                   "g", [x], [y], [table, other])
    folded = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    with pytest.raises(FrontendError, match="Add node 'fold': cannot import it: ValueError: operands could not be "
                                            "broadcast together"):
        frontend.import_onnx(folded)
    # A LayerNormalization whose epsilon is negative imported into IR that the verifier refused.
    normed, _, _ = onnx_blocks.gpt2_block(batch=1, seq=4, hidden=16, heads=2, layer_norm_op=True)
    node = next(n for n in normed.graph.node if n.op_type == "LayerNormalization")
    next(a for a in node.attribute if a.name == "epsilon").f = -1.0
    with pytest.raises(FrontendError, match=f"LayerNormalization node '{node.name}': epsilon must be finite and "
                                            "non-negative, got -1.0"):
        frontend.import_onnx(normed)


def test_pow_with_an_exponent_of_another_type():
    """Pow's base and exponent types may differ (ONNX's T and T1), and ONNX computes such a pair in float64.
    A float base with a run-time float exponent of another type computes in f32 and rounds once (within an f16
    ulp of the float64 reference); a constant integer exponent up to 2^24 likewise; a run-time integer exponent
    (whose parity f32 loses past 2^24) and an integer base with a float exponent (wrong in f32 past 2^24) are
    refused, naming the node."""
    rng, seed = fresh_rng()
    x = (rng.random(16) * 3 + 0.5).astype(np.float16)
    x[:2] = [-1.0, -2.0]
    e = rng.uniform(-2, 4, 16).astype(np.float32)
    e[:2] = [3.0, 5.0]
    node = helper.make_node("Pow", ["x", "e"], ["y"], name="pow")
    model = frontend.from_onnx(graph_model([node], [value("x", [16], TensorProto.FLOAT16), value("e", [16])],
                                           [value("y", [16], TensorProto.FLOAT16)], opset=15))
    expected = np.power(x.astype(np.float64), e.astype(np.float64)).astype(np.float16)
    np.testing.assert_allclose(model(x=x, e=e).astype(np.float64), expected.astype(np.float64), rtol=1e-3,
                               err_msg=f"seed {seed}")

    odd = numpy_helper.from_array(np.array([3, 65537], np.int32), "k")
    cubes = frontend.from_onnx(graph_model([helper.make_node("Pow", ["x", "k"], ["y"], name="pow")],
                                           [value("x", [2])], [value("y", [2])], [odd], opset=15))
    np.testing.assert_array_equal(cubes(x=np.array([-2.0, -1.0], np.float32)), np.array([-8.0, -1.0], np.float32))

    refusals = [(TensorProto.FLOAT, TensorProto.INT32, "a float base with an integer exponent at run time"),
                (TensorProto.INT64, TensorProto.FLOAT, "an integer base \\(i64\\) with a float exponent")]
    for base, exponent, message in refusals:
        refused = graph_model([helper.make_node("Pow", ["x", "e"], ["y"], name="pow")],
                              [value("x", [4], base), value("e", [4], exponent)], [value("y", [4], base)], opset=15)
        with pytest.raises(FrontendError, match=f"Pow node 'pow': {message}"):
            frontend.import_onnx(refused)
