"""FlexAttention-style variants (kiln.ops.attention's score_mod and mask_mod) on the host target.

Each variant is a pair: the mod functions Kiln traces into the attention op, and the same rule written on numpy
index grids for the float64 reference. Fresh seeds every run (recorded with the error), lengths that do not
divide the host tiles, GQA and Sq != Sk; f32 inputs checked to 1e-4 relative in the max norm, bf16 to 2e-2. The
sliding-window variants run with windows and lengths that leave whole key tiles unseen, so the key loop's bounds
from the mask's linear bounds are what is checked; document masks and prefix-LM masks are no conjunction of
linear bounds, so they exercise the path that masks every tile; document spans (each query's first and last key
read from tables the mask promises are nondecreasing) bound the key loop by table reads, and sorted document ids
(promised nondecreasing) by searches of the id table.
"""

import re

import ml_dtypes
import numpy as np
import pytest

from numerics import check, fresh_rng, kiln


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def reference(q, k, v, *, causal=False, scale=None, score=None, visible=None):
    """fp64 attention with the variant's score rule and visibility on [B, H, Sq, Sk] index grids."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    b, hq, sq, d = q.shape
    group = hq // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * (scale if scale is not None else 1 / np.sqrt(d))
    sk = k.shape[2]
    bi, hi, qi, ki = np.meshgrid(np.arange(b), np.arange(hq), np.arange(sq), np.arange(sk), indexing="ij")
    if score is not None:
        s = score(s, bi, hi, qi, ki)
    hidden = np.zeros(s.shape, bool)
    if causal:
        hidden |= ki > qi + (sk - sq)
    if visible is not None:
        hidden |= ~visible(bi, hi, qi, ki)
    s = np.where(hidden, -np.inf, s)
    # A row that sees no key gives zeros (as torch's SDPA and FlashAttention).
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isneginf(m), 0, m))
    total = p.sum(-1, keepdims=True)
    return (p / np.where(total == 0, 1, total)) @ v


CAP = 20.0


def variants(rng, hq, sq, sk):
    """name -> (score_mod, mask_mod, causal, numpy score rule, numpy visibility)."""
    slopes = (2.0 ** -np.arange(1, hq + 1)).astype(np.float32)
    table = randn(rng, hq, sq + sk - 1)
    docs = np.sort(rng.integers(0, 4, sk)).astype(np.int32)
    shift = sk - sq  # bottom-right alignment of the diagonal
    # Each query's document span over the keys (query q stands at key q + shift): nondecreasing in q.
    span_first = np.searchsorted(docs, docs[shift:], side="left").astype(np.int32)
    span_last = (np.searchsorted(docs, docs[shift:], side="right") - 1).astype(np.int32)
    spans = kiln.mods.promise_nondecreasing(lambda b, h, q, kv: (kv >= span_first[q]) & (kv <= span_last[q]),
                                            span_first, span_last)
    window = 40
    return {
        "softcap": (lambda s, b, h, q, kv: CAP * kiln.tanh(s / CAP), None, False,
                    lambda s, b, h, q, kv: CAP * np.tanh(s / CAP), None),
        "alibi": (lambda s, b, h, q, kv: s + slopes[h] * (kv - q), None, True,
                  lambda s, b, h, q, kv: s + slopes[h] * (kv - q), None),
        "relative_bias_table": (lambda s, b, h, q, kv: s + table[h, q - kv + (sk - 1)], None, False,
                                lambda s, b, h, q, kv: s + table[h, q - kv + (sk - 1)], None),
        "sliding_window": (None, lambda b, h, q, kv: (q + shift - kv < window) & (kv <= q + shift), False,
                           None, lambda b, h, q, kv: (q + shift - kv < window) & (kv <= q + shift)),
        "sliding_window_causal_softcap": (lambda s, b, h, q, kv: CAP * kiln.tanh(s / CAP),
                                          lambda b, h, q, kv: q + shift - kv < window, True,
                                          lambda s, b, h, q, kv: CAP * np.tanh(s / CAP),
                                          lambda b, h, q, kv: q + shift - kv < window),
        "document": (None, lambda b, h, q, kv: docs[q + shift] == docs[kv], False,
                     None, lambda b, h, q, kv: docs[q + shift] == docs[kv]),
        "document_spans": (None, spans, False, None, lambda b, h, q, kv: docs[q + shift] == docs[kv]),
        "document_sorted": (None, kiln.mods.promise_nondecreasing(lambda b, h, q, kv: docs[q + shift] == docs[kv],
                                                                  docs), False,
                            None, lambda b, h, q, kv: docs[q + shift] == docs[kv]),
        "prefix_lm": (None, lambda b, h, q, kv: (kv <= q + shift) | (kv < 24), False,
                      None, lambda b, h, q, kv: (kv <= q + shift) | (kv < 24)),
    }


NAMES = ["softcap", "alibi", "relative_bias_table", "sliding_window", "sliding_window_causal_softcap", "document",
         "document_spans", "document_sorted", "prefix_lm"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(2, 4, 2, 77, 77, 32), (1, 2, 1, 50, 203, 64)])
def test_variant_f32(name, shape, record_error):
    rng, seed = fresh_rng()
    b, hq, hk, sq, sk, d = shape
    q, k, v = randn(rng, b, hq, sq, d), randn(rng, b, hk, sk, d), randn(rng, b, hk, sk, d)
    score_mod, mask_mod, causal, score, visible = variants(rng, hq, sq, sk)[name]
    out = kiln.ops.attention(q, k, v, causal=causal, score_mod=score_mod, mask_mod=mask_mod)
    expected = reference(q, k, v, causal=causal, score=score, visible=visible)
    check(record_error, f"flex attention: {name} f32", out, expected, seed)


@pytest.mark.parametrize("name", ["softcap", "alibi", "sliding_window"])
def test_variant_bf16(name, record_error):
    rng, seed = fresh_rng()
    b, hq, hk, sq, sk, d = 1, 4, 1, 70, 150, 64
    q, k, v = (randn(rng, b, h, s, d).astype(ml_dtypes.bfloat16) for h, s in ((hq, sq), (hk, sk), (hk, sk)))
    score_mod, mask_mod, causal, score, visible = variants(rng, hq, sq, sk)[name]
    out = kiln.ops.attention(q, k, v, causal=causal, score_mod=score_mod, mask_mod=mask_mod)
    expected = reference(q, k, v, causal=causal, score=score, visible=visible)
    check(record_error, f"flex attention: {name} bf16", out.astype(np.float32), expected, seed, tolerance=2e-2)


def test_tables_are_read_on_every_call(record_error):
    """A new table of the same shape reuses the program and is read, not baked in."""
    rng, seed = fresh_rng()
    q, k, v = randn(rng, 1, 2, 33, 32), randn(rng, 1, 2, 33, 32), randn(rng, 1, 2, 33, 32)
    for _ in range(2):
        slopes = randn(rng, 2)
        out = kiln.ops.attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s + slopes[h] * (kv - qi))
        expected = reference(q, k, v, score=lambda s, b, h, qi, kv: s + slopes[h] * (kv - qi))
        check(record_error, "flex attention: alibi f32", out, expected, seed)


def test_jit_function_with_a_mod_over_an_argument(record_error):
    """Inside @kiln.jit a mod closes over a traced argument: it becomes the op's mod operand."""
    rng, seed = fresh_rng()

    @kiln.jit
    def biased(q, k, v, bias):
        return kiln.attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s + bias[qi, kv])

    q, k, v, bias = randn(rng, 1, 2, 40, 16), randn(rng, 1, 2, 90, 16), randn(rng, 1, 2, 90, 16), randn(rng, 40, 90)
    expected = reference(q, k, v, score=lambda s, b, h, qi, kv: s + bias[qi, kv])
    check(record_error, "flex attention: jit bias f32", biased(q, k, v, bias), expected, seed)


