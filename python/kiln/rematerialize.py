"""Data movement of graph inputs recomputed beside each user, so that no partition passes it to another.

Why: a tensor made from graph inputs by views, concatenations or stacks alone (gpt-fast's freqs_cis, stacked from
the step's cos and sin) is read by nodes that the partitioner may put into different partitions, for example RoPE
of k before the cache write and RoPE of q after it. One copy of it then lives in the first partition, which
writes it out as a result (a concat kernel) for the second to read back (a slice kernel). Recomputing it beside
each user costs nothing in a kernel (it is how the kernel reads its inputs) and lets each partition fuse it into
its reads. Only the inputs nothing in the graph mutates qualify: a copy placed after an in-place write of its
input would read the written value.
"""

import torch

from .aten_converters import DATA_MOVEMENT

__all__ = ["rematerialize_input_data_movement"]

aten = torch.ops.aten

#: The ops recomputed beside each user: data movement, and stack (a concat of unsqueezed inputs).
MOVEMENT = DATA_MOVEMENT | {aten.stack.default}


def rematerialize_input_data_movement(gm):
    """Gives each user of a node made only by MOVEMENT ops from unmutated placeholders its own copy of it (and
    of the chain above it). Returns how many copies it made."""
    graph = gm.graph
    mutated = {node.args[0] for node in graph.nodes
               if node.op == "call_function" and node.args and _mutates_first_argument(node.target)}
    from_inputs = set()
    for node in graph.nodes:
        if node.op == "placeholder" and node not in mutated:
            from_inputs.add(node)
        elif (node.op == "call_function" and node.target in MOVEMENT
              and all(arg in from_inputs for arg in node.all_input_nodes) and node.all_input_nodes):
            from_inputs.add(node)
    copies = 0
    # Last node first: a copy's inputs gain a user, which their own turn then splits.
    for node in reversed(list(graph.nodes)):
        if node.op != "call_function" or node not in from_inputs or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_before(user):
                copy = graph.node_copy(node)
            user.replace_input_with(node, copy)
            copies += 1
    if copies:
        graph.lint()
        gm.recompile()
    return copies


def _mutates_first_argument(target):
    """Whether an aten op writes its first argument (an in-place or out= overload: its schema marks it)."""
    schema = getattr(target, "_schema", None)
    return bool(schema and schema.arguments and schema.arguments[0].alias_info
                and schema.arguments[0].alias_info.is_write)
