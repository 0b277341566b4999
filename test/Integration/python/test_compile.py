"""kiln.compile on the host target: kiln IR text to a callable program on numpy arrays.

Each numerical test draws a fresh seed (printed in the worst-error summary), uses shapes that do not divide the
host tiles, and compares against a float64 numpy reference with the tolerance stated next to the case: 1e-4
relative (max norm) for f32, 2e-2 for bf16. The error tests check that every bad input is a Python exception
naming the thing at fault, with the MLIR diagnostic where there is one. The package is imported from
``$KILN_BUILD_DIR/python`` (default /work/main/build/python), where the build assembles it.
"""

import os
import pathlib
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from numerics import BUILD_DIR, check, fresh_rng, kiln

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "attention_block.mlir"


def t(shape, dtype="f32"):
    return "tensor<" + "x".join(str(d) for d in shape) + f"x{dtype}>"


def matmul_source(m, k, n, dtype="f32"):
    a, b, c = t((m, k), dtype), t((k, n), dtype), t((m, n), dtype)
    return (f"func.func @mm(%a: {a}, %b: {b}) -> {c} {{\n"
            f"  %c = kiln.matmul %a, %b : {a}, {b} -> {c}\n"
            f"  return %c : {c}\n}}\n")


def mlp_source(m, d, h):
    x, w1, hh, w2 = t((m, d)), t((d, h)), t((m, h)), t((h, d))
    return (f"func.func @mlp(%x: {x}, %w1: {w1}, %b1: {t((h,))}, %w2: {w2}) -> {x} {{\n"
            f"  %h = kiln.matmul %x, %w1 : {x}, {w1} -> {hh}\n"
            f"  %hb = kiln.add %h, %b1 : {hh}, {t((h,))} -> {hh}\n"
            f"  %g = kiln.silu %hb : {hh}\n"
            f"  %y = kiln.matmul %g, %w2 : {hh}, {w2} -> {x}\n"
            f"  return %y : {x}\n}}\n")


def attention_source(b, hq, hk, sq, sk, d):
    q, k, o = t((b, hq, sq, d)), t((b, hk, sk, d)), t((b, hq, sq, d))
    return (f"func.func @attn(%q: {q}, %k: {k}, %v: {k}) -> {o} {{\n"
            f"  %o = kiln.attention %q, %k, %v : {q}, {k}, {k} -> {o}\n"
            f"  return %o : {o}\n}}\n")


def attention_reference(q, k, v):
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (37, 61, 29), (130, 70, 97)])
def test_matmul_f32(m, k, n, record_error):
    rng, seed = fresh_rng()
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = kiln.compile(matmul_source(m, k, n))(a, b)
    assert out.dtype == np.float32 and out.shape == (m, n)
    check(record_error, "python: matmul f32", out, a.astype(np.float64) @ b, seed, 1e-4)


def test_matmul_bf16(record_error):
    rng, seed = fresh_rng()
    bf16 = ml_dtypes.bfloat16
    a = rng.standard_normal((45, 83)).astype(bf16)
    b = rng.standard_normal((83, 38)).astype(bf16)
    out = kiln.compile(matmul_source(45, 83, 38, "bf16"))(a, b)
    assert out.dtype == bf16
    check(record_error, "python: matmul bf16", out, a.astype(np.float64) @ b.astype(np.float64), seed, 2e-2)


@pytest.mark.parametrize("b,hq,hk,sq,sk,d", [(1, 2, 2, 33, 33, 16), (2, 4, 1, 70, 45, 32), (1, 8, 2, 5, 130, 64)])
def test_attention_gqa(b, hq, hk, sq, sk, d, record_error):
    rng, seed = fresh_rng()
    q = rng.standard_normal((b, hq, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, hk, sk, d)).astype(np.float32)
    v = rng.standard_normal((b, hk, sk, d)).astype(np.float32)
    out = kiln.compile(attention_source(b, hq, hk, sq, sk, d))(q, k, v)
    check(record_error, "python: attention f32", out, attention_reference(q, k, v), seed, 1e-4)


