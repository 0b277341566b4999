"""Split-K matmul on the CPU host backend: ``kiln.matmul {k_chunk}`` and ``kiln.sum_splits`` against float64.

kiln-split-k rewrites a decode-shaped GEMM on the GPU targets as a matmul over chunks of its contraction (each
chunk's f32 partial product) and a sum of the chunks that runs the matmul's epilogue. Both are ordinary kiln ops,
so the host backend runs them too: these tests write them out in IR (the pass leaves the host target alone) and
check each chunk's partial product and the finished sum against float64, over contractions that the chunks do
not divide, chunks that are not whole host k-tiles, batch dimensions, a transposed weight and an epilogue.
Tolerances: 1e-4 for f32, 2e-2 for bf16 (relative, max norm).
"""

import subprocess

import ml_dtypes
import numpy as np
import pytest

from numerics import BUILD_DIR, check, fresh_rng, kiln


def element(dtype):
    return "bf16" if dtype == ml_dtypes.bfloat16 else "f32"


def tensor(shape, dtype):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + dtype + ">"


def bias_silu_epilogue(n, e):
    """An epilogue region adding a bias of `n` elements of type `e` and applying SiLU."""
    return f"""epilogue(%b : {tensor((n,), e)}) {{
  ^bb0(%acc: f32, %bias: f32):
    %s = arith.addf %acc, %bias : f32
    %neg = arith.negf %s : f32
    %ex = math.exp %neg : f32
    %one = arith.constant 1.0 : f32
    %den = arith.addf %one, %ex : f32
    %silu = arith.divf %s, %den : f32
    kiln.yield %silu : f32
  }}"""


