"""Ready-made kernels on numpy arrays: kiln.ops.matmul, attention, softmax, rms_norm, layer_norm, rope, and the
paged KV cache's paged_attention and append_kv.

Each is a one-op ``@kiln.jit`` function over the traced op of the same name (kiln/trace.py), so the argument
checks are those of the tracer and a repeated signature goes straight to the run. matmul's bias and activation
become separate ops that the fusion pass folds into the matmul's epilogue. The paged ops also read their tables
before running: a page id outside the caches or a length past the block table is data no compile-time check
sees, and the compiled op would clamp it rather than fail, so it is refused here, naming the entry.
"""

import inspect

import numpy as np

from . import mods, trace, varlen
from .jit import _constant_key, jit


@jit
def matmul(a, b, *, bias=None, activation=None, fp32_precision=None):
    """``activation(a @ b + bias)`` with numpy batch broadcasting; a: [..., M, K], b: [..., K, N], bias: [N].
    f32 operands multiply on a GPU's TF32 tensor cores unless ``fp32_precision="ieee"`` (f32 accuracy)."""
    return trace.matmul(a, b, bias=bias, activation=activation, fp32_precision=fp32_precision)


@jit
def _attention(q, k, v, *, causal=False, scale=None, mask=None, fp32_precision=None):
    return trace.attention(q, k, v, causal=causal, scale=scale, mask=mask, fp32_precision=fp32_precision)


#: The jitted attention of each pair of mod functions, by what their regions depend on (_mod_key).
_MOD_ATTENTIONS = {}


def attention(q, k, v, *, causal=False, scale=None, mask=None, score_mod=None, mask_mod=None, cu_seqlens_q=None,
              cu_seqlens_k=None, fp32_precision=None):
    """Scaled dot-product attention on [B, H, S, D] (GQA/MQA from the head counts, causal bottom-right).

    ``score_mod(score, b, h, q_idx, kv_idx)`` and ``mask_mod(b, h, q_idx, kv_idx)`` are torch flex_attention's
    functions (kiln/mods.py): traced once into the kernel; the arrays they close over (of the same kind as q:
    numpy arrays, or CUDA tensors) are read on every call.

    With ``cu_seqlens_q`` and ``cu_seqlens_k`` (int32 [B + 1], as flash_attn_varlen takes them) q [Tq, Hq, D], k
    and v [Tk, Hkv, D] hold B sequences packed along the token axis, sequence b in rows ``cu_seqlens[b]`` to
    ``cu_seqlens[b + 1]``; each attends only within itself (causal bottom-right per sequence), and the result is
    [Tq, Hq, Dv] (kiln/varlen.py).

    f32 q, k, v multiply on a GPU's TF32 tensor cores unless ``fp32_precision="ieee"`` (f32 accuracy, 3xTF32)."""
    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("attention: variable-length attention takes both 'cu_seqlens_q' and 'cu_seqlens_k'")
        if mask is not None or score_mod is not None or mask_mod is not None:
            raise ValueError("attention: 'cu_seqlens_q'/'cu_seqlens_k' do not combine with 'mask', 'score_mod' or "
                             "'mask_mod'")
        return varlen.attention(q, k, v, cu_seqlens_q, cu_seqlens_k, causal, scale,
                                lambda q, k, v, causal, scale, mask_mod: attention(
                                    q, k, v, causal=causal, scale=scale, mask_mod=mask_mod,
                                    fp32_precision=fp32_precision))
    function, args, kwargs = _attention_call(q, k, v, causal, scale, mask, score_mod, mask_mod, fp32_precision)
    return function(*args, **kwargs)


def _attention_source(q, k, v, *, causal=False, scale=None, mask=None, score_mod=None, mask_mod=None,
                      fp32_precision=None):
    """The kiln IR kiln.ops.attention traces for these arguments (without compiling it)."""
    function, args, kwargs = _attention_call(q, k, v, causal, scale, mask, score_mod, mask_mod, fp32_precision)
    return function.source(*args, **kwargs)


attention.source = _attention_source
# The plain attention's programs, as the jitted op exposed them (tests and benchmarks read its cache).
attention.programs, attention._fast = _attention.programs, _attention._fast


def _attention_call(q, k, v, causal, scale, mask, score_mod, mask_mod, fp32_precision):
    """The jitted function that runs an attention, and its arguments."""
    options = {"causal": causal, "scale": scale, "fp32_precision": fp32_precision}
    if score_mod is None and mask_mod is None:
        return _attention, (q, k, v), dict(options, mask=mask)
    tables = mods.captured((score_mod, mask_mod), mods.table_kinds(trace.Tensor))
    promised = mods.nondecreasing_positions(mask_mod, tables)
    key = _mod_key(score_mod, mask_mod, len(tables)) + (promised,)
    function = _MOD_ATTENTIONS.get(key)
    if function is None:
        function = _MOD_ATTENTIONS[key] = _mod_attention(score_mod, mask_mod, len(tables), promised)
    return function, (q, k, v, mask, *tables), options


