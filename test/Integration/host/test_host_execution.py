"""CPU execution tests of Kiln: kernels compiled and run by ``kiln-run``, checked against numpy.

Each test writes a small ``kiln`` function (static shapes) as MLIR text, saves random inputs as .npy files in
its ``tmp_path``, runs ``$KILN_BUILD_DIR/bin/kiln-run`` on them (``KILN_BUILD_DIR`` defaults to
/work/main/build; the module is skipped when the binary does not exist) and compares each result with a float64
numpy reference written here, independently of Kiln (Kiln's own untiled lowering is *not* the oracle). Every case
runs through the default, tiled host pipeline (fusion: kiln-fuse-attention, kiln-fuse-epilogue, kernel outlining;
then kiln-select-config, kiln-tile, kiln-online-softmax); a representative subset also runs with ``--no-tile``
(the unfused, untiled reference lowering).

Sections: kiln.attention (MHA/GQA/MQA, causal, masks, scale, lse, f16/bf16); attention written op by op (what
kiln-fuse-attention must and must not fuse); kiln.matmul (shapes, batch broadcasting, transposes, f16/bf16);
matmul epilogues written as graph ops (what kiln-fuse-epilogue fuses); kiln.cast rounding; softmax / RMSNorm /
LayerNorm row kernels; functions with several results; kiln-run's error paths.

Error measure: ``max|out - ref| / max|ref|`` over the whole result tensor, with ``out`` converted to float64
(bf16 results, which kiln-run writes as uint16 bit patterns, are widened to float first). Tolerances: 1e-4 for
f32 results (lse included), 5e-3 for f16, 2e-2 for bf16 (1e-2 for an f32 matmul cast to bf16 by an epilogue).
References for f16 / bf16 inputs are computed from the rounded input values. Two checks are exact instead:
kiln.cast must round to nearest even bit for bit (its "error" is the number of mismatching values), and a result
that passed through an f16 / bf16 tensor must consist of f16 / bf16 values.

A known Kiln bug would be kept as a strict xfail with its reproducer, so that it turns into a failure once fixed.

Seeds are fresh on every run (``np.random.SeedSequence().entropy``) and printed in every assertion message;
``KILN_TEST_SEED=<seed> pytest ... -k <test>`` replays a failure. The worst error of every family is recorded
(conftest.py) and printed at the end of the session.
"""

import math
import os
import pathlib
import subprocess
import time

import numpy as np
import pytest

BUILD_DIR = pathlib.Path(os.environ.get("KILN_BUILD_DIR", "/work/main/build"))
KILN_RUN = BUILD_DIR / "bin" / "kiln-run"

if not KILN_RUN.is_file():
    pytest.skip(f"{KILN_RUN} does not exist (build kiln-run or set KILN_BUILD_DIR)", allow_module_level=True)

TOLERANCE = {"f32": 1e-4, "f16": 5e-3, "bf16": 2e-2}
NP_DTYPE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}
PIPELINES = {"tiled": [], "no-tile": ["--no-tile"]}

# --------------------------------------------------------------------------------------------------------------
# Helpers: seeds, bf16, MLIR text, running kiln-run, comparing
# --------------------------------------------------------------------------------------------------------------


def fresh_seed():
    replay = os.environ.get("KILN_TEST_SEED")
    return int(replay) if replay else int(np.random.SeedSequence().entropy)


def f32_to_bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), rounding to nearest even (inputs here are finite)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_kiln(values, dtype):
    """(array to save as .npy, the float64 values Kiln will actually see) for float64 `values`."""
    if dtype == "bf16":
        bits = f32_to_bf16_bits(values.astype(np.float32))
        return bits, bf16_bits_to_f32(bits).astype(np.float64)
    stored = values.astype(NP_DTYPE[dtype])
    return stored, stored.astype(np.float64)


def from_kiln(array, dtype):
    assert array.dtype == np.dtype(NP_DTYPE[dtype]).newbyteorder("<"), f"result dtype {array.dtype}, expected {dtype}"
    if dtype == "bf16":
        return bf16_bits_to_f32(array).astype(np.float64)
    return array.astype(np.float64)


def ttype(shape, dtype):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def func_text(args, results, body, name="main"):
    """A func.func with arguments [(name, type)], result types and body lines ending in a return."""
    signature = ", ".join(f"%{n}: {t}" for n, t in args)
    result_types = ", ".join(results)
    lines = "\n".join("  " + line for line in body)
    return f"func.func @{name}({signature}) -> ({result_types}) {{\n{lines}\n}}\n"


def run_command(cmd):
    """Runs a command; if kiln-run is momentarily missing or unexecutable (being relinked), waits and retries."""
    for attempt in range(4):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except OSError:
            if attempt == 3:
                raise
            time.sleep(20)


def run_kiln(tmp_path, mlir, inputs, num_outputs, pipeline="tiled", entry=None):
    """Runs kiln-run on `mlir` with `inputs` (numpy arrays, saved as .npy) and returns the loaded results."""
    source = tmp_path / "kernel.mlir"
    source.write_text(mlir)
    cmd = [str(KILN_RUN), str(source)]
    if entry:
        cmd.append(f"--entry={entry}")
    for index, array in enumerate(inputs):
        path = tmp_path / f"input{index}.npy"
        np.save(path, np.asarray(array, order="C"))  # keeps 0-d arrays 0-d
        cmd.append(f"--input={path}")
    outputs = [tmp_path / f"output{index}.npy" for index in range(num_outputs)]
    cmd += [f"--output={path}" for path in outputs]
    cmd += PIPELINES[pipeline]
    proc = run_command(cmd)
    assert proc.returncode == 0, (
        f"kiln-run exited with {proc.returncode}\ncommand: {' '.join(cmd)}\nstderr:\n{proc.stderr}\n"
        f"stdout:\n{proc.stdout}")
    return [np.load(path) for path in outputs]


def relative_error(out, ref):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape, f"result shape {out.shape}, expected {ref.shape}"
    if not np.all(np.isfinite(out)):
        return math.inf
    scale = np.max(np.abs(ref)) if ref.size else 0.0
    return float(np.max(np.abs(out - ref)) / (scale if scale > 0 else 1.0)) if ref.size else 0.0


def check(record_error, family, out, ref, tolerance, seed, what, tmp_path):
    error = relative_error(out, ref)
    record_error(family, error, tolerance, seed)
    assert error <= tolerance, (
        f"{what}: max|out - ref| / max|ref| = {error:.3e} > {tolerance:.0e} (seed {seed}; replay with "
        f"KILN_TEST_SEED={seed}; inputs in {tmp_path})")


def with_pipelines(cases, pick=lambda case: case.get("no_tile", False)):
    """pytest.params: every case through the tiled pipeline, the picked ones also with --no-tile."""
    params = []
    for case in cases:
        marks = case.get("marks", ())
        tiled_marks, no_tile_marks = case.get("tiled_marks", ()), case.get("no_tile_marks", ())
        params.append(pytest.param(case, "tiled", id=f"tiled-{case['id']}", marks=marks or tiled_marks))
        if pick(case):
            params.append(pytest.param(case, "no-tile", id=f"no-tile-{case['id']}", marks=marks or no_tile_marks))
    return params


def erf(x):
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# --------------------------------------------------------------------------------------------------------------
# kiln.attention
# --------------------------------------------------------------------------------------------------------------


def attention_reference(q, k, v, mask, causal, scale):
    """float64 softmax(scale q k^T + mask) v, per head, k/v head h // (Hq / Hkv); also the lse."""
    heads, kv_heads = q.shape[1], k.shape[1]
    group = heads // kv_heads
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    seq_q, seq_k = q.shape[2], k.shape[2]
    scores = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if mask is not None:
        scores = scores + mask
    if causal:
        i = np.arange(seq_q)[:, None]
        j = np.arange(seq_k)[None, :]
        scores = np.where(j > i + (seq_k - seq_q), -np.inf, scores)
    row_max = scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores - row_max)
    row_sum = probs.sum(axis=-1, keepdims=True)
    out = np.einsum("bhij,bhje->bhie", probs / row_sum, v)
    lse = (row_max + np.log(row_sum))[..., 0]
    return out, lse


def attention_mask(kind, rng, batch, heads, seq_q, seq_k):
    """An additive mask of the given kind (float64), or None."""
    if kind is None:
        return None
    if kind == "rank4":  # [B, 1, Sq, Sk]: per batch, shared by the heads
        return 2.0 * rng.standard_normal((batch, 1, seq_q, seq_k))
    if kind == "rank2":  # [Sq, Sk]
        return 2.0 * rng.standard_normal((seq_q, seq_k))
    if kind == "keypad":  # [B, 1, 1, Sk]: -inf on each batch's trailing padding keys
        mask = np.zeros((batch, 1, 1, seq_k))
        for b in range(batch):
            mask[b, ..., seq_k - 1 - 37 * b:] = -np.inf
        return mask
    if kind == "neginf_prefix":  # [Sq, Sk]: the first 70 keys (more than one 64-key tile) hidden from every row
        mask = 0.5 * rng.standard_normal((seq_q, seq_k))
        mask[:, :70] = -np.inf
        return mask
    if kind == "full4":  # [B, Hq, Sq, Sk]
        return 2.0 * rng.standard_normal((batch, heads, seq_q, seq_k))
    if kind == "head3":  # [Hq, 1, Sk]
        return 2.0 * rng.standard_normal((heads, 1, seq_k))
    if kind == "query2":  # [Sq, 1]: a per-query bias (cancels in the softmax, but must not break it)
        return 5.0 * rng.standard_normal((seq_q, 1))
    if kind == "key1":  # [Sk]
        return 2.0 * rng.standard_normal(seq_k)
    if kind == "scalar":  # []
        return np.array(1.5)
    raise ValueError(kind)


