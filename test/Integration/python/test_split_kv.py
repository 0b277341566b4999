"""Split-KV attention on the CPU host backend: ``kiln.attention {kv_chunk}`` and ``kiln.merge_splits`` against
float64 attention.

kiln-split-kv rewrites a decode-shaped attention on the GPU targets as attention over chunks of the keys (each
chunk's normalised output and log-sum-exp) and a merge of the chunks by their lse. Those two ops are ordinary kiln
ops, so the host backend runs them too: these tests write them out in IR (the pass itself leaves the host target
alone) and check each chunk's output and lse, and the merged output, against the float64 attention over all keys
and over each chunk's keys. Chunks that a row sees no key of (causal rows before the chunk, a sliding window past
it) must give lse = -inf and weigh nothing in the merge. Tolerances: 1e-4 for f32, 2e-2 for bf16 (relative, max
norm).
"""

import ml_dtypes
import numpy as np
import pytest

from numerics import check, fresh_rng, kiln


def element(dtype):
    return "bf16" if dtype == ml_dtypes.bfloat16 else "f32"


def split_source(shape_q, shape_kv, chunk, causal, window, dtype):
    """IR of a split attention returning its merged output, its chunks' outputs and their lse."""
    b, hq, sq, d = shape_q
    hkv, sk = shape_kv[1], shape_kv[2]
    n = -(-sk // chunk)
    t = element(dtype)
    q, kv = f"tensor<{b}x{hq}x{sq}x{d}x{t}>", f"tensor<{b}x{hkv}x{sk}x{d}x{t}>"
    parts, lse = f"tensor<{n}x{b}x{hq}x{sq}x{d}xf32>", f"tensor<{n}x{b}x{hq}x{sq}xf32>"
    out = f"tensor<{b}x{hq}x{sq}x{d}x{t}>"
    mask = ""
    if window:  # key j visible to query i when j > i + (sk - sq) - window
        mask = f"""mask_mod {{
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %shift = arith.constant {sk - sq - window} : index
      %lo = arith.addi %i, %shift : index
      %in = arith.cmpi sgt, %j, %lo : index
      kiln.yield %in : i1
    }}"""
    return f"""
func.func @split(%q: {q}, %k: {kv}, %v: {kv}) -> ({out}, {parts}, {lse}) {{
  %p, %l = kiln.attention %q, %k, %v {"causal" if causal else ""} {mask} {{kv_chunk = {chunk} : i64}}
      : {q}, {kv}, {kv} -> {parts}, {lse}
  %o = kiln.merge_splits %p, %l : {parts}, {lse} -> {out}
  return %o, %p, %l : {out}, {parts}, {lse}
}}
"""


def scores64(q, k, causal, window):
    """float64 masked scores [B, Hq, Sq, Sk] (GQA by repeating k)."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k.astype(np.float64), group, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k) / np.sqrt(q.shape[-1])
    sq, sk = q.shape[2], k.shape[2]
    rows, cols = np.arange(sq)[:, None], np.arange(sk)[None, :]
    hidden = np.zeros((sq, sk), dtype=bool)
    if causal:
        hidden |= cols > rows + (sk - sq)
    if window:
        hidden |= cols <= rows + (sk - sq) - window
    s[..., hidden] = -np.inf
    return s


def attend64(s, v, group):
    """float64 softmax(s) v and the lse of each row (-inf, with output 0, where a row sees no key)."""
    v = np.repeat(v.astype(np.float64), group, axis=1)
    top = np.max(s, axis=-1, keepdims=True)
    seen = np.isfinite(top)
    p = np.where(seen, np.exp(s - np.where(seen, top, 0)), 0)
    total = p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bhkd->bhqd", p / np.where(total > 0, total, 1), v)
    with np.errstate(divide="ignore"):
        lse = np.where(seen[..., 0], top[..., 0] + np.log(np.where(total > 0, total, 1)[..., 0]), -np.inf)
    return out, lse


CASES = [  # q shape, kv heads, keys, chunk, causal, window, dtype
    pytest.param((1, 8, 4, 64), 8, 1000, 256, False, 0, np.float32, id="decode-partial-last-chunk"),
    pytest.param((2, 8, 1, 128), 2, 777, 128, True, 0, np.float32, id="gqa-one-row-causal"),
    pytest.param((1, 2, 300, 32), 2, 300, 64, True, 0, np.float32, id="causal-empty-chunks"),
    pytest.param((1, 4, 5, 64), 2, 900, 192, False, 100, np.float32, id="window-empty-chunks"),
    pytest.param((3, 4, 3, 64), 1, 513, 256, True, 0, ml_dtypes.bfloat16, id="mqa-bf16"),
]


@pytest.mark.parametrize("shape_q,kv_heads,keys,chunk,causal,window,dtype", CASES)
def test_split_attention_matches_float64(shape_q, kv_heads, keys, chunk, causal, window, dtype, record_error):
    rng, seed = fresh_rng()
    b, hq, sq, d = shape_q
    q = rng.standard_normal(shape_q).astype(dtype)
    k = rng.standard_normal((b, kv_heads, keys, d)).astype(dtype)
    v = rng.standard_normal((b, kv_heads, keys, d)).astype(dtype)
    program = kiln.compile(split_source(shape_q, k.shape, chunk, causal, window, dtype))
    out, parts, lse = program(q, k, v)
    tolerance = 2e-2 if dtype == ml_dtypes.bfloat16 else 1e-4
    s = scores64(q, k, causal, window)
    reference, _ = attend64(s, v, hq // kv_heads)
    check(record_error, f"split attention {element(dtype)}", out, reference, seed, tolerance)
    # Each chunk on its own: its output where the row sees a key of it, and its lse (-inf exactly where none).
    for n in range(parts.shape[0]):
        keep = slice(n * chunk, min((n + 1) * chunk, keys))
        chunk_out, chunk_lse = attend64(s[..., keep], v[:, :, keep], hq // kv_heads)
        empty = np.isneginf(chunk_lse)
        assert np.array_equal(np.isneginf(lse[n]), empty), f"chunk {n}: -inf lse where no key is seen (seed {seed})"
        if not empty.all():
            check(record_error, f"split attention chunk {element(dtype)}", np.where(empty[..., None], 0, parts[n]),
                  chunk_out, seed, tolerance)
            finite = ~empty
            assert np.max(np.abs(lse[n][finite] - chunk_lse[finite])) < 1e-3 * max(1, np.max(np.abs(chunk_lse[finite])))


def test_merge_of_rows_that_see_no_key_is_zero():
    """A row that no chunk gives a key (lse -inf everywhere) merges to 0, as the unsplit attention gives."""
    parts = np.zeros((2, 1, 1, 2, 8), np.float32)
    lse = np.array([[[[-np.inf, 0.5]]], [[[-np.inf, -np.inf]]]], np.float32)
    parts[0, 0, 0, 1] = 3.0
    parts[1, 0, 0, 1] = np.nan  # a chunk without keys holds anything; it must not reach the sum
    program = kiln.compile("""
func.func @merge(%p: tensor<2x1x1x2x8xf32>, %l: tensor<2x1x1x2xf32>) -> tensor<1x1x2x8xf32> {
  %o = kiln.merge_splits %p, %l : tensor<2x1x1x2x8xf32>, tensor<2x1x1x2xf32> -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}
""")
    out = program(parts, lse)
    assert np.array_equal(out[0, 0, 0], np.zeros(8, np.float32))
    assert np.array_equal(out[0, 0, 1], np.full(8, 3.0, np.float32))


def test_tiled_split_attention_matches_the_reference_lowering(tmp_path):
    """kiln-run --check: the tiled host pipeline (kiln-tile's chunk loop, the online softmax) against the untiled
    reference lowering of the same split attention and merge, on seeded random inputs."""
    import subprocess
    from numerics import BUILD_DIR
    source = tmp_path / "split.mlir"
    source.write_text(split_source((2, 4, 3, 32), (2, 2, 1000, 32), 256, True, 0, np.float32))
    result = subprocess.run([str(BUILD_DIR / "bin" / "kiln-run"), str(source), "--random-inputs", "--check"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    reports = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "vs the reference" in line]
    assert len(reports) == 3 and all("(ok," in line for line in reports), reports
