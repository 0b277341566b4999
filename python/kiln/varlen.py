"""Variable-length attention: packed sequences described by ``cu_seqlens``, as flash_attn_varlen takes them.

Why: a batch of prompts of different lengths is packed along one token axis (no padding) and attention must not
cross from one sequence into another. The packed attention is an ordinary kiln.attention over the whole token
axis with a mask_mod that reads two tables built here from ``cu_seqlens``: each query's first and last visible
key (its sequence's first key; its sequence's last key, or with ``causal`` its bottom-right diagonal). Both
rise with the query, which the mask promises (kiln.mods.promise_nondecreasing), so the kernel runs each query
tile over the key tiles of its own sequences only: a packed batch costs what its sequences cost. The tables are
built on the host; for CUDA tensors they are copied to the device, where the kernel reads them like any
mask_mod table.
"""

import numpy as np

from . import mods

OP = "attention"


def _lengths(name, cu_seqlens, total):
    """``cu_seqlens`` as int64 numpy, checked against the packed length ``total``: [0, ..., total], rising."""
    if hasattr(cu_seqlens, "detach"):  # a torch tensor, on any device
        cu_seqlens = cu_seqlens.detach().cpu().numpy()
    offsets = np.asarray(cu_seqlens)
    if offsets.ndim != 1 or offsets.size < 2:
        raise ValueError(f"{OP}: '{name}' must be 1-D with at least 2 entries (batch + 1), got shape "
                         f"{tuple(offsets.shape)}")
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"{OP}: '{name}' must hold integers (int32), got {offsets.dtype}")
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0:
        raise ValueError(f"{OP}: '{name}'[0] = {offsets[0]}; the first sequence starts at 0")
    falls = np.flatnonzero(np.diff(offsets) < 0)
    if falls.size:
        i = int(falls[0])
        raise ValueError(f"{OP}: '{name}' decreases at entry {i + 1} ({offsets[i]} then {offsets[i + 1]})")
    if offsets[-1] != total:
        raise ValueError(f"{OP}: '{name}'[-1] = {offsets[-1]}, but the packed tensor holds {total} tokens")
    return offsets


def tables(q_tokens, k_tokens, cu_seqlens_q, cu_seqlens_k, causal):
    """(first_key, last_key, packed_causal): int32 tables of each query's first and last visible key, both
    nondecreasing, and whether the packed tensors' own causal diagonal (key j for query i when j <= i + Tk - Tq)
    holds wherever the tables let a query see a key, so that the attention may take it as its causal flag: with
    causal, when no sequence's diagonal lies beyond it."""
    starts_q = _lengths("cu_seqlens_q", cu_seqlens_q, q_tokens)
    starts_k = _lengths("cu_seqlens_k", cu_seqlens_k, k_tokens)
    if starts_q.size != starts_k.size:
        raise ValueError(f"{OP}: 'cu_seqlens_q' describes {starts_q.size - 1} sequences and 'cu_seqlens_k' "
                         f"{starts_k.size - 1}")
    lengths_q = np.diff(starts_q)
    seq_q = np.repeat(np.arange(starts_q.size - 1), lengths_q)
    ends_q, ends_k = starts_q[1:], starts_k[1:]
    # Query i of sequence s sees keys from the sequence's first, up to i + (end_k[s] - end_q[s]) with causal
    # (bottom-right), else to the sequence's last key. A query that sees no key (a sequence without keys, or with
    # causal one of a sequence's first queries when it has more queries than keys) gets last = first - 1, the
    # empty span, and gives zeros, as flash_attn_varlen does. Both tables rise with i: a sequence's keys follow
    # the previous one's, whose last key is this one's first - 1.
    first = starts_k[:-1][seq_q]
    last = np.arange(q_tokens, dtype=np.int64) + (ends_k - ends_q)[seq_q] if causal else (ends_k - 1)[seq_q]
    last = np.maximum(last, first - 1)
    offsets = (ends_k - ends_q)[lengths_q > 0]  # the diagonals of the sequences that have queries
    packed_causal = causal and q_tokens <= k_tokens and bool(np.all(offsets <= k_tokens - q_tokens))
    return first.astype(np.int32), last.astype(np.int32), packed_causal


def attention(q, k, v, cu_seqlens_q, cu_seqlens_k, causal, scale, run):
    """The packed attention of ``q`` [Tq, Hq, D], ``k``, ``v`` [Tk, Hkv, D]: [Tq, Hq, Dv], each token attending
    only within its sequence. ``run(q, k, v, causal, scale, mask_mod)`` is kiln.ops.attention on [B, H, S, D]."""
    for name, value in (("q", q), ("k", k), ("v", v)):
        if len(value.shape) != 3:
            raise ValueError(f"{OP}: with cu_seqlens, '{name}' is packed [tokens, heads, head_dim], got shape "
                             f"{tuple(value.shape)}")
    first, last, packed_causal = tables(q.shape[0], k.shape[0], cu_seqlens_q, cu_seqlens_k, causal)
    if k.shape[0] == 0:  # no sequence has a key: every query gives zeros
        shape = (q.shape[0], q.shape[1], v.shape[2])
        return np.zeros(shape, q.dtype) if isinstance(q, np.ndarray) else q.new_zeros(shape)
    if hasattr(q, "device") and not isinstance(q, np.ndarray):  # torch tensors: tables on q's device
        import torch
        first, last = (torch.from_numpy(t).to(q.device) for t in (first, last))
        heads_first = (lambda t: t.transpose(0, 1).unsqueeze(0).contiguous())  # noqa: E731
        tokens_first = (lambda t: t[0].transpose(0, 1).contiguous())  # noqa: E731
    else:
        heads_first = (lambda t: np.ascontiguousarray(np.transpose(t, (1, 0, 2))[None]))  # noqa: E731
        tokens_first = (lambda t: np.ascontiguousarray(np.transpose(t[0], (1, 0, 2))))  # noqa: E731

    def same_sequence(b, h, q_idx, kv_idx):
        return (kv_idx >= first[q_idx]) & (kv_idx <= last[q_idx])

    mods.promise_nondecreasing(same_sequence, first, last)
    out = run(heads_first(q), heads_first(k), heads_first(v), packed_causal, scale, same_sequence)
    return tokens_first(out)
