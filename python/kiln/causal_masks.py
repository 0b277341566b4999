"""Causal masks that a model builds from constants, recognised in aten graphs before partitioning.

Why: a model that writes its causal mask out, as ``torch.full((s, s), -inf).triu(1)`` or
``torch.ones(s, s, dtype=torch.bool).tril()``, hands scaled_dot_product_attention a dense [S, S] mask. Run as
written that is two torch kernels to build it and an attention that reads it for every score and computes every
key tile, the hidden half included. The mask depends on no input, so its value is known when the graph compiles:
this pass evaluates such a mask once (its nodes, in torch, on the device the graph records) and, where it is
exactly the causal triangle, gives the attention ``is_causal=True`` instead. The mask's nodes become dead code;
Kiln's attention then skips the hidden key tiles. A mask that is not the triangle, or that reads an input, stays
as it is.
"""

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .aten_converters import ATTENTION_RESULTS, named_arguments, recorded

__all__ = ["fold_constant_causal_masks"]

#: Masks evaluated at compile time are at most this many elements (a [8192, 8192] mask), to bound the work.
MAX_ELEMENTS = 1 << 26


def _constant_nodes(mask):
    """The nodes computing ``mask`` in graph order, or None when one of them reads an input, mutates, or is
    not an aten op."""
    order, seen, stack = [], set(), [mask]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "get_attr":
            order.append(node)
            continue
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or schema.is_mutable:
            return None
        order.append(node)
        stack.extend(node.all_input_nodes)
    position = {n: i for i, n in enumerate(mask.graph.nodes)}
    return sorted(order, key=position.__getitem__)


def _evaluate(gm, mask):
    """The value of a mask that depends on no input, or None."""
    meta = recorded(mask)
    if not isinstance(meta, torch.Tensor) or meta.numel() > MAX_ELEMENTS:
        return None
    nodes = _constant_nodes(mask)
    if nodes is None:
        return None
    values = {}
    with unset_fake_temporarily():  # the backend runs under dynamo's fake mode: this needs real values
        for node in nodes:
            if node.op == "get_attr":
                values[node] = getattr(gm, node.target)
                continue
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
            values[node] = node.target(*args, **kwargs)
    return values[mask]


def _is_causal_triangle(mask, seq_q, seq_k):
    """True when ``mask`` (boolean "may attend", or additive) is the top-left causal triangle of a [seq_q, seq_k]
    score matrix, the same for every batch and head."""
    if seq_q != seq_k or mask.ndim < 2 or tuple(mask.shape[-2:]) != (seq_q, seq_k):
        return False
    if any(d != 1 for d in mask.shape[:-2]):
        return False
    with unset_fake_temporarily():
        rows = mask.reshape(seq_q, seq_k)
        visible = torch.ones(seq_q, seq_k, dtype=torch.bool, device=mask.device).tril()
        if rows.dtype == torch.bool:
            return bool(torch.equal(rows, visible))
        triangle = torch.zeros_like(rows).masked_fill(~visible, float("-inf"))
        return bool(torch.equal(rows, triangle))


def fold_constant_causal_masks(gm):
    """Rewrites each attention of ``gm`` whose mask is a constant causal triangle to ``is_causal=True`` without
    the mask, and removes the mask's nodes left unused. Returns the number of attentions rewritten."""
    folded = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in ATTENTION_RESULTS:
            continue
        arguments = named_arguments(node)
        key = "attn_mask" if "attn_mask" in arguments else "attn_bias"
        mask = arguments.get(key)
        if not isinstance(mask, torch.fx.Node) or arguments.get("is_causal") or "is_causal" not in arguments:
            continue
        value = _evaluate(gm, mask)
        query, keys = recorded(arguments["query"]), recorded(arguments["key"])
        if value is None or not _is_causal_triangle(value, query.shape[-2], keys.shape[-2]):
            continue
        arguments[key], arguments["is_causal"] = None, True
        node.args, node.kwargs = (), arguments
        folded += 1
    if folded:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return folded
