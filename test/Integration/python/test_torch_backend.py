"""torch.compile(model, backend="kiln") on CPU tensors: the host backend against torch's eager results in f32.

Blocks written in plain torch (plain_torch_blocks.py) at small hidden sizes, fresh seeds (printed), tolerance 1e-4
relative in the max norm. Each test also checks where the graph went: the backend's report of the compiled
graph (kiln.torch_backend.reports()) names the partitions Kiln runs and the aten nodes left to torch, and each
partition counts the calls it ran, so a model that silently ran in torch fails.
"""

import gc
import secrets
import weakref

import pytest

torch = pytest.importorskip("torch")

from numerics import kiln  # noqa: E402,F401  (the package from the build)
import kiln.compiler  # noqa: E402
import kiln.torch_backend as backend  # noqa: E402
from plain_torch_blocks import (Gpt2Block, GptFastDecodeLayer, GptFastModel, LlamaBlock, relative_error,  # noqa: E402
                                rope_tables)

F = torch.nn.functional
aten = torch.ops.aten
TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def fresh():
    """A seeded torch RNG per test, dynamo's caches emptied, the backend's reports cleared."""
    seed = secrets.randbits(32)
    print(f"seed {seed}")
    torch.manual_seed(seed)
    torch._dynamo.reset()
    backend.reports().clear()
    with torch.no_grad():
        yield


def compiled(model, **kwargs):
    if isinstance(model, torch.nn.Module):
        model.eval()
    return torch.compile(model, backend="kiln", **kwargs)


def only_report():
    (report,) = backend.reports()
    return report


def test_the_backend_is_registered():
    assert "kiln" in torch._dynamo.list_backends()


def test_gpt2_block_runs_whole_in_kiln():
    block = Gpt2Block(64, 4)
    x = torch.randn(2, 19, 64)
    out = compiled(block)(x)
    assert relative_error(out, block(x)) < TOLERANCE
    report = only_report()
    assert report.torch_nodes == [] and report.fallbacks == []
    (partition,) = report.partitions
    assert partition.calls == 1 and partition.device.type == "cpu"
    assert {aten.native_layer_norm.default, aten.addmm.default, aten.gelu.default}.issubset(partition.nodes)
    # The attention is one kiln op (not a softmax of matmuls), and the biases sit in the matmuls.
    assert partition.source.count("kiln.attention") == 1 and partition.source.count("kiln.matmul") == 4
    assert "causal" in partition.source
    # nn.Linear's weight.t() is read transposed by the GEMM (transpose_rhs), not copied by a transpose kernel: the
    # traced weight transposes are left unused (and erased as dead code when the partition compiles).
    assert partition.source.count("transpose_rhs") == 4
    weight_transposes = [line.split("=")[0].strip() for line in partition.source.splitlines()
                         if "kiln.transpose %arg" in line and "[1, 0]" in line]
    assert len(weight_transposes) == 4
    assert all(partition.source.count(f"{name} ") + partition.source.count(f"{name},") == 1
               for name in weight_transposes), partition.source
    # For the GPU, the biases, the tanh GELU and both residual adds sit in the GEMMs' epilogues (nn.Linear traces
    # its bias over flattened rows, then the view to [B, S, N] before them): two norms, the q, k and v GEMMs on
    # views of c_attn's weight rows (grouped into one launch; no slice kernel), the attention and three more GEMMs.
    kernels = [k["name"] for k in kiln.compile(partition.source, target="sm_90a").kernels]
    assert len(kernels) == 7 and not any(k.endswith(("_gelu", "_add", "_slice")) for k in kernels), kernels
    assert kernels[1].endswith("_matmul_x3"), kernels


