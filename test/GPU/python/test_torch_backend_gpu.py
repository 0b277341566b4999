"""torch.compile(model, backend="kiln") on CUDA tensors: the GPT-2 and Llama blocks of plain_torch_blocks.py in bf16 and
f32 against eager, their launch counts, and the CUDA-graph replay of the partitions.

Run with the GPU suite. The programs are compiled on the GPU machine (the installed wheel) or found in the disk cache
that prepare.py filled. References are eager torch in f32 (TF32 off); a Kiln result may be off by 2e-2 (bf16) or
1e-2 (f32 on TF32 tensor cores) relative in the max norm, or by twice eager's own error at the same precision
(bf16, or f32 with TF32), whichever is larger: a whole block rounds more than one op does.
"""

import secrets
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Integration" / "python"))
import kiln.torch_backend as backend  # noqa: E402
from plain_torch_blocks import (Gpt2Block, GptFastDecodeLayer, GptFastModel, LlamaBlock, relative_error,  # noqa: E402
                                rope_tables)

TOLERANCE = {torch.bfloat16: 2e-2, torch.float32: 1e-2}
#: (hidden, heads, kv_heads, ffn, batch, seq): a small shape whose lengths divide no tile, and a realistic one.
GPT2_SHAPES = {"small": (256, 4, 4, 1024, 2, 77), "gpt2": (768, 12, 12, 3072, 8, 512)}
LLAMA_SHAPES = {"small": (256, 4, 2, 512, 2, 77), "llama8b_b1": (4096, 32, 8, 14336, 1, 2048),
                "llama8b_b8": (4096, 32, 8, 14336, 8, 512)}


@pytest.fixture(autouse=True)
def fresh():
    seed = secrets.randbits(32)
    print(f"seed {seed}")
    torch.manual_seed(seed)
    torch._dynamo.reset()
    backend.reports().clear()
    with torch.no_grad():
        yield