def attn(id, b, hq, hkv, sq, sk, d, dv=None, causal=False, mask=None, scale=None, lse=False, dtype="f32",
         mask_dtype=None, no_tile=False, seq_major=False, out_seq_major=False, marks=()):
    return dict(id=id, b=b, hq=hq, hkv=hkv, sq=sq, sk=sk, d=d, dv=dv or d, causal=causal, mask=mask, scale=scale,
                lse=lse, dtype=dtype, mask_dtype=mask_dtype or dtype, no_tile=no_tile, seq_major=seq_major,
                out_seq_major=out_seq_major, marks=marks)


ATTENTION_CASES = [
    # Plain multi-head attention, seq 1 and 77.
    attn("mha_s1_d64", 1, 2, 2, 1, 1, 64),
    attn("mha_s1_d64_causal", 1, 2, 2, 1, 1, 64, causal=True),
    attn("mha_s77_d64", 2, 3, 3, 77, 77, 64, no_tile=True),
    attn("mha_s77_d64_causal", 2, 3, 3, 77, 77, 64, causal=True, no_tile=True),
    attn("mha_s77_d80_causal", 1, 2, 2, 77, 77, 80, causal=True),
    attn("mha_s77_d96", 1, 2, 2, 77, 77, 96),
    attn("mha_s77_d128_causal", 1, 2, 2, 77, 77, 128, causal=True),
    # Grouped-query 4:1 and 8:1, multi-query.
    attn("gqa4_s77_d80", 2, 8, 2, 77, 77, 80),
    attn("gqa4_s77_d80_causal", 1, 8, 2, 77, 77, 80, causal=True, no_tile=True),
    attn("gqa4_s1_d128_causal", 1, 8, 2, 1, 1, 128, causal=True),
    attn("gqa8_s77_d96", 1, 16, 2, 77, 77, 96),
    attn("gqa8_s77_d96_causal", 1, 16, 2, 77, 77, 96, causal=True, no_tile=True),
    attn("gqa8_s1_d64", 1, 16, 2, 1, 1, 64),
    attn("mqa_s77_d128", 1, 4, 1, 77, 77, 128),
    attn("mqa_s77_d128_causal", 2, 4, 1, 77, 77, 128, causal=True, no_tile=True),
    attn("mqa_s1_d96", 1, 4, 1, 1, 1, 96),
    # seq 1000 (batch 1, few heads).
    attn("mha_s1000_d64", 1, 1, 1, 1000, 1000, 64),
    attn("gqa2_s1000_d64_causal", 1, 2, 1, 1000, 1000, 64, causal=True, no_tile=True),
    attn("mha_s1000_d128_causal", 1, 1, 1, 1000, 1000, 128, causal=True),
    attn("mqa_s1000_d80_causal_lse", 1, 2, 1, 1000, 1000, 80, causal=True, lse=True),
    # seq_q != seq_k; causal is aligned bottom-right.
    attn("gqa_q77_k200_d64", 1, 4, 2, 77, 200, 64),
    attn("gqa_q77_k200_d64_causal", 1, 4, 2, 77, 200, 64, causal=True, no_tile=True),
    attn("gqa4_q1_k300_d128", 1, 8, 2, 1, 300, 128),
    attn("gqa4_q1_k300_d128_causal", 1, 8, 2, 1, 300, 128, causal=True, no_tile=True),
    attn("mha_q200_k77_d64", 1, 2, 2, 200, 77, 64),
    attn("mha_q130_k200_d96_causal", 1, 2, 2, 130, 200, 96, causal=True),
    # value head dim != q/k head dim
    attn("gqa4_s77_d64_dv32_causal", 1, 8, 2, 77, 77, 64, dv=32, causal=True),
    # Additive masks.
    attn("mask4_q77_k200_d64", 2, 4, 2, 77, 200, 64, mask="rank4", no_tile=True),
    attn("mask4_s77_d128_causal", 2, 4, 4, 77, 77, 128, mask="rank4", causal=True),
    attn("mask2_s77_d96", 1, 4, 4, 77, 77, 96, mask="rank2", no_tile=True),
    attn("mask2_q77_k200_d64_causal", 1, 8, 2, 77, 200, 64, mask="rank2", causal=True),
    attn("mask2_q1_k300_d80", 1, 8, 2, 1, 300, 80, mask="rank2"),
    attn("mask_keypad_q77_k200_d64", 2, 4, 2, 77, 200, 64, mask="keypad"),
    attn("mask_neginf_prefix_q77_k200_d64", 1, 4, 2, 77, 200, 64, mask="neginf_prefix", no_tile=True),
    # Explicit scale.
    attn("scale0.3_s77_d64", 1, 4, 2, 77, 77, 64, scale=0.3, no_tile=True),
    attn("scale0.05_q77_k200_d128_causal", 1, 4, 1, 77, 200, 128, scale=0.05, causal=True),
    attn("scale0.5_mask2_s77_d80", 1, 2, 2, 77, 77, 80, scale=0.5, mask="rank2"),
    # The lse result.
    attn("lse_s77_d64", 2, 4, 2, 77, 77, 64, lse=True, no_tile=True),
    attn("lse_s77_d96_causal", 1, 8, 2, 77, 77, 96, lse=True, causal=True),
    attn("lse_q77_k200_d64_causal", 1, 4, 2, 77, 200, 64, lse=True, causal=True, no_tile=True),
    attn("lse_q1_k300_d128", 1, 8, 1, 1, 300, 128, lse=True),
    attn("lse_mask4_q77_k200_d80", 2, 4, 2, 77, 200, 80, lse=True, mask="rank4"),
    attn("lse_mask2_scale_s77_d64_causal", 1, 4, 2, 77, 77, 64, lse=True, mask="rank2", scale=0.2, causal=True),
    attn("lse_neginf_prefix_q77_k200_d64", 1, 2, 2, 77, 200, 64, lse=True, mask="neginf_prefix"),
    # f16 and bf16 inputs.
    attn("f16_gqa4_s77_d64_causal", 1, 8, 2, 77, 77, 64, causal=True, dtype="f16", no_tile=True),
    attn("f16_mqa_q1_k300_d128_lse", 1, 4, 1, 1, 300, 128, lse=True, dtype="f16"),
    attn("f16_mask2_q77_k200_d80", 1, 2, 2, 77, 200, 80, mask="rank2", dtype="f16"),
    attn("bf16_s77_d128", 1, 2, 2, 77, 77, 128, dtype="bf16", no_tile=True),
    attn("bf16_gqa8_s77_d64_causal_lse", 1, 16, 2, 77, 77, 64, causal=True, lse=True, dtype="bf16"),
    attn("bf16_mask4_q77_k200_d96_causal", 1, 4, 2, 77, 200, 96, mask="rank4", causal=True, dtype="bf16"),
    attn("bf16_f32mask2_s77_d64", 1, 2, 2, 77, 77, 64, mask="rank2", dtype="bf16", mask_dtype="f32"),
    attn("f32_f16mask4_q77_k200_d64_causal", 1, 4, 2, 77, 200, 64, mask="rank4", causal=True, mask_dtype="f16"),
    attn("f32_bf16mask2_s77_d96", 1, 2, 1, 77, 77, 96, mask="rank2", mask_dtype="bf16"),
    # Sequence lengths that are exact multiples of the 64-row / 64-key host tiles (no padding, folded bounds).
    attn("mha_s64_d64", 1, 2, 2, 64, 64, 64),
    attn("gqa4_s128_d64_causal", 1, 8, 2, 128, 128, 64, causal=True, no_tile=True),
    attn("mqa_q64_k256_d128_causal_lse", 1, 4, 1, 64, 256, 128, causal=True, lse=True),
    attn("mha_q128_k64_d80", 1, 2, 2, 128, 64, 80),
    attn("mha_s65_d96_causal", 1, 2, 2, 65, 65, 96, causal=True),
    attn("gqa_q1_k64_d64_causal", 1, 4, 2, 1, 64, 64, causal=True),
    # More mask shapes: full [B, Hq, Sq, Sk], per-head [Hq, 1, Sk], per-query [Sq, 1], per-key [Sk], scalar.
    attn("mask_full4_q77_k200_d64", 2, 4, 2, 77, 200, 64, mask="full4"),
    attn("mask_head3_q77_k200_d64_causal", 1, 4, 2, 77, 200, 64, mask="head3", causal=True),
    attn("mask_query2_s77_d64", 1, 2, 2, 77, 77, 64, mask="query2"),
    attn("mask_key1_q77_k200_d64", 1, 2, 2, 77, 200, 64, mask="key1", no_tile=True),
    attn("mask_scalar_s77_d64_causal_lse", 1, 2, 2, 77, 77, 64, mask="scalar", causal=True, lse=True),
    # Large scores (scale 1 with head dim 128): the running max changes a lot from tile to tile.
    attn("scale1_s1000_d128_causal_lse", 1, 1, 1, 1000, 1000, 128, scale=1.0, causal=True, lse=True),
    attn("scale1_q77_k300_d128", 1, 2, 2, 77, 300, 128, scale=1.0, no_tile=True),
    # layout = "bshd": q, k, v and out are [B, S, H, D] (the mask and lse keep [B, H, Sq, ...]).
    attn("bshd_mha_s77_d64", 2, 3, 3, 77, 77, 64, seq_major=True, no_tile=True),
    attn("bshd_gqa4_s77_d64_causal", 2, 8, 2, 77, 77, 64, causal=True, seq_major=True),
    attn("bshd_gqa_q77_k200_d96_mask4_lse", 2, 4, 2, 77, 200, 96, mask="rank4", lse=True, seq_major=True),
    attn("bshd_mqa_q1_k300_d128_causal", 3, 4, 1, 1, 300, 128, causal=True, seq_major=True, no_tile=True),
    attn("bshd_bf16_gqa4_s130_d64_dv32_causal_lse", 2, 8, 2, 130, 130, 64, dv=32, causal=True, lse=True,
         dtype="bf16", seq_major=True),
    # out_layout = "bshd": [B, H, S, D] inputs, the output stored [B, S, H, D].
    attn("out_bshd_gqa4_s77_d64_causal", 2, 8, 2, 77, 77, 64, causal=True, out_seq_major=True, no_tile=True),
    attn("out_bshd_q77_k200_d96_mask4_lse", 2, 4, 2, 77, 200, 96, mask="rank4", lse=True, out_seq_major=True),
    attn("out_bshd_bf16_s130_d64_dv32", 1, 4, 4, 130, 130, 64, dv=32, dtype="bf16", out_seq_major=True),
]