@pytest.mark.parametrize("norm,gqa,mask", [("hf", "repeat_interleave", "flag"), ("module", "expand", "additive")])
def test_llama_block_runs_in_kiln(norm, gqa, mask):
    block = LlamaBlock(64, 4, 2, 96, norm=norm, gqa=gqa, mask=mask)
    x = torch.randn(2, 21, 64)
    cos, sin = rope_tables(21, 16)
    out = compiled(block)(x, cos, sin)
    assert relative_error(out, block(x, cos, sin)) < TOLERANCE
    report = only_report()
    (partition,) = report.partitions
    assert partition.calls == 1 and report.fallbacks == []
    assert partition.source.count("kiln.attention") == 1 and partition.source.count("kiln.matmul") == 7
    # Both GQA spellings reach the attention as the 2 key/value heads, not as their expansion to 4.
    (attention,) = [line for line in partition.source.splitlines() if "kiln.attention" in line]
    assert attention.count("tensor<2x2x21x16xf32>") == 2 and "tensor<2x4x21x16xf32>" in attention
    # The additive triangle (full, triu: no input) is evaluated when the graph compiles, found to be the causal
    # triangle, and becomes the attention's causal flag: nothing of it is left to run.
    assert report.torch_nodes == [] and report.causal_masks == (mask != "flag")
    assert "causal" in attention and "mask(" not in partition.source


@pytest.mark.parametrize("write, rope", [("index_copy_", "halves"), ("index_put_", "halves"),
                                         ("index_copy_", "pairs")])
def test_gpt_fast_decode_layer_with_a_static_cache(write, rope):
    """gpt-fast's decode layer: its write of the new rows into the static cache (``index_copy_``, or the same as an
    indexed assignment, ``index_put_``) is made in place again after torch.compile functionalized it
    (kiln/cache_writes.py), and runs in torch as that one small write into the buffers themselves; everything
    around it runs in Kiln, the attention over the whole cache under the position mask. Two decode steps:
    outputs and both caches as eager's, the caches still the module's own storage. RoPE as this file's halves
    or as gpt-fast's apply_rotary_emb (pairs of x in f32, freqs_cis stacked from cos and sin)."""
    batch, max_len, hidden = 2, 40, 64
    eager, model = (GptFastDecodeLayer(hidden, 4, 2, 96, batch, max_len, write=write, rope=rope) for _ in range(2))
    model.load_state_dict(eager.state_dict())
    for layer in (eager, model):
        layer.eval()
    cache = torch.randn(2, batch, 2, max_len, 16)
    for layer in (eager, model):
        layer.k_cache.copy_(cache[0]), layer.v_cache.copy_(cache[1])
    step = compiled(model)
    storage = (model.k_cache.data_ptr(), model.v_cache.data_ptr())
    x = torch.randn(batch, hidden)
    for position in (max_len - 3, max_len - 2):
        angles = position / 10000.0 ** (torch.arange(8) * 2 / 16)
        cos, sin = angles.cos()[None].expand(batch, -1), angles.sin()[None].expand(batch, -1)
        inputs = (x, cos, sin, torch.tensor([position]), (torch.arange(max_len) <= position)[None, None, None])
        reference, out = eager(*inputs), step(*inputs)
        assert relative_error(out, reference) < TOLERANCE
        assert relative_error(model.k_cache, eager.k_cache) < TOLERANCE
        assert relative_error(model.v_cache, eager.v_cache) < TOLERANCE
        x = out
    report = backend.reports()[-1]
    in_place = getattr(aten, write).default
    assert report.fallbacks == [] and report.cache_writes == 2
    assert report.torch_nodes == [in_place, in_place]
    assert (model.k_cache.data_ptr(), model.v_cache.data_ptr()) == storage
    sources = "".join(p.source for p in report.partitions)
    assert sources.count("kiln.attention") == 1 and sources.count("kiln.matmul") == 4
    # For the GPU: wqkv and w13 run as GEMMs of their weights' row views (no slice kernels; SiLU and the gate
    # product in the w1 and w3 GEMMs' epilogues), RoPE (either spelling) is one kiln.rope for q and one for k,
    # and the boolean position mask is read by the attention (a mask_mod over it, no bias kernel). The pairs
    # spelling's freqs_cis, stacked from cos and sin and read by both partitions, is stacked in each
    # (rematerialize.py) instead of passed from one to the other: no concat or slice kernel.
    kernels = [k["name"].split("_", 3)[-1] for p in report.partitions
               for k in kiln.compile(p.source, target="sm_90a").kernels]
    assert kernels == ["rms_norm", "matmul_x3", "rope", "rope", "attention", "matmul", "rms_norm", "matmul",
                       "matmul", "matmul"], kernels
    if rope == "pairs":
        assert report.rematerialized > 0


