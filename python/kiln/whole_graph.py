"""One CUDA graph for a whole compiled graph: Kiln's partitions and the torch nodes between them replayed together.

Why: each GPU partition replays its own CUDA graph, but the torch nodes between partitions (a decode step's
in-place cache write, ``index_copy_``) and the host side of each partition's call (its address checks, the copies
into its graph's inputs, the copies out of its results) still run once per partition per call, from Python. A
decode step at batch 1 does a fraction of a millisecond of device work, so that host work, not the GPU, sets its
pace. When every tensor of the graph lives on one GPU, the backend replays the whole partitioned graph from one
CUDA graph instead, captured at its second call (the first loads every kernel):

- an input whose address stays from call to call (weights, buffers, a KV cache) is read where it is; one that
  moves is copied, before each replay, into a buffer the graph reads;
- an input that the graph writes in place (a cache that ``index_copy_`` updates) is never copied, since the
  write must reach the caller's tensor: when it moves, the graph is captured again around its new address;
- an input that moves and is not contiguous is not copied into a buffer of another layout: that call runs node
  by node;
- results are copied out of the graph's buffers, which the next replay overwrites (aot_autograd makes a result
  that views an input again from the input itself);
- a graph whose capture fails (a node that waits for the host, such as ``.item()``) runs node by node from then
  on, with a warning, and its partitions replay their own graphs.
"""

import warnings

import torch
import torch.fx

__all__ = ["GraphedGraph", "has_unknown_effects", "mutated_inputs", "on_one_gpu"]


def mutated_inputs(gm):
    """Positions of the placeholders of ``gm`` that a node writes in place, directly or through a view."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    roots = {n: i for i, n in enumerate(placeholders)}  # a node aliasing an input: that input's position
    mutated = set()
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        bound = dict(zip((a.name for a in schema.arguments), node.args))
        bound.update(node.kwargs)
        aliasing = any(r.alias_info is not None for r in schema.returns)
        for argument in schema.arguments:
            value = bound.get(argument.name)
            # A Tensor(a!)[] argument (the _foreach_ ops) aliases, and may write, each tensor of its list.
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if argument.alias_info is None or not isinstance(item, torch.fx.Node) or item not in roots:
                    continue
                if argument.alias_info.is_write:
                    mutated.add(roots[item])
                if aliasing:
                    roots.setdefault(node, roots[item])
    return mutated


def has_unknown_effects(gm):
    """Whether a node of ``gm`` calls something without an aten schema (beyond ``operator.getitem``), whose writes
    to its inputs mutated_inputs could not see."""
    import operator
    return any(n.op == "call_function" and n.target is not operator.getitem and
               getattr(n.target, "_schema", None) is None for n in gm.graph.nodes)


def on_one_gpu(gm):
    """The CUDA device every tensor of the aten graph ``gm`` (inputs, intermediates and results, as torch recorded
    them) is on, or None when one is elsewhere or unrecorded (work on a host tensor would run once, at the
    capture, and never at a replay)."""
    devices = set()
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        if "val" not in node.meta:
            return None
        values = node.meta["val"]
        for value in values if isinstance(values, (tuple, list)) else [values]:
            if isinstance(value, torch.Tensor):
                devices.add(value.device)
    if len(devices) != 1:
        return None
    device = devices.pop()
    return device if device.type == "cuda" else None


def _address(value):
    """What must stay equal between calls for a captured graph to read an argument: a tensor's address, or the
    value of anything else (baked into the graph)."""
    return ("tensor", value.data_ptr()) if isinstance(value, torch.Tensor) else ("value", value)


class GraphedGraph:
    """``forward`` (a partitioned graph's, called with its inputs) replayed from one CUDA graph; inputs at
    ``mutated`` are written in place by it."""

    def __init__(self, forward, mutated, device):
        self.forward, self.mutated, self.device = forward, frozenset(mutated), device
        self.first = None  # the addresses the graph reads inputs at (those of the first call, or of a recapture)
        self.staged = frozenset()  # inputs copied into the graph's own buffers before each replay
        self.graph = self.inputs = self.outputs = None
        self.stream = None  # the capture stream, on the graph's device
        self.failed = None  # why the graph runs node by node, once a capture failed
        self.captures = self.replays = 0

    def __call__(self, *args):
        if self.failed is not None or torch.cuda.is_current_stream_capturing():
            return self.forward(*args)
        addresses = [_address(a) for a in args]
        if self.first is None:  # the warm call: every kernel loads, outside any capture
            self.first = addresses
            return self.forward(*args)
        moved = {i for i, (now, then) in enumerate(zip(addresses, self.first)) if now != then}
        rebound = {i for i in moved if i in self.mutated or not isinstance(args[i], torch.Tensor)}
        if any(not args[i].is_contiguous() for i in moved - rebound):
            return self.forward(*args)
        if self.graph is None or rebound or not moved <= self.staged:
            for i in rebound:
                self.first[i] = addresses[i]
            if not self._capture(args, frozenset(self.staged | (moved - rebound))):
                return self.forward(*args)
        for i in self.staged:
            self.inputs[i].copy_(args[i])
        self.graph.replay()
        self.replays += 1
        return self._results()

    def _capture(self, args, staged):
        """Captures the graph reading the inputs at ``staged`` from buffers of its own; False (and node-by-node
        runs from then on) when it cannot be captured."""
        self.graph = self.inputs = self.outputs = None
        inputs = [a.clone() if i in staged else a for i, a in enumerate(args)]
        graph = torch.cuda.CUDAGraph()
        # A stream of the graph's device (torch's default capture stream belongs to the device that was current
        # at the process's first capture).
        self.stream = self.stream or torch.cuda.Stream(self.device)
        try:
            with torch.cuda.device(self.device), torch.cuda.graph(graph, stream=self.stream):
                outputs = self.forward(*inputs)
        except (RuntimeError, OSError) as error:
            self.failed = f"{type(error).__name__}: {error}"
            warnings.warn(f"kiln: the compiled graph runs node by node, without one CUDA graph ({self.failed})",
                          stacklevel=3)
            return False
        self.graph, self.inputs, self.outputs, self.staged = graph, inputs, outputs, staged
        self.captures += 1
        return True

    def _results(self):
        """This replay's results: copies of the graph's buffers (a partition may return an input's own buffer for a
        clone it folded away, which must not reach the caller as that input)."""
        def out(value):
            return value.clone() if isinstance(value, torch.Tensor) else value

        if isinstance(self.outputs, (tuple, list)):
            return type(self.outputs)(out(v) for v in self.outputs)
        return out(self.outputs)