@pytest.mark.parametrize("case,pipeline", with_pipelines(ATTENTION_CASES))
def test_attention(case, pipeline, tmp_path, record_error):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = case
    dtype = c["dtype"]
    q_shape = (c["b"], c["hq"], c["sq"], c["d"])
    k_shape = (c["b"], c["hkv"], c["sk"], c["d"])
    v_shape = (c["b"], c["hkv"], c["sk"], c["dv"])
    out_shape = (c["b"], c["hq"], c["sq"], c["dv"])
    q_np, q = to_kiln(rng.standard_normal(q_shape), dtype)
    k_np, k = to_kiln(rng.standard_normal(k_shape), dtype)
    v_np, v = to_kiln(rng.standard_normal(v_shape), dtype)
    inputs = [q_np, k_np, v_np]
    # Seq-major: the same tensors passed as [B, S, H, D]; the reference stays [B, H, S, D].
    layout = (lambda shape: (shape[0], shape[2], shape[1], shape[3])) if c["seq_major"] else (lambda shape: shape)
    if c["seq_major"]:
        inputs = [np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in inputs]
    args = [("q", ttype(layout(q_shape), dtype)), ("k", ttype(layout(k_shape), dtype)),
            ("v", ttype(layout(v_shape), dtype))]

    mask = attention_mask(c["mask"], rng, c["b"], c["hq"], c["sq"], c["sk"])
    mask_clause = ""
    if mask is not None:
        mask_np, mask = to_kiln(mask, c["mask_dtype"])
        inputs.append(mask_np)
        mask_type = ttype(mask.shape, c["mask_dtype"])
        args.append(("m", mask_type))
        mask_clause = f" mask(%m : {mask_type})"

    scale = 1.0 / math.sqrt(c["d"])
    attributes = ['layout = "bshd"'] if c["seq_major"] else []
    if c["out_seq_major"]:
        attributes.append('out_layout = "bshd"')
    out_layout = (lambda shape: (shape[0], shape[2], shape[1], shape[3])) if c["out_seq_major"] else layout
    if c["scale"] is not None:
        attributes.append(f"scale = {c['scale']!r} : f32")
        scale = float(np.float32(c["scale"]))  # the attribute is an f32
    attrs = f" {{{', '.join(attributes)}}}" if attributes else ""
    results = [ttype(out_layout(out_shape), dtype)] + ([ttype(out_shape[:3], "f32")] if c["lse"] else [])
    names = "%o, %lse" if c["lse"] else "%o"
    mlir = func_text(args, results, [
        f"{names} = kiln.attention %q, %k, %v{mask_clause}{' causal' if c['causal'] else ''}{attrs}",
        f"    : {args[0][1]}, {args[1][1]}, {args[2][1]} -> {', '.join(results)}",
        f"return {names} : {', '.join(results)}",
    ])

    outputs = run_kiln(tmp_path, mlir, inputs, len(results), pipeline)
    ref_out, ref_lse = attention_reference(q, k, v, mask, c["causal"], scale)
    if c["seq_major"] or c["out_seq_major"]:
        ref_out = ref_out.transpose(0, 2, 1, 3)
    check(record_error, f"attention {dtype} [{pipeline}]", from_kiln(outputs[0], dtype), ref_out,
          TOLERANCE[dtype], seed, f"attention {c['id']} out", tmp_path)
    if c["lse"]:
        check(record_error, f"attention lse [{pipeline}]", from_kiln(outputs[1], "f32"), ref_lse, TOLERANCE["f32"],
              seed, f"attention {c['id']} lse", tmp_path)


# Attention written op by op, as exporters emit it. In the tiled pipeline kiln-fuse-attention replaces the forms
# it recognises with kiln.attention; forms it must not (or need not) recognise stay unfused. Either way the
# result must be the graph's.


def dense_literal(values, fmt):
    """The text of an MLIR dense literal for a 2-D numpy array."""
    return "[" + ", ".join("[" + ", ".join(fmt(v) for v in row) + "]" for row in values) + "]"


def f32_literal(v):
    return "0xFF800000" if v == -np.inf else repr(float(v))


def graph_attention(id, b, hq, hkv, sq, sk, d, gqa="interleave", kt="transpose", scale="div", mask=None,
                    dtype="f32", no_tile=False, marks=()):
    return dict(id=id, b=b, hq=hq, hkv=hkv, sq=sq, sk=sk, d=d, gqa=gqa, kt=kt, scale=scale, mask=mask,
                dtype=dtype, no_tile=no_tile, marks=marks)


GRAPH_ATTENTION_CASES = [
    # The form of examples/attention_block.mlir: GQA by reshape/broadcast/reshape, explicit transpose, divide.
    graph_attention("gqa4_transpose_div", 1, 8, 2, 77, 77, 64, no_tile=True),
    graph_attention("mha_transpose_rhs_mul", 2, 4, 4, 77, 77, 80, gqa="none", kt="transpose_rhs", scale="mul"),
    graph_attention("mqa_scalar_on_lhs", 1, 4, 1, 77, 77, 96, scale="mul_lhs"),
    graph_attention("gqa8_unscaled", 1, 16, 2, 33, 100, 64, scale="none"),
    graph_attention("gqa4_mask_tensor", 2, 8, 2, 77, 100, 64, mask="tensor", no_tile=True),
    # Causal masks: select with a constant condition, additive 0 / -inf and 0 / -1e9 constants (bottom-right).
    graph_attention("gqa4_causal_select", 1, 8, 2, 77, 77, 64, mask="causal_select", no_tile=True),
    graph_attention("causal_select_q33_k100", 1, 2, 2, 33, 100, 128, gqa="none", mask="causal_select"),
    graph_attention("causal_add_neginf_q33_k100", 1, 4, 2, 33, 100, 64, mask="causal_add_neginf"),
    graph_attention("causal_add_1e9_s77", 1, 2, 1, 77, 77, 80, mask="causal_add_1e9", kt="transpose_rhs"),
    # Look-alikes that are not bottom-right causal attention: must stay a plain mask (or unfused).
    graph_attention("topleft_causal_add_q33_k100", 1, 2, 2, 33, 100, 64, gqa="none", mask="topleft_add",
                    no_tile=True),
    graph_attention("causal_select_inverted", 1, 4, 2, 77, 77, 64, mask="causal_select_inverted"),
    graph_attention("mask_added_before_scale", 1, 4, 2, 77, 100, 64, mask="tensor_then_scale"),
    graph_attention("gqa_tile_order", 1, 8, 2, 77, 77, 64, gqa="tile", no_tile=True),
    graph_attention("f16_gqa4_causal_select", 1, 8, 2, 77, 77, 64, mask="causal_select", dtype="f16"),
]