def test_gpt_fast_model_decodes_with_its_caches_written_in_place():
    """gpt-fast's whole model over two layers: embedding, the mask row and cos/sin read at the position (the latter
    expanded over the batch: a partition result of zero strides, given to torch contiguous), the layers, the final
    norm and the vocabulary projection. Five decode steps from position 0: logits and every cache as eager's, the
    four cache writes in place, nothing falling back."""
    eager, model = (GptFastModel(100, 64, 4, 2, 96, 2, 48, 2) for _ in range(2))
    model.load_state_dict(eager.state_dict())
    eager.eval()
    step = compiled(model)
    for position in range(5):
        tokens, input_pos = torch.randint(0, 100, (2,)), torch.tensor([position])
        reference, out = eager(tokens, input_pos), step(tokens, input_pos)
        assert relative_error(out, reference) < TOLERANCE
        for mine, theirs in zip(model.layers, eager.layers):
            assert relative_error(mine.k_cache, theirs.k_cache) < TOLERANCE
            assert relative_error(mine.v_cache, theirs.v_cache) < TOLERANCE
    report = backend.reports()[-1]
    assert report.fallbacks == [] and report.cache_writes == 4
    assert aten.index_copy.default not in report.torch_nodes


def test_whole_graph_capture_sees_the_cache_writes_and_stays_off_the_host():
    """What the whole-graph CUDA graph (kiln/whole_graph.py) is decided by, read from gpt-fast's compiled layer on
    CPU tensors: the inputs the graph writes in place are the two caches (index_copy_ on them, or index_put_
    through the same placeholders), and a graph on the host gets no CUDA graph (its partitions run on the host
    backend)."""
    from kiln.whole_graph import has_unknown_effects, mutated_inputs, on_one_gpu
    for write in ("index_copy_", "index_put_"):
        torch._dynamo.reset()
        layer = GptFastDecodeLayer(64, 4, 2, 96, 2, 24, write=write)
        step = compiled(layer)
        angles = 5 / 10000.0 ** (torch.arange(8) * 2 / 16)
        cos, sin = angles.cos()[None].expand(2, -1), angles.sin()[None].expand(2, -1)
        step(torch.randn(2, 64), cos, sin, torch.tensor([5]), (torch.arange(24) <= 5)[None, None, None])
        report = backend.reports()[-1]
        placeholders = [n for n in report.graph.graph.nodes if n.op == "placeholder"]
        caches = {i for i, n in enumerate(placeholders) if tuple(n.meta["val"].shape) == (2, 2, 24, 16)}
        assert len(caches) == 2 and mutated_inputs(report.graph) == caches
        assert on_one_gpu(report.graph) is None and report.whole_graph is None
        assert not has_unknown_effects(report.graph)
    # A call without an aten schema (here torch.relu, as a plain FX trace records it) could write its inputs
    # unseen: such a graph gets no whole-graph CUDA graph.
    assert has_unknown_effects(torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1))


def test_mutated_inputs_are_found_through_views_and_lists():
    """The inputs a graph writes in place (which the whole-graph CUDA graph must never stage) include those written
    through a view and each tensor of a Tensor(a!)[] list (_foreach_add_), not an input only read."""
    from kiln.whole_graph import mutated_inputs
    graph = torch.fx.Graph()
    a, b, c, read = (graph.placeholder(name) for name in ("a", "b", "c", "read"))
    graph.call_function(aten._foreach_add_.Scalar, ([a, c], 1.0))
    view = graph.call_function(aten.view.default, (b, [4]))
    graph.call_function(aten.add_.Tensor, (view, graph.call_function(aten.neg.default, (read,))))
    graph.output(None)
    assert mutated_inputs(torch.fx.GraphModule(torch.nn.Module(), graph)) == {0, 1, 2}


