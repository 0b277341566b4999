"""A Llama decode layer over a paged KV cache on the H200: Kiln's run plan against torch eager and torch.compile
of the same layer written the way gpt-fast writes it, in one run, checked against float32 in the same run.

Why: a decode step is where serving spends its GPU time, and its floor is the bytes it must read: the layer's
436 MB of weights and the KV cache. The layer (4096 hidden, 32/8 heads of 128, 14336 MLP, bf16) takes its KV
cache in pages and its positions as inputs: RMSNorm, the q/k/v projections, RoPE at each sequence's position
(the cos/sin rows of its position, as gpt-fast indexes freqs_cis by input_pos), the new K/V rows appended into
their pages in place (kiln.append_kv), paged attention over every sequence's keys, the output projection and the
residual, RMSNorm, SwiGLU and the down projection with the residual: one @kiln.jit function, compiled to one run
plan, replayed as one CUDA graph.

- ``prepare`` (here, where the compiler is): traces the layer for each case and compiles it with kilnc into
  ``<out>/<case>``, plus ``<out>/cases.json``.
- ``visit`` (on the GPU machine, build/python on PYTHONPATH): per case, fresh random weights and caches (each
  sequence's pages at shuffled ids of one pool, rows past its length NaN), one call checked against the layer in
  float32 (the new rows in their pages too), then the time of one layer as a CUDA graph of back-to-back calls
  (row_kernels.time_ms) beside torch eager, torch.compile and torch.compile with CUDA graphs
  (mode="reduce-overhead") of a gpt-fast-style layer (nn.Linear weights with fused qkv and w13, a static
  [B, Hkv, max_len, D] cache written by index_copy_, SDPA under a position mask), and each Kiln kernel's own time;
  writes decode_layer.json and decode_layer.md to ``--out``.
"""
import argparse
import json
import math
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 4096, 32, 8, 128, 14336
EPS = 1e-5
#: name: (batch, KV length including the new token, page size)
CASES = {
    "b32_kv4096_p16": (32, 4096, 16),
    "b32_kv4096_p128": (32, 4096, 128),
    "b1_kv8192_p16": (1, 8192, 16),
    "b1_kv8192_p128": (1, 8192, 128),
}
COPY_LIMIT_TBS = 4.27  # the H200's device-to-device copy rate (H200.md)


def layer():
    """The decode layer as a @kiln.jit function (made here so that importing this script needs no kiln)."""
    import kiln

    @kiln.jit
    def decode_layer(x, cos, sin, k_cache, v_cache, block_table, positions, seq_lens, attn_norm, wq, wk, wv, wo,
                     ffn_norm, w1, w3, w2):
        batch = x.shape[0]
        h = kiln.rms_norm(x, attn_norm, eps=EPS)
        q = kiln.rope(kiln.reshape(kiln.matmul(h, wq), (batch, HEADS, HEAD_DIM)), cos, sin, seq_dim=0)
        k = kiln.rope(kiln.reshape(kiln.matmul(h, wk), (batch, KV_HEADS, HEAD_DIM)), cos, sin, seq_dim=0)
        v = kiln.matmul(h, wv)
        k_cache, v_cache = kiln.append_kv(k_cache, v_cache, kiln.reshape(k, (batch, KV_HEADS, 1, HEAD_DIM)),
                                          kiln.reshape(v, (batch, KV_HEADS, 1, HEAD_DIM)), block_table, positions)
        o = kiln.paged_attention(kiln.reshape(q, (batch, HEADS, 1, HEAD_DIM)), k_cache, v_cache, block_table,
                                 seq_lens)
        x = kiln.matmul(kiln.reshape(o, (batch, HEADS * HEAD_DIM)), wo) + x
        h = kiln.rms_norm(x, ffn_norm, eps=EPS)
        g = kiln.silu(kiln.matmul(h, w1)) * kiln.matmul(h, w3)
        return kiln.matmul(g, w2) + x, k_cache, v_cache

    return decode_layer