@pytest.mark.parametrize("case,pipeline", with_pipelines(GRAPH_ATTENTION_CASES))
def test_attention_graph(case, pipeline, tmp_path, record_error):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = case
    dt, b, hq, hkv, sq, sk, d = c["dtype"], c["b"], c["hq"], c["hkv"], c["sq"], c["sk"], c["d"]
    group = hq // hkv
    kv_heads = hkv if c["gqa"] != "none" else hq
    q_np, q = to_kiln(rng.standard_normal((b, hq, sq, d)), dt)
    k_np, k = to_kiln(rng.standard_normal((b, kv_heads, sk, d)), dt)
    v_np, v = to_kiln(rng.standard_normal((b, kv_heads, sk, d)), dt)
    Q, KV, S = ttype((b, hq, sq, d), dt), ttype((b, kv_heads, sk, d), dt), ttype((b, hq, sq, sk), dt)
    H = ttype((b, hq, sk, d), dt)
    args = [("q", Q), ("k", KV), ("v", KV)]
    inputs = [q_np, k_np, v_np]
    lines = []
    # k and v with Hq heads.
    if c["gqa"] == "none":
        kr, vr = "%k", "%v"
        k_full, v_full = k, v
    else:
        if c["gqa"] == "interleave":  # [B, Hkv, 1, S, D] -> [B, Hkv, G, S, D]: q head h reads kv head h // G
            unsq, expd = (b, hkv, 1, sk, d), (b, hkv, group, sk, d)
            k_full, v_full = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        else:  # [B, 1, Hkv, S, D] -> [B, G, Hkv, S, D]: q head h reads kv head h % Hkv
            unsq, expd = (b, 1, hkv, sk, d), (b, group, hkv, sk, d)
            k_full, v_full = np.tile(k, (1, group, 1, 1)), np.tile(v, (1, group, 1, 1))
        for name in "kv":
            lines += [f"%{name}5 = kiln.reshape %{name} : {KV} -> {ttype(unsq, dt)}",
                      f"%{name}e = kiln.broadcast %{name}5 : {ttype(unsq, dt)} -> {ttype(expd, dt)}",
                      f"%{name}r = kiln.reshape %{name}e : {ttype(expd, dt)} -> {H}"]
        kr, vr = "%kr", "%vr"
    if c["kt"] == "transpose":
        KT = ttype((b, hq, d, sk), dt)
        lines += [f"%kt = kiln.transpose {kr} [0, 1, 3, 2] : {H} -> {KT}",
                  f"%s = kiln.matmul %q, %kt : {Q}, {KT} -> {S}"]
    else:
        lines += [f"%s = kiln.matmul %q, {kr} transpose_rhs : {Q}, {H} -> {S}"]
    # Scale and mask.
    scalar = f"tensor<{dt}>"
    mask, scale, causal, cur = None, 1.0, False, "%s"
    if c["mask"] == "tensor_then_scale":  # (q k^T + m) * c
        m_np, m = to_kiln(rng.standard_normal((b, 1, sq, sk)), dt)
        args.append(("m", ttype(m.shape, dt)))
        inputs.append(m_np)
        lines += [f"%sm = kiln.add %s, %m : {S}, {ttype(m.shape, dt)} -> {S}"]
        cur = "%sm"
    if c["scale"] == "div":
        lines += [f"%c = kiln.constant dense<{math.sqrt(d)!r}> : {scalar}",
                  f"%sc = kiln.div {cur}, %c : {S}, {scalar} -> {S}"]
        scale = 1.0 / float(np.float32(math.sqrt(d)) if dt == "f32" else np.float16(math.sqrt(d)))
        cur = "%sc"
    elif c["scale"] in ("mul", "mul_lhs"):
        lines += [f"%c = kiln.constant dense<0.125> : {scalar}",
                  f"%sc = kiln.mul {cur}, %c : {S}, {scalar} -> {S}" if c["scale"] == "mul"
                  else f"%sc = kiln.mul %c, {cur} : {scalar}, {S} -> {S}"]
        scale = 0.125
        cur = "%sc"
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    bottom_right = j <= i + (sk - sq)
    if c["mask"] == "tensor_then_scale":
        mask = m * scale
    elif c["mask"] == "tensor":
        m_np, mask = to_kiln(2.0 * rng.standard_normal((b, 1, sq, sk)), dt)
        args.append(("m", ttype(mask.shape, dt)))
        inputs.append(m_np)
        lines += [f"%ma = kiln.add {cur}, %m : {S}, {ttype(mask.shape, dt)} -> {S}"]
        cur = "%ma"
    elif c["mask"] in ("causal_select", "causal_select_inverted"):
        keep = bottom_right if c["mask"] == "causal_select" else ~bottom_right
        C = ttype((sq, sk), "i1")
        lines += [f"%keep = kiln.constant dense<{dense_literal(keep, lambda v: 'true' if v else 'false')}> : {C}",
                  f"%ninf = kiln.constant dense<0xFF800000> : {scalar}" if dt == "f32"
                  else f"%ninf = kiln.constant dense<0xFC00> : {scalar}"]
        lines += [f"%ma = kiln.select %keep, {cur}, %ninf : {C}, {S}, {scalar} -> {S}" if c["mask"] == "causal_select"
                  else f"%ma = kiln.select %keep, %ninf, {cur} : {C}, {scalar}, {S} -> {S}"]
        causal, cur = True, "%ma"
    elif c["mask"] in ("causal_add_neginf", "causal_add_1e9", "topleft_add"):
        pattern = (j <= i) if c["mask"] == "topleft_add" else bottom_right
        fill = -np.inf if c["mask"] == "causal_add_neginf" else -1.0e9
        additive = np.where(pattern, 0.0, fill)
        lines += [f"%cm = kiln.constant dense<{dense_literal(additive, f32_literal)}> : {ttype((sq, sk), dt)}",
                  f"%ma = kiln.add {cur}, %cm : {S}, {ttype((sq, sk), dt)} -> {S}"]
        mask = np.where(pattern, 0.0, -np.inf)  # -1e9 and -inf mask alike here
        cur = "%ma"
    P, O = S, ttype((b, hq, sq, d), dt)
    lines += [f"%p = kiln.softmax {cur} axis 3 : {S}",
              f"%o = kiln.matmul %p, {vr} : {P}, {H} -> {O}",
              f"return %o : {O}"]
    mlir = func_text(args, [O], lines)
    (out,) = run_kiln(tmp_path, mlir, inputs, 1, pipeline)
    ref, _ = attention_reference(q, k_full, v_full, mask, causal, scale)
    check(record_error, f"attention graph {dt} [{pipeline}]", from_kiln(out, dt), ref, TOLERANCE[dt], seed,
          f"attention graph {c['id']}", tmp_path)


# --------------------------------------------------------------------------------------------------------------
# kiln.matmul
# --------------------------------------------------------------------------------------------------------------


def mm(id, lhs, rhs, transpose_lhs=False, transpose_rhs=False, dtype="f32", out_dtype=None, no_tile=False,
       marks=()):
    return dict(id=id, lhs=lhs, rhs=rhs, tl=transpose_lhs, tr=transpose_rhs, dtype=dtype,
                out_dtype=out_dtype or dtype, no_tile=no_tile, marks=marks)


def matmul_result_shape(lhs, rhs, tl, tr):
    m = lhs[-1] if tl else lhs[-2]
    n = rhs[-2] if tr else rhs[-1]
    batch = np.broadcast_shapes(tuple(lhs[:-2]), tuple(rhs[:-2]))
    return tuple(batch) + (m, n)


def matmul_reference(a, b, tl, tr):
    if tl:
        a = np.swapaxes(a, -1, -2)
    if tr:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


MATMUL_CASES = [
    mm("1x1x1", (1, 1), (1, 1), no_tile=True),
    mm("m33_n65_k17", (33, 17), (17, 65), no_tile=True),
    mm("m130_n70_k129", (130, 129), (129, 70), no_tile=True),
    mm("m1000_n1000_k1000", (1000, 1000), (1000, 1000)),
    mm("m1_n300_k77", (1, 77), (77, 300)),
    mm("m64_n64_k64", (64, 64), (64, 64)),
    mm("m128_n192_k256", (128, 256), (256, 192), no_tile=True),
    mm("transpose_both_m128_n64_k128", (128, 128), (64, 128), transpose_lhs=True, transpose_rhs=True),
    mm("batched_1x33x17_1x17x65", (1, 33, 17), (1, 17, 65)),
    mm("batched_2x33x17_17x65", (2, 33, 17), (17, 65), no_tile=True),
    mm("batched_bcast_3x2x16x8_1x2x8x24", (3, 2, 16, 8), (1, 2, 8, 24), no_tile=True),
    mm("batched_bcast_1x2x16x8_3x1x8x24", (1, 2, 16, 8), (3, 1, 8, 24)),
    mm("batched_lhs2d_33x17_4x17x65", (33, 17), (4, 17, 65)),
    mm("transpose_lhs_m33_n65_k17", (17, 33), (17, 65), transpose_lhs=True, no_tile=True),
    mm("transpose_rhs_m33_n65_k17", (33, 17), (65, 17), transpose_rhs=True, no_tile=True),
    mm("transpose_both_m130_n70_k129", (129, 130), (70, 129), transpose_lhs=True, transpose_rhs=True,
       no_tile=True),
    mm("transpose_rhs_batched_2x77x130_96x130", (2, 77, 130), (96, 130), transpose_rhs=True),
    mm("transpose_lhs_batched_3x2x8x16_1x2x8x24", (3, 2, 8, 16), (1, 2, 8, 24), transpose_lhs=True),
    mm("f16_m77_n96_k130", (77, 130), (130, 96), dtype="f16", no_tile=True),
    mm("f16_to_f32_m77_n96_k130", (77, 130), (130, 96), dtype="f16", out_dtype="f32"),
    mm("f16_transpose_rhs_batched", (2, 33, 65), (70, 65), transpose_rhs=True, dtype="f16"),
    mm("bf16_m77_n96_k130", (77, 130), (130, 96), dtype="bf16", no_tile=True),
    mm("bf16_to_f32_m77_n96_k130", (77, 130), (130, 96), dtype="bf16", out_dtype="f32"),
    mm("bf16_transpose_rhs_2x77x512_1024x512", (2, 77, 512), (1024, 512), transpose_rhs=True, dtype="bf16"),
]