def test_a_table_read_out_of_bounds_gives_zero(record_error):
    rng, seed = fresh_rng()
    q, k, v = randn(rng, 1, 1, 20, 16), randn(rng, 1, 1, 20, 16), randn(rng, 1, 1, 20, 16)
    bias = randn(rng, 10)
    out = kiln.ops.attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s + bias[kv - 5])
    padded = np.concatenate([np.zeros(5, np.float32), bias, np.zeros(10, np.float32)])
    expected = reference(q, k, v, score=lambda s, b, h, qi, kv: s + padded[kv])
    check(record_error, "flex attention: out-of-bounds table f32", out, expected, seed)


@pytest.mark.parametrize("score_mod,mask_mod,message", [
    (lambda s, b, h, q, kv: s if q > kv else -s, None, "no truth value"),
    (None, lambda b, h, q, kv: q - kv, "mask_mod must return a visibility"),
    (lambda s, b, h, q, kv: "x", None, "score_mod must return the new score"),
    ("softcap", None, "must be Python functions"),
    (None, lambda b, h, q, kv: [0, 1][q] == 0, "cannot index a Python sequence"),
    (lambda s, b, h, q, kv: kiln.where(kv <= q, kv < q, 1.0), None, "two visibilities or two numbers"),
])
def test_bad_mods_name_the_problem(score_mod, mask_mod, message):
    q = np.zeros((1, 1, 8, 16), np.float32)
    with pytest.raises(TypeError, match=message):
        kiln.ops.attention(q, q, q, score_mod=score_mod, mask_mod=mask_mod)


