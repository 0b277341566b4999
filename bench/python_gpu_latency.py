"""Kiln's Python JIT latency on the GPU machine: cold JIT compile, cold start from the disk cache, per-call overhead.

Three modes, for the same programs as bench/jit_latency_baseline.py measures for Triton — a matmul+bias+SiLU, a
second specialisation, a 3-matmul MLP, an attention, tiny calls for the per-call overhead (and, cold, the
matmul+bias+SiLU at five new row counts and the attention at five new lengths whose kernels are in the kernel
cache already):

- ``--prepare`` (on a machine with the full build) compiles them for sm_90a into a cache folder, timing each;
- ``--cold-jit`` (on the GPU machine with the wheel installed, docs/python.md) starts from an empty cache and
  with the driver's own JIT cache off, so each first call traces, compiles (MLIR pipelines, PTX, the driver's
  in-process PTX JIT), loads and launches there;
- neither (with the prepared cache as KILN_CACHE_DIR) times the first call as a cold start from the disk cache.

Each mode times, in a fresh process after ``import kiln`` and CUDA initialisation, the first call of each program
(synchronised) and the warm per-call host time over many calls (Kiln's calls and torch's in turn, seven rounds,
so that both see the same host), and checks every result against torch float32. The host's speed drifts by a
third within a run, so each first call
is timed five times, in five rounds of all the programs (so that every program sees the host's slow phases
alike), Kiln's in-memory caches cleared and, for ``--cold-jit``, a new empty disk cache each time: the median is
the figure, with the fastest and the process's very first compile (which pays one-time setup) beside it.

    python3 bench/python_gpu_latency.py --prepare --build build --cache gpu_python/latency_cache
    KILN_CACHE_DIR=gpu_python/latency_cache PYTHONPATH=gpu_python python3 bench/python_gpu_latency.py --out $OUT
    python3 bench/python_gpu_latency.py --cold-jit --out $OUT
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def programs(kiln):
    @kiln.jit
    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = kiln.matmul(x, w1, bias=b1, activation="silu")
        h = kiln.matmul(h, w2, bias=b2, activation="silu")
        return kiln.matmul(h, w3, bias=b3)

    return {
        "matmul+bias+silu 1000^3": (kiln.ops.matmul, [(1000, 1000), (1000, 1000)], {"bias": (1000,),
                                                                                     "activation": "silu"}),
        "matmul+bias 1000^3 (second specialisation)": (kiln.ops.matmul, [(1000, 1000), (1000, 1000)],
                                                       {"bias": (1000,)}),
        "3-matmul MLP 77x512": (mlp, [(77, 512), (512, 1536), (1536,), (1536, 1024), (1024,), (1024, 512),
                                      (512,)], {}),
        "attention 1x8x128x64": (kiln.ops.attention, [(1, 8, 128, 64)] * 3, {}),
        "tiny matmul 16x16": (kiln.ops.matmul, [(16, 16), (16, 16)], {"bias": (16,)}),
        "tiny attention 1x1x16x64": (kiln.ops.attention, [(1, 1, 16, 64)] * 3, {}),
    }


def prepare(args):
    os.environ["KILN_CACHE_DIR"] = str(Path(args.cache).resolve())
    sys.path.insert(0, str(Path(args.build).resolve() / "python"))
    import ml_dtypes
    import numpy as np

    import kiln
    for name, (fn, shapes, constants) in programs(kiln).items():
        arrays = [np.zeros(s, ml_dtypes.bfloat16) for s in shapes]
        kw = {k: (np.zeros(v, ml_dtypes.bfloat16) if isinstance(v, tuple) else v) for k, v in constants.items()}
        start = time.perf_counter()
        kiln.compile(fn.source(*arrays, **kw), target="sm_90a")
        print(f"cold compile here (trace + sm_90a, 2-core build machine): {name:44s} "
              f"{(time.perf_counter() - start) * 1e3:7.1f} ms")


def relative_error(out, ref):
    return ((out.float() - ref).abs().max() / ref.abs().max()).item()


def measure(args):
    if args.cold_jit:
        os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-cold-")
        os.environ["CUDA_CACHE_DISABLE"] = "1"  # the driver's JIT must compile, not find an earlier run's cubin
    import torch
    import torch.nn.functional as F

    from gpu_visit import interleaved_per_call_us, report_latency

    import kiln
    if args.cold_jit:
        kiln.compiler.native()  # the compiler must be here: an ImportError says why not
    first_call = "cold JIT (trace, compile, load, launch)" if args.cold_jit else "cold start (disk cache, no compile)"
    torch.empty(1, device="cuda")  # the CUDA context is not part of any latency
    rows, errors = {}, {}
    made, every_sample, stages = {}, {}, {}

    def compile_us(fn):
        """The manifest's stage times of the program ``fn`` compiled last."""
        return list(fn.programs.values())[-1].manifest.get("compile_us")

    def first_call_ms(fn, tensors, kw):
        """The first call of ``fn`` with Kiln's in-memory caches cleared (and, cold, a new empty disk cache)."""
        fn.programs.clear(), fn._fast.clear(), kiln.compiler._compile_cached.cache_clear()
        if args.cold_jit:
            os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-cold-")
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn(*tensors, **kw)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3, out

    for name, (fn, shapes, constants) in programs(kiln).items():
        scale = [1.0] + [1 / 30] * (len(shapes) - 1) if "matmul" in name or "MLP" in name else [1.0] * len(shapes)
        tensors = [torch.randn(s, device="cuda", dtype=torch.bfloat16) * c for s, c in zip(shapes, scale)]
        kw = {k: (torch.randn(v, device="cuda", dtype=torch.bfloat16) if isinstance(v, tuple) else v)
              for k, v in constants.items()}
        made[name] = (fn, tensors, kw)
    # Five rounds, each program once a round (the tiny ones in the first only): the host's slow phases last
    # seconds, and programs sampled in turn see the same phases, where five samples in a row may all fall in one.
    samples, outputs = {name: [] for name in made}, {}
    for round_ in range(5):
        for name, (fn, tensors, kw) in made.items():
            if round_ and name.startswith("tiny"):
                continue
            elapsed, outputs[name] = first_call_ms(fn, tensors, kw)
            samples[name].append(elapsed)
            if args.cold_jit:  # where each compile's time went, to tell a slow host from a slow stage
                stages.setdefault(name, []).append(compile_us(fn))
    for name, (fn, tensors, kw) in made.items():
        every_sample[name] = [round(s, 2) for s in samples[name]]
        if not rows:
            rows[f"{first_call}: the process's first ({name})"] = samples[name][0]
        if not name.startswith("tiny"):
            rows[f"{first_call}: {name}"] = statistics.median(samples[name])
            rows[f"{first_call}, fastest of 5: {name}"] = min(samples[name])
        out = outputs[name]
        f = [t.float() for t in tensors]
        if "attention" in name:
            ref = F.scaled_dot_product_attention(*f)
        elif "MLP" in name:
            ref = F.silu(f[0] @ f[1] + f[2])
            ref = F.silu(ref @ f[3] + f[4])
            ref = ref @ f[5] + f[6]
        else:
            ref = f[0] @ f[1] + kw["bias"].float()
            ref = F.silu(ref) if kw.get("activation") == "silu" else ref
        errors[name] = relative_error(out, ref)
    if args.cold_jit:
        def new_shapes(label, call, jit, arguments, reference, fresh_cache):
            """Times the first ``call`` on each argument tuple (a new shape each: a new program of the jitted
            function ``jit``), checks it against ``reference`` and records the stages; with ``fresh_cache`` each
            call gets a new disk cache (a cold compile), else they share one. Returns the median time and each
            program's kernel-cache result."""
            samples, hits = [], []
            for args_ in arguments:
                if fresh_cache:
                    os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-cold-")
                torch.cuda.synchronize()
                start = time.perf_counter()
                out = call(*args_)
                torch.cuda.synchronize()
                samples.append((time.perf_counter() - start) * 1e3)
                program = list(jit.programs.values())[-1]
                hits.append(program.kernels[0].get("kernel_cache"))
                stages.setdefault(label, []).append(program.manifest["compile_us"])
                errors[f"{label}: {'x'.join(map(str, args_[0].shape))}"] = relative_error(out, reference(*args_))
            every_sample[label] = [round(s, 2) for s in samples]
            return statistics.median(samples), hits

        def attentions(lengths):
            return [(q, q, q) for q in (torch.randn(1, 8, n, 64, device="cuda", dtype=torch.bfloat16)
                                        for n in lengths)]

        def sdpa(q, k, v):
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float())

        # One sample is at the mercy of the host: the median of five more attentions, each a new shape and a new
        # disk cache (some of these lengths share a kernel) and so a new compile, is the figure the goal is read
        # from.
        attention = kiln.ops.attention
        rows[f"{first_call}: attention 1x8xSx64, median of 5 new S"], _ = new_shapes(
            "attention 1x8xSx64, S = 136 ... 168", attention, attention, attentions((136, 144, 152, 160, 168)), sdpa,
            fresh_cache=True)
        # A new shape whose kernels are compiled already: the matmul kernel reads M, N and K from its parameters,
        # so after the 1000^3 matmul + bias + SiLU (compiled first, in a new cache), each new M (none a whole
        # number of 128-row tiles: another kernel) finds its kernel in the kernel cache and only the program
        # around it is compiled.
        fn, (x, w), kw = made["matmul+bias+silu 1000^3"]
        first_call_ms(fn, (x, w), kw)  # compiled again into a new cache, whose kernel cache then holds the kernel
        bias = kw["bias"]
        median, hits = new_shapes(
            "matmul+bias+silu Mx1000x1000, kernel cached",
            lambda x: kiln.ops.matmul(x, w, bias=bias, activation="silu"), kiln.ops.matmul,
            [(torch.randn(m, 1000, device="cuda", dtype=torch.bfloat16),) for m in (520, 650, 777, 900, 999)],
            lambda x: F.silu(x.float() @ w.float() + bias.float()), fresh_cache=False)
        rows[f"{first_call}: matmul+bias+silu, new M, kernel cached ({hits.count('hit')}/5 hits), median of 5"] = \
            median
        # The attention kernel reads Sq and Sk too, and keeps the number of key tiles (32 keys each at these
        # lengths): after 136 keys (compiled first, in a new cache), lengths of as many tiles find the kernel.
        first_call_ms(attention, attentions((136,))[0], {})
        median, hits = new_shapes("attention 1x8xSx64, kernel cached", attention, attention,
                                  attentions((138, 142, 146, 150, 154)), sdpa, fresh_cache=False)
        rows[f"{first_call}: attention 1x8xSx64, new S, kernel cached ({hits.count('hit')}/5 hits), median of 5"] = \
            median
    # The host's speed drifts: torch's own per-call times, measured in turn with Kiln's, to compare with.
    warm = {}
    for name in ("tiny matmul 16x16", "tiny attention 1x1x16x64", "3-matmul MLP 77x512"):
        fn, tensors, kw = made[name]
        warm[f"warm us/call: {name}"] = lambda fn=fn, tensors=tensors, kw=kw: fn(*tensors, **kw)
    a, q = made["tiny matmul 16x16"][1][0], made["tiny attention 1x1x16x64"][1][0]
    warm["warm us/call: torch.matmul 16x16 (same process)"] = lambda: torch.matmul(a, a)
    warm["warm us/call: SDPA 1x1x16x64 (same process)"] = lambda: F.scaled_dot_product_attention(q, q, q)
    rows.update(interleaved_per_call_us(warm))
    name = "python_gpu_cold_jit.json" if args.cold_jit else "python_gpu_latency.json"
    ok = report_latency(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", rows, errors,
                        os.path.join(args.out, name),
                        {"torch": torch.__version__, "samples_ms": every_sample, "compile_us": stages}, digits=2)
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--prepare", action="store_true", help="compile the programs into --cache (full build)")
    mode.add_argument("--cold-jit", action="store_true", help="compile on this machine from an empty cache")
    parser.add_argument("--build", default="build")
    parser.add_argument("--cache", default="gpu_python/latency_cache")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    return prepare(args) if args.prepare else measure(args)


if __name__ == "__main__":
    sys.exit(main())