@pytest.mark.parametrize("case,pipeline", with_pipelines(MATMUL_CASES))
def test_matmul(case, pipeline, tmp_path, record_error):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = case
    a_np, a = to_kiln(rng.standard_normal(c["lhs"]), c["dtype"])
    b_np, b = to_kiln(rng.standard_normal(c["rhs"]), c["dtype"])
    out_shape = matmul_result_shape(c["lhs"], c["rhs"], c["tl"], c["tr"])
    lhs_t, rhs_t, out_t = ttype(c["lhs"], c["dtype"]), ttype(c["rhs"], c["dtype"]), ttype(out_shape, c["out_dtype"])
    flags = (" transpose_lhs" if c["tl"] else "") + (" transpose_rhs" if c["tr"] else "")
    mlir = func_text([("a", lhs_t), ("b", rhs_t)], [out_t], [
        f"%y = kiln.matmul %a, %b{flags} : {lhs_t}, {rhs_t} -> {out_t}",
        f"return %y : {out_t}",
    ])
    (out,) = run_kiln(tmp_path, mlir, [a_np, b_np], 1, pipeline)
    check(record_error, f"matmul {c['out_dtype']} [{pipeline}]", from_kiln(out, c["out_dtype"]),
          matmul_reference(a, b, c["tl"], c["tr"]), TOLERANCE[c["out_dtype"]], seed, f"matmul {c['id']}", tmp_path)


# Epilogues written as graph ops after a matmul of x [M, K] (or [B, M, K]) by w [K, N]. In the tiled pipeline
# kiln-fuse-epilogue folds such single-use elementwise chains into the matmul; --no-tile runs them unfused.
M, K, N = 77, 130, 96
BF16_EPILOGUE_TOLERANCE = 1e-2

def r16(x):
    """Rounds float64 values to f16 and back (what a tensor<..xf16> holds)."""
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def rbf16(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float64).astype(np.float32))).astype(np.float64)


def epi(id, body, reference, extra=(), batch=(), dtype="f32", y_dtype=None, out_dtype=None, tolerance=None,
        exact_inputs=False, representable=None, no_tile=False, marks=(), tiled_marks=()):
    """`body`: MLIR lines after `%y = kiln.matmul %x, %w` (x, w of `dtype`, y of `y_dtype`) leaving the result in
    %r, written with the placeholders {T} (type of y), {B} (the [N] bias type) and {S} (y's shape in f32);
    `extra`: more arguments (name, shape[, dtype]); `reference(y, values)` computes the expected result from the
    exact float64 product y = x @ w and the (rounded) input values.

    `exact_inputs`: x holds integers in [-8, 8] and w multiples of 1/128 in [-1, 1] (exact in f16 and bf16), so
    that y is exact in f32 and rounding it to a narrow type is deterministic; `representable`: the result must
    also consist of values exactly representable in that narrow type (it passed through such a tensor)."""
    y_dtype = y_dtype or dtype
    out_dtype = out_dtype or y_dtype
    return dict(id=id, body=body, reference=reference, extra=[e if len(e) == 3 else (*e, dtype) for e in extra],
                batch=batch, dtype=dtype, y_dtype=y_dtype, out_dtype=out_dtype, tolerance=tolerance,
                exact_inputs=exact_inputs, representable=representable, no_tile=no_tile, marks=marks,
                tiled_marks=tiled_marks)


SCALE = 0.37
F32 = lambda shape: ttype(shape, "f32")  # noqa: E731


def gelu_tanh(z):
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))


def silu(z):
    return z * sigmoid(z)