def _mod_key(score_mod, mask_mod, count):
    """What the traced regions depend on: the functions' code, their default arguments and the constants they
    close over, numbers by type and value as @kiln.jit keys them (tables are arguments; other objects, such as
    modules, by identity)."""
    tables = mods.table_kinds(trace.Tensor)

    def constant(value):
        if isinstance(value, np.generic):
            value = value.item()
        return _constant_key(value) if isinstance(value, (bool, int, float, str)) else id(value)

    def of(fn):
        if fn is None:
            return None
        named = sorted((fn.__kwdefaults__ or {}).items()) + sorted(mods.free_values(fn).items())
        return (fn.__code__, tuple(constant(value) for value in fn.__defaults__ or ()),
                tuple((name, constant(value)) for name, value in named if not isinstance(value, tables)))
    return (of(score_mod), of(mask_mod), count)


def _mod_attention(score_mod, mask_mod, count, promised):
    """A jitted attention taking q, k, v, the additive mask and the mods' tables as arguments; ``promised``: the
    positions of the tables promised nondecreasing (part of the cache key, so every call it serves promises
    them, whichever arrays the closures hold when it traces)."""
    names = [f"table{i}" for i in range(count)]
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(name, positional) for name in ["q", "k", "v", "mask"] + names]
    parameters += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY)
                   for name in ("causal", "scale", "fp32_precision")]

    def attention(**arguments):
        # The tables of the functions traced, in the order captured() gives them, as the traced tensors.
        found = mods.captured((score_mod, mask_mod), mods.table_kinds(trace.Tensor))
        tables = {id(value): arguments[name] for value, name in zip(found, names)}
        return trace.attention(arguments["q"], arguments["k"], arguments["v"], causal=arguments["causal"],
                               scale=arguments["scale"], mask=arguments["mask"], score_mod=score_mod,
                               mask_mod=mask_mod, tables=tables, nondecreasing=promised,
                               fp32_precision=arguments["fp32_precision"])

    attention.__signature__ = inspect.Signature(parameters)
    return jit(attention)


@jit
def softmax(x, axis=-1):
    """Softmax of ``x`` along ``axis``."""
    return trace.softmax(x, axis)


@jit
def rms_norm(x, weight, eps=1e-6):
    """RMS normalisation over the last dimension, times ``weight``."""
    return trace.rms_norm(x, weight, eps)


@jit
def layer_norm(x, weight, bias=None, eps=1e-5):
    """Layer normalisation over the last dimension, times ``weight``, plus ``bias`` when given."""
    return trace.layer_norm(x, weight, bias, eps)


@jit
def rope(x, cos, sin, *, interleaved=False, seq_dim=None):
    """Rotary embedding of ``x`` [..., S, D] by ``cos``, ``sin`` [S, D/2] (or by the rows of dimension
    ``seq_dim`` of ``x``)."""
    return trace.rope(x, cos, sin, interleaved=interleaved, seq_dim=seq_dim)


@jit
def _paged_attention(q, k_cache, v_cache, block_table, seq_lens, scale, fp32_precision=None):
    return trace.paged_attention(q, k_cache, v_cache, block_table, seq_lens, scale=scale,
                                 fp32_precision=fp32_precision)


@jit
def _append_kv(k_cache, v_cache, k, v, block_table, positions):
    return trace.append_kv(k_cache, v_cache, k, v, block_table, positions)


