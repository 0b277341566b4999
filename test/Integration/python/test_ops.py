"""kiln.ops on the host target: ready-made kernels on numpy arrays against float64 numpy references.

Fresh seeds every run (recorded in the worst-error summary), shapes that do not divide the host tiles, f32
inputs with tolerance 1e-4 relative in the max norm (2e-2 for the bf16 case). The error tests check that each
bad argument is a Python exception naming the argument, raised before any IR is built.
"""

import math
import os
import re

import ml_dtypes
import numpy as np
import pytest

from numerics import check, fresh_rng, kiln

erf = np.vectorize(math.erf)


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


ACTIVATIONS = {
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("a_shape,b_shape", [((37, 61), (61, 29)), ((3, 19, 70), (70, 33)), ((2, 1, 9, 40), (3, 40, 17))])
def test_matmul_bias_activation(a_shape, b_shape, activation, record_error):
    rng, seed = fresh_rng()
    a, b, bias = randn(rng, *a_shape), randn(rng, *b_shape), randn(rng, b_shape[-1])
    out = kiln.ops.matmul(a, b, bias=bias, activation=activation)
    reference = ACTIVATIONS[activation](a.astype(np.float64) @ b + bias)
    check(record_error, "ops: matmul+bias+activation f32", out, reference, seed)


def test_matmul_bf16_without_bias(record_error):
    rng, seed = fresh_rng()
    a, b = randn(rng, 33, 50, dtype=ml_dtypes.bfloat16), randn(rng, 50, 21, dtype=ml_dtypes.bfloat16)
    out = kiln.ops.matmul(a, b)
    assert out.dtype == ml_dtypes.bfloat16
    check(record_error, "ops: matmul bf16", out, a.astype(np.float64) @ b.astype(np.float64), seed, 2e-2)


@pytest.mark.parametrize("fp32_precision", ["tf32", "ieee"])
def test_matmul_fp32_precision_on_the_host(fp32_precision, record_error):
    """The host multiplies f32 in f32 whatever the precision asked of a GPU."""
    rng, seed = fresh_rng()
    a, b = randn(rng, 2, 37, 61), randn(rng, 61, 29)
    out = kiln.ops.matmul(a, b, fp32_precision=fp32_precision)
    check(record_error, f"ops: matmul f32 {fp32_precision}", out, a.astype(np.float64) @ b, seed)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_matmul_fp32_precision_on_the_gpu(target, tmp_path, monkeypatch):
    """Compiled here (no GPU): f32 runs mma.sync m16n8k8 on TF32, "ieee" three of them per fragment pair (3xTF32);
    the H200 runs check their numerics (bench/matmul_lowering.py)."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    mma = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    counts = {}
    for precision in ("tf32", "ieee"):
        source = (f'func.func @mm(%a: tensor<100x64xf32>, %b: tensor<64x72xf32>) -> tensor<100x72xf32> {{\n'
                  f'  %c = kiln.matmul %a, %b {{fp32_precision = "{precision}"}} : tensor<100x64xf32>, '
                  f'tensor<64x72xf32> -> tensor<100x72xf32>\n  return %c : tensor<100x72xf32>\n}}\n')
        ptx = kiln.compile(source, target=target).ptx
        assert "cvt.rna.tf32.f32" in ptx
        counts[precision] = ptx.count(mma)
    assert counts["tf32"] > 0 and counts["ieee"] == 3 * counts["tf32"], counts


@pytest.mark.parametrize("fp32_precision", ["tf32", "ieee"])
def test_attention_fp32_precision_on_the_host(fp32_precision, record_error):
    """The host attends in f32 whatever the precision asked of a GPU."""
    rng, seed = fresh_rng()
    q, k, v = randn(rng, 1, 4, 19, 16), randn(rng, 1, 2, 23, 16), randn(rng, 1, 2, 23, 16)
    out = kiln.ops.attention(q, k, v, causal=True, fp32_precision=fp32_precision)
    check(record_error, f"ops: attention f32 {fp32_precision}", out,
          attention_reference(q, k, v, True, None, None), seed)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_attention_fp32_precision_on_the_gpu(target, tmp_path, monkeypatch):
    """Compiled here (no GPU): an f32 attention runs mma.sync m16n8k8 on TF32, "ieee" three of them per fragment
    pair in both products (3xTF32); the GPU suite checks the numerics (test/GPU/python/gpu_cases.py)."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    mma = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    counts = {}
    q, k = np.zeros((1, 4, 70, 64), np.float32), np.zeros((1, 2, 90, 64), np.float32)
    for precision in ("tf32", "ieee"):
        source = kiln.ops.attention.source(q, k, k, causal=True, fp32_precision=precision)
        assert f'fp32_precision = "{precision}"' in source
        counts[precision] = kiln.compile(source, target=target).ptx.count(mma)
    assert counts["tf32"] > 0 and counts["ieee"] == 3 * counts["tf32"], counts


@pytest.mark.parametrize("fp32_precision, dtype, message", [
    ("fp64", np.float32, "attention: fp32_precision must be 'tf32' or 'ieee', got 'fp64'"),
    ("ieee", np.float16, "attention: fp32_precision applies to f32 operands, got f16"),
])
def test_attention_fp32_precision_refused(fp32_precision, dtype, message):
    q = np.zeros((1, 2, 3, 8), dtype)
    with pytest.raises(ValueError, match=re.escape(message)):
        kiln.ops.attention(q, q, q, fp32_precision=fp32_precision)


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 0), (0, 4)), ((3, 0), (0, 4)), ((2, 3, 0), (2, 0, 4))])
def test_matmul_empty_contraction(a_shape, b_shape):
    """K = 0 is numpy's empty sum: zeros, plus the bias. (kiln-fold-matmul-batch once divided by K: SIGFPE.)"""
    rng, _ = fresh_rng()
    a, b, bias = np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32), randn(rng, b_shape[-1])
    np.testing.assert_array_equal(kiln.ops.matmul(a, b), a @ b)
    np.testing.assert_array_equal(kiln.ops.matmul(a, b, bias=bias), a @ b + bias)


