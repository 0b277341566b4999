"""torch.compile(model, backend="kiln"): aten graphs partitioned between Kiln and torch.

Why: Kiln's users write PyTorch, and torch.compile is how PyTorch hands a model to a compiler. Dynamo captures the
model's graph; aot_autograd lowers it to an inference aten graph; this backend converts the aten nodes Kiln can
express straight into kiln IR through Kiln's own tracer (kiln/trace.py: no ONNX on this path; the converters, one
per aten op, are kiln/aten_converters.py), lets torch's CapabilityBasedPartitioner group them into the largest
partitions, compiles each partition for the tensors' device (the host backend for CPU tensors, the GPU target of
the device's chip for CUDA tensors) and leaves every other node to torch. Whether a node is supported is decided by
converting it: a node the tracer refuses, or whose converted result differs in shape or dtype from what torch
recorded, stays in torch, and a partition whose compile fails runs in torch whole, so an unsupported model runs
slower but never wrongly.

    import kiln.torch_backend  # registers the backend (an installed package registers it by entry point)
    fast = torch.compile(model, backend="kiln", dynamic=False)

Shapes are static per compile: torch.compile's guards recompile for a new shape, and Kiln's program and kernel
caches make those compiles cheap. A graph dynamo made dynamic is specialised per input shape at run time.
"""

import operator
import warnings
import weakref

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import trace
from .aten_converters import CONVERTERS, DATA_MOVEMENT, ELEMENTS, Unsupported, convert, recorded
from .cache_writes import write_caches_in_place
from .causal_masks import fold_constant_causal_masks
from .compiler import compile as kiln_compile
from .gpu import chip_for
from .rematerialize import rematerialize_input_data_movement
from .torch_ops import _host, _torch
from .whole_graph import GraphedGraph, has_unknown_effects, mutated_inputs, on_one_gpu

__all__ = ["kiln_backend", "reports", "KilnPartition", "GraphReport"]

aten = torch.ops.aten
_REPORTS = []

# ----------------------------------------------------------------------------------------------------------------
# What Kiln supports: a node is supported when converting it on placeholders of its inputs succeeds.
# ----------------------------------------------------------------------------------------------------------------

def _static_tensor(value):
    """The (shape, element) of a fake tensor whose shape is static and dtype one Kiln has, else None."""
    if not isinstance(value, torch.Tensor) or value.dtype not in ELEMENTS or value.layout != torch.strided:
        return None
    if not all(isinstance(d, int) for d in value.shape):
        return None
    return tuple(value.shape), ELEMENTS[value.dtype]


def _computed(node):
    """The fake tensors of the node's results that Kiln computes: all of a split's, the first of the other
    multi-result ops (an attention's output, a norm's normalised value; statistics and RNG state are not)."""
    meta = recorded(node)
    if not isinstance(meta, (tuple, list)):
        return [meta]
    return list(meta) if node.target in (aten.split.Tensor, aten.split_with_sizes.default) else [meta[0]]


def _devices(node):
    """The devices of the node's tensor inputs and results."""
    return {value.device for n in node.all_input_nodes + [node] for value in _computed(n)
            if isinstance(value, torch.Tensor)}


class KilnSupport(OperatorSupportBase):
    """The partitioner's question, answered by a trial conversion of the node alone."""

    def is_node_supported(self, submodules, node):
        if node.op != "call_function" or node.target not in CONVERTERS:
            return False
        if len(_devices(node)) != 1 or not _users_are_converted(node):
            return False
        with trace.Graph() as graph:
            values = {}
            for i, n in enumerate(node.all_input_nodes):
                meta = recorded(n)
                if isinstance(meta, (tuple, list)):  # getitem of a multi-result node: each converted
                    specs = [_static_tensor(m) for m in meta]
                    values[n] = tuple(None if s is None else trace.Tensor(graph, f"%t{i}_{j}", *s)
                                      for j, s in enumerate(specs))
                    continue
                spec = _static_tensor(meta)
                if spec is None:
                    return False
                values[n] = trace.Tensor(graph, f"%t{i}", *spec)
            try:
                convert(node, values)
            except (Unsupported, TypeError, ValueError, KeyError, IndexError, RuntimeError):
                return False
        return True