def _check_pages(op, block_table, num_pages, page_size, row, first, stop):
    """Checks that the pages holding positions [first, stop) of sequence ``row`` are pages of the caches."""
    if stop <= first:
        return
    columns = np.arange(first // page_size, (stop - 1) // page_size + 1)
    ids = block_table[row, columns]
    bad = np.flatnonzero((ids < 0) | (ids >= num_pages))
    if bad.size:
        column = columns[bad[0]]
        raise ValueError(f"{op}: 'block_table'[{row}, {column}] = {ids[bad[0]]} is not a page of the caches "
                         f"(0 <= id < {num_pages}); sequence {row} uses it for positions "
                         f"{max(first, column * page_size)}..{min(stop, (column + 1) * page_size) - 1}")


def _tables_to_check(*tables):
    """The tables as numpy arrays for the checks before a launch: numpy arrays as they are, torch tensors copied
    to the host (on a GPU, a wait for the tables' producers). None when one is neither."""
    arrays = []
    for table in tables:
        if isinstance(table, np.ndarray):
            arrays.append(table)
        elif type(table).__module__.startswith("torch"):
            arrays.append(table.detach().cpu().numpy())
        else:
            return None
    return arrays


def paged_attention(q, k_cache, v_cache, block_table, seq_lens, *, scale=None, check_tables=True,
                    fp32_precision=None):
    """Attention of each sequence's ``Sq`` newest tokens over its paged KV cache.

    ``q`` [B, Hq, Sq, D] (the new tokens, already appended), ``k_cache``, ``v_cache`` [num_pages, page_size, Hkv,
    D] (page_size 16..256), ``block_table`` [B, max_pages] int32 (sequence b's position j lives in page
    ``block_table[b, j // page_size]``, row ``j % page_size``), ``seq_lens`` [B] int32 (each length, the new
    tokens included: ``Sq <= seq_lens[b] <= max_pages * page_size``). Returns [B, Hq, Sq, D]; query i of
    sequence b sees positions ``0..seq_lens[b] - Sq + i``. GQA/MQA from the head counts; ``scale`` defaults to
    ``1/sqrt(D)``. Only the table entries a sequence's length reaches are read, so unused ones may hold anything.
    The tables' values are checked before the launch (a ValueError naming the entry); on a GPU that copies them to
    the host, which ``check_tables=False`` skips (a bad entry then reads the wrong keys, never outside the caches).
    f32 q and caches multiply on a GPU's TF32 tensor cores unless ``fp32_precision="ieee"`` (3xTF32).
    """
    _paged_attention.source(q, k_cache, v_cache, block_table, seq_lens, scale, fp32_precision)  # types, shapes
    tables = _tables_to_check(block_table, seq_lens) if check_tables else None
    if tables is not None:
        table_host, lens_host = tables
        op, seq_q = "paged_attention", q.shape[2]
        num_pages, page_size = k_cache.shape[:2]
        capacity = table_host.shape[1] * page_size
        for b, length in enumerate(lens_host.tolist()):
            if length < 0:
                raise ValueError(f"{op}: 'seq_lens'[{b}] = {length} is negative")
            if length < seq_q:
                raise ValueError(f"{op}: 'seq_lens'[{b}] = {length} is less than the {seq_q} new tokens of 'q' "
                                 f"(dim 2); a length counts the sequence's new tokens")
            if length > capacity:
                raise ValueError(f"{op}: 'seq_lens'[{b}] = {length} is past the end of 'block_table', which holds "
                                 f"{capacity} positions per sequence (max_pages * page_size)")
            _check_pages(op, table_host, num_pages, page_size, b, 0, length)
    return _paged_attention(q, k_cache, v_cache, block_table, seq_lens, scale, fp32_precision)


def append_kv(k_cache, v_cache, k, v, block_table, positions):
    """The caches with new K/V rows written into their pages; returns ``(k_cache, v_cache)``. On numpy arrays (the
    host backend) these are new arrays and the arguments are not modified; on CUDA tensors the rows are written
    into the caches given, which are returned (in place, as vLLM's reshape_and_cache writes them).

    ``k_cache``, ``v_cache`` [num_pages, page_size, Hkv, D], ``k``, ``v`` [B, Hkv, S_new, D], ``block_table``
    [B, max_pages] int32, ``positions`` [B] int32: token s of sequence b goes to position ``positions[b] + s``
    (``positions`` is each length before the append, so ``positions + S_new`` is the ``seq_lens`` that
    ``paged_attention`` takes next). Every written position must lie in the table and in a page of the caches,
    and no two sequences may write the same slot.
    """
    _append_kv.source(k_cache, v_cache, k, v, block_table, positions)  # types and shapes, named
    tables = _tables_to_check(block_table, positions)
    if tables is not None:
        table_host, positions_host = tables
        op, count = "append_kv", k.shape[2]
        num_pages, page_size = k_cache.shape[:2]
        capacity = table_host.shape[1] * page_size
        slots, owners = [np.zeros(0, np.int64)], [np.zeros((0, 2), np.int64)]
        for b, start in enumerate(positions_host.tolist()):
            if start < 0:
                raise ValueError(f"{op}: 'positions'[{b}] = {start} is negative")
            if start + count > capacity:
                raise ValueError(f"{op}: 'positions'[{b}] = {start} plus the {count} new tokens of 'k' (dim 2) is "
                                 f"past the end of 'block_table', which holds {capacity} positions per sequence "
                                 f"(max_pages * page_size)")
            _check_pages(op, table_host, num_pages, page_size, b, start, start + count)
            written = np.arange(start, start + count)
            slots.append(table_host[b, written // page_size].astype(np.int64) * page_size + written % page_size)
            owners.append(np.stack([np.full(count, b), written], axis=1))
        slots, owners = np.concatenate(slots), np.concatenate(owners)
        order = np.argsort(slots, kind="stable")
        same = np.flatnonzero(slots[order][1:] == slots[order][:-1])
        if same.size:
            (b0, p0), (b1, p1) = owners[order[same[0]]], owners[order[same[0] + 1]]
            page, row = divmod(int(slots[order[same[0]]]), page_size)
            raise ValueError(f"{op}: 'block_table' sends position {p0} of sequence {b0} and position {p1} of "
                             f"sequence {b1} to the same slot (page {page}, row {row}); each new row needs its own")
    return _append_kv(k_cache, v_cache, k, v, block_table, positions)
