"""Property-based numerics on the GPU: kiln.ops on torch CUDA tensors, shapes and dtypes drawn by Hypothesis.

The GPU twin of test/Integration/python/test_properties.py: each op's shapes, dtype, head counts and input seed
are drawn at random, the op runs through the GPU JIT (each new shape a compile, or a kernel-cache hit), and the
result is checked against torch in float64 on the same (rounded) inputs; every run is repeated and must be
bitwise identical. KILN_GPU_PROPERTY_EXAMPLES (default 40 per op) bounds the draws; the seed of a failure is in
its message, and Hypothesis prints the shrunk example. Tolerances (relative in the max norm; a matmul's to the
root-sum-square of each output's terms, since a dot product may cancel): bf16 2e-2,
f16 5e-3, f32 2e-3 (matmuls and attention on TF32 tensor cores, each input rounded to 10 mantissa bits). Matmul's N
and K take any size, aligned to 16 bytes or not; attention (bf16, f16, f32) head dims that are multiples of 8, 24
to 256.
"""

import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import kiln  # noqa: E402

F = torch.nn.functional
EXAMPLES = int(os.environ.get("KILN_GPU_PROPERTY_EXAMPLES", "40"))
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
TOLERANCES = {"bf16": 2e-2, "f16": 5e-3, "f32": 2e-3}
WORST = {}
# Each new shape compiles a program, which Hypothesis would otherwise flag as slow data generation.
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow])

dtypes = st.sampled_from(sorted(DTYPES))
seeds = st.integers(0, 2**31 - 1)


def inputs(seed, dtype, *shapes):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(*shape, generator=generator, device="cuda").to(DTYPES[dtype]) for shape in shapes]


def checked(name, dtype, seed, kernel, reference, *args, scale=None):
    """Runs ``kernel`` twice (bitwise identical) and checks it against ``reference`` in float64, relative to the
    largest magnitude of the result, or of ``scale`` (the same arguments) where the result may cancel."""
    first, second = kernel(*args), kernel(*args)
    torch.cuda.synchronize()
    assert torch.equal(first.view(torch.int16), second.view(torch.int16)), f"{name}: two runs differ (seed {seed})"
    doubles = [a.double() if isinstance(a, torch.Tensor) else a for a in args]
    expected = reference(*doubles)
    magnitude = (scale or reference)(*doubles).abs().max().clamp_min(1e-30)
    error = ((first.double() - expected).abs().max() / magnitude).item()
    key = f"{name} {dtype}"
    WORST[key] = max(WORST.get(key, 0.0), error)
    assert error <= TOLERANCES[dtype], f"{name} {dtype}: relative error {error:.2e} (seed {seed})"


@PROPERTY
@given(dtype=dtypes, m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 600), bias=st.booleans(),
       seed=seeds)
def test_matmul(dtype, m, n, k, bias, seed):
    a, b, c = inputs(seed, dtype, (m, k), (k, n), (n,))
    b = b / k ** 0.5
    # A dot product that cancels (one output of a long K, say) is measured against the size of its terms, the
    # root of their summed squares, which is what each product's rounding scales with: for random inputs that is
    # the size of a typical output, so the bound stays as tight as the max-norm one there.
    checked("matmul", dtype, seed, lambda a, b, c: kiln.ops.matmul(a, b, bias=c if bias else None),
            lambda a, b, c: a @ b + (c if bias else 0), a, b, c,
            scale=lambda a, b, c: ((a * a) @ (b * b) + (c * c if bias else 0)).sqrt())


@PROPERTY
@given(dtype=dtypes, rows=st.lists(st.integers(1, 50), min_size=1, max_size=2).map(tuple),
       width=st.integers(1, 3000), op=st.sampled_from(["softmax", "rms_norm", "layer_norm"]), seed=seeds)
def test_rows(dtype, rows, width, op, seed):
    x, w, b = inputs(seed, dtype, (*rows, width), (width,), (width,))
    if op == "softmax":
        checked(op, dtype, seed, kiln.ops.softmax, lambda x: torch.softmax(x, -1), x)
    elif op == "rms_norm":
        checked(op, dtype, seed, kiln.ops.rms_norm, lambda x, w: F.rms_norm(x, (width,), w, 1e-6), x, w)
    else:
        checked(op, dtype, seed, kiln.ops.layer_norm, lambda x, w, b: F.layer_norm(x, (width,), w, b, 1e-5), x, w, b)


@PROPERTY
@given(dtype=dtypes, b=st.integers(1, 2), kv_heads=st.integers(1, 4), group=st.sampled_from([1, 2, 4]),
       seq_q=st.integers(1, 200), extra_keys=st.integers(0, 300),
       head_dim=st.sampled_from([24, 40, 64, 72, 80, 96, 128, 256]),
       causal=st.booleans(), seed=seeds)
def test_attention(dtype, b, kv_heads, group, seq_q, extra_keys, head_dim, causal, seed):
    seq_k = seq_q + extra_keys
    q, k, v = inputs(seed, dtype, (b, kv_heads * group, seq_q, head_dim), (b, kv_heads, seq_k, head_dim),
                     (b, kv_heads, seq_k, head_dim))

    def reference(q, k, v):
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        scores = q @ k.transpose(-1, -2) / head_dim ** 0.5
        if causal:  # bottom-right aligned: query i sees keys up to i + seq_k - seq_q
            keys, queries = torch.arange(seq_k, device="cuda"), torch.arange(seq_q, device="cuda")
            scores = scores.masked_fill(keys[None, :] > queries[:, None] + (seq_k - seq_q), float("-inf"))
        return torch.softmax(scores, -1) @ v

    checked("attention", dtype, seed, lambda q, k, v: kiln.ops.attention(q, k, v, causal=causal), reference, q, k, v)


def test_report_worst_errors():
    """Prints the worst error of each family over the draws above (runs last in this file)."""
    print("\n" + "\n".join(f"worst {key}: {value:.2e}" for key, value in sorted(WORST.items())))