EPILOGUE_CASES = [
    # The epilogues of the brief, each written as graph ops after the matmul.
    epi("bias", ["%r = kiln.add %y, %bias : {T}, {B} -> {T}"], lambda y, e: y + e["bias"],
        extra=[("bias", (N,))], no_tile=True),
    epi("bias_batched", ["%r = kiln.add %y, %bias : {T}, {B} -> {T}"], lambda y, e: y + e["bias"],
        extra=[("bias", (N,))], batch=(2,)),
    epi("scale", [f"%c = kiln.constant dense<{SCALE}> : tensor<f32>", "%r = kiln.mul %y, %c : {T}, tensor<f32> -> {T}"],
        lambda y, e: y * float(np.float32(SCALE))),
    epi("relu", ["%r = kiln.relu %y : {T}"], lambda y, e: np.maximum(y, 0.0), no_tile=True),
    epi("gelu", ["%r = kiln.gelu %y : {T}"], lambda y, e: 0.5 * y * (1.0 + erf(y / math.sqrt(2.0)))),
    epi("gelu_tanh", ["%r = kiln.gelu %y approximate(tanh) : {T}"], lambda y, e: gelu_tanh(y)),
    epi("silu", ["%r = kiln.silu %y : {T}"], lambda y, e: silu(y)),
    epi("sigmoid", ["%r = kiln.sigmoid %y : {T}"], lambda y, e: sigmoid(y)),
    epi("residual", ["%r = kiln.add %y, %res : {T}, {T} -> {T}"], lambda y, e: y + e["res"],
        extra=[("res", (M, N))]),
    epi("swiglu", ["%g = kiln.matmul %x, %w3 : tensor<77x130xf32>, tensor<130x96xf32> -> {T}",
                   "%s = kiln.silu %y : {T}", "%r = kiln.mul %s, %g : {T}, {T} -> {T}"],
        lambda y, e: silu(y) * (e["x"] @ e["w3"]), extra=[("w3", (K, N))], no_tile=True),
    epi("swiglu_gate_first", ["%g = kiln.matmul %x, %w3 : tensor<77x130xf32>, tensor<130x96xf32> -> {T}",
                              "%s = kiln.silu %y : {T}", "%r = kiln.mul %g, %s : {T}, {T} -> {T}"],
        lambda y, e: silu(y) * (e["x"] @ e["w3"]), extra=[("w3", (K, N))]),
    epi("cast_bf16", ["%r = kiln.cast %y : {T} to tensor<77x96xbf16>"], lambda y, e: y, out_dtype="bf16",
        no_tile=True),
    epi("bias_gelu_tanh_residual", ["%b = kiln.add %y, %bias : {T}, {B} -> {T}",
                                    "%g = kiln.gelu %b approximate(tanh) : {T}",
                                    "%r = kiln.add %g, %res : {T}, {T} -> {T}"],
        lambda y, e: gelu_tanh(y + e["bias"]) + e["res"], extra=[("bias", (N,)), ("res", (M, N))]),
    epi("scale_bias_silu_cast_bf16", [f"%c = kiln.constant dense<{SCALE}> : tensor<f32>",
                                      "%s = kiln.mul %y, %c : {T}, tensor<f32> -> {T}",
                                      "%b = kiln.add %s, %bias : {T}, {B} -> {T}",
                                      "%a = kiln.silu %b : {T}",
                                      "%r = kiln.cast %a : {T} to tensor<77x96xbf16>"],
        lambda y, e: silu(y * float(np.float32(SCALE)) + e["bias"]), extra=[("bias", (N,))], out_dtype="bf16"),
    # Operand order, broadcast shapes and repeated operands inside a fused chain.
    epi("bias_minus_y", ["%r = kiln.sub %bias, %y : {B}, {T} -> {T}"], lambda y, e: e["bias"] - y,
        extra=[("bias", (N,))], no_tile=True),
    epi("div_by_tensor", ["%r = kiln.div %y, %d : {T}, {T} -> {T}"], lambda y, e: y / e["d"],
        extra=[("d", (M, N))]),
    epi("tensor_div_by_y_plus_4", ["%c = kiln.constant dense<4.0> : tensor<f32>",
                                   "%a = kiln.abs %y : {T}", "%b = kiln.add %a, %c : {T}, tensor<f32> -> {T}",
                                   "%r = kiln.div %d, %b : {T}, {T} -> {T}"],
        lambda y, e: e["d"] / (np.abs(y) + 4.0), extra=[("d", (M, N))]),
    epi("row_scale_Mx1", ["%r = kiln.mul %y, %s : {T}, tensor<77x1xf32> -> {T}"], lambda y, e: y * e["s"],
        extra=[("s", (M, 1))], no_tile=True),
    epi("col_scale_1xN", ["%r = kiln.mul %s, %y : tensor<1x96xf32>, {T} -> {T}"], lambda y, e: y * e["s"],
        extra=[("s", (1, N))]),
    epi("batched_residual_1xMxN", ["%r = kiln.add %y, %res : {T}, tensor<1x77x96xf32> -> {T}"],
        lambda y, e: y + e["res"], extra=[("res", (1, M, N))], batch=(3,)),
    epi("batched_per_batch_bias_2x1xN", ["%r = kiln.add %y, %b : {T}, tensor<2x1x96xf32> -> {T}"],
        lambda y, e: y + e["b"], extra=[("b", (2, 1, N))], batch=(2,)),
    epi("operand_used_twice", ["%a = kiln.add %y, %bias : {T}, {B} -> {T}",
                               "%r = kiln.mul %a, %bias : {T}, {B} -> {T}"],
        lambda y, e: (y + e["bias"]) * e["bias"], extra=[("bias", (N,))]),
    epi("clamp_max_min", ["%lo = kiln.constant dense<-1.5> : tensor<f32>",
                          "%hi = kiln.constant dense<2.0> : tensor<f32>",
                          "%a = kiln.max %y, %lo : {T}, tensor<f32> -> {T}",
                          "%r = kiln.min %a, %hi : {T}, tensor<f32> -> {T}"],
        lambda y, e: np.clip(y, -1.5, 2.0), no_tile=True),
    epi("tanh_neg_exp", ["%a = kiln.tanh %y : {T}", "%b = kiln.neg %a : {T}", "%r = kiln.exp %b : {T}"],
        lambda y, e: np.exp(-np.tanh(y))),
    epi("square_then_rsqrt", ["%c = kiln.constant dense<1.0> : tensor<f32>", "%a = kiln.mul %y, %y : {T}, {T} -> {T}",
                              "%b = kiln.add %a, %c : {T}, tensor<f32> -> {T}", "%r = kiln.rsqrt %b : {T}"],
        lambda y, e: 1.0 / np.sqrt(y * y + 1.0)),
    epi("silu_squared_multi_use", ["%s = kiln.silu %y : {T}", "%r = kiln.mul %s, %s : {T}, {T} -> {T}"],
        lambda y, e: silu(y) ** 2),
    epi("mid_cast_f16_then_bias", ["%h = kiln.cast %y : {T} to tensor<77x96xf16>",
                                   "%f = kiln.cast %h : tensor<77x96xf16> to {T}",
                                   "%r = kiln.add %f, %bias : {T}, {B} -> {T}"],
        lambda y, e: r16(y) + e["bias"], extra=[("bias", (N,))], exact_inputs=True, no_tile=True),
    epi("bias_cast_f16", ["%b = kiln.add %y, %bias : {T}, {B} -> {T}", "%r = kiln.cast %b : {T} to tensor<77x96xf16>"],
        lambda y, e: y + e["bias"], extra=[("bias", (N,))], out_dtype="f16"),
    # Narrow matmuls with fused epilogues (checked against exact math at the f16 / bf16 tolerances).
    epi("f16_bias_gelu", ["%b = kiln.add %y, %bias : {T}, {B} -> {T}", "%r = kiln.gelu %b : {T}"],
        lambda y, e: (lambda z: 0.5 * z * (1.0 + erf(z / math.sqrt(2.0))))(y + e["bias"]),
        extra=[("bias", (N,))], dtype="f16", no_tile=True),
    epi("bf16_bias_silu_residual", ["%b = kiln.add %y, %bias : {T}, {B} -> {T}", "%s = kiln.silu %b : {T}",
                                    "%r = kiln.add %s, %res : {T}, {T} -> {T}"],
        lambda y, e: silu(y + e["bias"]) + e["res"], extra=[("bias", (N,)), ("res", (M, N))], dtype="bf16",
        no_tile=True),
    epi("f16_to_f32_bias_relu", ["%b = kiln.add %y, %bias : {T}, {B} -> {T}", "%r = kiln.relu %b : {T}"],
        lambda y, e: np.maximum(y + e["bias"], 0.0), extra=[("bias", (N,), "f32")], dtype="f16", y_dtype="f32"),
    # Graph semantics of narrow intermediate types: a tensor<..xf16> holds f16 values, so widening it is exact.
    epi("f16_matmul_cast_f32", ["%r = kiln.cast %y : {T} to {S}"], lambda y, e: r16(y), dtype="f16",
        out_dtype="f32", tolerance=1e-4, exact_inputs=True, representable="f16", no_tile=True),
    epi("bf16_matmul_relu_cast_f32", ["%a = kiln.relu %y : {T}", "%r = kiln.cast %a : {T} to {S}"],
        lambda y, e: np.maximum(rbf16(y), 0.0), dtype="bf16", out_dtype="f32", tolerance=1e-4, exact_inputs=True,
        representable="bf16", no_tile=True),
    epi("f32_matmul_silu_in_f16", ["%h = kiln.cast %y : {T} to tensor<77x96xf16>",
                                   "%s = kiln.silu %h : tensor<77x96xf16>",
                                   "%r = kiln.cast %s : tensor<77x96xf16> to {T}"],
        lambda y, e: silu(r16(y)), tolerance=TOLERANCE["f16"], exact_inputs=True, representable="f16",
        no_tile=True),
]


@pytest.mark.parametrize("case,pipeline", with_pipelines(EPILOGUE_CASES))
def test_matmul_epilogue(case, pipeline, tmp_path, record_error):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = case
    batch = tuple(c["batch"])
    x_shape, y_shape = batch + (M, K), batch + (M, N)
    inputs, values = [], {}

    def add_input(name, raw, dtype):
        stored, values[name] = to_kiln(raw, dtype)
        inputs.append(stored)
        return (name, ttype(raw.shape, dtype))

    if c["exact_inputs"]:
        x_raw = rng.integers(-8, 9, x_shape).astype(np.float64)
        w_raw = rng.integers(-128, 129, (K, N)) / 128.0
    else:
        x_raw = rng.standard_normal(x_shape)
        w_raw = rng.standard_normal((K, N)) * (2.0 / math.sqrt(K))
    args = [add_input("x", x_raw, c["dtype"]), add_input("w", w_raw, c["dtype"])]
    for name, shape, dtype in c["extra"]:
        raw = rng.standard_normal(shape)
        if name == "w3":
            raw *= 2.0 / math.sqrt(K)
        if name == "d":  # divisors in [1, 2]
            raw = 1.0 + rng.random(shape)
        args.append(add_input(name, raw, dtype))
    y_type = ttype(y_shape, c["y_dtype"])
    bias_dtype = next((d for n, _, d in c["extra"] if n == "bias"), c["y_dtype"])
    body = [line.format(T=y_type, B=ttype((N,), bias_dtype), S=ttype(y_shape, "f32")) for line in c["body"]]
    out_t = ttype(y_shape, c["out_dtype"])
    mlir = func_text(args, [out_t], [
        f"%y = kiln.matmul %x, %w : {args[0][1]}, {args[1][1]} -> {y_type}",
        *body,
        f"return %r : {out_t}",
    ])
    (out,) = run_kiln(tmp_path, mlir, inputs, 1, pipeline)
    ref = c["reference"](values["x"] @ values["w"], values)
    tolerance = c["tolerance"] or (BF16_EPILOGUE_TOLERANCE if c["out_dtype"] == "bf16" and c["dtype"] == "f32"
                                   else TOLERANCE[c["out_dtype"]] if c["dtype"] == "f32"
                                   else max(TOLERANCE[c["dtype"]], TOLERANCE[c["out_dtype"]]))
    result = from_kiln(out, c["out_dtype"])
    if c["representable"]:
        narrow = r16(result) if c["representable"] == "f16" else rbf16(result)
        bad = np.flatnonzero(narrow != result)
        assert bad.size == 0, (
            f"matmul epilogue {c['id']}: {bad.size} of {result.size} results are not {c['representable']} values "
            f"although they passed through a tensor of {c['representable']}, e.g. {result.ravel()[bad[:3]]} "
            f"(seed {seed}; inputs in {tmp_path})")
    check(record_error, f"matmul epilogue {c['dtype']}->{c['out_dtype']} [{pipeline}]", result, ref, tolerance,
          seed, f"matmul epilogue {c['id']}", tmp_path)