def test_backend_options_are_checked():
    """A cuda_graphs option other than True, False or "partitions" is refused, naming the option."""
    with pytest.raises(Exception, match="cuda_graphs"):
        torch.compile(lambda x: x * 2, backend="kiln", options={"cuda_graphs": "whole"})(torch.randn(3))


class RuntimeRotary(torch.nn.Module):
    """RoPE with its cos/sin computed from the positions at run time (Hugging Face's rotary embedding)."""

    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

    def forward(self, x, positions):
        angles = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat([angles, angles], dim=-1)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * emb.cos() + rotated * emb.sin()


def test_rotary_table_computed_at_run_time_runs_in_kiln():
    """aten.cos and aten.sin of run-time angles convert (kiln.cos, kiln.sin): the whole rotation is one partition."""
    module = RuntimeRotary(16)
    x, positions = torch.randn(3, 37, 16), torch.arange(37, dtype=torch.float32) + 500.0
    out = compiled(module)(x, positions)
    assert relative_error(out, module(x, positions)) < TOLERANCE
    report = only_report()
    assert report.torch_nodes == [] and report.fallbacks == [] and len(report.partitions) == 1
    source = report.partitions[0].source
    assert "kiln.cos" in source and "kiln.sin" in source


def test_reports_do_not_keep_compiled_graphs_alive():
    """A report keeps what the backend did (its counts, its fallbacks) but not the compiled graph: once torch
    drops the compiled function, its GraphModule and partitions (their programs, their CUDA graphs on a GPU) are
    freed while the report stays, reading None and no partitions."""
    layer = torch.nn.Linear(16, 8)
    step = compiled(lambda x: torch.relu(layer(x)))
    step(torch.randn(3, 16))
    report = only_report()
    graph, partition = weakref.ref(report.graph), weakref.ref(report.partitions[0])
    assert report.kernels is None and report.torch_nodes == []  # host partitions
    del step
    torch._dynamo.reset()
    gc.collect()
    assert graph() is None and partition() is None
    assert report.graph is None and report.partitions == [] and report.whole_graph is None
    assert report.fallbacks == [] and backend.reports() == [report]


def _set_generic_fp32_precision(value):
    """torch's generic fp32 precision, which the CUDA matmul setting inherits while that one is "none"."""
    torch.backends.fp32_precision = value
    torch.backends.cuda.matmul.fp32_precision = "none"