def test_softcap_written_out_fuses_into_one_attention(record_error):
    """Gemma 2's softcap written op by op (scores, scale, cap * tanh(s / cap), softmax, values) becomes one
    kiln.attention with a score_mod (kiln-fuse-attention), not four kernels with the scores in memory."""
    rng, seed = fresh_rng()

    @kiln.jit
    def gemma_attention(q, k, v):
        s = kiln.matmul(q, kiln.transpose(k, [0, 1, 3, 2])) * 0.125
        s = kiln.tanh(s / CAP) * CAP
        return kiln.matmul(kiln.softmax(s, axis=-1), v)

    q, k, v = randn(rng, 1, 2, 70, 64) * 3, randn(rng, 1, 2, 90, 64) * 3, randn(rng, 1, 2, 90, 64)
    fused = kiln.compile(gemma_attention.source(q, k, v)).ir("fused")
    assert "score_mod" in fused and "math.tanh" in fused
    assert "kiln.softmax" not in fused and "kiln.tanh" not in fused
    expected = reference(q, k, v, scale=0.125, score=lambda s, b, h, qi, kv: CAP * np.tanh(s / CAP))
    check(record_error, "flex attention: softcap written out f32", gemma_attention(q, k, v), expected, seed)


def test_a_score_mod_may_write_minus_infinity(record_error):
    """flex_attention's way to hide a key from a score_mod: where(visible, s, -inf)."""
    rng, seed = fresh_rng()
    q, k, v = randn(rng, 1, 2, 30, 16), randn(rng, 1, 2, 30, 16), randn(rng, 1, 2, 30, 16)
    out = kiln.ops.attention(q, k, v, score_mod=lambda s, b, h, qi, kv: kiln.where(kv <= qi, s, -float("inf")))
    check(record_error, "flex attention: -inf score_mod f32", out, reference(q, k, v, causal=True), seed)


def test_mods_that_differ_only_in_a_default_argument_are_different_programs(record_error):
    """The loop idiom `lambda ..., w=w:` binds each window as a default: each gets its own program."""
    rng, seed = fresh_rng()
    q, k, v = randn(rng, 1, 1, 40, 16), randn(rng, 1, 1, 40, 16), randn(rng, 1, 1, 40, 16)
    for window in (2, 5):
        out = kiln.ops.attention(q, k, v, mask_mod=lambda b, h, qi, kv, w=window: (qi - kv < w) & (kv <= qi))
        expected = reference(q, k, v, visible=lambda b, h, qi, kv: (qi - kv < window) & (kv <= qi))
        check(record_error, "flex attention: window by default argument f32", out, expected, seed)


