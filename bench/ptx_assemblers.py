"""What each way of turning PTX into a cubin costs on the GPU machine: the driver's JIT, nvJitLink and ptxas.

Why: on a cold JIT compile the assembly of each kernel is about half of the time (bench/jit_latency_breakdown.py),
and the GPU machine may offer several assemblers: the driver's JIT (cuLink, in process, what the Python JIT uses
when the GPU is the target's), the nvJitLink library that CUDA's pip packages carry (in process), and ptxas
binaries (a process each). This times all that it finds on the same PTX, one at a time and all kernels at once,
with the minor page faults each takes, and checks that every cubin loads. The assemblers do not build the same
code: the driver's JIT and nvJitLink compile PTX as relocatable code before linking it, which can take more
registers than ptxas' whole-program compile, so `speed` also runs large kernels built by each side by side
(CUDA events, median of many) and compares their outputs.

    python3 bench/ptx_assemblers.py prepare --ptx ptx_probe          # here: the JIT benchmark's kernels
    PYTHONPATH=build/python python3 bench/ptx_assemblers.py run --ptx ptx_probe --out $OUT   # GPU machine
    PYTHONPATH=build/python python3 bench/ptx_assemblers.py speed --ptx ptx_probe --out $OUT
"""

import argparse
import ctypes
import glob
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_NVJITLINK_INPUT_PTX = 2


def prepare(args):
    """Writes the PTX of the cold-JIT benchmark's programs (bench/python_gpu_latency.py) into args.ptx."""
    sys.path.insert(0, str(Path(args.build).resolve() / "python"))
    os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-ptx-probe-")
    import ml_dtypes
    import numpy as np
    import kiln

    @kiln.jit
    def attention(q, k, v):
        return kiln.attention(q, k, v)

    @kiln.jit
    def silu_matmul(a, b, bias):
        return kiln.matmul(a, b, bias=bias, activation="silu")

    @kiln.jit
    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = kiln.matmul(x, w1, bias=b1, activation="silu")
        h = kiln.matmul(h, w2, bias=b2, activation="silu")
        return kiln.matmul(h, w3, bias=b3)

    programs = {"attention": (attention, [(1, 8, 128, 64)] * 3),
                "silu_matmul": (silu_matmul, [(1000, 1000), (1000, 1000), (1000,)]),
                "mlp": (mlp, [(77, 512), (512, 1536), (1536,), (1536, 1024), (1024,), (1024, 512), (512,)])}
    out = Path(args.ptx)
    out.mkdir(parents=True, exist_ok=True)
    native = kiln.compiler.native()
    # Large programs for `speed`: whole compiled folders (manifest, PTX, ptxas' cubin) and their FLOP counts.
    large = {"matmul_bias_silu_4096": (silu_matmul, [(4096, 4096), (4096, 4096), (4096,)], 2 * 4096 ** 3),
             "mlp_4096x4096": (mlp, [(4096, 4096), (4096, 4096), (4096,), (4096, 4096), (4096,), (4096, 4096),
                                     (4096,)], 3 * 2 * 4096 ** 3),
             "attention_1x16x4096x128": (attention, [(1, 16, 4096, 128)] * 3, 4 * 16 * 4096 * 4096 * 128)}
    for name, (fn, shapes, flops) in large.items():
        source = fn.source(*[np.zeros(s, dtype=ml_dtypes.bfloat16) for s in shapes])
        folder = out / "programs" / name
        native.compile_gpu(source, "sm_90a", str(folder))
        (folder / "probe.json").write_text(json.dumps({"flops": flops}))
        print(f"{folder}: {sorted(p.name for p in folder.iterdir())}")
    for name, (fn, shapes) in programs.items():
        source = fn.source(*[np.zeros(s, dtype=ml_dtypes.bfloat16) for s in shapes])
        folder = Path(tempfile.mkdtemp(prefix=f"kiln-ptx-{name}-"))
        native.compile_gpu(source, "sm_90a", str(folder), assembler=lambda ptx: (b"", ""))
        for ptx in sorted(folder.glob("*.ptx")):
            shutil.copy(ptx, out / f"{name}.{ptx.name}")
            print(f"{out / f'{name}.{ptx.name}'}: {len(ptx.read_text().splitlines())} lines")