def attention_reference(q, k, v, causal, scale, mask):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = s + mask
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None] + (sk - sq), -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("shape", [(1, 4, 4, 33, 33, 16), (2, 8, 2, 20, 70, 32), (1, 6, 1, 65, 65, 64),
                                   (2, 8, 2, 1, 70, 32), (1, 6, 1, 1, 65, 64)],
                         ids=["mha", "gqa4_sq<sk", "mqa", "gqa4_decode", "mqa_decode"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_attention(shape, causal, masked, record_error):
    rng, seed = fresh_rng()
    b, hq, hk, sq, sk, d = shape
    q, k, v = randn(rng, b, hq, sq, d), randn(rng, b, hk, sk, d), randn(rng, b, hk, sk, d)
    mask = randn(rng, 1, 1, sq, sk) if masked else None
    scale = 0.2 if masked else None
    out = kiln.ops.attention(q, k, v, causal=causal, scale=scale, mask=mask)
    check(record_error, "ops: attention f32", out, attention_reference(q, k, v, causal, scale, mask), seed)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis, record_error):
    rng, seed = fresh_rng()
    x = randn(rng, 7, 130, 9) * 4
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    check(record_error, "ops: softmax f32", kiln.ops.softmax(x, axis=axis), e / e.sum(axis=axis, keepdims=True), seed)


def test_rms_norm(record_error):
    rng, seed = fresh_rng()
    x, w = randn(rng, 3, 77, 200), randn(rng, 200)
    x64 = x.astype(np.float64)
    reference = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-5) * w
    check(record_error, "ops: rms_norm f32", kiln.ops.rms_norm(x, w, eps=1e-5), reference, seed)


@pytest.mark.parametrize("with_bias", [False, True])
def test_layer_norm(with_bias, record_error):
    rng, seed = fresh_rng()
    x, w, b = randn(rng, 45, 129) * 3 + 1, randn(rng, 129), randn(rng, 129)
    x64 = x.astype(np.float64)
    reference = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * w
    reference = reference + b if with_bias else reference
    out = kiln.ops.layer_norm(x, w, b if with_bias else None)
    check(record_error, "ops: layer_norm f32", out, reference, seed)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope(interleaved, record_error):
    rng, seed = fresh_rng()
    x = randn(rng, 2, 3, 37, 24)
    angles = rng.uniform(0, 2 * math.pi, (37, 12))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    x64 = x.astype(np.float64)
    first, second = (x64[..., 0::2], x64[..., 1::2]) if interleaved else (x64[..., :12], x64[..., 12:])
    rotated = (first * cos - second * sin, first * sin + second * cos)
    reference = np.empty_like(x64)
    if interleaved:
        reference[..., 0::2], reference[..., 1::2] = rotated
    else:
        reference[..., :12], reference[..., 12:] = rotated
    check(record_error, "ops: rope f32", kiln.ops.rope(x, cos, sin, interleaved=interleaved), reference, seed)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_full_tables(interleaved, record_error):
    """[S, D] tables give each element its own factors: x * cos + rotate(x) * sin, with rotate the pair swap
    that negates the first member (rotate_half, or GPT-J's pairs), for tables whose halves differ."""
    rng, seed = fresh_rng()
    x = randn(rng, 2, 3, 37, 24)
    cos, sin = randn(rng, 37, 24), randn(rng, 37, 24)
    x64 = x.astype(np.float64)
    if interleaved:
        rotated = np.empty_like(x64)
        rotated[..., 0::2], rotated[..., 1::2] = -x64[..., 1::2], x64[..., 0::2]
    else:
        rotated = np.concatenate([-x64[..., 12:], x64[..., :12]], axis=-1)
    reference = x64 * cos + rotated * sin
    check(record_error, "ops: rope full tables", kiln.ops.rope(x, cos, sin, interleaved=interleaved), reference, seed)
    with pytest.raises(ValueError, match=r"rope: 'sin' has shape \(37, 12\), expected that of 'cos', \(37, 24\)"):
        kiln.ops.rope(x, cos, sin[:, :12])