def rounding_probe_values(rng, count):
    """f32 values for rounding checks: random magnitudes, exact bf16 and f16 ties, carries, subnormals."""
    random = (rng.standard_normal(count) * np.exp2(rng.integers(-20, 14, count))).astype(np.float32)
    bf16_ties = (np.array([0x3F808000, 0x3F818000, 0x3F7F8000, 0xBF808000, 0xBF818000, 0x40490000 | 0x8000,
                           0x3F80C000, 0x3F804000, 0x00018000, 0x80008000], dtype=np.uint32)).view(np.float32)
    f16_ties = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -(1 + 2.0 ** -11), 2049.0, 2051.0, 65504.0,
                         2.0 ** -24 * 1.5, 2.0 ** -24 * 0.5, 2.0 ** -25 * 3, 6.0e-5, -3.0e-7], dtype=np.float32)
    subnormal = np.array([1e-40, -3e-39, 1.4e-45], dtype=np.float32)
    return np.concatenate([random, bf16_ties, f16_ties, subnormal, np.zeros(2, np.float32)])


@pytest.mark.parametrize("source,target", [("f32", "bf16"), ("f32", "f16"), ("bf16", "f32"), ("f16", "f32")])
@pytest.mark.parametrize("pipeline", ["tiled", "no-tile"])
def test_cast_rounding(source, target, pipeline, tmp_path, record_error):
    """kiln.cast between float types rounds to nearest even, exactly (bit for bit)."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    values = rounding_probe_values(rng, 1000)
    if source == "f32":
        given = values
        expected = f32_to_bf16_bits(values) if target == "bf16" else values.astype(np.float16)
    else:
        given = f32_to_bf16_bits(values) if source == "bf16" else values.astype(np.float16)
        expected = bf16_bits_to_f32(given) if source == "bf16" else given.astype(np.float32)
    shape = (values.size,)
    mlir = func_text([("x", ttype(shape, source))], [ttype(shape, target)], [
        f"%r = kiln.cast %x : {ttype(shape, source)} to {ttype(shape, target)}",
        f"return %r : {ttype(shape, target)}"])
    (out,) = run_kiln(tmp_path, mlir, [given], 1, pipeline)
    assert out.dtype == expected.dtype, f"result dtype {out.dtype}, expected {expected.dtype}"
    mismatched = np.flatnonzero(out.view(f"u{out.itemsize}") != expected.view(f"u{out.itemsize}"))
    record_error(f"cast {source}->{target} mismatches [{pipeline}]", float(mismatched.size), 0.0, seed)
    assert mismatched.size == 0, (
        f"{mismatched.size} of {out.size} values differ from round-to-nearest-even, e.g. input "
        f"{[float(values[i]) for i in mismatched[:5]]} -> {[out[i] for i in mismatched[:5]]}, expected "
        f"{[expected[i] for i in mismatched[:5]]} (seed {seed})")


# --------------------------------------------------------------------------------------------------------------
# kiln.softmax, kiln.rms_norm, kiln.layer_norm
# --------------------------------------------------------------------------------------------------------------


def softmax_reference(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rms_norm_reference(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm_reference(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * w
    return y if b is None else y + b


def row(id, op, shape, axis=None, bias=True, dtype="f32", no_tile=False, marks=()):
    return dict(id=id, op=op, shape=shape, axis=len(shape) - 1 if axis is None else axis, bias=bias, dtype=dtype,
                no_tile=no_tile, marks=marks)


# Row counts that do not divide the 16-row host tile, and a few that do (16, 32, 2 x 48).
ROW_SHAPES = [(77, 64), (1, 77), (1000, 64), (77, 4096), (1, 4096), (1000, 77), (2, 77, 77), (3, 5, 64), (16, 64),
              (32, 77), (2, 48, 4096)]
NO_TILE_SHAPES = {(77, 64), (1000, 77), (2, 77, 77)}

ROW_CASES = (
    [row(f"softmax_{'x'.join(map(str, s))}", "softmax", s, no_tile=s in NO_TILE_SHAPES) for s in ROW_SHAPES]
    + [row("softmax_1000x4096", "softmax", (1000, 4096)),
       row("softmax_rank1_77", "softmax", (77,)),
       row("softmax_axis1_5x77x33", "softmax", (5, 77, 33), axis=1, no_tile=True),
       row("softmax_axis0_77x64", "softmax", (77, 64), axis=0),
       row("softmax_axis0_3x77x16", "softmax", (3, 77, 16), axis=0),
       row("softmax_neginf_77x200", "softmax", (77, 200)),
       row("softmax_large_77x64", "softmax", (77, 64)),
       row("softmax_77x1", "softmax", (77, 1))]
    + [row(f"rms_norm_{'x'.join(map(str, s))}", "rms_norm", s, no_tile=s in NO_TILE_SHAPES) for s in ROW_SHAPES]
    + [row(f"layer_norm_bias_{'x'.join(map(str, s))}", "layer_norm", s, no_tile=s in NO_TILE_SHAPES)
       for s in ROW_SHAPES]
    + [row(f"layer_norm_nobias_{'x'.join(map(str, s))}", "layer_norm", s, bias=False,
           no_tile=s == (77, 64)) for s in [(77, 64), (1, 77), (1000, 77), (77, 4096), (2, 77, 77)]]
    + [row("f16_softmax_77x77", "softmax", (77, 77), dtype="f16"),
       row("bf16_rms_norm_77x4096", "rms_norm", (77, 4096), dtype="bf16", no_tile=True),
       row("f16_layer_norm_bias_77x64", "layer_norm", (77, 64), dtype="f16"),
       row("bf16_layer_norm_nobias_1000x77", "layer_norm", (1000, 77), bias=False, dtype="bf16")]
)


@pytest.mark.parametrize("case,pipeline", with_pipelines(ROW_CASES))
def test_row_kernel(case, pipeline, tmp_path, record_error):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = case
    dtype, shape, width = c["dtype"], tuple(c["shape"]), c["shape"][-1]
    t, wt = ttype(shape, dtype), ttype((width,), dtype)
    if c["op"] == "softmax":
        x = 3.0 * rng.standard_normal(shape)
        if "neginf" in c["id"]:  # some -inf entries (never a whole row)
            x[rng.random(shape) < 0.3] = -np.inf
            x[:, 0] = rng.standard_normal(shape[0])
        if "large" in c["id"]:  # magnitudes where exp() overflows without the max subtraction
            x = 300.0 * x
        x_np, x = to_kiln(x, dtype)
        inputs, args = [x_np], [("x", t)]
        line = f"%r = kiln.softmax %x axis {c['axis']} : {t}"
        ref = softmax_reference(x, c["axis"])
    elif c["op"] == "rms_norm":
        x_np, x = to_kiln(2.0 * rng.standard_normal(shape), dtype)
        w_np, w = to_kiln(1.0 + 0.5 * rng.standard_normal(width), dtype)
        inputs, args = [x_np, w_np], [("x", t), ("w", wt)]
        line = f"%r = kiln.rms_norm %x, %w epsilon 1.0e-06 : {t}, {wt}"
        ref = rms_norm_reference(x, w, float(np.float32(1e-6)))
    else:
        # A non-zero mean and a non-unit variance, so that centring and scaling both matter.
        x_np, x = to_kiln(3.0 + 2.0 * rng.standard_normal(shape), dtype)
        w_np, w = to_kiln(1.0 + 0.5 * rng.standard_normal(width), dtype)
        inputs, args = [x_np, w_np], [("x", t), ("w", wt)]
        b = None
        if c["bias"]:
            b_np, b = to_kiln(rng.standard_normal(width), dtype)
            inputs.append(b_np)
            args.append(("b", wt))
            line = f"%r = kiln.layer_norm %x, %w, %b epsilon 1.0e-05 : {t}, {wt}, {wt}"
        else:
            line = f"%r = kiln.layer_norm %x, %w epsilon 1.0e-05 : {t}, {wt}"
        ref = layer_norm_reference(x, w, b, float(np.float32(1e-5)))
    mlir = func_text(args, [t], [line, f"return %r : {t}"])
    (out,) = run_kiln(tmp_path, mlir, inputs, 1, pipeline)
    family = f"{c['op']} {dtype} [{pipeline}]"
    check(record_error, family, from_kiln(out, dtype), ref, TOLERANCE[dtype], seed, c["id"], tmp_path)


# --------------------------------------------------------------------------------------------------------------
# Functions with several results (the host ABI: one out-parameter per result)
# --------------------------------------------------------------------------------------------------------------

X_T, W_T, Y_T = "tensor<33x17xf32>", "tensor<17x65xf32>", "tensor<33x65xf32>"
MULTI_RESULT_CASES = [
    dict(id="matmul_and_relu", results=[Y_T, Y_T],
         body=[f"%y = kiln.matmul %x, %w : {X_T}, {W_T} -> {Y_T}", f"%r = kiln.relu %y : {Y_T}"],
         returns="%y, %r", ref=lambda y, x: [y, np.maximum(y, 0)], no_tile=True),
    dict(id="argument_and_matmul", results=[X_T, Y_T],
         body=[f"%y = kiln.matmul %x, %w : {X_T}, {W_T} -> {Y_T}"], returns="%x, %y",
         ref=lambda y, x: [x, y], no_tile=True),
    dict(id="constant_and_matmul", results=["tensor<2xf32>", Y_T],
         body=["%c = kiln.constant dense<[1.5, -2.0]> : tensor<2xf32>",
               f"%y = kiln.matmul %x, %w : {X_T}, {W_T} -> {Y_T}"], returns="%c, %y",
         ref=lambda y, x: [np.array([1.5, -2.0]), y], no_tile=True),
    dict(id="same_value_twice", results=[Y_T, Y_T],
         body=[f"%y = kiln.matmul %x, %w : {X_T}, {W_T} -> {Y_T}", f"%r = kiln.relu %y : {Y_T}"],
         returns="%r, %r", ref=lambda y, x: [np.maximum(y, 0)] * 2, no_tile=True),
    dict(id="identical_matmuls_merged_by_cse", results=[Y_T, Y_T],
         body=[f"%y = kiln.matmul %x, %w : {X_T}, {W_T} -> {Y_T}", f"%z = kiln.matmul %x, %w : {X_T}, {W_T} -> {Y_T}"],
         returns="%y, %z", ref=lambda y, x: [y, y], no_tile=True),
    dict(id="argument_twice", results=[X_T, X_T], body=[], returns="%x, %x", ref=lambda y, x: [x, x],
         no_tile=True),
]


@pytest.mark.parametrize("case,pipeline", with_pipelines(MULTI_RESULT_CASES))
def test_multiple_results(case, pipeline, tmp_path, record_error):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((33, 17)).astype(np.float32)
    w = rng.standard_normal((17, 65)).astype(np.float32)
    results = case["results"]
    mlir = func_text([("x", X_T), ("w", W_T)], results,
                     case["body"] + [f"return {case['returns']} : {', '.join(results)}"])
    outputs = run_kiln(tmp_path, mlir, [x, w], len(results), pipeline)
    expected = case["ref"](x.astype(np.float64) @ w.astype(np.float64), x.astype(np.float64))
    for index, (out, ref) in enumerate(zip(outputs, expected)):
        check(record_error, f"multiple results [{pipeline}]", from_kiln(out, "f32"), ref, TOLERANCE["f32"], seed,
              f"{case['id']} result #{index}", tmp_path)


# --------------------------------------------------------------------------------------------------------------
# kiln-run error paths
# --------------------------------------------------------------------------------------------------------------

MATMUL_MLIR = func_text([("a", "tensor<4x8xf32>"), ("b", "tensor<8x16xf32>")], ["tensor<4x16xf32>"], [
    "%y = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>",
    "return %y : tensor<4x16xf32>",
], name="mm")


@pytest.fixture
def matmul_files(tmp_path):
    """A valid matmul module and inputs: (source, a.npy, b.npy, out.npy)."""
    source = tmp_path / "mm.mlir"
    source.write_text(MATMUL_MLIR)
    rng = np.random.default_rng(fresh_seed())
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, rng.standard_normal((4, 8)).astype(np.float32))
    np.save(b, rng.standard_normal((8, 16)).astype(np.float32))
    return source, a, b, tmp_path / "out.npy"


def run_failing(cmd, *expected):
    proc = run_command([str(part) for part in cmd])
    assert proc.returncode != 0, f"kiln-run accepted {cmd}\nstdout:\n{proc.stdout}"
    assert "Stack dump" not in proc.stderr and proc.returncode > 0, f"kiln-run crashed:\n{proc.stderr}"
    for text in expected:
        assert text in proc.stderr, f"stderr does not mention {text!r}:\n{proc.stderr}"
    return proc


def test_valid_invocation_succeeds(matmul_files):
    """The baseline the error tests modify: the same files, correctly passed, run."""
    source, a, b, out = matmul_files
    proc = run_command([str(KILN_RUN), str(source), f"--input={a}", f"--input={b}", f"--output={out}"])
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(out), np.load(a).astype(np.float64) @ np.load(b), rtol=1e-5, atol=1e-5)


def test_error_too_few_inputs(matmul_files):
    source, a, b, out = matmul_files
    run_failing([KILN_RUN, source, f"--input={a}", f"--output={out}"], "'mm' takes 2 inputs but 1 --input")


def test_error_too_many_inputs(matmul_files):
    source, a, b, out = matmul_files
    run_failing([KILN_RUN, source, f"--input={a}", f"--input={b}", f"--input={b}", f"--output={out}"],
                "'mm' takes 2 inputs but 3 --input")


def test_error_wrong_shape(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((8, 15), np.float32))
    run_failing([KILN_RUN, source, f"--input={a}", f"--input={wrong}", f"--output={out}"],
                "input #1", "tensor<8x16xf32>", "tensor<8x15xf32>")


def test_error_wrong_dtype(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((4, 8), np.float64))
    run_failing([KILN_RUN, source, f"--input={wrong}", f"--input={b}", f"--output={out}"],
                "input #0", "unsupported dtype", "<f8")


def test_error_truncated_npy(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    truncated = tmp_path / "truncated.npy"
    truncated.write_bytes(b.read_bytes()[:-12])
    run_failing([KILN_RUN, source, f"--input={a}", f"--input={truncated}", f"--output={out}"],
                "input #1", "truncated.npy", "data bytes")


def test_error_truncated_npy_header(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    truncated = tmp_path / "header.npy"
    truncated.write_bytes(a.read_bytes()[:40])
    run_failing([KILN_RUN, source, f"--input={truncated}", f"--input={b}", f"--output={out}"],
                "input #0", "header.npy", "truncated header")


def test_error_corrupt_npy(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    corrupt = tmp_path / "corrupt.npy"
    corrupt.write_bytes(b"this is not a numpy file at all" * 8)
    run_failing([KILN_RUN, source, f"--input={corrupt}", f"--input={b}", f"--output={out}"],
                "input #0", "corrupt.npy", "not a .npy file")


def test_error_missing_input_file(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    missing = tmp_path / "does_not_exist.npy"
    run_failing([KILN_RUN, source, f"--input={a}", f"--input={missing}", f"--output={out}"],
                "input #1", "does_not_exist.npy", "cannot open")


def test_error_not_mlir(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    garbage = tmp_path / "garbage.mlir"
    garbage.write_text("this is { not MLIR ]\n")
    run_failing([KILN_RUN, garbage, f"--input={a}", f"--input={b}", f"--output={out}"], "garbage.mlir", "error")


def test_error_missing_mlir_file(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    run_failing([KILN_RUN, tmp_path / "nope.mlir", f"--input={a}", f"--input={b}", f"--output={out}"],
                "nope.mlir", "No such file")


def test_error_fortran_order_npy(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    fortran = tmp_path / "fortran.npy"
    np.save(fortran, np.asfortranarray(np.load(a)))
    run_failing([KILN_RUN, source, f"--input={fortran}", f"--input={b}", f"--output={out}"],
                "input #0", "fortran.npy", "Fortran")


def test_error_unwritable_output(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    run_failing([KILN_RUN, source, f"--input={a}", f"--input={b}", f"--output={tmp_path / 'no_dir' / 'out.npy'}"],
                "out.npy", "cannot write")


def test_error_verifier_rejects_op(matmul_files, tmp_path):
    """An op the verifier rejects (causal attention with seq_q > seq_k) is reported with its location."""
    source = tmp_path / "bad.mlir"
    q, kv, o = "tensor<1x1x8x16xf32>", "tensor<1x1x4x16xf32>", "tensor<1x1x8x16xf32>"
    source.write_text(func_text([("q", q), ("k", kv), ("v", kv)], [o], [
        f"%o = kiln.attention %q, %k, %v causal : {q}, {kv}, {kv} -> {o}", f"return %o : {o}"]))
    run_failing([KILN_RUN, source, "--random-inputs"], "bad.mlir:2:", "seq_q <= seq_k")


def test_error_missing_entry(matmul_files):
    source, a, b, out = matmul_files
    run_failing([KILN_RUN, source, "--entry=no_such_function", f"--input={a}", f"--input={b}", f"--output={out}"],
                "no function named 'no_such_function'")


def test_error_wrong_number_of_outputs(matmul_files, tmp_path):
    source, a, b, out = matmul_files
    run_failing([KILN_RUN, source, f"--input={a}", f"--input={b}", f"--output={out}",
                 f"--output={tmp_path / 'extra.npy'}"], "'mm' has 1 results but 2 --output")


def test_entry_selects_among_functions(tmp_path):
    """--entry picks one of several public functions; without it kiln-run asks for one."""
    second = func_text([("a", "tensor<4x8xf32>")], ["tensor<4x8xf32>"], [
        "%r = kiln.relu %a : tensor<4x8xf32>", "return %r : tensor<4x8xf32>"], name="relu")
    source = tmp_path / "two.mlir"
    source.write_text(MATMUL_MLIR + second)
    rng = np.random.default_rng(fresh_seed())
    a = tmp_path / "a.npy"
    np.save(a, rng.standard_normal((4, 8)).astype(np.float32))
    out = tmp_path / "out.npy"
    run_failing([KILN_RUN, source, f"--input={a}", f"--output={out}"], "--entry")
    proc = run_command([str(KILN_RUN), str(source), "--entry=relu", f"--input={a}", f"--output={out}"])
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(out), np.maximum(np.load(a), 0))