def test_mlp_fuses_bias_and_activation(record_error):
    rng, seed = fresh_rng()
    m, d, h = 19, 40, 71
    x = rng.standard_normal((m, d)).astype(np.float32)
    w1 = (rng.standard_normal((d, h)) / np.sqrt(d)).astype(np.float32)
    b1 = rng.standard_normal(h).astype(np.float32)
    w2 = (rng.standard_normal((h, d)) / np.sqrt(h)).astype(np.float32)
    program = kiln.compile(mlp_source(m, d, h))
    fused = program.ir("fused")
    assert "epilogue(" in fused and "math.exp" in fused  # bias and silu now live in the first matmul's epilogue
    assert "kiln.add" not in fused and "kiln.silu" not in fused
    hb = x.astype(np.float64) @ w1 + b1
    reference = (hb / (1 + np.exp(-hb))) @ w2
    check(record_error, "python: mlp f32", program(x, w1, b1, w2), reference, seed, 1e-4)


def test_example_block_fuses_to_attention_and_runs(record_error):
    program = kiln.compile(EXAMPLE.read_text())
    assert "kiln.attention" in program.ir("fused") and "kiln.softmax" not in program.ir("fused")
    rng, seed = fresh_rng()
    args = [rng.standard_normal(shape).astype(dtype) * (0.05 if shape == (512, 512) else 1.0)
            for dtype, shape in program.inputs]
    q, k, v, w, b, x = (a.astype(np.float64) for a in args)
    o = attention_reference(q, k, v)
    reference = o.transpose(0, 2, 1, 3).reshape(1, 77, 512) @ w + b + x
    check(record_error, "python: attention block f32", program(*args), reference, seed, 1e-4)