def _users_are_converted(node):
    """A node with several results is supported only if every result read is one Kiln computes (a logsumexp or a
    layer norm's statistics read by another node would be missing)."""
    if not isinstance(recorded(node), (tuple, list)):
        return True
    probe = {aten.native_layer_norm.default: {0}, aten._fused_rms_norm.default: {0}}
    wanted = probe.get(node.target)
    if wanted is None and node.target in (aten.split.Tensor, aten.split_with_sizes.default):
        return all(user.target is operator.getitem for user in node.users)
    if wanted is None:
        wanted = {0}  # the attention spellings: the output alone
    return all(user.target is operator.getitem and user.args[1] in wanted for user in node.users)


# ----------------------------------------------------------------------------------------------------------------
# Partitions: traced into one kiln function each, compiled for their device, run in place of the torch nodes.
# ----------------------------------------------------------------------------------------------------------------

def _target_for(device):
    """The Kiln target of a torch device, or None when Kiln has none for it."""
    if device.type == "cpu":
        return "host"
    if device.type == "cuda":
        return chip_for(torch.cuda.get_device_capability(device))
    return None


def trace_partition(submodule, inputs, name):
    """Kiln IR for a fused partition (a GraphModule of supported nodes), given the fake tensors of its inputs."""
    nodes = list(submodule.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    with trace.Graph() as graph:
        values, params = {}, []
        for i, (n, meta) in enumerate(zip(placeholders, inputs)):
            spec = _static_tensor(meta)
            if spec is None:
                raise Unsupported(f"input {i} of the partition is not a static tensor")
            values[n] = trace.Tensor(graph, f"%arg{i}", *spec)
            params.append(f"{values[n].name}: {values[n].type}")
        output = None
        for n in nodes:
            if n.op == "call_function":
                values[n] = convert(n, values)
            elif n.op == "output":
                output = n.args[0]
    results = list(output) if isinstance(output, (tuple, list)) else [output]
    results = [values[r] for r in results]
    types = ", ".join(r.type for r in results)
    body = "".join(f"  {line}\n" for line in graph.lines)
    return (f"func.func @{name}({', '.join(params)}) -> ({types}) {{\n{body}"
            f"  return {', '.join(r.name for r in results)} : {types}\n}}\n")


class KilnPartition(torch.nn.Module):
    """One partition of the graph as a compiled Kiln program: numpy views on the host backend, CUDA tensors on
    the GPU (through a CUDA graph once its inputs' addresses settle, unless ``cuda_graphs`` is off)."""

    def __init__(self, name, source, program, device, nodes, tuple_output, strides, escaping, cuda_graphs):
        super().__init__()
        self.name, self.source, self.program, self.device = name, source, program, device
        self.strides = strides  # per output, the strides torch's own kernel gives it, or None where contiguous
        self.nodes = nodes  # the aten targets it replaces, in graph order
        self.tuple_output = tuple_output
        self.escaping = escaping  # output positions that may outlive the call (returned, or viewed by a result)
        self.cuda_graphs = cuda_graphs
        self.calls = 0
        self._graphed = None

    @property
    def kernels(self):
        """The GPU program's kernel launches (manifest entries), or None on the host backend."""
        return getattr(self.program, "kernels", None)

    def forward(self, *tensors):
        self.calls += 1
        if self.device.type == "cpu":
            out = self.program(*[_host(t) for t in tensors])
            outs = [_torch(o, tensors[0] if tensors else None) for o in (out if isinstance(out, tuple) else (out,))]
        else:
            outs = self._run_gpu([_aligned(t) for t in tensors])
        outs = [o if s is None else _restrided(o, s) for o, s in zip(outs, self.strides)]
        return tuple(outs) if self.tuple_output else outs[0]

    def _run_gpu(self, tensors):
        if self.cuda_graphs and not torch.cuda.is_current_stream_capturing():
            if self._graphed is None:
                self._graphed = _GraphedProgram(self.program, tensors)
                out = self.program(*tensors)  # the warm call: loads the kernels outside any capture
                return list(out) if isinstance(out, tuple) else [out]
            outs = self._graphed.run(tensors)
            return [o.clone() if i in self.escaping else o for i, o in enumerate(outs)]
        out = self.program(*tensors)
        return list(out) if isinstance(out, tuple) else [out]


def _restrided(tensor, strides):
    """``tensor`` copied into torch's layout for it: the torch nodes reading it (views) were traced for that
    layout (an attention's output, [B, S, H, D] in memory, viewed as [B, S, H * D] after a transpose)."""
    out = torch.empty_strided(tensor.shape, strides, dtype=tensor.dtype, device=tensor.device)
    return out.copy_(tensor)


def _output_strides(meta):
    """The strides torch gives a result, or None when they are the contiguous ones (nothing to copy) or when they
    repeat elements (an expand's zero strides: no tensor of them can be written, and a contiguous one holds the
    same values)."""
    if meta.numel() <= 1 or meta.is_contiguous():
        return None
    if any(stride == 0 and size > 1 for stride, size in zip(meta.stride(), meta.shape)):
        return None
    return tuple(int(s) for s in meta.stride())


def _aligned(tensor):
    """A tensor as a GPU program takes it: contiguous, starting on a 16-byte boundary."""
    if tensor.is_contiguous() and tensor.data_ptr() % 16 == 0:
        return tensor
    return tensor.clone(memory_format=torch.contiguous_format)


class _GraphedProgram:
    """A GPU program replayed from a CUDA graph. Inputs whose address stayed the same since the first call
    (weights) are read where they are; the others are copied into buffers the graph reads. An input read in place
    that moves is copied from then on, and the graph captured again."""

    def __init__(self, program, first):
        self.program = program
        self.first = [t.data_ptr() for t in first]
        self.moved = set()
        self.bound = None

    def run(self, tensors):
        pointers = [t.data_ptr() for t in tensors]
        moved = {i for i, p in enumerate(pointers) if p != self.first[i]}
        if self.bound is None or not moved <= self.moved:
            self.moved |= moved
            self._capture(tensors)
        for i, staging in self.staged:
            staging.copy_(tensors[i])
        return self.bound.replay()

    def _capture(self, tensors):
        inputs = list(tensors)
        self.staged = []
        for i in sorted(self.moved):
            inputs[i] = tensors[i].clone()
            self.staged.append((i, inputs[i]))
        self.bound = self.program.bind(*inputs).capture()


def _escaping_outputs(call):
    """Positions of a partition's outputs that may outlive the call: read by the graph's output, or by a view
    (through getitem) that is. A CUDA graph's outputs are overwritten by the next replay, so only these are
    copied out."""
    def escapes(node, seen):
        for user in node.users:
            if user.op == "output":
                return True
            if user.target is operator.getitem or _is_view(user.target):
                if user not in seen and escapes(user, seen | {user}):
                    return True
        return False

    getitems = {u.args[1]: u for u in call.users if u.target is operator.getitem}
    if not getitems:
        return {0} if escapes(call, set()) else set()
    return {i for i, u in getitems.items() if escapes(u, set())}


def _is_view(target):
    schema = getattr(target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


# ----------------------------------------------------------------------------------------------------------------
# The backend.
# ----------------------------------------------------------------------------------------------------------------

class GraphReport:
    """What the backend did with one aten graph: its partitions, the kiln programs and what fell back.

    The report reads the compiled graph without keeping it: the partitioned GraphModule, its partitions (with
    their programs and CUDA graphs) and the whole-graph replay are held weakly, so that they go (with their GPU
    memory) when torch drops the compiled function (torch._dynamo.reset(), a recompile past its cache) even
    while the report stays; then ``graph`` and ``whole_graph`` are None and ``partitions`` is empty. The counts
    and the names of what fell back stay."""

    def __init__(self):
        self._partitions = []  # weak references to the KilnPartition modules now in the graph
        self.fallbacks = []  # (partition name, reason) of partitions left to torch after a failed compile
        self.torch_nodes = []  # aten targets left to torch
        self._graph = None  # a weak reference to the partitioned GraphModule
        self.causal_masks = 0  # attentions whose constant mask was the causal triangle (now is_causal)
        self.cache_writes = 0  # buffer writes (index_copy_, index_put_) made in place again (cache_writes.py)
        self.rematerialized = 0  # copies of graph-input data movement given to its users (rematerialize.py)
        self._whole_graph = None  # a weak reference to the GraphedGraph replaying the whole graph, where one does

    @property
    def partitions(self):
        """The KilnPartition modules in the graph, while it lives."""
        alive = [ref() for ref in self._partitions]
        return [p for p in alive if p is not None]

    @property
    def graph(self):
        """The partitioned GraphModule, while it lives."""
        return self._graph() if self._graph is not None else None

    @property
    def whole_graph(self):
        """The GraphedGraph that replays the whole graph on its GPU (kiln/whole_graph.py), while it lives."""
        return self._whole_graph() if self._whole_graph is not None else None

    @property
    def kernels(self):
        """Kernel launches of the GPU partitions (None when a partition runs on the host)."""
        counts = [p.kernels for p in self.partitions]
        return None if any(c is None for c in counts) else sum(len(c) for c in counts)

    def __repr__(self):
        return (f"GraphReport({len(self.partitions)} kiln partitions of {sum(len(p.nodes) for p in self.partitions)}"
                f" nodes, {len(self.torch_nodes)} nodes in torch, {len(self.fallbacks)} fallbacks)")


def reports():
    """The reports of the graphs compiled so far in this process, oldest first (cleared with ``.clear()``)."""
    return _REPORTS


def _partition(gm):
    """``gm`` with its supported nodes fused into submodules (``fused_N``), and those submodules' call nodes."""
    partitioner = CapabilityBasedPartitioner(gm, KilnSupport(), allows_single_node_partition=True)
    partitions = [p for p in partitioner.propose_partitions()
                  if any(n.target not in DATA_MOVEMENT for n in p.nodes)]
    fused = partitioner.fuse_partitions(partitions, prefix="kiln_")
    calls = [n for n in fused.graph.nodes if n.op == "call_module" and n.target.startswith("kiln_")]
    return fused, calls


def _compile_partition(fused, call, options):
    """The KilnPartition for one fused submodule, or the reason it stays in torch."""
    submodule = getattr(fused, call.target)
    inputs = [recorded(a) for a in call.args]
    output = next(n for n in submodule.graph.nodes if n.op == "output").args[0]
    outputs = [recorded(n) for n in (output if isinstance(output, (tuple, list)) else [output])]
    devices = {m.device for m in inputs + outputs if isinstance(m, torch.Tensor)}
    if len(devices) != 1:
        return f"tensors on {len(devices)} devices"
    device = devices.pop()
    target = _target_for(device)
    if target is None:
        return f"no Kiln target for {device}"
    try:
        source = trace_partition(submodule, inputs, call.target)
        program = kiln_compile(source, target=target)
    except (Unsupported, ImportError, OSError, RuntimeError, TypeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    nodes = [n.target for n in submodule.graph.nodes if n.op == "call_function"]
    return KilnPartition(call.target, source, program, device, nodes, isinstance(output, (tuple, list)),
                         [_output_strides(m) for m in outputs], _escaping_outputs(call),
                         options.get("cuda_graphs", True))


def compile_graph(gm, example_inputs, options=None):
    """The aten graph ``gm`` with its Kiln partitions compiled (the forward compiler given to aot_autograd), and
    the GraphedGraph that replays it whole where it runs on one GPU (else None)."""
    options = options or {}
    report = GraphReport()
    report.cache_writes = write_caches_in_place(gm)
    report.causal_masks = fold_constant_causal_masks(gm)
    report.rematerialized = rematerialize_input_data_movement(gm)
    device = None if has_unknown_effects(gm) else on_one_gpu(gm)
    mutated = mutated_inputs(gm)
    fused, calls = _partition(gm)
    for call in calls:
        partition = _compile_partition(fused, call, options)
        if isinstance(partition, str):
            report.fallbacks.append((call.target, partition))
            warnings.warn(f"kiln: partition {call.target} runs in torch ({partition})", stacklevel=2)
            continue
        setattr(fused, call.target, partition)
        report._partitions.append(weakref.ref(partition))
    report.torch_nodes = [n.target for n in fused.graph.nodes
                          if n.op == "call_function" and n.target is not operator.getitem]
    report._graph = weakref.ref(fused)
    fused.recompile()
    replay = None
    if device is not None and options.get("cuda_graphs", True) is True and report.partitions:
        replay = GraphedGraph(fused.forward, mutated, device)
        report._whole_graph = weakref.ref(replay)
    _REPORTS.append(report)
    return fused, replay


def _aot_backend(options):
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def forward(gm, example_inputs):
        fused, replay = compile_graph(gm, example_inputs, options)
        return make_boxed_func(replay or fused.forward)

    def backward(gm, example_inputs):  # gradients stay in torch
        return make_boxed_func(gm.forward)

    # A buffer the graph writes (a KV cache) is written back inside the graph, where write_caches_in_place sees
    # the write, rather than by torch's wrapper after it.
    return aot_autograd(fw_compiler=forward, bw_compiler=backward, keep_inference_input_mutations=True)


def _symbolic(example_inputs):
    return any(isinstance(t, torch.SymInt) or isinstance(t, torch.Tensor) and
               not all(isinstance(d, int) for d in t.shape) for t in example_inputs)


class _PerShape:
    """A graph dynamo made dynamic, compiled once per concrete input shape (Kiln's programs are static)."""

    def __init__(self, gm, options):
        self.gm, self.options, self.compiled = gm, options, {}

    def __call__(self, *args):
        key = tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else a for a in args)
        function = self.compiled.get(key)
        if function is None:
            try:
                function = _aot_backend(self.options)(self.gm, list(args))
            except Exception as error:  # noqa: BLE001 - anything the specialisation meets: torch runs the graph
                warnings.warn(f"kiln: a dynamic graph runs in torch ({type(error).__name__}: {error})", stacklevel=2)
                function = self.gm.forward
            self.compiled[key] = function
        return function(*args)


def kiln_backend(gm, example_inputs, options=None, **kwargs):
    """torch.compile's backend: ``torch.compile(model, backend="kiln")``. On a GPU a graph whose tensors all live
    there replays from one CUDA graph (kiln/whole_graph.py), else each partition from its own;
    ``options={"cuda_graphs": "partitions"}`` keeps to the partitions' graphs, and ``{"cuda_graphs": False}``
    launches every kernel one by one."""
    options = dict(options or {})
    if options.get("cuda_graphs", True) not in (True, False, "partitions"):
        raise ValueError(f"kiln backend option 'cuda_graphs' must be True, False or \"partitions\", got "
                         f"{options['cuda_graphs']!r}")
    if _symbolic(example_inputs):
        return _PerShape(gm, options)
    return _aot_backend(options)(gm, example_inputs)


def _register():
    """Registers the backend under "kiln" unless torch already knows it (through the package's entry point)."""
    from torch._dynamo import list_backends, register_backend
    if "kiln" not in list_backends(exclude_tags=()):
        register_backend(kiln_backend, name="kiln")


_register()
