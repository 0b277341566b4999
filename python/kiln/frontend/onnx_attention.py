"""ONNX's attention operators (opset 23 on): Attention onto kiln.attention, RotaryEmbedding onto kiln.rope.

Why a file of their own: each of these ONNX operators folds many variants into one node — 3-D or 4-D inputs, a
KV cache concatenated inside the node, boolean or additive masks shorter than the keys, causal masks aligned to
the cache, sliding windows, fully masked rows that must give zeros, angles gathered from a cache by position —
and the importer maps every variant onto the one kiln op that owns the semantics, with reshapes, slices and
masks around it, or refuses it by name. Masks that depend only on shapes and attributes (causal at the cache
offset, windows, a constant nonpad_kv_seqlen) are built with numpy at import time.
"""

import math

import numpy as np

from .. import mods, trace
from .onnx_ops import binary, concat, reshape_to, slice_window, take, transpose_to
from .values import Const, FrontendError


# --- Attention -------------------------------------------------------------------------------------------------

def _attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
    """ONNX Attention (23-25) as ``softmax(scale q k^T + bias) v`` by kiln.attention, where the bias gathers the
    mask input, the causal frontier and the windows; a query row that no key may attend yields zeros."""
    _check_attention_attributes(ctx)
    q, k, v = (ctx.float_tensor(t, name) for t, name in ((q, "Q"), (k, "K"), (v, "V")))
    if not q.element == k.element == v.element:
        raise FrontendError(f"{ctx.node.describe()}: Q, K and V have different types ({q.element}, {k.element}, "
                            f"{v.element})")
    rank = q.ndim
    if rank not in (3, 4) or k.ndim != rank or v.ndim != rank:
        raise FrontendError(f"{ctx.node.describe()}: Q, K and V must all be 3-D or all 4-D, got shapes {q.shape}, "
                            f"{k.shape}, {v.shape}")
    if rank == 3:
        q = _split_heads(ctx, q, "Q", "q_num_heads")
        k = _split_heads(ctx, k, "K", "kv_num_heads")
        v = _split_heads(ctx, v, "V", "kv_num_heads")
    if (past_key is None) != (past_value is None):
        raise FrontendError(f"{ctx.node.describe()}: past_key and past_value must be given together")
    offset = 0
    if past_key is not None:
        if nonpad_kv_seqlen is not None:
            raise FrontendError(f"{ctx.node.describe()}: nonpad_kv_seqlen cannot be combined with past_key")
        k = _append(ctx, past_key, k, "past_key", "K")
        v = _append(ctx, past_value, v, "past_value", "V")
        offset = _shape(past_key)[2]
    batch, q_heads, q_len, head_dim = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    if kv_heads == 0 or q_heads % kv_heads:
        raise FrontendError(f"{ctx.node.describe()}: {q_heads} query heads cannot share {kv_heads} key/value heads")
    padding = None
    if nonpad_kv_seqlen is not None:
        if not isinstance(nonpad_kv_seqlen, Const):
            raise FrontendError(f"{ctx.node.describe()}: nonpad_kv_seqlen (input 6) must be a constant, but it "
                                f"depends on a graph input")
        padding = nonpad_kv_seqlen.array.reshape(-1).astype(np.int64)
        offset = padding - q_len

    causal = bool(ctx.attr("is_causal", 0))
    windows = (ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1))
    mask = _mask_bias(ctx, attn_mask, kv_len) if attn_mask is not None else None
    # kiln's causal flag is ONNX's frontier when the offset is the number of keys before the queries' block;
    # with a mask, the frontier joins the mask so that the rows the two leave empty are found.
    causal_flag = causal and mask is None and padding is None and windows == (-1, -1) and \
        offset == kv_len - q_len
    allowed = _allowed(q_len, kv_len, offset, causal and not causal_flag, windows, padding)
    # A query row the bias hides entirely gives zeros, as ONNX asks: kiln.attention gives such a row 0.
    bias = _combined_bias(ctx, mask, allowed)

    operands = f"{q.name}, {k.name}, {v.name}"
    types = f"{q.type}, {k.type}, {v.type}"
    softcap = ctx.attr("softcap", 0.0)
    if bias is not None:
        # kiln.attention adds a mask of any float type in f32; the softcap's score_mod reads an f32 table.
        bias = ctx.tensor(_as_element(ctx, bias, "f32") if softcap else bias)
        if not softcap:
            operands += f" mask({bias.name} : {bias.type})"
    scale = ctx.attr("scale", None)
    flags = (" causal" if causal_flag else "") + \
        (trace.mod_regions(q.graph, _softcap_mod(softcap, bias), None, {}) if softcap else "") + \
        (f" {{scale = {trace.float_literal(scale)} : f32}}" if scale is not None else "")
    shape = (batch, q_heads, q_len, v.shape[3])
    y = ctx.emit(f"kiln.attention {operands}{flags} : {types} -> {trace.tensor_type(shape, q.element)}", shape,
                 q.element)
    if rank == 3:
        y = transpose_to(ctx, y, [0, 2, 1, 3])
        y = reshape_to(ctx, y, (batch, q_len, q_heads * v.shape[3]))
    if not _wants_scores(ctx):
        return [y, k, v]
    # The whole bias (the causal frontier too, which kiln.attention may take as its flag) for the scores output.
    whole = _combined_bias(ctx, mask, _allowed(q_len, kv_len, offset, causal, windows, padding))
    return [y, k, v, _scores_output(ctx, q, k, scale, softcap, whole)]