@pytest.mark.parametrize("setting, expected", [
    (lambda: torch.set_float32_matmul_precision("highest"), "ieee"),
    (lambda: torch.set_float32_matmul_precision("high"), "tf32"),
    (lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True), "tf32"),
    (lambda: _set_generic_fp32_precision("tf32"), "tf32"),
    (lambda: setattr(torch.backends.cuda.matmul, "fp32_precision", "ieee"), "ieee"),
], ids=["highest", "high", "allow_tf32", "generic_tf32", "matmul_ieee"])
def test_f32_matmuls_multiply_as_torch_would(setting, expected):
    """torch multiplies f32 matmuls in full f32 unless TF32 is allowed (set_float32_matmul_precision, the legacy
    allow_tf32, or the newer fp32_precision settings, generic or per backend): each f32 matmul of a partition
    says which (fp32_precision), so that a GPU runs 3xTF32 where torch would not round to TF32, and TF32 tensor
    cores where it would. Every spelling of the setting is read, none makes the matmuls fall back to torch."""
    previous = torch.get_float32_matmul_precision()
    setting()
    try:
        layer, x = torch.nn.Linear(32, 24), torch.randn(5, 32)
        out = compiled(lambda t: torch.relu(layer(t)) @ layer.weight)(x)
        assert relative_error(out, torch.relu(layer(x)) @ layer.weight) < TOLERANCE
    finally:
        # Back through the legacy call as well: restoring the new settings alone leaves torch's legacy getters
        # refusing a "mix" of the two APIs.
        torch.backends.fp32_precision = "none"
        torch.set_float32_matmul_precision(previous)
    report = only_report()
    source = report.partitions[0].source
    assert report.torch_nodes == [] and report.fallbacks == []
    assert source.count("kiln.matmul") == 2 and source.count(f'fp32_precision = "{expected}"') == 2, source


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_with_enable_gqa_is_one_grouped_attention(causal):
    """SDPA's own GQA (enable_gqa=True, 4 query heads on 2 key/value heads) reaches aten as a fused backend
    kernel that takes no enable_gqa (on CPU tensors _scaled_dot_product_flash_attention_for_cpu): its different
    head counts are GQA as torch computes it, one kiln.attention over the 2 heads, not a fallback to torch."""
    q, k, v = torch.randn(2, 4, 13, 16), torch.randn(2, 2, 13, 16), torch.randn(2, 2, 13, 16)

    def attend(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q * 0.5, k, v, is_causal=causal, enable_gqa=True) + q
    out = compiled(attend)(q, k, v)
    assert relative_error(out, attend(q, k, v)) < TOLERANCE
    report = only_report()
    (partition,) = report.partitions
    assert report.torch_nodes == [] and report.fallbacks == []
    (attention,) = [line for line in partition.source.splitlines() if "kiln.attention" in line]
    assert attention.count("tensor<2x2x13x16xf32>") == 2 and ("causal" in attention) == causal


@pytest.mark.parametrize("setting, expected", [
    (lambda: torch.set_float32_matmul_precision("highest"), "ieee"),
    (lambda: torch.set_float32_matmul_precision("high"), "tf32"),
], ids=["highest", "high"])
def test_f32_attention_multiplies_as_torch_would(setting, expected):
    """An f32 attention's two products follow torch's matmul setting as the matmuls do: 3xTF32 ("ieee") at
    torch's default, where a GPU's TF32 alone would leave errors near 1e-3 that torch's own f32 attention does
    not have, TF32 where torch allows it."""
    previous = torch.get_float32_matmul_precision()
    setting()
    try:
        q, k, v = torch.randn(1, 4, 9, 16), torch.randn(1, 4, 11, 16), torch.randn(1, 4, 11, 16)

        def attend(q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q * 0.5, k, v) + q
        out = compiled(attend)(q, k, v)
        assert relative_error(out, attend(q, k, v)) < TOLERANCE
    finally:
        torch.backends.fp32_precision = "none"
        torch.set_float32_matmul_precision(previous)
    source = only_report().partitions[0].source
    assert source.count("kiln.attention") == 1 and f'fp32_precision = "{expected}"' in source, source


class RuntimePaddingMask(torch.nn.Module):
    """Attention scores masked by a padding mask computed at run time from an int64 attention_mask, the way
    Hugging Face builds it (a comparison with 0, or-ed with the future, masked_fill with the dtype's minimum),
    beside remainders and logical ops on the scores."""

    def forward(self, scores, attention_mask):
        padded = (attention_mask == 0)[:, None, :]
        seq = scores.shape[-1]
        future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
        hidden = torch.logical_or(padded, future)
        masked = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
        probs = torch.softmax(masked, dim=-1)
        signs = torch.logical_xor(scores > 0, torch.logical_not(scores <= 1.5))
        return probs, torch.remainder(scores, 1.5), torch.fmod(scores, -2.0), torch.where(signs, scores, 0.25)