def build(kind, shape, dtype, **spelling):
    hidden, heads, kv_heads, ffn, batch, seq = shape
    if kind == "gpt2":
        block, extra = Gpt2Block(hidden, heads), ()
    else:
        block = LlamaBlock(hidden, heads, kv_heads, ffn, **spelling)
        extra = rope_tables(seq, hidden // heads, device="cuda")
    block = block.cuda().eval()
    for p in block.parameters():  # the default init is too small for a block's output to exercise the kernels
        p.data.normal_(0.0, 1.0 / p.shape[-1] ** 0.5 if p.ndim == 2 else 1.0).add_(1.0 if p.ndim == 1 else 0.0)
    x = torch.randn(batch, seq, hidden, device="cuda")
    return block, x, extra


def eager(block, dtype, x, extra, tf32):
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        model = block.to(dtype)
        return model(x.to(dtype), *[t.to(dtype) for t in extra]).float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def check_block(kind, shape, dtype, **spelling):
    block, x, extra = build(kind, shape, dtype, **spelling)
    reference = eager(block, torch.float32, x, extra, tf32=False)
    own = relative_error(eager(block, dtype, x, extra, tf32=True), reference)
    model = block.to(dtype)
    fast = torch.compile(model, backend="kiln", dynamic=False)
    inputs = (x.to(dtype), *[t.to(dtype) for t in extra])
    out = fast(*inputs)
    error = relative_error(out, reference)
    print(f"{kind} {shape} {dtype}: kiln {error:.2e}, eager {own:.2e}")
    assert out.dtype == dtype and error <= max(TOLERANCE[dtype], 2 * own)
    return fast, inputs, reference


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("shape", list(GPT2_SHAPES))
def test_gpt2_block(shape, dtype):
    check_block("gpt2", GPT2_SHAPES[shape], dtype)
    (report,) = backend.reports()
    assert report.torch_nodes == [] and report.fallbacks == [] and len(report.partitions) == 1
    assert report.partitions[0].device.type == "cuda"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("shape", list(LLAMA_SHAPES))
def test_llama_block(shape, dtype):
    check_block("llama", LLAMA_SHAPES[shape], dtype)
    (report,) = backend.reports()
    assert report.torch_nodes == [] and report.fallbacks == [] and len(report.partitions) == 1


@pytest.mark.parametrize("write", ["index_copy_", "index_put_"])
def test_gpt_fast_decode_layer_with_a_static_cache(write):
    """gpt-fast's decode layer in bf16 (its write into the static cache made in place again and left to torch):
    two decode steps against the same layer in f32 eager (TF32 off), outputs and the caches' new rows, written
    into the module's own buffers."""
    batch, max_len, hidden = 2, 300, 256
    layer = GptFastDecodeLayer(hidden, 4, 2, 512, batch, max_len, write=write).cuda().eval()
    for p in layer.parameters():
        p.data.normal_(0.0, 1.0 / p.shape[-1] ** 0.5 if p.ndim == 2 else 1.0).add_(1.0 if p.ndim == 1 else 0.0)
    layer.k_cache.normal_(), layer.v_cache.normal_()
    reference_layer = GptFastDecodeLayer(hidden, 4, 2, 512, batch, max_len).cuda().eval()
    reference_layer.load_state_dict(layer.state_dict())
    model = layer.to(torch.bfloat16)
    step = torch.compile(model, backend="kiln", dynamic=False)
    storage = (model.k_cache.data_ptr(), model.v_cache.data_ptr())
    x = torch.randn(batch, hidden, device="cuda")
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    kept = []
    try:
        for position in (max_len - 50, max_len - 49, max_len - 48):
            angles = position / 10000.0 ** (torch.arange(32, device="cuda") * 2 / 64)
            cos, sin = angles.cos()[None].expand(batch, -1), angles.sin()[None].expand(batch, -1)
            mask = (torch.arange(max_len, device="cuda") <= position)[None, None, None]
            index = torch.tensor([position], device="cuda")
            reference = reference_layer(x, cos, sin, index, mask)
            # Each step's inputs stay alive, so that no later step's input reuses an earlier one's address (the
            # whole graph would read it in place and capture again when it moved).
            kept.append((x.bfloat16(), cos.bfloat16(), sin.bfloat16(), index, mask))
            out = step(*kept[-1])
            error = relative_error(out, reference)
            rows = [relative_error(mine[:, :, position], theirs[:, :, position])
                    for mine, theirs in ((model.k_cache, reference_layer.k_cache),
                                         (model.v_cache, reference_layer.v_cache))]
            print(f"position {position}: output {error:.2e}, new cache rows {max(rows):.2e}")
            assert error <= TOLERANCE[torch.bfloat16] and max(rows) <= TOLERANCE[torch.bfloat16]
            x = reference
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    report = backend.reports()[-1]
    assert report.fallbacks == [] and all(p.device.type == "cuda" for p in report.partitions)
    assert report.cache_writes == 2 and (model.k_cache.data_ptr(), model.v_cache.data_ptr()) == storage
    # The whole layer, both partitions and the two in-place writes between them, replays from one CUDA graph
    # from the second step on (the first loads the kernels).
    graph = report.whole_graph
    assert graph is not None and graph.failed is None and (graph.captures, graph.replays) == (1, 2)


def test_whole_graph_replay_follows_inputs_that_move():
    """The whole-graph CUDA graph (kiln/whole_graph.py) on a graph that writes one input in place and reads two
    others: new rows in a fresh tensor each call (copied into the graph's buffer), a weight that stays (read in
    place), and the cache, whose write must reach the caller's tensor. Given another cache, the graph is captured
    again around it: each call's result and each cache as eager's, f32 with TF32 off."""
    def write_and_read(cache, rows, position, weight):
        cache.index_copy_(0, position, rows)
        return torch.relu(cache @ weight).sum(0)

    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        step = torch.compile(write_and_read, backend="kiln", dynamic=False)
        weight = torch.randn(64, 80, device="cuda")
        caches = [torch.randn(37, 64, device="cuda") for _ in range(2)]
        references = [c.clone() for c in caches]
        for call, (which, position) in enumerate([(0, 3), (0, 4), (0, 5), (1, 6), (1, 7), (0, 8)]):
            rows, index = torch.randn(1, 64, device="cuda"), torch.tensor([position], device="cuda")
            expected = write_and_read(references[which], rows, index, weight)
            out = step(caches[which], rows, index, weight)
            assert relative_error(out, expected) < 1e-4, call
            for mine, theirs in zip(caches, references):
                assert relative_error(mine, theirs) < 1e-6, call
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    report = backend.reports()[-1]
    assert report.cache_writes == 1 and report.partitions
    graph = report.whole_graph
    # Captured at the second call, again for the other cache, and again for the first one back.
    assert graph.failed is None and (graph.captures, graph.replays) == (3, 5)


def test_gpt_fast_model_decodes_with_its_caches_written_in_place():
    """gpt-fast's model over two layers in bf16 (embedding, mask row and cos/sin read at the position, the layers,
    the vocabulary projection): four decode steps against the same model in f32 eager (TF32 off), logits within
    bf16's tolerance or twice eager bf16's error, the four cache writes in place."""
    reference_model = GptFastModel(1000, 256, 4, 2, 512, 2, 300, 2).cuda().eval()
    for p in reference_model.parameters():
        p.data.normal_(0.0, 1.0 / p.shape[-1] ** 0.5 if p.ndim == 2 else 1.0).add_(1.0 if p.ndim == 1 else 0.0)
    model, eager = (GptFastModel(1000, 256, 4, 2, 512, 2, 300, 2).cuda().eval() for _ in range(2))
    for copy in (model, eager):
        copy.load_state_dict(reference_model.state_dict())
        copy.to(torch.bfloat16)
    step = torch.compile(model, backend="kiln", dynamic=False)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for position in range(4):
            tokens = torch.randint(0, 1000, (2,), device="cuda")
            input_pos = torch.tensor([position], device="cuda")
            reference, out = reference_model(tokens, input_pos), step(tokens, input_pos)
            error, eager_error = relative_error(out, reference), relative_error(eager(tokens, input_pos), reference)
            print(f"position {position}: logits {error:.2e} (eager bf16 {eager_error:.2e})")
            assert error <= max(TOLERANCE[torch.bfloat16], 2 * eager_error)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    report = backend.reports()[-1]
    assert report.fallbacks == [] and report.cache_writes == 4


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_launch_count_is_the_partitions_kernels(kind):
    """With the block whole in Kiln, one call launches exactly the partition's kernels (counted by the profiler,
    which sees the driver API's launches too)."""
    shapes = GPT2_SHAPES if kind == "gpt2" else LLAMA_SHAPES
    block, x, extra = build(kind, shapes["small"], torch.bfloat16)
    block = block.to(torch.bfloat16)
    inputs = (x.to(torch.bfloat16), *[t.to(torch.bfloat16) for t in extra])
    fast = torch.compile(block, backend="kiln", dynamic=False, options={"cuda_graphs": False})
    fast(*inputs)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        fast(*inputs)
        torch.cuda.synchronize()
    launches = [e for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA
                and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    (report,) = backend.reports()
    print(f"{kind}: {report.kernels} kiln kernels: {[k['name'] for k in report.partitions[0].kernels]}")
    assert len(launches) == report.kernels


@pytest.mark.parametrize("norm,gqa,mask", [("hf", "repeat_interleave", "flag"), ("module", "expand", "additive"),
                                            ("module", "repeat_interleave", "flag"), ("hf", "expand", "additive")])
def test_llama_spellings_fuse_to_at_most_ten_launches(norm, gqa, mask):
    """Each spelling of the Llama block (Hugging Face's RMSNorm with f32 casts or nn.RMSNorm; GQA by
    repeat_interleave or expand + reshape; causal by the flag or an additive -inf triangle) runs whole in Kiln,
    matches eager, and launches at most 10 kernels: one RMSNorm, the grouped q/k/v GEMMs, one RoPE launch for q
    and k, the attention, and the output and MLP GEMMs (Inductor: 16)."""
    shape = LLAMA_SHAPES["small"]
    fast, inputs, _ = check_block("llama", shape, torch.bfloat16, norm=norm, gqa=gqa, mask=mask)
    (report,) = backend.reports()
    assert report.torch_nodes == [] and report.fallbacks == [] and len(report.partitions) == 1
    assert report.causal_masks == (mask == "additive")
    names = [k["name"] for k in report.partitions[0].kernels]
    print(f"{norm}/{gqa}/{mask}: {len(names)} kernels: {names}")
    assert report.kernels <= 10 and sum("rope" in n for n in names) == 1 and not any("transpose" in n for n in names)


@pytest.mark.parametrize("graphs", ["partitions", True])
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_cuda_graph_replays_with_new_inputs(kind, graphs):
    """From the second call on, the partition's own CUDA graph (cuda_graphs="partitions") or the whole graph's
    (the default) replays: new activations are copied in, weights read in place, and a result kept from an
    earlier call is not overwritten by a later replay."""
    shapes = GPT2_SHAPES if kind == "gpt2" else LLAMA_SHAPES
    block, _, extra = build(kind, shapes["small"], torch.bfloat16)
    block = block.to(torch.bfloat16)
    extra = [t.to(torch.bfloat16) for t in extra]
    fast = torch.compile(block, backend="kiln", dynamic=False, options={"cuda_graphs": graphs})
    xs = [torch.randn(*shapes["small"][4:], shapes["small"][0], device="cuda", dtype=torch.bfloat16)
          for _ in range(4)]
    outs = [fast(x, *extra) for x in xs]
    torch.cuda.synchronize()
    (report,) = backend.reports()
    (partition,) = report.partitions
    if graphs == "partitions":
        assert report.whole_graph is None
        assert partition.calls == 4 and partition._graphed is not None and partition._graphed.bound is not None
    else:
        # The warm call and the capture run the partition; the third and fourth calls replay the whole graph.
        whole = report.whole_graph
        assert partition.calls == 2 and whole.failed is None and (whole.captures, whole.replays) == (1, 3)
    for x, out in zip(xs, outs):
        assert relative_error(out, block(x, *extra)) <= TOLERANCE[torch.bfloat16]
    assert len({o.data_ptr() for o in outs}) == len(outs)


def test_a_new_batch_recompiles_with_kernel_cache_hits():
    shape = LLAMA_SHAPES["small"]
    block, x, extra = build("llama", shape, torch.bfloat16)
    block = block.to(torch.bfloat16)
    extra = [t.to(torch.bfloat16) for t in extra]
    fast = torch.compile(block, backend="kiln", dynamic=False)
    for batch in (2, 3):
        x = torch.randn(batch, shape[5], shape[0], device="cuda", dtype=torch.bfloat16)
        assert relative_error(fast(x, *extra), block(x, *extra)) <= TOLERANCE[torch.bfloat16]
    first, second = backend.reports()
    assert len(second.partitions) == 1
    hits = [k.get("kernel_cache") for k in second.partitions[0].kernels]
    print(f"second batch: {hits.count('hit')} of {len(hits)} kernels from the kernel cache")
    assert "hit" in hits


def positions_and_slots(positions, ids):
    """Integer position arithmetic (page and slot, a signed offset divided both ways), as serving code writes it."""
    page, slot = positions // 16, positions % 16
    offset = positions - 40
    return (page * 16 + slot, torch.div(offset, 3, rounding_mode="trunc"), torch.div(offset, 3, rounding_mode="floor"),
            torch.remainder(ids, 7), torch.fmod(ids - 3, -4), torch.maximum(ids, positions))


def test_integer_arithmetic_runs_in_kiln_exactly_on_the_gpu():
    """Every result equal to eager's, the graph one Kiln partition with nothing left to torch."""
    positions = torch.arange(77 * 5, device="cuda").reshape(5, 77)
    ids = torch.randint(-100, 100, (5, 77), device="cuda")
    outs = torch.compile(positions_and_slots, backend="kiln")(positions, ids)
    for index, (out, reference) in enumerate(zip(outs, positions_and_slots(positions, ids))):
        assert out.dtype == reference.dtype and torch.equal(out, reference), index
    (report,) = backend.reports()
    assert report.torch_nodes == [] and report.fallbacks == [] and len(report.partitions) == 1
