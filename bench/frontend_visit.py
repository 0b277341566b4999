"""The frontend's GPU visit: the Llama-style block compiled by Kiln against eager PyTorch and torch.compile.

Why one script: the block must be checked and timed side by side in one run (METHOD.md) — same weights, same
inputs, CUDA events after warm-up, medians. For each shape prepared by bench/frontend_prepare.py it generates
bf16 weights, runs Kiln's plan (kiln.load: the package's plan runner over the runtime), eager PyTorch
(examples/torch_blocks.py, SDPA attention as model code uses) and torch.compile of the same module; it checks
Kiln against the module in fp32, counts the CUDA kernels each runs per forward, and times them all. It also exports the small example
blocks to ONNX with torch.onnx, so the importer can be tested on a real exporter's output.

    PYTHONPATH=build/python python3 bench/frontend_visit.py --plans frontend_build --out $OUT
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "examples")]

import kiln  # noqa: E402
from gpu_visit import time_ms  # noqa: E402
import torch_blocks  # noqa: E402


def cuda_kernels(fn):
    """Kernels (not memcpy/memset) one call launches, from the profiler."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len([n for n in names if not n.startswith(("Memcpy", "Memset"))])


def kernel_times_us(fn):
    """Device time per kernel of one call, in launch order, from the profiler, after 50 calls back to back: the
    kernels run about a tenth slower under sustained load than in a cool call (the times below are sustained)."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(50):
        fn()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:  # no synchronize first: the GPU is still busy
        fn()
        torch.cuda.synchronize()
    return [(e.name, e.device_time) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def seeded_block(config):
    """The Llama-style block of a prepared shape (fp32, on the CPU) with seeded random weights: projections
    scaled by 1/sqrt(fan-in), norm weights near 1."""
    torch.manual_seed(0)
    module = torch_blocks.LlamaBlock(hidden=config["hidden"], heads=config["heads"], kv_heads=config["kv_heads"],
                                     mlp=14336, seq=config["seq"], eps=config["eps"], sdpa=True)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) / (p.shape[-1] ** 0.5) if p.dim() == 2 else 1 + 0.1 * torch.randn_like(p))
    return module


def kiln_weights(module):
    """The plan's weight inputs in the ONNX graph's layout (matrices [in, out])."""
    return {
        "norm1": module.norm1.weight, "norm2": module.norm2.weight,
        "wq": module.q_proj.weight.t(), "wk": module.k_proj.weight.t(), "wv": module.v_proj.weight.t(),
        "wo": module.o_proj.weight.t(), "wg": module.gate_proj.weight.t(), "wu": module.up_proj.weight.t(),
        "wd": module.down_proj.weight.t(),
    }


def run_shape(name, folder, log):
    meta = json.loads((folder / "block.json").read_text())
    c = meta["config"]
    module = seeded_block(c).to("cuda", torch.bfloat16).eval()
    x = torch.randn(c["batch"], c["seq"], c["hidden"], device="cuda", dtype=torch.bfloat16)
    weights = kiln_weights(module)
    inputs = [x] + [weights[k].contiguous() for k in meta["weights"]]
    runner = kiln.load(folder)
    row = dict(shape=name, batch=c["batch"], seq=c["seq"], kiln_kernels=len(runner.kernels),
               import_s=meta["import_s"], kilnc_s=meta["compile_s"])
    with torch.no_grad():
        out = runner(*inputs)
        torch.cuda.synchronize()
        reference = torch_blocks.LlamaBlock(hidden=c["hidden"], heads=c["heads"], kv_heads=c["kv_heads"], mlp=14336,
                                            seq=c["seq"], eps=c["eps"], sdpa=True)
        reference.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
        ref = reference.to("cuda").eval()(x.float())
        eager_out = module(x)
        row["kiln_rel_err"] = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        row["eager_rel_err"] = ((eager_out.float() - ref).abs().max() / ref.abs().max()).item()
        row["kiln_nan"] = bool(torch.isnan(out).any().item())
        compiled = torch.compile(module)
        start = time.perf_counter()
        compiled(x)
        torch.cuda.synchronize()
        row["torch_compile_s"] = time.perf_counter() - start
        row["eager_kernels"] = cuda_kernels(lambda: module(x))
        row["compile_kernels"] = cuda_kernels(lambda: compiled(x))
        row["kiln_kernel_us"] = kernel_times_us(lambda: runner(*inputs))
        prepared = runner.bind(*inputs)
        prepared.capture()
        (replayed,) = prepared.replay()
        torch.cuda.synchronize()
        row["kiln_graph_rel_err"] = ((replayed.float() - ref).abs().max() / ref.abs().max()).item()
        graphed = torch.compile(module, mode="reduce-overhead")
        for _ in range(3):
            graphed(x)
        variants = {"kiln_ms": lambda: runner(*inputs), "kiln_prepared_ms": prepared.launch,
                    "kiln_graph_ms": prepared.replay, "eager_ms": lambda: module(x), "compile_ms": lambda: compiled(x),
                    "compile_graphs_ms": lambda: graphed(x)}
        # Interleaved rounds, so that a slow spell of the host does not land on one variant only.
        rounds = {name: [] for name in variants}
        for _ in range(5):
            for name, fn in variants.items():
                rounds[name].append(time_ms(fn, warmup=5, reps=40, calls=1))  # latency of one block call
        for name, times in rounds.items():
            row[name] = statistics.median(times)
            row[name.replace("_ms", "_rounds_ms")] = times
    log.write(json.dumps(row) + "\n")
    return row


def export_examples(out, log):
    """The small example blocks through torch.onnx (examples/export_torch_blocks.py), and their kernel counts
    under eager torch and torch.compile."""
    import export_torch_blocks
    results = export_torch_blocks.export(out)
    for name, module, x in export_torch_blocks.example_modules():
        cuda_module, cuda_x = module.to("cuda"), x.to("cuda")
        with torch.no_grad():
            results[f"{name}.eager_kernels"] = cuda_kernels(lambda: cuda_module(cuda_x))
            compiled = torch.compile(cuda_module)
            results[f"{name}.compile_kernels"] = cuda_kernels(lambda: compiled(cuda_x))
    log.write(json.dumps(results) + "\n")
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", default="frontend_build")
    parser.add_argument("--out", default="frontend_results")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with open(out / "frontend_visit.jsonl", "w") as log:
        log.write(json.dumps(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__)) + "\n")
        exports = export_examples(out, log)
        for folder in sorted(Path(args.plans).iterdir()):
            if (folder / "block.json").exists():
                rows.append(run_shape(folder.name, folder, log))
    print(json.dumps(exports, indent=1))
    print(f"{'shape':16} {'kernels K/E/C':>14} {'kiln ms':>8} {'prepared':>9} {'graph':>7} {'eager ms':>9} "
          f"{'compile':>8} {'compile+graphs':>15} {'rel err K':>10} {'K graph':>9} {'rel err E':>10}")
    for r in rows:
        print(f"{r['shape']:16} {r['kiln_kernels']:>4}/{r['eager_kernels']:>3}/{r['compile_kernels']:>3}  "
              f"{r['kiln_ms']:8.3f} {r['kiln_prepared_ms']:9.3f} {r['kiln_graph_ms']:7.3f} {r['eager_ms']:9.3f} "
              f"{r['compile_ms']:8.3f} {r['compile_graphs_ms']:15.3f} {r['kiln_rel_err']:10.2e} "
              f"{r['kiln_graph_rel_err']:9.2e} {r['eager_rel_err']:10.2e}")
    for r in rows:
        total = sum(us for _, us in r["kiln_kernel_us"])
        print(f"{r['shape']}: Kiln's kernels, device time {total:.1f} us of {r['kiln_ms'] * 1000:.1f} us")
        for name, us in r["kiln_kernel_us"]:
            print(f"  {name:28} {us:9.1f} us")


if __name__ == "__main__":
    main()