def test_padding_mask_computed_at_run_time_runs_in_kiln():
    """aten.eq/gt/le, logical_or/xor/not, masked_fill, where, remainder and fmod convert: one partition; only
    the constants (the future triangle, where's 0.25) are made by torch."""
    module = RuntimePaddingMask()
    scores = torch.randn(3, 29, 29) * 3
    attention_mask = torch.ones(3, 29, dtype=torch.int64)
    attention_mask[1, 4:9] = 0
    attention_mask[2, -6:] = 0
    outs = compiled(module)(scores, attention_mask)
    for out, reference in zip(outs, module(scores, attention_mask)):
        assert relative_error(out, reference) < TOLERANCE
    report = only_report()
    constants = {aten.ones.default, aten.triu.default}
    assert set(report.torch_nodes) == constants and report.fallbacks == [] and len(report.partitions) == 1
    source = report.partitions[0].source
    assert "kiln.compare eq" in source and "kiln.remainder" in source and "kiln.fmod" in source


def cache_slots(positions, ids, x):
    """Integer arithmetic as serving code writes it (a position's page and slot, a signed offset divided both
    ways), integer remainders and maximum, and a float floor division."""
    page, slot = positions // 16, positions % 16
    offset = positions - 40
    return (page * 16 + slot, torch.div(offset, 3, rounding_mode="trunc"), torch.div(offset, 3, rounding_mode="floor"),
            torch.remainder(ids, 7), torch.fmod(ids - 3, -4), torch.maximum(ids, positions),
            torch.floor_divide(x, 0.1), torch.div(x, -0.3, rounding_mode="trunc"))


def test_integer_arithmetic_runs_in_kiln_exactly():
    """aten add/sub/mul/remainder/fmod/maximum and div with both rounding modes on int64, and floor_divide on
    floats, convert: one partition, nothing left to torch, every result equal to eager's (Python's // on floats,
    not floor(x / y))."""
    positions = torch.arange(77, dtype=torch.int64).reshape(7, 11)
    ids = torch.randint(-100, 100, (7, 11))
    x = torch.randn(7, 11) * 3
    outs = compiled(cache_slots)(positions, ids, x)
    references = cache_slots(positions, ids, x)
    for index, (out, reference) in enumerate(zip(outs, references)):
        assert out.dtype == reference.dtype and torch.equal(out, reference), index
    report = only_report()
    assert report.torch_nodes == [] and report.fallbacks == [] and len(report.partitions) == 1
    source = report.partitions[0].source
    assert "kiln.div" in source and "xi64>" in source


def test_comparisons_kiln_cannot_make_exactly_stay_in_torch():
    """A bool compared with 2 and an int64 tensor with 2.5 are made by torch's promotion (to int, to float), which
    Kiln does not do: those nodes stay in torch and the results are eager's."""
    def compare(ids, x):
        return torch.where((ids == 0) != 2, x, 0.5) + torch.where(ids > 2.5, x, -x)

    ids, x = torch.randint(0, 5, (3, 7)), torch.randn(3, 7)
    out = compiled(compare)(ids, x)
    assert relative_error(out, compare(ids, x)) < TOLERANCE
    report = only_report()
    assert aten.ne.Scalar in report.torch_nodes and aten.gt.Scalar in report.torch_nodes
    assert aten.eq.Scalar not in report.torch_nodes


class ReadsTheOldCache(torch.nn.Module):
    """A buffer read before its index_copy_ as well as after it: the functional write must stay (an in-place
    write could run before the first read)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.randn(6, 8))

    def forward(self, x, position):
        old = self.cache * 2.0
        self.cache.index_copy_(0, position, x)
        return old + self.cache


def test_a_cache_read_before_its_write_keeps_the_functional_write():
    eager, model = ReadsTheOldCache(), ReadsTheOldCache()
    model.load_state_dict(eager.state_dict())
    x, position = torch.randn(1, 8), torch.tensor([4])
    reference, out = eager(x, position), compiled(model)(x, position)
    assert relative_error(out, reference) < TOLERANCE
    assert relative_error(model.cache, eager.cache) < TOLERANCE
    assert backend.reports()[-1].cache_writes == 0


class Mixed(torch.nn.Module):
    """Supported layers around a sort and a bitwise and, which stay in torch."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 48), torch.nn.Linear(48, 32)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        h, order = torch.sort(h, dim=-1)
        shift = (order[..., :1] & 3).to(x.dtype)  # no bitwise ops in kiln
        return torch.softmax(self.fc2(h) * 0.5, dim=-1) + shift