def test_promised_tables_bound_the_key_loops(record_error):
    """Document spans of 100, 130 and 70 tokens: the op carries the promise (test/Transforms/tile.mlir pins the
    key loops it bounds), with the same results as the reference."""
    rng, seed = fresh_rng()
    docs = np.repeat(np.arange(3, dtype=np.int32), [100, 130, 70])
    first = np.searchsorted(docs, docs, side="left").astype(np.int32)
    last = (np.searchsorted(docs, docs, side="right") - 1).astype(np.int32)
    mask_mod = kiln.mods.promise_nondecreasing(lambda b, h, q, kv: (kv >= first[q]) & (kv <= last[q]), first, last)
    q, k, v = randn(rng, 1, 2, 300, 32), randn(rng, 1, 1, 300, 32), randn(rng, 1, 1, 300, 32)
    source = kiln.ops.attention.source(q, k, v, mask_mod=mask_mod)
    assert "nondecreasing_tables = array<i64: 0, 1>" in source
    out = kiln.ops.attention(q, k, v, mask_mod=mask_mod)
    expected = reference(q, k, v, visible=lambda b, h, qi, kv: docs[qi] == docs[kv])
    check(record_error, "flex attention: promised document spans f32", out, expected, seed)


@pytest.mark.parametrize("causal", [False, True])
def test_sorted_document_ids_bound_the_key_loops(causal, record_error):
    """Sorted document ids over 700 keys (runs of 1 to about 120 tokens, ids that skip values, Sq < Sk): each
    query tile searches the ids for its documents' keys (test/Transforms/tile.mlir pins the searches), with the
    same results as the reference."""
    rng, seed = fresh_rng()
    sq, sk = 450, 700
    docs = np.cumsum(rng.random(sk) < rng.uniform(0.01, 0.1)).astype(np.int32) * 3
    docs[sk // 2] = docs[sk // 2 - 1] + 1  # a one-token document
    docs[sk // 2 + 1:] += 2
    shift = sk - sq
    mask_mod = kiln.mods.promise_nondecreasing(lambda b, h, q, kv: docs[q + shift] == docs[kv], docs)
    q, k, v = randn(rng, 1, 4, sq, 32), randn(rng, 1, 2, sk, 32), randn(rng, 1, 2, sk, 32)
    assert "nondecreasing_tables = array<i64: 0>" in kiln.ops.attention.source(q, k, v, mask_mod=mask_mod)
    out = kiln.ops.attention(q, k, v, causal=causal, mask_mod=mask_mod)
    expected = reference(q, k, v, causal=causal, visible=lambda b, h, qi, kv: docs[qi + shift] == docs[kv])
    check(record_error, "flex attention: sorted document ids f32", out, expected, seed)


def test_a_promise_holds_for_new_arrays_behind_the_same_closure():
    """A loop that rebinds the table a promised mask_mod closes over, at a new shape each time: every call's
    program carries the promise (the cached trace once read the first call's promise, which names an array the
    closure no longer holds, and lost it)."""
    for length in (96, 160):
        docs = np.repeat(np.arange(4, dtype=np.int32), length // 4)
        mask_mod = kiln.mods.promise_nondecreasing(lambda b, h, q, kv: docs[q] == docs[kv], docs)
        q = np.zeros((1, 1, length, 16), np.float32)
        assert "nondecreasing_tables = array<i64: 0>" in kiln.ops.attention.source(q, q, q, mask_mod=mask_mod)


@pytest.mark.parametrize("table, message", [
    (np.array([0, 2, 1], np.int32), "table 0 decreases at entry 2 (2 then 1)"),
    (np.zeros((2, 2), np.int32), "table 0 must be a 1-D integer array, got int32 of shape (2, 2)"),
    (np.zeros(3, np.float32), "table 0 must be a 1-D integer array, got float32 of shape (3,)"),
])
def test_a_broken_promise_is_refused(table, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        kiln.mods.promise_nondecreasing(lambda b, h, q, kv: kv >= table[q], table)
    with pytest.raises(TypeError, match="takes the mask_mod function first"):
        kiln.mods.promise_nondecreasing(table, table)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("sq, sk", [(5, 7), (150, 230)])
def test_a_query_row_that_sees_no_key_gives_zeros(sq, sk, dtype, record_error):
    """Rows no key is visible to give zeros, as torch's SDPA, ONNX's Attention and FlashAttention give, not NaN:
    hidden by a mask_mod whose linear bounds leave whole query tiles without a key tile (the key loop runs no
    tile), by a mask_mod the kernel evaluates on every tile, and by an additive mask of -inf; one key tile (the
    softmax of a single tile) and several (the online softmax)."""
    rng, seed = fresh_rng()
    q, k, v = randn(rng, 1, 4, sq, 32, dtype=dtype), randn(rng, 1, 2, sk, 32, dtype=dtype), \
        randn(rng, 1, 2, sk, 32, dtype=dtype)
    dead = np.zeros(sq, bool)
    dead[rng.choice(sq, max(1, sq // 5), replace=False)] = True
    alive = (~dead).astype(np.int32)
    late = sq * 3 // 4  # the queries before it see no key under the linear bound
    additive = np.broadcast_to(np.where(dead[:, None], -np.inf, 0).astype(dtype), (1, 1, sq, sk)).copy()
    cases = {
        "linear bound": (dict(mask_mod=lambda b, h, qi, kv: kv + late <= qi), lambda b, h, qi, kv: kv + late <= qi),
        "table": (dict(mask_mod=lambda b, h, qi, kv: alive[qi] == 1), lambda b, h, qi, kv: ~dead[qi]),
        "additive": (dict(mask=additive), lambda b, h, qi, kv: ~dead[qi]),
    }
    tolerance = 1e-4 if dtype == np.float32 else 2e-2
    for name, (arguments, visible) in cases.items():
        out = np.asarray(kiln.ops.attention(q, k, v, **arguments)).astype(np.float64)
        expected = reference(q, k, v, visible=visible)
        empty = ~visible(0, 0, np.arange(sq)[:, None], np.arange(sk)[None]).any(-1)
        assert empty.any(), name
        assert np.array_equal(out[:, :, empty], np.zeros_like(out[:, :, empty])), f"{name}: rows without keys"
        check(record_error, f"flex attention: rows without keys, {name}", out, expected, seed, tolerance)


@pytest.mark.parametrize("cap", [30.0, 50.0])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_softcap_rows_far_below_their_bound(cap, dtype, record_error):
    """A softcap bounds the scores to [-cap, cap], so kiln-online-softmax takes cap as a fixed maximum where that
    range fits f32 (cap 30; cap 50 keeps the running maximum: test/Transforms/online-softmax.mlir). Rows whose
    scores all sit near -cap, 2 cap below that maximum, must still normalise: queries against keys pointing
    the other way (every score saturated), half the rows also seeing one key near +cap, and a fully masked row
    (a window before its keys) giving zeros."""
    rng, seed = fresh_rng()
    b, h, sq, sk, d = 1, 2, 40, 96, 32
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    q = np.broadcast_to(8 * np.sqrt(d) * direction, (b, h, sq, d)) + 0.1 * randn(rng, b, h, sq, d)
    k = np.broadcast_to(-8 * direction, (b, h, sk, d)) + 0.1 * randn(rng, b, h, sk, d)
    k[:, :, sk - sq // 2] = 8 * direction  # one key with a score near +cap, seen by the rows from sq // 2 on
    v = randn(rng, b, h, sk, d)
    tanh = kiln.tanh
    score_mod = lambda s, bi, hi, qi, kv: cap * tanh(s / cap)  # noqa: E731
    # Row 0 sees no key (its window ends before key 0); the others see keys up to their diagonal.
    mask_mod = lambda bi, hi, qi, kv: (kv <= qi + (sk - sq)) & (qi > 0)  # noqa: E731
    visible = lambda bi, hi, qi, kv: (kv <= qi + (sk - sq)) & (qi > 0)  # noqa: E731
    score = lambda s, bi, hi, qi, kv: cap * np.tanh(s / cap)  # noqa: E731
    q, k = np.ascontiguousarray(q, dtype=np.float32), np.ascontiguousarray(k, dtype=np.float32)
    if dtype == "bf16":
        q, k, v = (x.astype(ml_dtypes.bfloat16) for x in (q, k, v))
    out = kiln.ops.attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod)
    expected = reference(q, k, v, score=score, visible=visible)
    assert np.all(out[:, :, 0].astype(np.float32) == 0), "the row that sees no key must be zeros"
    check(record_error, f"flex attention: softcap {cap:g} far below its bound {dtype}", out.astype(np.float32),
          expected, seed, tolerance=2e-2 if dtype == "bf16" else 1e-4)
