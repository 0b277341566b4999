"""kiln.ops.attention over packed variable-length sequences (cu_seqlens) on the host target, against float64 numpy.

Every case draws a fresh seed (recorded in the worst-error summary and in each failure) and random lengths: one
token, lengths that do not divide the tiles, sequences with more keys than queries (chunked prefill), empty
sequences, GQA. The reference runs each sequence on its own, causal bottom-right within it. Tolerance: 1e-4
relative in the max norm for f32, 2e-2 for bf16 (inputs rounded to bf16 before the reference sees them). The
error tests check that bad offsets, shapes and combinations raise exceptions naming the argument.
"""

import ml_dtypes
import numpy as np
import pytest

from numerics import check, fresh_rng, kiln


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def varlen_reference(q, k, v, cu_q, cu_k, causal, scale):
    """float64 attention of each packed sequence alone."""
    heads, kv_heads = q.shape[1], k.shape[1]
    out = np.zeros((q.shape[0], heads, v.shape[2]))
    for s in range(len(cu_q) - 1):
        qs = q[cu_q[s]:cu_q[s + 1]].astype(np.float64)
        ks = np.repeat(k[cu_k[s]:cu_k[s + 1]].astype(np.float64), heads // kv_heads, axis=1)
        vs = np.repeat(v[cu_k[s]:cu_k[s + 1]].astype(np.float64), heads // kv_heads, axis=1)
        if qs.shape[0] == 0:
            continue
        scores = np.einsum("qhd,khd->hqk", qs, ks) * scale
        if causal:
            lq, lk = qs.shape[0], ks.shape[0]
            scores[:, np.arange(lk)[None, :] > np.arange(lq)[:, None] + (lk - lq)] = -np.inf
        # A query that sees no key (none in its sequence, or before the causal diagonal) gives zeros.
        top = scores.max(axis=-1, keepdims=True, initial=-np.inf)
        probs = np.exp(scores - np.where(np.isneginf(top), 0, top))
        total = probs.sum(axis=-1, keepdims=True)
        out[cu_q[s]:cu_q[s + 1]] = np.einsum("hqk,khd->qhd", probs / np.where(total == 0, 1, total), vs)
    return out


CASES = [  # batch, q heads, kv heads, head dim, chunked (more keys than queries), dtype
    pytest.param(1, 4, 4, 64, False, np.float32, id="b1-mha-d64"),
    pytest.param(4, 8, 2, 64, False, np.float32, id="b4-gqa-d64"),
    pytest.param(3, 4, 1, 128, True, np.float32, id="b3-mqa-d128-chunked"),
    pytest.param(5, 4, 2, 32, True, ml_dtypes.bfloat16, id="b5-gqa-d32-chunked-bf16"),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("batch,heads,kv_heads,head_dim,chunked,dtype", CASES)
def test_varlen_attention(batch, heads, kv_heads, head_dim, chunked, dtype, causal, record_error):
    rng, seed = fresh_rng()
    lengths_q = rng.integers(1, 90, size=batch)
    lengths_q[0] = 1
    lengths_k = lengths_q + (rng.integers(0, 40, size=batch) if chunked else 0)
    if batch > 2:  # an empty sequence between others
        lengths_q[1] = lengths_k[1] = 0
    cu_q, cu_k = offsets(lengths_q), offsets(lengths_k)
    q = rng.standard_normal((cu_q[-1], heads, head_dim)).astype(dtype)
    k = rng.standard_normal((cu_k[-1], kv_heads, head_dim)).astype(dtype)
    v = rng.standard_normal((cu_k[-1], kv_heads, head_dim)).astype(dtype)
    out = kiln.ops.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert out.shape == q.shape and out.dtype == dtype
    reference = varlen_reference(q, k, v, cu_q, cu_k, causal, 1 / np.sqrt(head_dim))
    name = "bf16" if dtype == ml_dtypes.bfloat16 else "f32"
    check(record_error, f"varlen attention {name}", out, reference, seed,
          tolerance=2e-2 if dtype == ml_dtypes.bfloat16 else 1e-4)


def test_varlen_reads_new_offsets_without_recompiling():
    """The tables are arguments of one program: new lengths with the same packed sizes reuse it."""
    rng, seed = fresh_rng()
    q = rng.standard_normal((40, 2, 32)).astype(np.float32)
    k = rng.standard_normal((40, 2, 32)).astype(np.float32)

    def programs():
        return sum(len(function.programs) for function in kiln.ops._MOD_ATTENTIONS.values())

    counts = []
    for cut in (7, 19, 33):
        cu = np.array([0, cut, 40], np.int32)
        out = kiln.ops.attention(q, k, k, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu)
        check(lambda *args: None, "varlen", out, varlen_reference(q, k, k, cu, cu, True, 1 / np.sqrt(32)), seed)
        counts.append(programs())
    assert counts[0] == counts[1] == counts[2]


BAD = [
    (dict(cu_seqlens_q=np.array([0, 4, 10], np.int32)), ValueError, "takes both 'cu_seqlens_q' and 'cu_seqlens_k'"),
    (dict(cu_seqlens_q=np.array([0, 4, 10], np.int32), cu_seqlens_k=np.array([0, 4, 9], np.int32)), ValueError,
     "'cu_seqlens_k'\\[-1\\] = 9, but the packed tensor holds 10 tokens"),
    (dict(cu_seqlens_q=np.array([1, 4, 10], np.int32), cu_seqlens_k=np.array([0, 4, 10], np.int32)), ValueError,
     "'cu_seqlens_q'\\[0\\] = 1; the first sequence starts at 0"),
    (dict(cu_seqlens_q=np.array([0, 6, 4, 10], np.int32), cu_seqlens_k=np.array([0, 2, 4, 10], np.int32)),
     ValueError, "'cu_seqlens_q' decreases at entry 2 \\(6 then 4\\)"),
    (dict(cu_seqlens_q=np.array([0, 4, 10], np.int32), cu_seqlens_k=np.array([0, 10], np.int32)), ValueError,
     "'cu_seqlens_q' describes 2 sequences and 'cu_seqlens_k' 1"),
    (dict(cu_seqlens_q=np.array([0.0, 10.0]), cu_seqlens_k=np.array([0, 10], np.int32)), TypeError,
     "'cu_seqlens_q' must hold integers \\(int32\\), got float64"),
    (dict(cu_seqlens_q=np.array([[0, 10]], np.int32), cu_seqlens_k=np.array([0, 10], np.int32)), ValueError,
     "'cu_seqlens_q' must be 1-D with at least 2 entries"),
    (dict(cu_seqlens_q=np.array([0, 10], np.int32), cu_seqlens_k=np.array([0, 10], np.int32),
          mask_mod=lambda b, h, q, kv: kv >= 0), ValueError, "do not combine with 'mask', 'score_mod' or 'mask_mod'"),
]


@pytest.mark.parametrize("arguments,error,message", BAD)
def test_varlen_bad_arguments(arguments, error, message):
    q = np.zeros((10, 2, 16), np.float32)
    with pytest.raises(error, match=message):
        kiln.ops.attention(q, q, q, **arguments)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_queries_that_see_no_key_give_zeros(causal, record_error):
    """A sequence with queries but no keys, and with causal one with more queries than keys (its first queries
    stand before every key), give those queries zeros, as flash_attn_varlen does; the others are unchanged."""
    rng, seed = fresh_rng()
    lengths_q, lengths_k = np.array([5, 70, 3, 40]), np.array([9, 0, 1, 100])
    cu_q, cu_k = offsets(lengths_q), offsets(lengths_k)
    q = rng.standard_normal((cu_q[-1], 4, 32)).astype(np.float32)
    k, v = (rng.standard_normal((cu_k[-1], 2, 32)).astype(np.float32) for _ in range(2))
    out = kiln.ops.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert not np.any(out[cu_q[1]:cu_q[2]]), "the sequence without keys"
    if causal:
        assert not np.any(out[cu_q[2]:cu_q[2] + 2]), "the queries before the causal diagonal"
    check(record_error, "varlen attention f32", out, varlen_reference(q, k, v, cu_q, cu_k, causal, 1 / np.sqrt(32)),
          seed)


def test_a_batch_without_keys_gives_zeros():
    q, k = np.ones((3, 2, 16), np.float32), np.ones((0, 1, 16), np.float32)
    out = kiln.ops.attention(q, k, k, causal=True, cu_seqlens_q=np.array([0, 1, 3], np.int32),
                             cu_seqlens_k=np.array([0, 0, 0], np.int32))
    assert out.shape == q.shape and out.dtype == q.dtype and not out.any()


def test_varlen_needs_packed_tensors():
    q = np.zeros((1, 2, 10, 16), np.float32)
    cu = np.array([0, 10], np.int32)
    with pytest.raises(ValueError, match="with cu_seqlens, 'q' is packed \\[tokens, heads, head_dim\\], got shape "
                                         "\\(1, 2, 10, 16\\)"):
        kiln.ops.attention(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu)