def test_unsupported_nodes_stay_in_torch():
    model = Mixed()
    x = torch.randn(3, 10, 32)
    out = compiled(model)(x)
    assert relative_error(out, model(x)) < TOLERANCE
    report = only_report()
    assert len(report.partitions) == 2 and all(p.calls == 1 for p in report.partitions)
    assert aten.sort.default in report.torch_nodes and aten.bitwise_and.Scalar in report.torch_nodes
    kiln_nodes = {n for p in report.partitions for n in p.nodes}
    assert aten.sort.default not in kiln_nodes and aten._softmax.default in kiln_nodes


def test_attention_kiln_does_not_express_stays_in_torch():
    """torch aligns a causal mask top-left when seq_q != seq_k, Kiln bottom-right: that attention is torch's;
    the projections around it are Kiln's."""
    proj = torch.nn.Linear(16, 16)

    def cross(q, k, v):
        return proj(F.scaled_dot_product_attention(q, k, v, is_causal=True))

    q, k, v = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 9, 16), torch.randn(1, 2, 9, 16)
    out = compiled(cross)(q, k, v)
    assert relative_error(out, cross(q, k, v)) < TOLERANCE
    report = only_report()
    assert aten._scaled_dot_product_flash_attention_for_cpu.default in report.torch_nodes
    assert len(report.partitions) == 1 and report.partitions[0].calls == 1


def test_bool_mask_and_layer_norm_without_affine():
    norm = torch.nn.LayerNorm(16, elementwise_affine=False)

    def masked(q, k, v, keep):
        return norm(F.scaled_dot_product_attention(q, k, v, attn_mask=keep))

    q, k, v = torch.randn(2, 2, 7, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16)
    keep = torch.rand(7, 11) > 0.3
    keep[:, 0] = True
    keep[3] = False  # a query that sees no key: its attention is zeros in eager, so LayerNorm's output too
    out = compiled(masked)(q, k, v, keep)
    assert relative_error(out, masked(q, k, v, keep)) < TOLERANCE
    assert not out.isnan().any()
    (partition,) = only_report().partitions
    # The boolean mask is the attention's table, read by a mask_mod: no kernel makes it an additive bias.
    (attention,) = [line for line in partition.source.splitlines() if "kiln.attention" in line]
    assert "mod_operands(%arg3 : tensor<7x11xi1>) mask_mod" in attention
    assert "kiln.select" not in kiln.compile(partition.source).ir("fused")


@pytest.mark.parametrize("spelling", ["bool_tril", "bool_tril_4d", "additive_triu", "window", "offset_triu",
                                      "from_input"])
def test_constant_causal_masks_become_the_causal_flag(spelling):
    """A mask built from constants is evaluated when the graph compiles: the causal triangle (as a bool tril or an
    additive -inf triu) becomes is_causal and leaves nothing to run; any other mask (a window, a shifted triangle,
    one computed from an input) stays the attention's mask."""
    def attend(q, k, v, scores_bias):
        s = q.shape[-2]
        if spelling == "bool_tril":
            mask = torch.ones(s, s, dtype=torch.bool).tril()
        elif spelling == "bool_tril_4d":  # broadcast over batch and heads as [1, 1, S, S]
            mask = torch.ones(s, s, dtype=torch.bool).tril()[None, None]
        elif spelling == "additive_triu":
            mask = torch.full((s, s), float("-inf")).triu(1)
        elif spelling == "window":
            mask = torch.ones(s, s, dtype=torch.bool).tril().triu(-3)
        elif spelling == "offset_triu":
            mask = torch.full((s, s), float("-inf")).triu(2)
        else:
            mask = torch.full((s, s), float("-inf")).triu(1) + scores_bias
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * 2.0

    q, k, v = (torch.randn(2, 3, 13, 16) for _ in range(3))
    bias = torch.zeros(13, 13)
    out = compiled(attend)(q, k, v, bias)
    assert relative_error(out, attend(q, k, v, bias)) < TOLERANCE
    report = only_report()
    (partition,) = report.partitions
    causal = spelling in ("bool_tril", "bool_tril_4d", "additive_triu")
    assert report.causal_masks == int(causal)
    (attention,) = [line for line in partition.source.splitlines() if "kiln.attention" in line]
    assert ("causal" in attention) == causal and ("mask(" in attention or "mask_mod" in attention) != causal
    if causal:
        assert report.torch_nodes == []