def _wants_scores(ctx):
    return len(ctx.node.proto.output) > 3 and bool(ctx.node.proto.output[3])


def _scores_output(ctx, q, k, scale, softcap, bias):
    """Attention's qk_matmul_output, by qk_matmul_output_mode: the scaled scores ``scale q k^T``, softcapped where
    softcap is set (modes 0 and 1, as ONNX's reference computes both), plus the bias (2), or their softmax with
    the rows no key may attend zeroed (3). Kiln ops beside the fused attention, whose kernel never holds the
    [q_len, kv_len] scores: asking for them costs their matmul and their memory."""
    mode = ctx.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise FrontendError(f"{ctx.node.describe()}: qk_matmul_output_mode {mode} is not one of 0, 1, 2, 3")
    bias = None if bias is None else _as_element(ctx, bias, "f32")  # added to the f32 scores
    batch, q_heads, q_len, head_dim = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    if q_heads != kv_heads:  # query head h reads key head h // group
        group = q_heads // kv_heads
        k = reshape_to(ctx, k, (batch, kv_heads, 1, kv_len, head_dim))
        wide = (batch, kv_heads, group, kv_len, head_dim)
        k = ctx.emit(f"kiln.broadcast {k.name} : {k.type} -> {trace.tensor_type(wide, k.element)}", wide,
                     k.element)
        k = reshape_to(ctx, k, (batch, q_heads, kv_len, head_dim))
    shape = (batch, q_heads, q_len, kv_len)
    scores = ctx.emit(f"kiln.matmul {q.name}, {k.name} transpose_rhs : {q.type}, {k.type} -> "
                      f"{trace.tensor_type(shape, 'f32')}", shape, "f32")
    scale = scale if scale is not None else 1.0 / math.sqrt(head_dim)
    (scores,) = binary("mul", np.multiply)(ctx, scores, Const(np.float32(scale)))
    if softcap:
        (scores,) = binary("div", np.divide)(ctx, scores, Const(np.float32(softcap)))
        scores = ctx.emit(f"kiln.tanh {scores.name} : {scores.type}", shape, "f32")
        (scores,) = binary("mul", np.multiply)(ctx, scores, Const(np.float32(softcap)))
    if mode == 2 and bias is not None:
        (scores,) = binary("add", np.add)(ctx, scores, bias)
    elif mode == 3:
        if bias is not None:
            (scores,) = binary("add", np.add)(ctx, scores, bias)
        scores = ctx.emit(f"kiln.softmax {scores.name} axis 3 zero_empty_rows : {scores.type}", shape, "f32")
    return _as_element(ctx, scores, q.element)