def test_rope_at_each_sequence_position(record_error):
    """``seq_dim=0`` on a decode step's q [B, H, D]: sequence b takes row b of the tables (its own position)."""
    rng, seed = fresh_rng()
    x = randn(rng, 5, 3, 16)
    angles = rng.uniform(0, 2 * math.pi, (5, 8))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    x64 = x.astype(np.float64)
    first, second = x64[..., :8], x64[..., 8:]
    c, s = cos[:, None, :], sin[:, None, :]
    reference = np.concatenate([first * c - second * s, first * s + second * c], axis=-1)
    check(record_error, "ops: rope seq_dim=0", kiln.ops.rope(x, cos, sin, seq_dim=0), reference, seed)
    with pytest.raises(ValueError, match=r"rope: 'seq_dim' must be a dimension of 'x' before the last \(0 to 1\)"):
        kiln.ops.rope(x, cos, sin, seq_dim=2)
    with pytest.raises(ValueError, match=r"rope: 'cos' has shape \(5, 8\), expected \(3, 8\) or \(3, 16\)"):
        kiln.ops.rope(x, cos, sin, seq_dim=1)


def test_repeated_signature_reuses_the_compiled_program():
    x = np.ones((4, 5), np.float32)
    kiln.ops.softmax(x)
    programs = dict(kiln.ops.softmax.programs)
    kiln.ops.softmax(x * 2)
    assert kiln.ops.softmax.programs == programs
    kiln.ops.softmax(np.ones((4, 6), np.float32))
    assert len(kiln.ops.softmax.programs) == len(programs) + 1


