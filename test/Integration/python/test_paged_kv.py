"""kiln.ops.paged_attention and kiln.ops.append_kv on the host target, against float64 numpy references.

Every case draws a fresh seed (recorded in the worst-error summary and in each failure): sequences get shuffled
pages of one shared pool, lengths end mid-page, the pool's unused pages and the rows past each length hold NaN
and the unused table entries -1, so any read of them would show. Tolerance: 1e-4 relative in the max norm for
f32, 2e-2 for bf16 (inputs rounded to bf16 before the reference sees them). The error tests check that each bad
table, length or dtype is an exception naming the argument, raised before the program runs.
"""

import math

import ml_dtypes
import numpy as np
import pytest

from numerics import check, fresh_rng, kiln


def paged_pool(rng, lens, page_size, max_pages, kv_heads, head_dim, dtype, spare=3):
    """A NaN-filled cache pair whose sequences (of lengths ``lens``) hold random rows in shuffled pages, and
    their block table (-1 past each sequence's pages)."""
    needed = [math.ceil(n / page_size) for n in lens]
    num_pages = sum(needed) + spare
    shape = (num_pages, page_size, kv_heads, head_dim)
    k_cache, v_cache = np.full(shape, np.nan, dtype), np.full(shape, np.nan, dtype)
    table = np.full((len(lens), max_pages), -1, np.int32)
    pages = rng.permutation(num_pages)
    for b, (length, count) in enumerate(zip(lens, needed)):
        table[b, :count], pages = pages[:count], pages[count:]
        positions = np.arange(length)
        for cache in (k_cache, v_cache):
            cache[table[b, positions // page_size], positions % page_size] = (
                rng.standard_normal((length, kv_heads, head_dim)).astype(dtype))
    return k_cache, v_cache, table


def paged_reference(q, k_cache, v_cache, table, lens, scale):
    """float64 attention of each sequence's last Sq tokens over its gathered keys, causal bottom-right."""
    batch, heads, seq_q, head_dim = q.shape
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = heads // kv_heads
    out = np.zeros(q.shape)
    for b, length in enumerate(lens):
        positions = np.arange(length)
        pages, rows = table[b, positions // page_size], positions % page_size
        k = k_cache[pages, rows].astype(np.float64)
        v = v_cache[pages, rows].astype(np.float64)
        visible = positions[None, :] <= length - seq_q + np.arange(seq_q)[:, None]
        for h in range(heads):
            scores = np.where(visible, q[b, h].astype(np.float64) @ k[:, h // group].T * scale, -np.inf)
            probs = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[b, h] = probs / probs.sum(axis=1, keepdims=True) @ v[:, h // group]
    return out


def draw_lengths(rng, batch, seq_q, capacity, page_size):
    """Lengths in [seq_q, capacity], the first one ending mid-page."""
    lens = rng.integers(seq_q, capacity + 1, size=batch)
    while lens[0] % page_size == 0:
        lens[0] = rng.integers(seq_q, capacity + 1)
    return [int(n) for n in lens]


CASES = [  # batch, q heads, kv heads, seq_q, head_dim, page_size, max_pages, dtype
    pytest.param(1, 4, 4, 1, 64, 16, 4, np.float32, id="b1-mha-d64-decode"),
    pytest.param(3, 8, 2, 1, 128, 16, 3, np.float32, id="b3-gqa-d128-decode"),
    pytest.param(8, 4, 1, 1, 64, 32, 2, np.float32, id="b8-mqa-d64-p32-decode"),
    pytest.param(2, 4, 2, 5, 64, 16, 3, np.float32, id="b2-gqa-d64-chunk5"),
    pytest.param(4, 8, 2, 2, 128, 16, 2, ml_dtypes.bfloat16, id="b4-gqa-d128-bf16-chunk2"),
]


@pytest.mark.parametrize("batch,heads,kv_heads,seq_q,head_dim,page_size,max_pages,dtype", CASES)
def test_paged_attention(batch, heads, kv_heads, seq_q, head_dim, page_size, max_pages, dtype, record_error):
    rng, seed = fresh_rng()
    lens = draw_lengths(rng, batch, seq_q, max_pages * page_size, page_size)
    k_cache, v_cache, table = paged_pool(rng, lens, page_size, max_pages, kv_heads, head_dim, dtype)
    q = rng.standard_normal((batch, heads, seq_q, head_dim)).astype(dtype)
    out = kiln.ops.paged_attention(q, k_cache, v_cache, table, np.array(lens, np.int32))
    assert out.dtype == dtype
    reference = paged_reference(q, k_cache, v_cache, table, lens, 1 / math.sqrt(head_dim))
    tolerance = 2e-2 if dtype == ml_dtypes.bfloat16 else 1e-4
    family = f"paged_attention {np.dtype(dtype).name}"
    check(record_error, family, out, reference, f"{seed} lens={lens}", tolerance)


def test_paged_attention_scale_and_full_table(record_error):
    """An explicit scale, and a sequence that fills its whole table (no -1 entry, no NaN row to skip)."""
    rng, seed = fresh_rng()
    lens = [48, 17]
    k_cache, v_cache, table = paged_pool(rng, lens, 16, 3, 2, 64, np.float32)
    q = rng.standard_normal((2, 2, 3, 64)).astype(np.float32)
    out = kiln.ops.paged_attention(q, k_cache, v_cache, table, np.array(lens, np.int32), scale=0.3)
    check(record_error, "paged_attention float32", out, paged_reference(q, k_cache, v_cache, table, lens, 0.3),
          seed)


def test_append_kv_then_attend(record_error):
    """append_kv writes exactly the new rows (the arguments unchanged), and attention over the appended caches
    sees them as each sequence's newest tokens."""
    rng, seed = fresh_rng()
    page_size, max_pages, kv_heads, head_dim, new = 16, 3, 2, 64, 3
    before = [13, 29, 0, 16]
    lens = [n + new for n in before]
    k_cache, v_cache, table = paged_pool(rng, lens, page_size, max_pages, kv_heads, head_dim, np.float32)
    positions = np.array(before, np.int32)
    k = rng.standard_normal((len(lens), kv_heads, new, head_dim)).astype(np.float32)
    v = rng.standard_normal(k.shape).astype(np.float32)
    k_old, v_old = k_cache.copy(), v_cache.copy()
    k_new, v_new = kiln.ops.append_kv(k_cache, v_cache, k, v, table, positions)
    np.testing.assert_array_equal(k_cache, k_old)
    np.testing.assert_array_equal(v_cache, v_old)
    k_expected, v_expected = k_old.copy(), v_old.copy()
    for b, start in enumerate(before):
        written = np.arange(start, start + new)
        slots = table[b, written // page_size], written % page_size
        k_expected[slots] = k[b].transpose(1, 0, 2)
        v_expected[slots] = v[b].transpose(1, 0, 2)
    np.testing.assert_array_equal(k_new, k_expected)
    np.testing.assert_array_equal(v_new, v_expected)

    q = rng.standard_normal((len(lens), 4, new, head_dim)).astype(np.float32)
    out = kiln.ops.paged_attention(q, k_new, v_new, table, np.array(lens, np.int32))
    reference = paged_reference(q, k_expected, v_expected, table, lens, 1 / math.sqrt(head_dim))
    check(record_error, "paged_attention float32", out, reference, seed)


HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 64, 4, 2, 16, 96


@kiln.jit
def decode_layer(x, cos, sin, k_cache, v_cache, block_table, positions, seq_lens, attn_norm, wq, wk, wv, wo,
                 ffn_norm, w1, w3, w2):
    """A Llama-style decode layer over a paged cache (bench/decode_layer.py's; its sizes from the arguments': the
    head dim twice the rotary tables' width)."""
    batch, head_dim = x.shape[0], 2 * cos.shape[1]
    heads, kv_heads = wq.shape[1] // head_dim, wk.shape[1] // head_dim
    h = kiln.rms_norm(x, attn_norm, eps=1e-5)
    q = kiln.rope(kiln.reshape(kiln.matmul(h, wq), (batch, heads, head_dim)), cos, sin, seq_dim=0)
    k = kiln.rope(kiln.reshape(kiln.matmul(h, wk), (batch, kv_heads, head_dim)), cos, sin, seq_dim=0)
    v = kiln.matmul(h, wv)
    k_cache, v_cache = kiln.append_kv(k_cache, v_cache, kiln.reshape(k, (batch, kv_heads, 1, head_dim)),
                                      kiln.reshape(v, (batch, kv_heads, 1, head_dim)), block_table, positions)
    o = kiln.paged_attention(kiln.reshape(q, (batch, heads, 1, head_dim)), k_cache, v_cache, block_table, seq_lens)
    x = kiln.matmul(kiln.reshape(o, (batch, heads * head_dim)), wo) + x
    h = kiln.rms_norm(x, ffn_norm, eps=1e-5)
    g = kiln.silu(kiln.matmul(h, w1)) * kiln.matmul(h, w3)
    return kiln.matmul(g, w2) + x, k_cache, v_cache


def test_decode_layer_over_a_paged_cache(record_error):
    """One program: RMSNorm, q/k/v, RoPE at each sequence's own position (seq_dim=0), the append, paged
    attention, the output projection, residual, SwiGLU MLP; against the same layer in float64 (new rows in their
    pages, the caches given left unchanged on the host)."""
    rng, seed = fresh_rng()
    page_size, max_pages, before = 16, 4, [37, 0, 16, 50]
    batch = len(before)
    k_cache, v_cache, table = paged_pool(rng, [n + 1 for n in before], page_size, max_pages, KV_HEADS, HEAD_DIM,
                                         np.float32)
    positions = np.array(before, np.int32)
    angles = positions[:, None] / 10000.0 ** (np.arange(HEAD_DIM // 2) * 2 / HEAD_DIM)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)

    def weight(*shape):
        return (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32)

    w = dict(attn_norm=1 + 0.1 * rng.standard_normal(HIDDEN).astype(np.float32), wq=weight(HIDDEN, HEADS * HEAD_DIM),
             wk=weight(HIDDEN, KV_HEADS * HEAD_DIM), wv=weight(HIDDEN, KV_HEADS * HEAD_DIM),
             wo=weight(HEADS * HEAD_DIM, HIDDEN), ffn_norm=1 + 0.1 * rng.standard_normal(HIDDEN).astype(np.float32),
             w1=weight(HIDDEN, FFN), w3=weight(HIDDEN, FFN), w2=weight(FFN, HIDDEN))
    x = rng.standard_normal((batch, HIDDEN)).astype(np.float32)
    k_old, v_old = k_cache.copy(), v_cache.copy()
    out, k_new, v_new = decode_layer(x, cos, sin, k_cache, v_cache, table, positions, positions + 1, *w.values())
    np.testing.assert_array_equal(k_cache, k_old)

    f = {name: value.astype(np.float64) for name, value in w.items()}

    def norm(v, weight):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-5) * weight

    def rope(v):
        half = HEAD_DIM // 2
        a, b = v[..., :half], v[..., half:]
        c, s = np.cos(angles)[:, None], np.sin(angles)[:, None]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)

    x64 = x.astype(np.float64)
    h = norm(x64, f["attn_norm"])
    q = rope((h @ f["wq"]).reshape(batch, HEADS, HEAD_DIM))
    k = rope((h @ f["wk"]).reshape(batch, KV_HEADS, HEAD_DIM))
    v = (h @ f["wv"]).reshape(batch, KV_HEADS, HEAD_DIM)
    k_expected, v_expected = k_old.astype(np.float64), v_old.astype(np.float64)
    slots = table[np.arange(batch), positions // page_size], positions % page_size
    k_expected[slots], v_expected[slots] = k, v
    check(record_error, "decode layer: new k rows", k_new[slots], k, seed)
    check(record_error, "decode layer: new v rows", v_new[slots], v, seed)
    untouched = np.ones(k_cache.shape[:2], bool)
    untouched[slots] = False
    np.testing.assert_array_equal(k_new[untouched], k_old[untouched])
    np.testing.assert_array_equal(v_new[untouched], v_old[untouched])
    o = paged_reference(q[:, :, None], k_expected, v_expected, table, [n + 1 for n in before], 1 / math.sqrt(HEAD_DIM))
    x64 = o.reshape(batch, HEADS * HEAD_DIM) @ f["wo"] + x64
    h = norm(x64, f["ffn_norm"])
    gate = h @ f["w1"]
    reference = (gate / (1 + np.exp(-gate)) * (h @ f["w3"])) @ f["w2"] + x64
    check(record_error, "decode layer f32", out, reference, seed)


# ---------------------------------------------------------------------------------------------------------------
# Bad inputs: each names the argument at fault.


def decode_inputs(batch=2, page_size=16, max_pages=2):
    rng, _ = fresh_rng()
    lens = [20, 9][:batch]
    k_cache, v_cache, table = paged_pool(rng, lens, page_size, max_pages, 2, 64, np.float32)
    q = rng.standard_normal((batch, 4, 1, 64)).astype(np.float32)
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, block_table=table, seq_lens=np.array(lens, np.int32))


def test_paged_attention_accepts_the_clean_inputs():
    assert kiln.ops.paged_attention(**decode_inputs()).shape == (2, 4, 1, 64)


def test_paged_attention_f32_precision(record_error):
    """fp32_precision reaches the attention (3xTF32 on a GPU); the host attends in f32 either way, and a value
    other than "tf32" / "ieee" is refused, naming it."""
    arguments = decode_inputs()
    assert 'fp32_precision = "ieee"' in kiln.ops._paged_attention.source(*arguments.values(), None, "ieee")
    out = kiln.ops.paged_attention(**arguments, fp32_precision="ieee")
    lens = arguments["seq_lens"].tolist()
    reference = paged_reference(arguments["q"], arguments["k_cache"], arguments["v_cache"], arguments["block_table"],
                                lens, 1 / math.sqrt(arguments["q"].shape[-1]))
    check(record_error, "paged_attention float32", out, reference, "fp32_precision ieee")
    with pytest.raises(ValueError, match="paged_attention: fp32_precision must be 'tf32' or 'ieee', got 'x'"):
        kiln.ops.paged_attention(**arguments, fp32_precision="x")


@pytest.mark.parametrize("change,error,match", [
    (lambda a: a.update(block_table=a["block_table"].astype(np.int64)), TypeError, "'block_table' has dtype int64"),
    (lambda a: a.update(seq_lens=a["seq_lens"].astype(np.float32)), TypeError, "'seq_lens' has dtype float32"),
    (lambda a: a.update(k_cache=a["k_cache"].astype(np.float16)), TypeError, "'k_cache' has dtype float16"),
    (lambda a: a.update(q=a["q"][0]), ValueError, "'q' must be"),
    (lambda a: a.update(block_table=a["block_table"][0]), ValueError, "'block_table' must be"),
    (lambda a: a.update(seq_lens=a["seq_lens"][:1]), ValueError, "'seq_lens' must have shape"),
    (lambda a: a.update(v_cache=a["v_cache"][:, :, :1]), ValueError, "'v_cache' has shape"),
    (lambda a: a.update(k_cache=a["k_cache"][:, :8], v_cache=a["v_cache"][:, :8]), ValueError,
     r"'k_cache' has page size 8 \(dim 1\); it must be in \[16, 256\]"),
    (lambda a: a.update(q=a["q"][:, :3]), ValueError, "3 query heads cannot share 2"),
    (lambda a: a.update(seq_lens=np.array([20, -1], np.int32)), ValueError, r"'seq_lens'\[1\] = -1 is negative"),
    (lambda a: a.update(q=np.repeat(a["q"], 10, axis=2)), ValueError,
     r"'seq_lens'\[1\] = 9 is less than the 10 new tokens of 'q' \(dim 2\)"),
    (lambda a: a.update(seq_lens=np.array([33, 9], np.int32)), ValueError,
     r"'seq_lens'\[0\] = 33 is past the end of 'block_table', which holds 32"),
    (lambda a: a["block_table"].__setitem__((1, 0), -1), ValueError,
     r"'block_table'\[1, 0\] = -1 is not a page of the caches"),
    (lambda a: a["block_table"].__setitem__((0, 1), a["k_cache"].shape[0]), ValueError,
     r"'block_table'\[0, 1\] = 6 is not a page of the caches \(0 <= id < 6\); sequence 0 uses it for "
     r"positions 16..19"),
])
def test_paged_attention_refuses(change, error, match):
    arguments = decode_inputs()
    change(arguments)
    with pytest.raises(error, match=match):
        kiln.ops.paged_attention(**arguments)


def append_inputs():
    arguments = decode_inputs()
    rng, _ = fresh_rng()
    k = rng.standard_normal((2, 2, 3, 64)).astype(np.float32)
    return dict(k_cache=arguments["k_cache"], v_cache=arguments["v_cache"], k=k, v=k.copy(),
                block_table=arguments["block_table"], positions=np.array([17, 6], np.int32))


def test_append_kv_accepts_the_clean_inputs():
    k_cache, v_cache = kiln.ops.append_kv(**append_inputs())
    assert k_cache.shape == v_cache.shape == (6, 16, 2, 64)


@pytest.mark.parametrize("change,error,match", [
    (lambda a: a.update(positions=a["positions"].astype(np.int64)), TypeError, "'positions' has dtype int64"),
    (lambda a: a.update(k=a["k"].astype(ml_dtypes.bfloat16)), TypeError, "'k' has dtype bfloat16"),
    (lambda a: a.update(k=a["k"][:, :1], v=a["v"][:, :1]), ValueError, "'k' has 1 heads of dim 64"),
    (lambda a: a.update(v=a["v"][:, :, :2]), ValueError, "'v' has shape"),
    (lambda a: a.update(positions=np.array([-2, 6], np.int32)), ValueError, r"'positions'\[0\] = -2 is negative"),
    (lambda a: a.update(positions=np.array([17, 30], np.int32)), ValueError,
     r"'positions'\[1\] = 30 plus the 3 new tokens of 'k' \(dim 2\) is past the end of 'block_table'"),
    (lambda a: a["block_table"].__setitem__((1, 0), 99), ValueError,
     r"'block_table'\[1, 0\] = 99 is not a page of the caches"),
    (lambda a: (a["block_table"].__setitem__((1, 0), a["block_table"][0, 1]),
                a.update(positions=np.array([17, 1], np.int32))), ValueError,
     r"'block_table' sends position 17 of sequence 0 and position 1 of sequence 1 to the same slot"),
])
def test_append_kv_refuses(change, error, match):
    arguments = append_inputs()
    change(arguments)
    with pytest.raises(error, match=match):
        kiln.ops.append_kv(**arguments)


@pytest.mark.parametrize("batch,keys,kernels", [(1, 8192, ["kiln.rms_norm", "kiln.matmul", "kiln.rope",
                                                           "kiln.append_kv", "kiln.attention", "kiln.merge_splits",
                                                           "kiln.matmul", "kiln.rms_norm", "kiln.matmul",
                                                           "kiln.sum_splits", "kiln.matmul", "kiln.sum_splits"]),
                                                (32, 4096, ["kiln.rms_norm", "kiln.matmul", "kiln.rope",
                                                            "kiln.append_kv", "kiln.attention", "kiln.matmul",
                                                            "kiln.rms_norm", "kiln.matmul", "kiln.matmul",
                                                            "kiln.matmul", "kiln.sum_splits"])],
                         ids=["b1_kv8192", "b32_kv4096"])
def test_decode_layer_plan_for_the_gpu(batch, keys, kernels, tmp_path, monkeypatch):
    """The Llama decode layer at bench/decode_layer.py's sizes (4096 hidden, 32/8 heads of 128, 14336 MLP, bf16,
    128-row pages) compiles for sm_90a to its run plan: at batch 1 twelve kernels (the split attention and its
    merge; the split projections' sums computed by RoPE, the append, the next norm and the next sums), at batch
    32 eleven. Pins the plan that the decode-layer benchmark times."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    bf16, i32 = ml_dtypes.bfloat16, np.int32
    pages = batch * keys // 128 + 7
    shapes = [((batch, 4096), bf16), ((batch, 64), bf16), ((batch, 64), bf16), ((pages, 128, 8, 128), bf16),
              ((pages, 128, 8, 128), bf16), ((batch, keys // 128), i32), ((batch,), i32), ((batch,), i32),
              ((4096,), bf16), ((4096, 4096), bf16), ((4096, 1024), bf16), ((4096, 1024), bf16),
              ((4096, 4096), bf16), ((4096,), bf16), ((4096, 14336), bf16), ((4096, 14336), bf16),
              ((14336, 4096), bf16)]
    program = kiln.compile(decode_layer.source(*[np.zeros(shape, dtype) for shape, dtype in shapes]),
                           target="sm_90a")
    assert [kernel.get("op") for kernel in program.kernels] == kernels, program.kernels