def _softcap_mod(softcap, bias):
    """Attention's softcap as a score_mod: ``softcap * tanh(s / softcap)`` of the scaled scores, then the bias
    (the mask, the causal frontier, the windows), which ONNX adds after the cap so that a masked score stays -inf;
    kiln.attention adds its own mask before a score_mod, so the bias is read as a table inside it (its dims of one
    element broadcast)."""
    def score_mod(s, b, h, q, kv):
        capped = softcap * mods.unary("tanh", s / softcap)
        if bias is None:
            return capped
        positions = (b, h, q, kv)[4 - len(bias.shape):]
        return capped + bias[tuple(p if extent != 1 else 0 for p, extent in zip(positions, bias.shape))]
    return score_mod


def _check_attention_attributes(ctx):
    """Refuses the variants kiln.attention cannot express, naming the attribute or output. softmax_precision
    needs nothing: kiln's softmax runs in f32 whatever the input type."""
    softcap = ctx.attr("softcap", 0.0)
    if not (math.isfinite(softcap) and softcap >= 0):
        raise FrontendError(f"{ctx.node.describe()}: softcap {softcap} is not supported (0, or a finite positive "
                            f"number)")
    scale = ctx.attr("scale", None)
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise FrontendError(f"{ctx.node.describe()}: scale {scale} is not supported (a finite positive number)")
    for name in ("left_window_size", "right_window_size"):
        if ctx.attr(name, -1) < -1:
            raise FrontendError(f"{ctx.node.describe()}: {name} {ctx.attr(name)} must be -1 or non-negative")


