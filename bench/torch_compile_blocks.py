"""torch.compile(block, backend="kiln") on the H200 beside eager and Inductor (with and without CUDA graphs).

Why: the kiln dynamo backend (python/kiln/torch_backend.py) takes the FX graph of a plain-torch block, hands Kiln
its supported partitions and leaves the rest to torch. This script measures what a user of torch.compile would:
the time of one call of the compiled block (median of many, CUDA events around each call after warm-up, the
calls' host work included, as a serving loop pays it), its kernel launches (the profiler's count of device
kernels per call), the first call's compile time, and its error against eager float32 (TF32 off) in the same
run, and where the time goes: each kernel's device time per call for Kiln and Inductor (the profiler's). Blocks:
GPT-2 (768 wide, 12 heads) and Llama (4096 wide, 32/8 heads, 14336 MLP; RoPE by cat, SwiGLU) from
test/Integration/python/plain_torch_blocks.py, in bf16, the Llama block in two spellings: Hugging Face's
(RMSNorm written out with f32 casts, repeat_interleave GQA, the causal flag) and another (nn.RMSNorm, GQA by
expand + reshape, an additive -inf triangle as the mask).

Run on the GPU machine with the wheel installed (the programs compile there):

    python3 bench/torch_compile_blocks.py --out OUT    # writes OUT/torch_compile.json and .md
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test" / "Integration" / "python"))

#: The Llama block's second spelling (LlamaBlock's keyword arguments); the first is its default.
NN_EXPAND_TRIANGLE = dict(norm="module", gqa="expand", mask="additive")
#: name: (block kind, hidden, heads, kv heads, ffn, batch, seq, spelling)
SHAPES = {
    "gpt2_b8_s512": ("gpt2", 768, 12, 12, 3072, 8, 512, {}),
    "llama_b1_s2048": ("llama", 4096, 32, 8, 14336, 1, 2048, {}),
    "llama_b8_s512": ("llama", 4096, 32, 8, 14336, 8, 512, {}),
    "llama_nn_expand_triangle_b1_s2048": ("llama", 4096, 32, 8, 14336, 1, 2048, NN_EXPAND_TRIANGLE),
    "llama_nn_expand_triangle_b8_s512": ("llama", 4096, 32, 8, 14336, 8, 512, NN_EXPAND_TRIANGLE),
}
VARIANTS = ("eager", "inductor", "inductor_cudagraphs", "kiln", "kiln_no_graphs")


def build(shape, dtype):
    import torch
    from plain_torch_blocks import Gpt2Block, LlamaBlock, rope_tables
    kind, hidden, heads, kv_heads, ffn, batch, seq, spelling = shape
    block = Gpt2Block(hidden, heads) if kind == "gpt2" else LlamaBlock(hidden, heads, kv_heads, ffn, **spelling)
    block = block.cuda().eval()
    for p in block.parameters():  # weights of unit-scale activations, as test_torch_backend_gpu.py sets them
        p.data.normal_(0.0, 1.0 / p.shape[-1] ** 0.5 if p.ndim == 2 else 1.0).add_(1.0 if p.ndim == 1 else 0.0)
    x = torch.randn(batch, seq, hidden, device="cuda")
    extra = () if kind == "gpt2" else rope_tables(seq, hidden // heads, device="cuda")
    reference = block(x, *extra).float()  # float32, TF32 off (torch's default for matmuls)
    block = block.to(dtype)
    return block, (x.to(dtype), *[t.to(dtype) for t in extra]), reference


def compiled(variant, block):
    import torch
    if variant == "eager":
        return block
    if variant == "inductor":
        return torch.compile(block, dynamic=False)
    if variant == "inductor_cudagraphs":
        return torch.compile(block, dynamic=False, mode="reduce-overhead")
    import kiln.torch_backend  # noqa: F401  (registers the backend)
    if variant == "kiln_no_graphs":  # the partitions' plans launched per call, no CUDA graph (nor output copy)
        return torch.compile(block, backend="kiln", dynamic=False, options={"cuda_graphs": False})
    return torch.compile(block, backend="kiln", dynamic=False)


def call_ms(fn, inputs, calls=50):
    """Median time of one call between CUDA events, after warm-up."""
    import torch
    for _ in range(5):
        fn(*inputs)
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def launches(fn, inputs):
    """Device kernels of one call (memcpy and memset excluded), by the profiler."""
    import torch
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        fn(*inputs)
        torch.cuda.synchronize()
    return sum(1 for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


def kernel_breakdown(fn, inputs, calls=10, copies=False):
    """[(kernel name, launches per call, device µs per call)] over ``calls`` calls, slowest first (the
    profiler's); device copies and fills too with ``copies``."""
    import torch
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    rows = []
    for item in profile.key_averages():
        total = getattr(item, "device_time_total", None)
        total = item.cuda_time_total if total is None else total
        if total > 0 and (copies or "memcpy" not in item.key.lower() and "memset" not in item.key.lower()):
            rows.append((item.key[:90], item.count / calls, total / calls))
    return sorted(rows, key=lambda r: -r[2])


def main():
    import torch
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=".")
    parser.add_argument("--only", default="", help="only the shapes whose names contain this")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    with torch.no_grad():
        for name, shape in SHAPES.items():
            if args.only not in name:
                continue
            block, inputs, reference = build(shape, torch.bfloat16)
            row = dict(name=name)
            for variant in VARIANTS:
                torch._dynamo.reset()
                fn = compiled(variant, block)
                torch.cuda.synchronize()
                began = time.perf_counter()
                out = fn(*inputs)
                torch.cuda.synchronize()
                row[f"{variant}_first_call_s"] = time.perf_counter() - began
                row[f"{variant}_error"] = ((out.float() - reference).abs().max() / reference.abs().max()).item()
                row[f"{variant}_ms"] = call_ms(fn, inputs)
                row[f"{variant}_launches"] = launches(fn, inputs) if variant != "inductor_cudagraphs" else None
                if variant in ("kiln", "inductor"):
                    row[f"{variant}_kernels"] = kernel_breakdown(fn, inputs)
            for variant in VARIANTS[1:]:
                row[f"kiln_vs_{variant}"] = row[f"{variant}_ms"] / row["kiln_ms"]
            row["kiln_vs_eager"] = row["eager_ms"] / row["kiln_ms"]
            rows.append(row)
            print(f"{name:16s} " + " | ".join(
                f"{v} {row[f'{v}_ms']:.3f} ms ({row[f'{v}_launches']} launches, err {row[f'{v}_error']:.1e}, "
                f"first call {row[f'{v}_first_call_s']:.1f} s)" for v in VARIANTS), flush=True)
            for variant in ("kiln", "inductor"):
                print(f"  {variant} kernels (µs per call): " + "; ".join(
                    f"{name} x{count:g} {us:.1f}" for name, count, us in row[f"{variant}_kernels"]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "torch_compile.json").write_text(json.dumps(dict(device=torch.cuda.get_device_name(),
                                                            torch=torch.__version__, rows=rows), indent=1))
    lines = ["| block | kiln ms | launches | eager ms | Inductor ms | launches | Inductor + CUDA graphs ms | "
             "kiln vs Inductor | vs Inductor + graphs | kiln first call s | Inductor first call s | "
             "kiln without CUDA graphs ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['kiln_ms']:.3f} | {r['kiln_launches']} | {r['eager_ms']:.3f} | "
                     f"{r['inductor_ms']:.3f} | {r['inductor_launches']} | {r['inductor_cudagraphs_ms']:.3f} | "
                     f"{r['kiln_vs_inductor']:.2f}x | {r['kiln_vs_inductor_cudagraphs']:.2f}x | "
                     f"{r['kiln_first_call_s']:.1f} | {r['inductor_first_call_s']:.1f} | "
                     f"{r['kiln_no_graphs_ms']:.3f} |")
    (out / "torch_compile.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