F = np.ones((2, 4, 8, 16), np.float32)
KV = np.ones((2, 2, 8, 16), np.float32)
BAD_OPS = [
    ("matmul K mismatch", lambda: kiln.ops.matmul(np.ones((3, 4), np.float32), np.ones((5, 6), np.float32)),
     ValueError, "'a' has K=4"),
    ("matmul rank 1", lambda: kiln.ops.matmul(np.ones(4, np.float32), np.ones((4, 6), np.float32)),
     ValueError, "rank >= 2"),
    ("matmul batch mismatch", lambda: kiln.ops.matmul(np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32)),
     ValueError, "do not broadcast"),
    ("matmul bias shape", lambda: kiln.ops.matmul(np.ones((3, 4), np.float32), np.ones((4, 6), np.float32),
                                                  bias=np.ones(5, np.float32)), ValueError, "'bias' has shape (5,)"),
    ("matmul activation", lambda: kiln.ops.matmul(np.ones((3, 4), np.float32), np.ones((4, 6), np.float32),
                                                  activation="tanhh"), ValueError, "unknown activation 'tanhh'"),
    ("matmul dtype mix", lambda: kiln.ops.matmul(np.ones((3, 4), np.float32), np.ones((4, 6), np.float16)),
     TypeError, "'b' has dtype float16 but 'a' has float32"),
    ("matmul integer dtype", lambda: kiln.ops.matmul(np.ones((3, 4), np.int32), np.ones((4, 6), np.int32)),
     TypeError, "'a' has dtype int32"),
    ("matmul not an array", lambda: kiln.ops.matmul([[1.0]], np.ones((1, 1), np.float32)),
     TypeError, "'a' must be a numpy array"),
    ("matmul fp32_precision value", lambda: kiln.ops.matmul(np.ones((3, 4), np.float32), np.ones((4, 6), np.float32),
                                                            fp32_precision="highest"),
     ValueError, "fp32_precision must be 'tf32' or 'ieee', got 'highest'"),
    ("matmul fp32_precision bf16", lambda: kiln.ops.matmul(np.ones((3, 4), ml_dtypes.bfloat16),
                                                           np.ones((4, 6), ml_dtypes.bfloat16), fp32_precision="ieee"),
     ValueError, "fp32_precision applies to f32 operands, got bf16"),
    ("attention rank", lambda: kiln.ops.attention(F[0], KV, KV), ValueError, "'q' must be [B, H, S, D]"),
    ("attention head dim", lambda: kiln.ops.attention(F, KV[..., :8], KV[..., :8]), ValueError, "head dim of 'q' is 16"),
    ("attention head count", lambda: kiln.ops.attention(F[:, :3], KV, KV), ValueError, "3 query heads cannot share 2"),
    ("attention k/v mismatch", lambda: kiln.ops.attention(F, KV, KV[:, :, :5]), ValueError, "'k' (2, 2, 8, 16) and 'v'"),
    ("attention batch", lambda: kiln.ops.attention(F, KV[:1], KV[:1]), ValueError, "batch of 'q' is 2"),
    ("attention mask shape", lambda: kiln.ops.attention(F, KV, KV, mask=np.ones((3, 8), np.float32)),
     ValueError, "'mask' of shape (3, 8)"),
    ("softmax axis", lambda: kiln.ops.softmax(F, axis=4), ValueError, "axis 4 is out of range"),
    ("rms_norm weight", lambda: kiln.ops.rms_norm(F, np.ones(8, np.float32)), ValueError, "'weight' has shape (8,)"),
    ("layer_norm bias", lambda: kiln.ops.layer_norm(F, np.ones(16, np.float32), np.ones(3, np.float32)),
     ValueError, "'bias' has shape (3,)"),
    ("rope odd D", lambda: kiln.ops.rope(F[..., :15], np.ones((8, 7), np.float32), np.ones((8, 7), np.float32)),
     ValueError, "D even"),
    ("rope table shape", lambda: kiln.ops.rope(F, np.ones((8, 7), np.float32), np.ones((8, 8), np.float32)),
     ValueError, "'cos' has shape (8, 7)"),
    ("attention causal not a bool", lambda: kiln.ops.attention(F, KV, KV, causal="False"),
     TypeError, "'causal' must be True or False, got 'False'"),
    ("attention causal long query", lambda: kiln.ops.attention(F, KV[:, :, :4], KV[:, :, :4], causal=True),
     ValueError, "needs seq_q <= seq_k, got seq_q = 8 (from 'q') and seq_k = 4 (from 'k')"),
    ("attention scale nan", lambda: kiln.ops.attention(F, KV, KV, scale=math.nan),
     ValueError, "'scale' must be a finite positive number, got nan"),
    ("attention scale inf", lambda: kiln.ops.attention(F, KV, KV, scale=math.inf),
     ValueError, "'scale' must be a finite positive number, got inf"),
    ("attention scale string", lambda: kiln.ops.attention(F, KV, KV, scale="0.5"),
     TypeError, "'scale' must be a number, got str"),
    ("attention empty head dim", lambda: kiln.ops.attention(F[..., :0], KV[..., :0], KV[..., :0]),
     ValueError, "'q' has head dim 0 (dim 3"),
    ("attention empty value head dim", lambda: kiln.ops.attention(F, KV, KV[..., :0]),
     ValueError, "'v' has head dim 0 (dim 3"),
    ("softmax empty axis", lambda: kiln.ops.softmax(F[..., :0]), ValueError, "'x' has size 0 along axis 3"),
    ("rms_norm empty rows", lambda: kiln.ops.rms_norm(F[..., :0], np.ones(0, np.float32)),
     ValueError, "'x' has size 0 in its last dimension (dim 3"),
    ("layer_norm empty rows", lambda: kiln.ops.layer_norm(F[..., :0], np.ones(0, np.float32)),
     ValueError, "'x' has size 0 in its last dimension (dim 3"),
    ("masked array", lambda: kiln.ops.softmax(np.ma.masked_array(F, mask=F < 0)),
     TypeError, "'x' is a numpy masked array"),
]


@pytest.mark.parametrize("description,call,error,text", BAD_OPS, ids=[case[0] for case in BAD_OPS])
def test_bad_argument_raises(description, call, error, text):
    with pytest.raises(error) as raised:
        call()
    assert text in str(raised.value), str(raised.value)


def test_many_signatures_do_not_start_threads_each():
    """Every program's context shares one thread pool, so compiling 20 signatures leaves the thread count flat."""
    def threads():
        return len(os.listdir("/proc/self/task"))
    kiln.ops.softmax(np.ones((1, 2), np.float32))
    before = threads()
    for n in range(2, 22):
        kiln.ops.softmax(np.ones((n, 2), np.float32))
    assert threads() <= before + 2