def test_a_new_shape_recompiles_and_kiln_caches_hit():
    block = Gpt2Block(32, 2)
    fast = compiled(block, dynamic=False)
    for seq in (8, 13):
        x = torch.randn(2, seq, 32)
        assert relative_error(fast(x), block(x)) < TOLERANCE
    assert len(backend.reports()) == 2  # torch.compile's guards asked for a second graph
    assert [p.calls for r in backend.reports() for p in r.partitions] == [1, 1]
    # A graph compiled again (dynamo's caches emptied) finds its Kiln program in Kiln's cache.
    torch._dynamo.reset()
    hits = kiln.compiler._compile_cached.cache_info().hits
    x = torch.randn(2, 8, 32)
    assert relative_error(compiled(block, dynamic=False)(x), block(x)) < TOLERANCE
    assert kiln.compiler._compile_cached.cache_info().hits == hits + 1


def test_a_graph_dynamo_made_dynamic_is_specialised_per_shape():
    block = Gpt2Block(32, 2)
    fast = compiled(block)  # dynamic=None: the second shape makes dynamo trace a dynamic graph
    for seq in (8, 13, 17, 13):
        x = torch.randn(1, seq, 32)
        assert relative_error(fast(x), block(x)) < TOLERANCE
    # One static graph, then one per new shape of the dynamic one (13 again is a hit).
    assert len(backend.reports()) == 3
    assert all(len(r.partitions) == 1 and r.partitions[0].calls >= 1 for r in backend.reports())


def test_non_contiguous_output_keeps_torchs_strides():
    """A partition whose result torch reads through a view gets it in torch's layout."""
    def f(x, w):
        y = (x @ w).transpose(0, 1)  # Kiln computes it contiguous; torch's is a transposed view
        return torch.sort(y, dim=0).values.transpose(0, 1).view(-1)  # sort keeps y's strides, view needs them

    x, w = torch.randn(6, 8), torch.randn(8, 5)
    out = compiled(f)(x, w)
    assert relative_error(out, f(x, w)) < TOLERANCE
    (partition,) = only_report().partitions
    assert partition.calls == 1 and partition.strides == [(1, 5)]


def test_data_movement_of_inputs_is_recomputed_in_each_partition():
    """A stack of graph inputs read on both sides of a node torch keeps (cumsum) is stacked in each partition
    (rematerialize.py) instead of being a result of the first partition that the second reads back."""
    def step(a, b, x):
        s = torch.stack([a, b], -1)
        y = (x * s.sum(-1)).cumsum(-1)
        return y + s[..., 0] * s[..., 1]

    a, b, x = torch.randn(3, 8), torch.randn(3, 8), torch.randn(3, 8)
    out = compiled(step)(a, b, x)
    assert relative_error(out, step(a, b, x)) < TOLERANCE
    report = only_report()
    assert report.rematerialized > 0 and aten.cumsum.default in report.torch_nodes
    assert len(report.partitions) == 2
    # Each partition takes a and b themselves: no stacked [3, 8, 2] tensor crosses between them.
    assert all("tensor<3x8x2xf32>" not in p.source.split("{")[0] for p in report.partitions)