def _split_heads(ctx, x, name, heads_attribute):
    """A 3-D [B, S, H * D] input as [B, H, S, D]."""
    heads = ctx.attr(heads_attribute, 0)
    batch, seq, hidden = x.shape
    if heads <= 0 or hidden % heads:
        raise FrontendError(f"{ctx.node.describe()}: 3-D {name} of width {hidden} needs attribute "
                            f"{heads_attribute} dividing it, got {heads or 'none'}")
    x = reshape_to(ctx, x, (batch, seq, heads, hidden // heads))
    return transpose_to(ctx, x, [0, 2, 1, 3])


def _append(ctx, past, new, past_name, new_name):
    """The cache ``past`` [B, H, P, D] followed by ``new`` [B, H, S, D] along the sequence (present_key/value)."""
    past = ctx.float_tensor(past, past_name)
    if past.ndim != 4 or past.element != new.element or past.shape[:2] != new.shape[:2] or \
            past.shape[3] != new.shape[3]:
        raise FrontendError(f"{ctx.node.describe()}: {past_name} {past.type} does not extend {new_name} {new.type}")
    return concat(ctx, [past, new], 2)


def _mask_bias(ctx, mask, kv_len):
    """attn_mask as an additive bias over the keys: a boolean mask gives 0 (attend) or -inf in f32; a float mask
    keeps its type (kiln.attention adds it in f32) unless it is shorter than the keys, when it is padded with -inf
    in f32 (the keys it does not cover are not attended)."""
    shape = _shape(mask)
    if not 1 <= len(shape) <= 4:
        raise FrontendError(f"{ctx.node.describe()}: attn_mask of rank {len(shape)} does not broadcast to [batch, "
                            f"heads, q_len, kv_len]")
    if shape[-1] > kv_len:
        raise FrontendError(f"{ctx.node.describe()}: attn_mask covers {shape[-1]} keys but there are {kv_len}")
    boolean = (mask.array.dtype == np.bool_) if isinstance(mask, Const) else mask.element == "i1"
    if isinstance(mask, Const):
        bias = np.where(mask.array, 0.0, -np.inf) if boolean else mask.array
        bias = bias.astype(np.float32)
        pad = [(0, 0)] * (len(shape) - 1) + [(0, kv_len - shape[-1])]
        return Const(np.pad(bias, pad, constant_values=-np.inf))
    if boolean:
        f32 = trace.tensor_type(shape, "f32")
        zero, minus_inf = (ctx.tensor(Const(np.float32(value))) for value in (0.0, -np.inf))
        bias = ctx.emit(f"kiln.select {mask.name}, {zero.name}, {minus_inf.name} : {mask.type}, {zero.type}, "
                        f"{minus_inf.type} -> {f32}", shape, "f32")
    else:
        bias = ctx.float_tensor(mask, "attn_mask")
    if shape[-1] < kv_len:
        fill = Const(np.full(shape[:-1] + (kv_len - shape[-1],), -np.inf, np.float32))
        bias = concat(ctx, [_as_element(ctx, bias, "f32"), fill], -1)
    return bias


def _allowed(q_len, kv_len, offset, causal, windows, padding):
    """Which keys each query may attend under the causal frontier, the windows and the padding, as a boolean
    [q_len, kv_len] array ([B, 1, q_len, kv_len] when the offset is per batch), or None when all may.

    Query i sits at position ``offset + i``: after the cache, or at nonpad_kv_seqlen - q_len per batch."""
    if not causal and windows == (-1, -1) and padding is None:
        return None
    rows, columns = np.arange(q_len)[:, None], np.arange(kv_len)[None, :]
    offset = np.reshape(offset, (-1, 1, 1, 1)) if np.ndim(offset) else offset
    distance = rows + offset - columns
    allowed = np.ones(np.shape(distance), dtype=bool)
    if causal:
        allowed &= distance >= 0
    left, right = windows
    if left >= 0:
        allowed &= distance <= left
    if right >= 0:
        allowed &= -distance <= right
    if padding is not None:
        allowed = allowed & (columns < padding.reshape(-1, 1, 1, 1))
    return allowed


def _combined_bias(ctx, mask, allowed):
    """The additive bias of the mask (or None) and the structure ``allowed`` leaves (0 or -inf; None when all may
    attend): a constant where both are, or None when nothing is masked; f32 where the two are added."""
    structure = None if allowed is None else Const(np.where(allowed, 0.0, -np.inf).astype(np.float32))
    if mask is None or structure is None:
        return structure if mask is None else mask
    if isinstance(mask, Const):
        return Const(mask.array + structure.array)
    (bias,) = binary("add", np.add)(ctx, _as_element(ctx, mask, "f32"), structure)
    return bias


def _as_element(ctx, value, element):
    """A float value in another float type (a constant is converted, a tensor gets kiln.cast)."""
    if isinstance(value, Const):
        return Const(value.array.astype(trace.DTYPES[element]))
    if value.element == element:
        return value
    return ctx.emit(f"kiln.cast {value.name} : {value.type} to {trace.tensor_type(value.shape, element)}",
                    value.shape, element)


# --- RotaryEmbedding ---------------------------------------------------------------------------------------------

def _rotary_embedding(ctx, x, cos_cache, sin_cache, position_ids=None):
    """ONNX RotaryEmbedding (23) as kiln.rope on the rotated part of each head; one kiln.rope per batch row when
    the rows' angles differ (kiln.rope takes one [S, D/2] table)."""
    x = ctx.float_tensor(x, "X")
    if x.ndim == 4:
        batch, _, seq, head_dim = x.shape
        heads_view, seq_dim = x, 2
    elif x.ndim == 3:
        heads = ctx.attr("num_heads", 0)
        batch, seq, hidden = x.shape
        if heads <= 0 or hidden % heads:
            raise FrontendError(f"{ctx.node.describe()}: 3-D X of width {hidden} needs attribute num_heads dividing "
                                f"it, got {heads or 'none'}")
        head_dim = hidden // heads
        heads_view, seq_dim = reshape_to(ctx, x, (batch, seq, heads, head_dim)), 1
    else:
        raise FrontendError(f"{ctx.node.describe()}: X must be 3-D or 4-D, got shape {x.shape}")
    rotary = ctx.attr("rotary_embedding_dim", 0) or head_dim
    if rotary % 2 or rotary > head_dim:
        raise FrontendError(f"{ctx.node.describe()}: rotary_embedding_dim {rotary} must be even and at most the "
                            f"head size {head_dim}")
    tables = [_angles(ctx, cache, name, position_ids, (batch, seq, rotary // 2), x.element)
              for cache, name in ((cos_cache, "cos_cache"), (sin_cache, "sin_cache"))]
    shared = all(_rows_equal(t) for t in tables)
    pieces = []
    for row in [0] if shared else range(batch):
        part = heads_view if shared else _batch_row(ctx, heads_view, row)
        cos, sin = (ctx.tensor(reshape_to(ctx, _batch_row(ctx, t, min(row, t.shape[0] - 1)), (seq, rotary // 2)))
                    for t in tables)
        pieces.append(_rope_part(ctx, part, cos, sin, rotary, seq_dim))
    y = pieces[0] if shared else concat(ctx, pieces, 0)
    return [reshape_to(ctx, y, x.shape)]


def _angles(ctx, cache, name, position_ids, expected, element):
    """cos_cache or sin_cache as [B or 1, S, R/2] angles: rows of the cache gathered by position_ids, or the
    cache itself when there are no positions."""
    if position_ids is not None:
        if len(_shape(cache)) != 2:
            raise FrontendError(f"{ctx.node.describe()}: {name} must be 2-D [positions, R/2] with position_ids, got "
                                f"shape {tuple(_shape(cache))}")
        cache = take(ctx, cache, position_ids, 0)
    shape = tuple(_shape(cache))
    if len(shape) != 3 or shape[0] not in (1, expected[0]) or shape[1:] != expected[1:]:
        raise FrontendError(f"{ctx.node.describe()}: {name} gives angles of shape {shape}, expected "
                            f"[{expected[0]}, {expected[1]}, {expected[2]}]")
    if isinstance(cache, Const):
        return Const(cache.array.astype(trace.DTYPES[element]))
    cache = ctx.float_tensor(cache, name)
    if cache.element != element:
        raise FrontendError(f"{ctx.node.describe()}: {name} is {cache.element} but X is {element}")
    return cache


def _rows_equal(table):
    """True when every batch row of the angles is the same (one kiln.rope serves the whole batch)."""
    if table.shape[0] == 1:
        return True
    return isinstance(table, Const) and bool((table.array == table.array[:1]).all())


def _batch_row(ctx, value, row):
    shape = _shape(value)
    return slice_window(ctx, value, [row] + [0] * (len(shape) - 1), (1,) + tuple(shape[1:]), [1] * len(shape))


def _rope_part(ctx, x, cos, sin, rotary, seq_dim):
    """kiln.rope of the first ``rotary`` features of each head, the positions along ``seq_dim``; the rest of the
    features pass through."""
    head_dim = x.shape[-1]
    rotated = x if rotary == head_dim else _features(ctx, x, 0, rotary)
    flags = (" interleaved" if ctx.attr("interleaved", 0) else "") + \
        (f" {{seq_dim = {seq_dim} : i64}}" if seq_dim != x.ndim - 2 else "")
    y = ctx.emit(f"kiln.rope {rotated.name}, {cos.name}, {sin.name}{flags} : {rotated.type}, {cos.type}, "
                 f"{sin.type}", rotated.shape, rotated.element)
    if rotary == head_dim:
        return y
    return concat(ctx, [y, _features(ctx, x, rotary, head_dim - rotary)], -1)


def _features(ctx, x, start, count):
    """``count`` features of the last dimension from ``start``."""
    offsets = [0] * (x.ndim - 1) + [start]
    return ctx.tensor(slice_window(ctx, x, offsets, x.shape[:-1] + (count,), [1] * x.ndim))


def _shape(value):
    return tuple(value.shape)


OPS = {
    "Attention": _attention,
    "RotaryEmbedding": _rotary_embedding,
}

#: The newest revision (schema ``since_version``) of each operator its emitter follows.
SCHEMAS = {"Attention": 25, "RotaryEmbedding": 23}