def split_source(lhs_shape, rhs_shape, chunk, dtype, transpose_rhs=False, epilogue=False):
    """A function returning the split matmul's parts and their sum (with a bias + SiLU epilogue if asked)."""
    e = element(dtype)
    k = lhs_shape[-1]
    n = rhs_shape[-2] if transpose_rhs else rhs_shape[-1]
    out_shape = tuple(lhs_shape[:-1]) + (n,)
    splits = max(1, -(-k // chunk))
    parts = tensor((splits,) + out_shape, "f32")
    args = f"%x: {tensor(lhs_shape, e)}, %w: {tensor(rhs_shape, e)}"
    finish = ""
    if epilogue:
        args += f", %b: {tensor((n,), e)}"
        finish = bias_silu_epilogue(n, e)
    return f"""
func.func @split({args}) -> ({tensor(out_shape, e)}, {parts}) {{
  %p = kiln.matmul %x, %w {"transpose_rhs" if transpose_rhs else ""} {{k_chunk = {chunk} : i64}}
      : {tensor(lhs_shape, e)}, {tensor(rhs_shape, e)} -> {parts}
  %y = kiln.sum_splits %p {finish} : {parts} -> {tensor(out_shape, e)}
  return %y, %p : {tensor(out_shape, e)}, {parts}
}}
"""


CASES = [
    pytest.param((32, 1000), (1000, 72), 256, np.float32, False, False, id="k1000-chunk256-f32"),
    pytest.param((5, 384), (384, 40), 128, np.float32, False, True, id="whole-chunks-epilogue-f32"),
    pytest.param((2, 3, 300), (300, 24), 100, np.float32, False, False, id="batch-chunk100-f32"),
    pytest.param((7, 515), (33, 515), 192, np.float32, True, True, id="transposed-rhs-epilogue-f32"),
    pytest.param((16, 640), (640, 48), 256, ml_dtypes.bfloat16, False, True, id="bf16-epilogue"),
    pytest.param((3, 50), (50, 9), 64, np.float32, False, False, id="one-chunk-f32"),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,chunk,dtype,transpose_rhs,epilogue", CASES)
def test_split_matmul_matches_float64(lhs_shape, rhs_shape, chunk, dtype, transpose_rhs, epilogue, record_error):
    rng, seed = fresh_rng()
    x = rng.standard_normal(lhs_shape).astype(dtype)
    w = rng.standard_normal(rhs_shape).astype(dtype)
    n = rhs_shape[-2] if transpose_rhs else rhs_shape[-1]
    inputs = [x, w]
    if epilogue:
        inputs.append(rng.standard_normal((n,)).astype(dtype))
    program = kiln.compile(split_source(lhs_shape, rhs_shape, chunk, dtype, transpose_rhs, epilogue))
    out, parts = program(*inputs)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    if transpose_rhs:
        w64 = w64.T
    tolerance = 2e-2 if dtype == ml_dtypes.bfloat16 else 1e-4
    k = lhs_shape[-1]
    assert parts.shape[0] == max(1, -(-k // chunk))
    for c in range(parts.shape[0]):
        keep = slice(c * chunk, min((c + 1) * chunk, k))
        check(record_error, f"split matmul chunk {element(dtype)}", parts[c], x64[..., keep] @ w64[keep], seed,
              tolerance)
    reference = x64 @ w64
    if epilogue:
        s = reference + inputs[2].astype(np.float64)
        reference = s / (1 + np.exp(-s))
    check(record_error, f"split matmul sum {element(dtype)}", out, reference, seed, tolerance)


def test_tiled_split_matmul_matches_the_reference_lowering(tmp_path):
    """kiln-run --check: the tiled host pipeline (kiln-tile's chunk loop, each bounded by its chunk) against the
    untiled reference lowering of the same split matmul and sum, on seeded random inputs."""
    source = tmp_path / "split.mlir"
    source.write_text(split_source((33, 1000), (1000, 70), 256, np.float32, epilogue=True))
    result = subprocess.run([str(BUILD_DIR / "bin" / "kiln-run"), str(source), "--random-inputs", "--check"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    reports = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "vs the reference" in line]
    assert len(reports) == 2 and all("(ok," in line for line in reports), reports


def cluster_source(lhs_shape, rhs_shape, splits, dtype, transpose_rhs=False, epilogue=False):
    """A matmul whose pinned wgmma config splits each output tile's contraction over a cluster of `splits` blocks
    (``k_splits``), with a bias + SiLU epilogue if asked."""
    e = element(dtype)
    n = rhs_shape[-2] if transpose_rhs else rhs_shape[-1]
    out = tensor(tuple(lhs_shape[:-1]) + (n,), e)
    args = f"%x: {tensor(lhs_shape, e)}, %w: {tensor(rhs_shape, e)}"
    finish = ""
    if epilogue:
        args += f", %b: {tensor((n,), e)}"
        finish = bias_silu_epilogue(n, e)
    config = (f'#kiln.config<tile = [64, 128, 64], warps = 4, stages = 4, lowering = "wgmma", '
              f'k_splits = {splits}>')
    return f"""
func.func @clustered({args}) -> {out} {{
  %y = kiln.matmul %x, %w {"transpose_rhs" if transpose_rhs else ""} {finish} {{kiln.config = {config}}}
      : {tensor(lhs_shape, e)}, {tensor(rhs_shape, e)} -> {out}
  return %y : {out}
}}
"""


CLUSTER_CASES = [
    pytest.param((40, 1000), (200, 1000), 3, np.float32, True, False, id="k1000-3-chunks-f32"),
    pytest.param((70, 4096), (4096, 130), 8, np.float32, False, True, id="two-tile-rows-8-chunks-epilogue-f32"),
    pytest.param((5, 200), (72, 200), 4, ml_dtypes.bfloat16, True, True, id="bf16-partial-last-chunk-epilogue"),
    pytest.param((9, 128), (128, 40), 4, np.float32, False, False, id="two-chunks-past-k-f32"),
    pytest.param((1, 640), (640, 300), 2, ml_dtypes.bfloat16, False, False, id="bf16-one-row"),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,splits,dtype,transpose_rhs,epilogue", CLUSTER_CASES)
def test_cluster_split_matmul_matches_float64(lhs_shape, rhs_shape, splits, dtype, transpose_rhs, epilogue,
                                              record_error):
    """A config's k_splits on the host backend: each output tile's chunks run in the tiled loop the GPU runs as a
    cluster (kiln.cluster_split), added up in chunk order, against float64; shapes that no tile divides, a last
    chunk that ends at K (200 = 3 k-tiles + 8 in 4 chunks of 64), chunks that start past it (K = 128 in 4 chunks
    of 64: the last two add nothing) and an epilogue after the sum."""
    rng, seed = fresh_rng()
    x = rng.standard_normal(lhs_shape).astype(dtype)
    w = rng.standard_normal(rhs_shape).astype(dtype)
    n = rhs_shape[-2] if transpose_rhs else rhs_shape[-1]
    inputs = [x, w] + ([rng.standard_normal((n,)).astype(dtype)] if epilogue else [])
    out = kiln.compile(cluster_source(lhs_shape, rhs_shape, splits, dtype, transpose_rhs, epilogue))(*inputs)
    w64 = w.astype(np.float64)
    reference = x.astype(np.float64) @ (w64.T if transpose_rhs else w64)
    if epilogue:
        s = reference + inputs[2].astype(np.float64)
        reference = s / (1 + np.exp(-s))
    tolerance = 2e-2 if dtype == ml_dtypes.bfloat16 else 1e-4
    check(record_error, f"cluster-split matmul {element(dtype)}", out, reference, seed, tolerance)


def test_cluster_split_runs_the_tiled_chunk_loop(tmp_path):
    """kiln-tile writes the chunk loop for a k_splits config (kiln.cluster_split), and kiln-run --check finds the
    tiled host pipeline equal to the untiled reference lowering on seeded random inputs."""
    source = tmp_path / "clustered.mlir"
    source.write_text(cluster_source((33, 1000), (1000, 70), 4, np.float32, epilogue=True))
    tiled = subprocess.run([str(BUILD_DIR / "bin" / "kiln-opt"), str(source), "--kiln-tile"], capture_output=True,
                           text=True, timeout=300)
    assert tiled.returncode == 0, tiled.stderr
    assert "kiln.cluster_split" in tiled.stdout
    result = subprocess.run([str(BUILD_DIR / "bin" / "kiln-run"), str(source), "--random-inputs", "--check"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    reports = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "vs the reference" in line]
    assert len(reports) == 1 and all("(ok," in line for line in reports), reports


@pytest.mark.parametrize("rows", [1, 16, 64])
def test_explicit_split_compiles_for_the_gpu(rows, tmp_path, monkeypatch):
    """A matmul written already split (k_chunk) compiles for sm_90a at every decode row count: the configs that
    split a 33-64-row contraction over a cluster (k_splits) are not given to a matmul whose chunks are blocks of
    their own (kiln-tile refuses both at once)."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    source = (f"func.func @f(%a: tensor<{rows}x4096xbf16>, %b: tensor<4096x4096xbf16>) -> tensor<{rows}x4096xbf16> {{\n"
              f"  %p = kiln.matmul %a, %b {{k_chunk = 2048 : i64}} : tensor<{rows}x4096xbf16>, tensor<4096x4096xbf16> "
              f"-> tensor<2x{rows}x4096xf32>\n"
              f"  %s = kiln.sum_splits %p : tensor<2x{rows}x4096xf32> -> tensor<{rows}x4096xbf16>\n"
              f"  return %s : tensor<{rows}x4096xbf16>\n}}\n")
    program = kiln.compile(source, target="sm_90a")
    matmul = next(k for k in program.kernels if k.get("op") == "kiln.matmul")
    assert "k_splits" not in matmul["config"] and matmul["grid"][0] == 2 * 4096 // matmul["config"]["tile"][1]


@kiln.jit
def rope_and_gate(x, cos, sin, wq, w1, w3):
    """q through RoPE (heads of the tables' width) and a SwiGLU gate, from projections of a few rows."""
    head_dim = 2 * cos.shape[1]
    q = kiln.matmul(x, wq)
    q = kiln.rope(kiln.reshape(q, (x.shape[0], wq.shape[1] // head_dim, head_dim)), cos, sin, seq_dim=0)
    return q, kiln.silu(kiln.matmul(x, w1)) * kiln.matmul(x, w3)


def test_split_sums_run_in_their_readers_on_the_gpu(tmp_path, monkeypatch, record_error):
    """On sm_90a kiln-split-k splits the three projections of two rows, and kiln-fuse-split-sums moves q's sum
    into the RoPE kernel and the gate's into the up projection's sum (its epilogue operand): the plan runs the
    grouped matmuls, RoPE reading q's f32 chunks, and one sum reading both MLP halves' chunks. On the host (no
    split) the same program matches float64."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    bf16 = ml_dtypes.bfloat16
    shapes = [(2, 2048), (2, 32), (2, 32), (2048, 512), (2048, 1024), (2048, 1024)]
    program = kiln.compile(rope_and_gate.source(*[np.zeros(shape, bf16) for shape in shapes]), target="sm_90a")
    ops = [kernel.get("op") for kernel in program.kernels]
    assert ops == ["kiln.matmul", "kiln.rope", "kiln.sum_splits"], ops
    chunks = [[param["shape"] for param in kernel["params"] if param["dtype"] == "f32"]
              for kernel in program.kernels[1:]]
    assert len(chunks[0]) == 1 and chunks[0][0][1:] == [2, 512], chunks
    assert len(chunks[1]) == 2 and all(shape[1:] == [2, 1024] for shape in chunks[1]), chunks

    rng, seed = fresh_rng()
    x, cos, sin, wq, w1, w3 = (rng.standard_normal(shape).astype(np.float32) / (16 if shape[0] == 256 else 1)
                               for shape in [(2, 256), (2, 32), (2, 32), (256, 128), (256, 96), (256, 96)])
    q, gate = rope_and_gate(x, cos, sin, wq, w1, w3)
    f = [value.astype(np.float64) for value in (x, cos, sin, wq, w1, w3)]
    heads = (f[0] @ f[3]).reshape(2, 2, 64)
    a, b = heads[..., :32], heads[..., 32:]
    c, s = f[1][:, None], f[2][:, None]
    check(record_error, "rope_and_gate q", q, np.concatenate([a * c - b * s, a * s + b * c], -1), seed)
    up = f[0] @ f[4]
    check(record_error, "rope_and_gate gate", gate, up / (1 + np.exp(-up)) * (f[0] @ f[5]), seed)


@kiln.jit
def residual_norm(o, wo, x, norm_weight, w2):
    """A residual add after a projection, the norm of the sum, and the next projection with the residual."""
    h = kiln.matmul(o, wo) + x
    return kiln.matmul(kiln.rms_norm(h, norm_weight, eps=1e-5), w2) + h


def test_residual_sum_runs_in_the_norm_and_the_next_add_on_the_gpu(tmp_path, monkeypatch, record_error):
    """On sm_90a the output projection of two rows is split, and its sum (with the residual) is read by the norm's
    row tiles and by the next projection's sum: kiln-fuse-split-sums has both compute it, so the plan runs the
    two matmuls, the norm and one sum, the norm and that sum each reading the first projection's f32 chunks. On
    the host (no split) the same program matches float64."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    bf16 = ml_dtypes.bfloat16
    shapes = [(2, 4096), (4096, 2048), (2, 2048), (2048,), (2048, 2048)]
    program = kiln.compile(residual_norm.source(*[np.zeros(shape, bf16) for shape in shapes]), target="sm_90a")
    ops = [kernel.get("op") for kernel in program.kernels]
    assert ops == ["kiln.matmul", "kiln.rms_norm", "kiln.matmul", "kiln.sum_splits"], ops
    parts = [param["shape"] for param in program.kernels[0]["params"] if param["role"] == "output"][0]
    for kernel in program.kernels[1::2]:
        assert parts in [param["shape"] for param in kernel["params"] if param["role"] == "input"], kernel

    rng, seed = fresh_rng()
    o, wo, x, norm_weight, w2 = (rng.standard_normal(shape).astype(np.float32) for shape in
                                 [(2, 96), (96, 64), (2, 64), (64,), (64, 64)])
    out = residual_norm(o, wo / 10, x, norm_weight, w2 / 8)
    h = o.astype(np.float64) @ (wo / 10) + x
    normed = h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-5) * norm_weight
    check(record_error, "residual_norm", out, normed @ (w2.astype(np.float64) / 8) + h, seed)
