"""Property-based numerics: every kiln.ops kernel on shapes, dtypes and head counts drawn at random (Hypothesis).

Why: hand-picked shapes miss the ones nobody thought of (a width of 1, a row count just past a tile, one query
against many keys). Hypothesis draws each op's shapes, dtype, attributes and input seed, runs the op on the CPU
host backend (the tiled, decomposed pipeline, as the GPU runs it), and checks it against numpy in float64;
a failure is shrunk to a small example and printed with its seed. Each op also runs twice on the same inputs:
the outputs must be bitwise identical. Examples are bounded (KILN_PROPERTY_EXAMPLES, default 12 per op) so that
`make test` stays short; raise it for a longer search.

Tolerances (relative in the max norm, outputs rounded to their type): f32 1e-4, f16 5e-3, bf16 2e-2.
"""

import os

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from numerics import check, kiln

EXAMPLES = int(os.environ.get("KILN_PROPERTY_EXAMPLES", "12"))
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
TOLERANCES = {"f32": 1e-4, "f16": 5e-3, "bf16": 2e-2}
# record_error only keeps the worst error of each family, so sharing it across examples is what it is for; each
# new shape compiles a program, which Hypothesis would otherwise flag as slow data generation.
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=False, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

dtypes = st.sampled_from(sorted(DTYPES))
seeds = st.integers(0, 2**32 - 1)
batch_dims = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


def inputs(seed, dtype, *shapes, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * scale).astype(DTYPES[dtype]) for shape in shapes]


def wide(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def run_twice(kernel, *args, **kwargs):
    """The op's output, after checking that a second run on the same inputs gives the same bits."""
    first = np.asarray(kernel(*args, **kwargs))
    second = np.asarray(kernel(*args, **kwargs))
    assert first.tobytes() == second.tobytes(), "two runs on the same inputs differ"
    return first


@PROPERTY
@given(dtype=dtypes, batch=batch_dims, m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 90),
       bias=st.booleans(), seed=seeds)
def test_matmul(record_error, dtype, batch, m, n, k, bias, seed):
    a, b, c = inputs(seed, dtype, (*batch, m, k), (k, n), (n,))
    out = run_twice(kiln.ops.matmul, a, b, bias=c if bias else None)
    a64, b64, c64 = wide(a, b, c)
    check(record_error, f"property matmul {dtype}", out, a64 @ b64 + (c64 if bias else 0), seed, TOLERANCES[dtype])


@PROPERTY
@given(dtype=dtypes, shape=st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple),
       width=st.integers(1, 300), axis_from_end=st.integers(0, 3), seed=seeds)
def test_softmax(record_error, dtype, shape, width, axis_from_end, seed):
    full = (*shape, width)
    axis = len(full) - 1 - min(axis_from_end, len(full) - 1)
    (x,) = inputs(seed, dtype, full, scale=3.0)
    out = run_twice(kiln.ops.softmax, x, axis)
    (x64,) = wide(x)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    check(record_error, f"property softmax {dtype}", out, e / e.sum(axis=axis, keepdims=True), seed,
          TOLERANCES[dtype])


@PROPERTY
@given(dtype=dtypes, rows=st.lists(st.integers(1, 40), min_size=0, max_size=2).map(tuple),
       width=st.integers(1, 700), layer=st.booleans(), bias=st.booleans(), seed=seeds)
def test_norms(record_error, dtype, rows, width, layer, bias, seed):
    x, w, b = inputs(seed, dtype, (*rows, width), (width,), (width,))
    x64, w64, b64 = wide(x, w, b)
    if layer:
        out = run_twice(kiln.ops.layer_norm, x, w, b if bias else None, 1e-5)
        centred = x64 - x64.mean(-1, keepdims=True)
        reference = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5) * w64 + (b64 if bias else 0)
    else:
        out = run_twice(kiln.ops.rms_norm, x, w, 1e-6)
        reference = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w64
    check(record_error, f"property {'layer' if layer else 'rms'}_norm {dtype}", out, reference, seed,
          TOLERANCES[dtype])


@PROPERTY
@given(dtype=dtypes, b=st.integers(1, 2), kv_heads=st.integers(1, 3), group=st.integers(1, 3),
       seq_q=st.integers(1, 40), extra_keys=st.integers(0, 60), head_dim=st.sampled_from([8, 16, 24, 32, 64]),
       causal=st.booleans(), seed=seeds)
def test_attention(record_error, dtype, b, kv_heads, group, seq_q, extra_keys, head_dim, causal, seed):
    seq_k = seq_q + extra_keys
    heads = kv_heads * group
    q, k, v = inputs(seed, dtype, (b, heads, seq_q, head_dim), (b, kv_heads, seq_k, head_dim),
                     (b, kv_heads, seq_k, head_dim))
    out = run_twice(kiln.ops.attention, q, k, v, causal=causal)
    q64, k64, v64 = wide(q, k, v)
    k64, v64 = np.repeat(k64, group, axis=1), np.repeat(v64, group, axis=1)
    scores = q64 @ k64.swapaxes(-1, -2) / np.sqrt(head_dim)
    if causal:  # bottom-right aligned: query i sees keys up to i + seq_k - seq_q
        visible = np.arange(seq_k)[None, :] <= np.arange(seq_q)[:, None] + (seq_k - seq_q)
        scores = np.where(visible, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    reference = (p / p.sum(-1, keepdims=True)) @ v64
    check(record_error, f"property attention {dtype}", out, reference, seed, TOLERANCES[dtype])


@PROPERTY
@given(dtype=dtypes, batch=batch_dims, seq=st.integers(1, 40), half=st.integers(1, 40), interleaved=st.booleans(),
       seed=seeds)
def test_rope(record_error, dtype, batch, seq, half, interleaved, seed):
    (x,) = inputs(seed, dtype, (*batch, seq, 2 * half))
    angles = np.random.default_rng(seed + 1).uniform(0, 6.3, (seq, half))
    cos, sin = np.cos(angles).astype(DTYPES[dtype]), np.sin(angles).astype(DTYPES[dtype])
    out = run_twice(kiln.ops.rope, x, cos, sin, interleaved=interleaved)
    x64, c64, s64 = wide(x, cos, sin)
    if interleaved:
        even, odd = x64[..., 0::2], x64[..., 1::2]
        reference = np.stack([even * c64 - odd * s64, even * s64 + odd * c64], -1).reshape(x64.shape)
    else:
        lo, hi = x64[..., :half], x64[..., half:]
        reference = np.concatenate([lo * c64 - hi * s64, hi * c64 + lo * s64], -1)
    check(record_error, f"property rope {dtype}", out, reference, seed, TOLERANCES[dtype])