class NvJitLink:
    """nvJitLink through ctypes: PTX to a linked cubin, with the verbose log."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)

    def __call__(self, ptx, arch="sm_90a"):
        lib, handle = self.lib, ctypes.c_void_p()
        options = [f"-arch={arch}".encode(), b"-O3", b"-verbose"]
        if lib.nvJitLinkCreate(ctypes.byref(handle), len(options), (ctypes.c_char_p * len(options))(*options)):
            raise RuntimeError("nvJitLinkCreate failed")
        try:
            data = ptx + b"\0"
            status = lib.nvJitLinkAddData(handle, _NVJITLINK_INPUT_PTX, data, len(data), b"kernels.ptx")
            status = status or lib.nvJitLinkComplete(handle)
            size = ctypes.c_size_t()
            lib.nvJitLinkGetInfoLogSize(handle, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value + 1)
            lib.nvJitLinkGetInfoLog(handle, log)
            if status:
                lib.nvJitLinkGetErrorLogSize(handle, ctypes.byref(size))
                error = ctypes.create_string_buffer(size.value + 1)
                lib.nvJitLinkGetErrorLog(handle, error)
                raise RuntimeError(f"nvJitLink failed ({status}): {error.value.decode(errors='replace')}")
            lib.nvJitLinkGetLinkedCubinSize(handle, ctypes.byref(size))
            cubin = ctypes.create_string_buffer(size.value)
            lib.nvJitLinkGetLinkedCubin(handle, cubin)
            return cubin.raw, log.value.decode(errors="replace")
        finally:
            lib.nvJitLinkDestroy(ctypes.byref(handle))


class Ptxas:
    """One ptxas binary, a process per PTX."""

    def __init__(self, path):
        self.path = path

    def __call__(self, ptx, arch="sm_90a"):
        with tempfile.TemporaryDirectory(prefix="kiln-ptxas-") as folder:
            source, cubin = Path(folder) / "k.ptx", Path(folder) / "k.cubin"
            source.write_bytes(ptx)
            done = subprocess.run([self.path, f"-arch={arch}", "-O3", "-v", str(source), "-o", str(cubin)],
                                  capture_output=True, text=True, check=True)
            return cubin.read_bytes(), done.stderr + done.stdout


def find_assemblers():
    """Every assembler on this machine, by label."""
    found = {}
    try:
        from kiln import runtime
        found["driver JIT (cuLink)"] = runtime.device(0).assemble
    except Exception as error:  # no runtime or no GPU: the row says so
        print(f"driver JIT: unavailable ({error})")
    candidates = [os.environ.get("KILN_NVJITLINK", "")]
    for root in sys.path:
        candidates += sorted(glob.glob(os.path.join(root, "nvidia", "**", "libnvJitLink.so*"), recursive=True))
    candidates += sorted(glob.glob("/usr/local/cuda*/lib64/libnvJitLink.so*"))
    for path in dict.fromkeys(os.path.realpath(c) for c in candidates if c and os.path.isfile(c)):
        try:
            found[f"nvJitLink {path}"] = NvJitLink(path)
        except OSError as error:
            print(f"nvJitLink {path}: {error}")
    binaries = [shutil.which("ptxas") or "", "/usr/local/cuda/bin/ptxas"]
    try:
        import triton
        binaries += glob.glob(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas*"))
    except ImportError:
        pass
    for path in dict.fromkeys(os.path.realpath(b) for b in binaries if b and os.path.isfile(b)):
        found[f"ptxas {path}"] = Ptxas(path)
    return found


def registers(log):
    """Registers per kernel from a verbose log (ptxas' or the JIT's form)."""
    return sorted(int(n) for n in re.findall(r"[Uu]sed (\d+) registers", log))


def compile_ms(log):
    """The compiler's own account of its time in a verbose log ("Compile time = X ms"), summed."""
    return sum(float(t) for t in re.findall(r"Compile time = ([0-9.]+) ms", log))


def faults():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_minflt + children.ru_minflt