def test_gqa_decode_step_runs_packed_with_its_lse(record_error):
    """One query row of grouped-query attention runs as multi-head attention of the group's rows
    (kiln-pack-gqa-decode); its output and lse are the unpacked computation's."""
    b, hq, hk, sk, d = 2, 12, 3, 45, 16
    source = (f"func.func @step(%q: tensor<{b}x{hq}x1x{d}xf32>, %k: tensor<{b}x{hk}x{sk}x{d}xf32>) -> "
              f"(tensor<{b}x{hq}x1x{d}xf32>, tensor<{b}x{hq}x1xf32>) {{\n"
              f"  %o, %lse = kiln.attention %q, %k, %k causal : tensor<{b}x{hq}x1x{d}xf32>, "
              f"tensor<{b}x{hk}x{sk}x{d}xf32>, tensor<{b}x{hk}x{sk}x{d}xf32> -> tensor<{b}x{hq}x1x{d}xf32>, "
              f"tensor<{b}x{hq}x1xf32>\n"
              f"  return %o, %lse : tensor<{b}x{hq}x1x{d}xf32>, tensor<{b}x{hq}x1xf32>\n}}\n")
    program = kiln.compile(source)
    assert f"tensor<{b}x{hk}x{hq // hk}x{d}xf32>" in program.ir("fused")  # q viewed as the groups' rows
    rng, seed = fresh_rng()
    q, k = rng.standard_normal((b, hq, 1, d)).astype(np.float32), rng.standard_normal((b, hk, sk, d)).astype(np.float32)
    out, lse = program(q, k)
    kk = np.repeat(k.astype(np.float64), hq // hk, axis=1)
    s = q.astype(np.float64) @ np.swapaxes(kk, -1, -2) / np.sqrt(d)
    top = s.max(-1, keepdims=True)
    reference_lse = (top + np.log(np.exp(s - top).sum(-1, keepdims=True)))[..., 0]
    check(record_error, "python: gqa decode f32", out, attention_reference(q, k, k), seed, 1e-4)
    check(record_error, "python: gqa decode lse f32", lse, reference_lse, seed, 1e-4)


def test_every_stage_prints():
    program = kiln.compile(matmul_source(9, 10, 11))
    assert "kiln.matmul" in program.ir("kiln")
    assert "kiln.matmul" in program.ir("fused")
    assert "kiln.kernel" in program.ir("tiled")
    assert "scf.for" in program.ir("loops")
    assert "llvm.func" in program.ir("llvm")


def test_entry_among_several_functions():
    two = matmul_source(3, 4, 5) + matmul_source(3, 4, 5).replace("@mm", "@other")
    with pytest.raises(kiln.CompileError, match="several public functions"):
        kiln.compile(two)
    assert kiln.compile(two, entry="other").entry == "other"


# Bad inputs: (description, call, exception type, text the message must contain).
MM = matmul_source(4, 6, 5)


def call_with(*arrays):
    return lambda: kiln.compile(MM)(*arrays)


A32, B32 = np.ones((4, 6), np.float32), np.ones((6, 5), np.float32)
BAD_INPUTS = [
    ("syntax error", lambda: kiln.compile("func.func @f( {"), kiln.CompileError, "<kiln source>:1:14: error"),
    ("operand type mismatch", lambda: kiln.compile(MM.replace("%b: tensor<6x5", "%b: tensor<7x5")),
     kiln.CompileError, "expects different type"),
    ("verifier: contraction dims", lambda: kiln.compile(MM.replace("tensor<6x5xf32>", "tensor<7x5xf32>")),
     kiln.CompileError, "error"),
    ("empty module", lambda: kiln.compile(""), kiln.CompileError, "no public function"),
    ("unknown entry", lambda: kiln.compile(MM, entry="nope"), kiln.CompileError, "nope"),
    ("source not a string", lambda: kiln.compile(b"bytes"), TypeError, "source must be kiln IR text"),
    ("unsupported target", lambda: kiln.compile(MM, target="sm_70"), ValueError, "sm_70"),
    ("too few arguments", call_with(A32), TypeError, "takes 2 arguments, got 1"),
    ("too many arguments", call_with(A32, B32, B32), TypeError, "takes 2 arguments, got 3"),
    ("wrong dtype", call_with(A32.astype(np.float64), B32), TypeError, "argument 0 of 'mm' has dtype float64"),
    ("wrong shape", call_with(A32, np.ones((5, 6), np.float32)), ValueError, "argument 1 of 'mm' has shape (5, 6)"),
    ("wrong rank", call_with(np.ones(24, np.float32), B32), ValueError, "argument 0 of 'mm' has shape (24,)"),
    ("not an array", call_with([[1.0] * 6] * 4, B32), TypeError, "argument 0 of 'mm' must be a numpy array"),
    ("unknown stage", lambda: kiln.compile(MM).ir("ptx"), ValueError, "unknown stage 'ptx'"),
    ("strided array straight to the host runner",
     lambda: kiln.compiler.native_host().HostProgram(MM).run([np.ones((4, 12), np.float32)[:, ::2], B32]),
     ValueError, "argument 0 is not a C-contiguous array"),
]


@pytest.mark.parametrize("description,call,error,text", BAD_INPUTS, ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_raises(description, call, error, text):
    with pytest.raises(error) as raised:
        call()
    assert text in str(raised.value), str(raised.value)


def test_non_contiguous_input_is_accepted_and_correct():
    rng, seed = fresh_rng()
    a = rng.standard_normal((6, 4)).astype(np.float32).T  # a transposed view, not C-contiguous
    out = kiln.compile(MM)(a, B32)
    assert np.allclose(out, a.astype(np.float64) @ B32, rtol=1e-5, atol=1e-5), f"seed {seed}"


def test_host_jit_leaves_no_files(tmp_path):
    """A process that compiles and runs a host program leaves nothing in its temporary or home folder: LLVM's perf
    listener once wrote $TMPDIR/.debug/jit/llvm-IR-jit-*/jit-PID.dump for every process and never removed it."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import numpy as np, kiln\n"
            "print(kiln.ops.softmax(np.ones((2, 3), np.float32)).sum())")
    env = dict(os.environ, TMPDIR=str(tmp_path), HOME=str(tmp_path))
    env.pop("JITDUMPDIR", None)
    result = subprocess.run([sys.executable, "-c", code, str(BUILD_DIR / "python")], capture_output=True, text=True,
                            env=env)
    assert result.returncode == 0 and result.stdout.strip() == "2.0", result.stderr
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == []
