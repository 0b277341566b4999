"""Tells a slow host from a slow compile: the cold JIT's wall time beside the CPU time and page faults it took.

Why: the cold JIT figures of bench/python_gpu_latency.py spread by up to 1.6x on the GPU machine between samples
of the same program. Each sample here records, besides the wall time, the process's user and system CPU time
(every thread: the compile's workers, the driver's JIT), its minor page faults and context switches, and the
manifest's stage and per-kernel times. The same compile taking more user CPU time is a slower host; more
system time and faults is memory the allocator gave back and faults in again. Samples alternate between the
3-matmul MLP (two kernels compiled at once) and the single-kernel attention, each in a new empty disk cache with
the driver's JIT cache off, and print one JSON line each and the medians. Needs the wheel installed on the GPU
machine (docs/python.md); run it under different environments (GLIBC_TUNABLES, taskset) to compare:

    python3 bench/cold_jit_host_speed.py --label base --rounds 8 > $OUT/base.jsonl
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["CUDA_CACHE_DISABLE"] = "1"  # the driver's JIT must compile, not find an earlier run's cubin


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="base", help="names this run's environment in every line")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-cold-")
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from python_gpu_latency import programs

    import kiln
    kiln.compiler.native()  # the compiler must be here: an ImportError says why not
    torch.empty(1, device="cuda")  # the CUDA context is not part of any sample
    made = {}
    for name, (fn, shapes, constants) in programs(kiln).items():
        if name.startswith("3-matmul") or name.startswith("attention"):
            tensors = [torch.randn(s, device="cuda", dtype=torch.bfloat16) / 8 for s in shapes]
            made[name] = (fn, tensors, constants)
    walls = {name: [] for name in made}
    for _ in range(args.rounds):
        for name, (fn, tensors, kw) in made.items():
            fn.programs.clear(), fn._fast.clear(), kiln.compiler._compile_cached.cache_clear()
            os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-cold-")
            torch.cuda.synchronize()
            before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            fn(*tensors, **kw)
            torch.cuda.synchronize()
            wall, after = (time.perf_counter() - start) * 1e3, resource.getrusage(resource.RUSAGE_SELF)
            manifest = list(fn.programs.values())[-1].manifest
            walls[name].append(wall)
            print(json.dumps({
                "label": args.label, "program": name, "wall_ms": round(wall, 1),
                "user_ms": round((after.ru_utime - before.ru_utime) * 1e3, 1),
                "system_ms": round((after.ru_stime - before.ru_stime) * 1e3, 1),
                "minor_faults": after.ru_minflt - before.ru_minflt,
                "voluntary_switches": after.ru_nvcsw - before.ru_nvcsw,
                "involuntary_switches": after.ru_nivcsw - before.ru_nivcsw,
                "stages_ms": {k: round(v / 1e3, 1) for k, v in manifest["compile_us"].items()},
                "kernels_ms": {k["name"]: {part: round(us / 1e3, 1) for part, us in k["compile_us"].items()}
                               for k in manifest["kernels"]}}), flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for name, samples in walls.items():
        print(f"# {args.label} {name}: median {statistics.median(samples):.1f} ms, fastest {min(samples):.1f}, "
              f"slowest {max(samples):.1f} ({len(samples)} samples); the process's peak RSS {peak:.0f} MiB",
              flush=True)


if __name__ == "__main__":
    main()