def run(args):
    ptx_files = sorted(Path(args.ptx).glob("*.ptx"))
    texts = {p.name: p.read_bytes() for p in ptx_files}
    assemblers = find_assemblers()
    try:
        from kiln import runtime
        gpu = runtime.device(0)
    except Exception:
        gpu = None
    info = {"machine": platform.uname()._asdict(), "cpus": os.cpu_count(), "python": sys.version.split()[0]}
    print(json.dumps(info))
    rows, results = [], []
    for label, assemble in assemblers.items():
        per_file, regs, own = {}, {}, {}
        try:
            assemble(texts[ptx_files[0].name])  # first use (library load, compiler start) out of the timing
            for name, text in texts.items():
                samples, page_faults = [], []
                for _ in range(args.repeats):
                    before, start = faults(), time.perf_counter()
                    cubin, log = assemble(text)
                    samples.append((time.perf_counter() - start) * 1e3)
                    page_faults.append(faults() - before)
                if gpu is not None:
                    gpu.load(cubin)  # the cubin is one this GPU runs
                per_file[name] = (statistics.median(samples), min(samples), statistics.median(page_faults))
                regs[name] = registers(log)
                own[name] = compile_ms(log)
            with ThreadPoolExecutor(len(texts)) as pool:  # processes for ptxas, threads in process
                together = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    list(pool.map(assemble, texts.values()))
                    together.append((time.perf_counter() - start) * 1e3)
        except Exception as error:
            print(f"{label}: failed: {error}")
            continue
        for name, (median, fastest, page_faults) in per_file.items():
            rows.append((label, name, median, fastest, page_faults, (regs[name], own[name])))
        rows.append((label, f"all {len(texts)} at once", statistics.median(together), min(together), None, None))
        results.append({"assembler": label, "files": {n: {"median_ms": m, "min_ms": f, "minor_faults": pf,
                                                         "registers": regs[n], "compile_time_ms": own[n]}
                                                     for n, (m, f, pf) in per_file.items()},
                        "all_at_once_median_ms": statistics.median(together)})
    width = max(len(r[0]) for r in rows) if rows else 10
    for label, name, median, fastest, page_faults, regs in rows:  # regs: (registers, compile time)
        extra = (f"  faults {page_faults:6.0f}  registers {regs[0]}  own compile time {regs[1]:.1f} ms"
                 if page_faults is not None else "")
        print(f"{label:<{width}}  {name:<44} {median:8.1f} ms (min {fastest:6.1f}){extra}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "ptx_assemblers.json").write_text(json.dumps({"info": info, "results": results},
                                                                        indent=1))


def speed(args):
    """Runs each large program with the cubins of every in-process assembler and of ptxas, side by side."""
    import torch
    from kiln.gpu import GpuProgram
    assemblers = find_assemblers()
    lines, results = [], []
    for folder in sorted((Path(args.ptx) / "programs").iterdir()):
        flops = json.loads((folder / "probe.json").read_text())["flops"]
        programs = {}
        for label, assemble in assemblers.items():
            copy = Path(tempfile.mkdtemp(prefix="kiln-speed-")) / folder.name
            shutil.copytree(folder, copy)
            try:
                for ptx in copy.glob("*.ptx"):
                    cubin, _ = assemble(ptx.read_bytes())
                    (copy / f"{ptx.stem}.sm_90a.cubin").write_bytes(cubin)
            except Exception as error:
                print(f"{folder.name}, {label}: failed: {error}")
                continue
            programs[label] = GpuProgram(copy)
        first = next(iter(programs.values()))
        generator = torch.Generator(device="cuda").manual_seed(0)
        inputs = [(torch.randn(shape, device="cuda", generator=generator) / (30 if len(shape) > 1 else 1)).to(
            getattr(torch, {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[dtype]))
                  for dtype, shape in first.inputs]
        reference = None
        for label, program in programs.items():
            for _ in range(10):
                out = program(*inputs)
            times = []
            for _ in range(args.repeats * 10):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = program(*inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            result = out[0] if isinstance(out, (list, tuple)) else out
            reference = result.float() if reference is None else reference
            difference = (result.float() - reference).abs().max().item()
            median = statistics.median(times)
            lines.append(f"{folder.name:<26} {label:<100.100} {median:8.3f} ms {flops / median / 1e9:7.1f} TFLOP/s"
                         f"  max |diff| vs first {difference:.2e}")
            results.append({"program": folder.name, "assembler": label, "median_ms": median,
                            "tflops": flops / median / 1e9, "max_abs_diff_vs_first": difference})
    print("\n".join(lines))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "ptx_assemblers_speed.json").write_text(json.dumps(results, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--build", default="build")
    p.add_argument("--ptx", required=True)
    r = sub.add_parser("run")
    r.add_argument("--ptx", required=True)
    r.add_argument("--out")
    r.add_argument("--repeats", type=int, default=7)
    s = sub.add_parser("speed")
    s.add_argument("--ptx", required=True)
    s.add_argument("--out")
    s.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    {"prepare": prepare, "run": run, "speed": speed}[args.command](args)


if __name__ == "__main__":
    main()