def shapes(batch, length, page):
    """The layer's argument shapes and dtypes, in order."""
    max_pages = -(-length // page)
    pages = batch * max_pages + 7  # a few pages no sequence uses
    bf16, i32 = "bfloat16", "int32"
    return [((batch, HIDDEN), bf16), ((batch, HEAD_DIM // 2), bf16), ((batch, HEAD_DIM // 2), bf16),
            ((pages, page, KV_HEADS, HEAD_DIM), bf16), ((pages, page, KV_HEADS, HEAD_DIM), bf16),
            ((batch, max_pages), i32), ((batch,), i32), ((batch,), i32), ((HIDDEN,), bf16),
            ((HIDDEN, HEADS * HEAD_DIM), bf16), ((HIDDEN, KV_HEADS * HEAD_DIM), bf16),
            ((HIDDEN, KV_HEADS * HEAD_DIM), bf16), ((HEADS * HEAD_DIM, HIDDEN), bf16), ((HIDDEN,), bf16),
            ((HIDDEN, FFN), bf16), ((HIDDEN, FFN), bf16), ((FFN, HIDDEN), bf16)]


def prepare(args):
    import ml_dtypes
    import numpy as np
    import kiln
    from gpu_cases import compile_graph
    dtypes = {"bfloat16": ml_dtypes.bfloat16, "int32": np.int32}
    out = Path(args.out)
    decode_layer = layer()
    listed = []
    for name, (batch, length, page) in CASES.items():
        if args.only not in name:
            continue
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        placeholders = [np.zeros(shape, dtypes[dtype]) for shape, dtype in shapes(batch, length, page)]
        (folder / "graph.mlir").write_text(decode_layer.source(*placeholders))
        if not compile_graph(args.kilnc, folder / "graph.mlir", folder, "sm_90a", name):
            return 1
        # The same kernels launched the ordinary way (no programmatic dependent launch).
        copy = out / f"{name}_ordinary_launch"
        shutil.copytree(folder, copy, dirs_exist_ok=True)
        manifest = json.loads((copy / "manifest.json").read_text())
        for kernel in manifest["kernels"]:
            kernel.pop("dependent_launch", None)
        (copy / "manifest.json").write_text(json.dumps(manifest, indent=1))
        # The layer's paged attention alone, as kiln.ops.paged_attention compiles it.
        alone = out / f"{name}_attention"
        alone.mkdir(parents=True, exist_ok=True)
        q = np.zeros((batch, HEADS, 1, HEAD_DIM), dtypes["bfloat16"])
        (alone / "graph.mlir").write_text(kiln.ops._paged_attention.source(q, *placeholders[3:6], placeholders[7],
                                                                           None))
        if not compile_graph(args.kilnc, alone / "graph.mlir", alone, "sm_90a", f"{name} attention"):
            return 1
        listed.append(dict(name=name, batch=batch, length=length, page=page))
    (out / "cases.json").write_text(json.dumps(listed, indent=1))
    print(f"compiled {len(listed)} decode layers into {out}")
    return 0


def make_inputs(batch, length, page, generator):
    """Random weights (unit-scale activations), caches with each sequence's first length - 1 rows at shuffled
    pages (the rest NaN), the tables, and the new token's cos/sin rows; also the dense K/V the caches hold."""
    import torch
    bf16 = torch.bfloat16

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=generator, device="cuda") * scale).to(bf16)

    max_pages = -(-length // page)
    pages = batch * max_pages + 7
    table = torch.randperm(pages, generator=generator, device="cuda")[:batch * max_pages].view(batch, max_pages)
    table = table.to(torch.int32)
    positions = torch.full((batch,), length - 1, dtype=torch.int32, device="cuda")
    seq_lens = positions + 1
    dense_k = randn(batch, KV_HEADS, max_pages * page, HEAD_DIM)
    dense_v = randn(batch, KV_HEADS, max_pages * page, HEAD_DIM)
    caches = []
    for dense in (dense_k, dense_v):
        cache = torch.full((pages, page, KV_HEADS, HEAD_DIM), float("nan"), dtype=bf16, device="cuda")
        dense[:, :, length - 1:] = float("nan")  # the new token's row and past it: not yet written
        cache[table.flatten().long()] = dense.view(batch, KV_HEADS, max_pages, page, HEAD_DIM) \
            .permute(0, 2, 3, 1, 4).reshape(batch * max_pages, page, KV_HEADS, HEAD_DIM)
        caches.append(cache)
    angles = (length - 1) / 500000.0 ** (torch.arange(HEAD_DIM // 2, device="cuda") * 2 / HEAD_DIM)
    cos = angles.cos()[None].expand(batch, -1).to(bf16).contiguous()
    sin = angles.sin()[None].expand(batch, -1).to(bf16).contiguous()
    weights = dict(attn_norm=1 + randn(HIDDEN, scale=0.1), wq=randn(HIDDEN, HEADS * HEAD_DIM, scale=HIDDEN ** -0.5),
                   wk=randn(HIDDEN, KV_HEADS * HEAD_DIM, scale=HIDDEN ** -0.5),
                   wv=randn(HIDDEN, KV_HEADS * HEAD_DIM, scale=HIDDEN ** -0.5),
                   wo=randn(HEADS * HEAD_DIM, HIDDEN, scale=HIDDEN ** -0.5), ffn_norm=1 + randn(HIDDEN, scale=0.1),
                   w1=randn(HIDDEN, FFN, scale=HIDDEN ** -0.5), w3=randn(HIDDEN, FFN, scale=HIDDEN ** -0.5),
                   w2=randn(FFN, HIDDEN, scale=FFN ** -0.5))
    x = randn(batch, HIDDEN)
    return x, cos, sin, caches, table, positions, seq_lens, weights, (dense_k, dense_v)


def rope_rows(x, cos, sin):
    """Rotate-half RoPE of x [B, H, D] by one cos/sin row [B, D/2] per sequence."""
    import torch
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


def rms_norm(x, weight):
    import torch
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def reference(x, cos, sin, weights, dense, length):
    """The layer in float32 on the dense K/V: (output [B, hidden], new k rows, new v rows [B, Hkv, D])."""
    import torch
    import torch.nn.functional as F
    f = {name: w.float() for name, w in weights.items()}
    x, cos, sin = x.float(), cos.float(), sin.float()
    batch = x.shape[0]
    h = rms_norm(x, f["attn_norm"])
    q = rope_rows((h @ f["wq"]).view(batch, HEADS, HEAD_DIM), cos, sin)
    k_new = rope_rows((h @ f["wk"]).view(batch, KV_HEADS, HEAD_DIM), cos, sin)
    v_new = (h @ f["wv"]).view(batch, KV_HEADS, HEAD_DIM)
    k = torch.cat([dense[0][:, :, :length - 1].float(), k_new[:, :, None]], dim=2)
    v = torch.cat([dense[1][:, :, :length - 1].float(), v_new[:, :, None]], dim=2)
    group = HEADS // KV_HEADS
    o = F.scaled_dot_product_attention(q[:, :, None], k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
    x = o.reshape(batch, HEADS * HEAD_DIM) @ f["wo"] + x
    h = rms_norm(x, f["ffn_norm"])
    return (F.silu(h @ f["w1"]) * (h @ f["w3"])) @ f["w2"] + x, k_new, v_new


def gpt_fast_layer(weights, batch, length):
    """The same layer as gpt-fast writes it: nn.Linear weights ([out, in]) with fused wqkv and w13, a static cache
    [B, Hkv, max_len, D] that index_copy_ writes at input_pos, SDPA over the whole cache under a position mask,
    GQA by repeat_interleave. Returns (module, its cache tensors)."""
    import torch
    import torch.nn.functional as F

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            t = lambda w: torch.nn.Parameter(w.t().contiguous(), requires_grad=False)  # noqa: E731
            self.wqkv = torch.nn.Parameter(torch.cat([weights["wq"], weights["wk"], weights["wv"]], 1).t()
                                           .contiguous(), requires_grad=False)
            self.w13 = torch.nn.Parameter(torch.cat([weights["w1"], weights["w3"]], 1).t().contiguous(),
                                          requires_grad=False)
            self.wo, self.w2 = t(weights["wo"]), t(weights["w2"])
            self.attn_norm = torch.nn.Parameter(weights["attn_norm"], requires_grad=False)
            self.ffn_norm = torch.nn.Parameter(weights["ffn_norm"], requires_grad=False)
            shape = (batch, KV_HEADS, length, HEAD_DIM)
            self.register_buffer("k_cache", torch.zeros(shape, dtype=torch.bfloat16, device="cuda"))
            self.register_buffer("v_cache", torch.zeros(shape, dtype=torch.bfloat16, device="cuda"))

        def norm(self, x, weight):
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)).type_as(x) * weight

        def forward(self, x, cos, sin, input_pos, mask):
            bsz = x.shape[0]
            q, k, v = F.linear(self.norm(x, self.attn_norm), self.wqkv).split(
                [HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
            q = rope_rows(q.view(bsz, HEADS, HEAD_DIM), cos, sin)[:, :, None]
            k = rope_rows(k.view(bsz, KV_HEADS, HEAD_DIM), cos, sin)[:, :, None]
            v = v.view(bsz, KV_HEADS, 1, HEAD_DIM)
            self.k_cache.index_copy_(2, input_pos, k)
            self.v_cache.index_copy_(2, input_pos, v)
            group = HEADS // KV_HEADS
            keys = self.k_cache.repeat_interleave(group, dim=1)
            values = self.v_cache.repeat_interleave(group, dim=1)
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            h = x + F.linear(o.reshape(bsz, HEADS * HEAD_DIM), self.wo)
            g1, g3 = F.linear(self.norm(h, self.ffn_norm), self.w13).split([FFN, FFN], dim=-1)
            return h + F.linear(F.silu(g1) * g3, self.w2)

    return Layer().cuda().eval()


def visit(args):
    import torch
    from row_kernels import start_cases, time_ms
    import kiln

    build, listed, seed, generator = start_cases(args)
    rows, failures = [], 0
    torch_timings = {}  # by (batch, length): torch's layer has no pages
    for item in listed:
        batch, length, page = item["batch"], item["length"], item["page"]
        x, cos, sin, caches, table, positions, seq_lens, weights, dense = make_inputs(batch, length, page, generator)
        program = kiln.load(build / item["name"])
        order = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w3", "w2")
        inputs = (x, cos, sin, caches[0], caches[1], table, positions, seq_lens, *(weights[n] for n in order))
        bound = program.bind(*inputs)
        out, k_cache, v_cache = bound.launch()
        torch.cuda.synchronize()
        expected, k_new, v_new = reference(x, cos, sin, weights, dense, length)
        error = ((out.float() - expected).abs().max() / expected.abs().max()).item()
        # The new rows in their pages (position length - 1 of each sequence), and the caches updated in place.
        slot = table[:, (length - 1) // page].long()
        row_errors = [((cache[slot, (length - 1) % page].float() - new).abs().max() / new.abs().max()).item()
                      for cache, new in ((k_cache, k_new), (v_cache, v_new))]
        in_place = k_cache.data_ptr() == caches[0].data_ptr() and v_cache.data_ptr() == caches[1].data_ptr()
        ok = error <= 2e-2 and max(row_errors) <= 2e-2 and in_place and not torch.isnan(out).any().item()
        failures += not ok
        row = dict(name=item["name"], batch=batch, length=length, page=page, error=error,
                   row_error=max(row_errors), in_place=in_place, ok=ok, kernels=len(program.kernels))
        weight_bytes = sum(w.numel() * 2 for w in weights.values())
        kv_bytes = 2 * batch * length * KV_HEADS * HEAD_DIM * 2
        row["floor_ms"] = (weight_bytes + kv_bytes) / COPY_LIMIT_TBS / 1e9
        print(f"{item['name']}: error {error:.1e}, new rows {max(row_errors):.1e}, in place {in_place}, "
              f"{row['kernels']} kernels", flush=True)
        if not args.no_bench:
            row["kiln_ms"] = time_ms(bound.launch)
            if args.baseline and (Path(args.baseline) / item["name"]).is_dir():
                row["baseline_ms"] = time_ms(kiln.load(Path(args.baseline) / item["name"]).bind(*inputs).launch)
            ordinary = build / f"{item['name']}_ordinary_launch"
            # Per-kernel device times come from the ordinary launches: under dependent launch a kernel starts
            # during its predecessor and the profiler counts its wait for it as its own time.
            profiled = bound
            if ordinary.is_dir():
                profiled = kiln.load(ordinary).bind(*inputs)
                row["ordinary_launch_ms"] = time_ms(profiled.launch)
            alone = build / f"{item['name']}_attention"
            if alone.is_dir():
                q = torch.randn(batch, HEADS, 1, HEAD_DIM, generator=generator, device="cuda").to(torch.bfloat16)
                row["attention_alone_ms"] = time_ms(kiln.load(alone).bind(q, k_cache, v_cache, table,
                                                                          seq_lens).launch)
            if (batch, length) not in torch_timings:
                torch_timings[batch, length] = time_torch(weights, batch, length, dense, x, cos, sin, expected)
            row.update(torch_timings[batch, length])
            per_kernel = kernel_times_ms(profiled.launch, program.kernels)
            row["kernel_ms"] = per_kernel
            print(f"  Kiln {row['kiln_ms']:.3f} ms ({row['kiln_ms'] / row['floor_ms']:.2f}x the {row['floor_ms']:.3f} "
                  f"ms floor; baseline {row.get('baseline_ms', 0):.3f}; launched the ordinary way "
                  f"{row.get('ordinary_launch_ms', 0):.3f}; its attention "
                  f"alone {row.get('attention_alone_ms', 0) * 1000:.1f} us) | eager {row['eager_ms']:.3f} | torch.compile {row['inductor_ms']:.3f} | with CUDA "
                  f"graphs {row['inductor_cudagraphs_ms']:.3f} (torch error {row['torch_error']:.1e}) | the gpt-fast "
                  f"module through backend=\"kiln\" {row['kiln_backend_ms']:.3f} (error "
                  f"{row['kiln_backend_error']:.1e}; partitions' own graphs "
                  f"{row['kiln_backend_partition_graphs_ms']:.3f})",
                  flush=True)
            for name, ms in per_kernel:
                print(f"    {ms * 1000:8.1f} us  {name}", flush=True)
            for suffix in ("", "_partition_graphs"):
                print(f"  backend{suffix or ' (one graph)'} device time per call:", flush=True)
                for name, count, us in row[f"kiln_backend{suffix}_kernels"]:
                    print(f"    {us:8.1f} us  x{count:g}  {name}", flush=True)
        rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_layer.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                           torch=torch.__version__, rows=rows), indent=1))
    write_table(rows, out / "decode_layer.md")
    print(f"{len(rows) - failures} of {len(rows)} layers match float32, {failures} failed")
    return 1 if failures else 0


def kernel_times_ms(launch, kernels, runs=50):
    """Each kernel's mean device time in ms over ``runs`` back-to-back runs of ``launch``, by the manifest's
    kernel ``name``, from torch.profiler's CUDA trace (the plan runs its launches in one call)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    launch()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(runs):
            launch()
        torch.cuda.synchronize()
    averages = {item.key: getattr(item, "device_time", None) or item.cuda_time for item in profiler.key_averages()}
    return [(kernel["name"], averages.get(kernel["function"], float("nan")) / 1e3) for kernel in kernels]


def time_torch(weights, batch, length, dense, x, cos, sin, expected):
    """The gpt-fast-style layer's error against float32 and its times: eager and torch.compile as CUDA graphs of
    back-to-back calls (time_ms), torch.compile(mode="reduce-overhead") and torch.compile(backend="kiln") per call
    (their own graphs)."""
    import torch
    from row_kernels import time_ms
    module = gpt_fast_layer(weights, batch, length)
    module.k_cache.copy_(dense[0][:, :, :length].nan_to_num())
    module.v_cache.copy_(dense[1][:, :, :length].nan_to_num())
    inputs = (x, cos, sin, torch.tensor([length - 1], device="cuda"),
              torch.ones(1, 1, 1, length, dtype=torch.bool, device="cuda"))
    row = {}
    with torch.no_grad():
        eager = module(*inputs)
        row["torch_error"] = ((eager.float() - expected).abs().max() / expected.abs().max()).item()
        row["eager_ms"] = time_ms(lambda: module(*inputs))
        for label, mode in (("inductor", None), ("inductor_cudagraphs", "reduce-overhead")):
            compiled = torch.compile(module, dynamic=False, mode=mode)
            for _ in range(3):
                compiled(*inputs)
            row[f"{label}_ms"] = time_ms(lambda: compiled(*inputs)) if mode is None else call_ms(
                lambda: compiled(*inputs))
        # The same module through Kiln's torch.compile backend (its index_copy_ made in place and left to torch), per
        # call: replayed as one CUDA graph (the default), and with each partition replaying its own graph (the
        # torch nodes between them launched from Python), in the same run; where each one's device time goes.
        import kiln.torch_backend  # noqa: F401  (registers the backend)
        from torch_compile_blocks import kernel_breakdown
        for suffix, graphs in (("", True), ("_partition_graphs", "partitions")):
            torch._dynamo.reset()
            compiled = torch.compile(module, backend="kiln", dynamic=False, options={"cuda_graphs": graphs})
            out = compiled(*inputs)
            row[f"kiln_backend{suffix}_error"] = ((out.float() - expected).abs().max() / expected.abs().max()).item()
            row[f"kiln_backend{suffix}_ms"] = call_ms(lambda: compiled(*inputs))
            row[f"kiln_backend{suffix}_kernels"] = kernel_breakdown(compiled, inputs, copies=True)
    return row


def call_ms(fn, calls=50):
    """Median time of one call of ``fn`` between CUDA events (what torch.compile's own CUDA graphs cost a caller:
    they cannot be captured into another graph), after warm-up."""
    import statistics
    import torch
    for _ in range(5):
        fn()
    samples = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def write_table(rows, path):
    """The timed rows as a markdown table: Kiln against its floor, the baseline build, and torch in the same run."""
    lines = ["| case | kernels | Kiln ms | floor ms | Kiln / floor | baseline build ms | ordinary launch ms | "
             "attention alone us | eager ms | torch.compile ms | + CUDA graphs ms | Kiln vs best torch | "
             "error vs f32 | gpt-fast module through backend=\"kiln\" ms | the same, each partition its own graph ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if "kiln_ms" in r):
        best = min(r["inductor_ms"], r["inductor_cudagraphs_ms"])
        lines.append(f"| {r['name']} | {r['kernels']} | {r['kiln_ms']:.3f} | {r['floor_ms']:.3f} | "
                     f"{r['kiln_ms'] / r['floor_ms']:.2f}x | {r.get('baseline_ms', math.nan):.3f} | "
                     f"{r.get('ordinary_launch_ms', math.nan):.3f} | {r.get('attention_alone_ms', math.nan) * 1000:.1f} | "
                     f"{r['eager_ms']:.3f} | {r['inductor_ms']:.3f} | {r['inductor_cudagraphs_ms']:.3f} | "
                     f"{best / r['kiln_ms']:.2f}x faster | {r['error']:.1e} | "
                     f"{r.get('kiln_backend_ms', math.nan):.3f} | "
                     f"{r.get('kiln_backend_partition_graphs_ms', math.nan):.3f} |")
    Path(path).write_text("\n".join(lines) + "\n")


def plot(args):
    """Draws a visit's decode_layer.json as decode_layer.png beside it (ms per layer; the floor as a line) and
    rewrites its table."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from row_kernels import device_name
    visit = json.loads(Path(args.json).read_text())
    rows = [r for r in visit["rows"] if "kiln_ms" in r]
    series = (("kiln_ms", "Kiln"), ("baseline_ms", "Kiln, baseline build"), ("eager_ms", "torch eager"),
              ("inductor_ms", "torch.compile"), ("inductor_cudagraphs_ms", "torch.compile, reduce-overhead"))
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(series)
    for i, (key, label) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * width
        ax.bar([j + offset for j in range(len(rows))], [r.get(key, 0) for r in rows], width, label=label)
    for j, r in enumerate(rows):
        ax.hlines(r["floor_ms"], j - 0.45, j + 0.45, colors="black", linestyles="dashed",
                  label="bandwidth floor" if j == 0 else None)
    ax.set_xticks(list(range(len(rows))), [r["name"] for r in rows])
    ax.set_ylabel("ms per layer")
    ax.set_yscale("log")
    ax.set_title(f"Llama decode layer over a paged KV cache on the {device_name(visit)}, bf16")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(Path(args.json).with_suffix(".png"), dpi=110)
    write_table(rows, Path(args.json).with_suffix(".md"))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--kilnc", default="build/bin/kilnc")
    p.add_argument("--out", default="gpu_build/decode_layer")
    p.add_argument("--only", default="")
    v = sub.add_parser("visit")
    v.add_argument("--build", default="gpu_build/decode_layer")
    v.add_argument("--out", default=".")
    v.add_argument("--only", default="")
    v.add_argument("--no-bench", action="store_true")
    v.add_argument("--baseline", default="", help="a folder of the same cases compiled by another kilnc, timed "
                                                 "beside (before and after a change, in one run)")
    sub.add_parser("plot").add_argument("json")
    args = parser.parse_args()
    return {"prepare": prepare, "visit": visit, "plot": plot}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
