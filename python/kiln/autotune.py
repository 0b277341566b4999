"""kiln.autotune: measure a space of kernel strategies on the GPU and keep the fastest correct one.

Why per kernel: a program's tunable kernels (matmuls, attentions) each carry a #kiln.config (tile, warps,
stages, lowering). The tuner starts from the compiler's defaults and, kernel by kernel, tries the candidates of
its space with the others at their defaults, timing the whole program's device time (CUDA-graph replays between
CUDA events, warm-up, median); then it tries
every kernel at its own best together. Measuring one kernel's candidates at a time keeps the space linear, and
keeps it to programs that ``prepare=True`` can compile ahead of time.
A candidate that does not compile, fails at launch, or disagrees with the default program's outputs beyond the
tolerance of the output type is never chosen. The choice is written next to the disk cache (``tuned/``), so
later runs (and other processes) reuse it without measuring again. Every candidate compiles through the disk
cache, so ``prepare=True`` on a machine without a GPU can compile the whole space for a GPU machine without a
compiler.
"""

import json
import os
import statistics
import sys
import tempfile

from . import cache
from .config import Config
from .compiler import CompileError, compile, native
from .gpu import TORCH_DTYPES

#: Relative tolerance (max norm) of a candidate against the default program, by output element type.
TOLERANCES = {"f32": 1e-4, "f16": 5e-3, "bf16": 2e-2}

def _space(*configs):
    return [Config(*config) for config in configs]


MATMUL_SPACE = _space(((128, 128, 32), 4, 4), ((128, 128, 64), 4, 3), ((128, 256, 32), 8, 3),
                      ((128, 128, 64), 8, 3), ((64, 128, 64), 4, 4), ((128, 64, 64), 4, 4), ((64, 64, 64), 4, 4),
                      ((64, 64, 128), 4, 4), ((32, 64, 128), 4, 4), ((16, 32, 128), 4, 4))
#: The Hopper kernel's tiles (bench/results/config_sweeps/gemm_wgmma.md), tried where the compiler chose it.
WGMMA_SPACE = _space(((128, 256, 64), 8, 4, "wgmma"), ((128, 128, 64), 8, 4, "wgmma"), ((128, 128, 64), 8, 3, "wgmma"),
                     ((256, 128, 64), 16, 4, "wgmma"), ((64, 256, 64), 4, 4, "wgmma"), ((128, 64, 64), 8, 6, "wgmma"))
ATTENTION_SPACE = _space(((64, 64), 4, 2), ((128, 64), 8, 2), ((128, 128), 8, 2), ((64, 128), 4, 2), ((128, 32), 8, 2))
#: The Hopper attention kernel's tiles (bench/results/config_sweeps/attention_wgmma.md), where the compiler chose it;
#: one stage is its sequential loop, about as fast or faster where a block sees only a few key tiles
#: (bench/results/config_sweeps/attention_wgmma_d128_short_loops.md), and at head dim 64 faster still with
#: 32-key tiles on the shortest key ranges (bench/results/config_sweeps/attention_wgmma_d64_short_tiles.md).
ATTENTION_WGMMA_SPACE = _space(((128, 128), 8, 2, "wgmma"), ((64, 128), 4, 2, "wgmma"), ((128, 64), 8, 2, "wgmma"),
                               ((128, 192), 8, 2, "wgmma"), ((64, 64), 4, 1, "wgmma"), ((64, 32), 4, 1, "wgmma"),
                               ((128, 64), 8, 1, "wgmma"))


def default_space(op, default):
    """The candidates for one kernel (Configs): its default first, then the space of its op without duplicates.
    The wgmma tiles join a kernel's space when the compiler's default for it is wgmma (sm_90a, past the decode
    shapes)."""
    default = Config.of(default)
    hopper = default.lowering == "wgmma"
    if op == "kiln.matmul":
        space = (WGMMA_SPACE if hopper else []) + MATMUL_SPACE
    else:
        space = (ATTENTION_WGMMA_SPACE if hopper else []) + ATTENTION_SPACE
    return [default] + [c for c in space if c != default]


def _tuned_path(source, target, entry):
    return cache.directory() / "tuned" / f"{cache.key(source, target, entry)}.json"


def _tunable_kernels(source, target, entry):
    """The program's tunable kernels and their default configs: from the compiler, recorded next to the cache
    so that a machine without the compiler (which found the candidates there) can read them."""
    path = cache.directory() / "space" / f"{cache.key(source, target, entry)}.json"
    try:
        kernels = json.loads(native().tunable_kernels(source, target))
    except ImportError:
        if not path.exists():
            raise
        kernels = json.loads(path.read_text())
    else:
        _record(path, kernels)
    return [(kernel["op"], Config.of(kernel["config"])) for kernel in kernels]


def _as_json(configs):
    """A list of Configs and Nones as the manifest's JSON objects and nulls."""
    return [None if config is None else Config.of(config).as_json() for config in configs]


def _record(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(dir=path.parent, prefix=".record.")
    with os.fdopen(handle, "w") as out:
        json.dump(record, out, indent=1)
    os.replace(staging, path)


def _random_inputs(program):
    import torch
    return [torch.randn(shape, device="cuda").to(getattr(torch, TORCH_DTYPES[dtype]))
            for dtype, shape in program.inputs]


#: Graph replays per timed sample: enough back-to-back work that the GPU never waits for the host.
REPLAYS_PER_SAMPLE = 10


def _time_ms(program, inputs, warmup, reps):
    """Median device time of one run of ``program``: its launches captured once into a CUDA graph, each sample
    timing REPLAYS_PER_SAMPLE back-to-back replays with CUDA events, so that host overhead (which a tuner must
    not rank kernels by) stays out of the measurement."""
    import torch
    bound = program.bind(*inputs)
    with torch.cuda.device(bound.device):  # capture and events on the inputs' GPU, whichever is current
        bound.capture()
        for _ in range(warmup):
            bound.replay()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(REPLAYS_PER_SAMPLE):
                bound.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / REPLAYS_PER_SAMPLE)
    return statistics.median(times)


def _outputs(program, inputs):
    out = program(*inputs)
    return out if isinstance(out, tuple) else (out,)


def _agrees(outputs, expected, program):
    for out, ref, (dtype, _) in zip(outputs, expected, program.outputs):
        ref = ref.float()
        error = ((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
        if not error <= TOLERANCES.get(dtype, 0.0):
            return False
    return True


def autotune(source, target="sm_90a", inputs=None, entry=None, space=default_space, warmup=5, reps=20,
             prepare=False, retune=False, progress=True):
    """Tunes ``source`` for ``target`` and returns the program with the best configs found (or recorded).

    ``inputs`` are torch CUDA tensors to measure on (random ones of the entry's types by default). ``space(op,
    default)`` lists the candidate Configs of one kernel (``default`` is the compiler's Config for it). ``prepare=True`` only compiles
    every candidate into the disk cache (no GPU needed) and returns None. ``retune=True`` ignores a recorded choice.
    """
    path = _tuned_path(source, target, entry)
    if path.exists() and not retune and not prepare:
        try:
            record = json.loads(path.read_text())
            return compile(source, target, entry, configs=record["configs"])
        except (ValueError, KeyError, TypeError, CompileError):
            pass  # an unreadable or stale record: tune again
    kernels = _tunable_kernels(source, target, entry)
    candidates = [space(op, default) for op, default in kernels]
    if prepare:
        compile(source, target, entry)
        for index, options in enumerate(candidates):
            for option in options:
                configs = [None] * len(kernels)
                configs[index] = option
                try:
                    compile(source, target, entry, configs=configs)
                except CompileError:
                    pass
        return None
    baseline = compile(source, target, entry)
    inputs = list(inputs) if inputs is not None else _random_inputs(baseline)
    expected = [t.clone() for t in _outputs(baseline, inputs)]
    trials = []

    def measure(configs):
        """The program's median time with these configs, or None when it fails or disagrees."""
        try:
            program = compile(source, target, entry, configs=configs)
            if not _agrees(_outputs(program, inputs), expected, program):
                trials.append({"configs": _as_json(configs), "correct": False})
                return None
            ms = _time_ms(program, inputs, warmup, reps)
        except (CompileError, RuntimeError, ImportError) as error:
            trials.append({"configs": _as_json(configs), "error": str(error).splitlines()[0]})
            return None
        trials.append({"configs": _as_json(configs), "ms": ms, "correct": True})
        return ms

    # Each kernel on its own, the others at their defaults: the programs prepare=True compiled.
    chosen, chosen_ms = [None] * len(kernels), _time_ms(baseline, inputs, warmup, reps)
    per_kernel = [None] * len(kernels)
    for index, options in enumerate(candidates):
        best_here = chosen_ms
        for number, option in enumerate(options):
            configs = [None] * len(kernels)
            configs[index] = option
            ms = measure(configs)
            if ms is not None and ms < best_here:
                best_here, per_kernel[index] = ms, option
            if ms is not None and ms < chosen_ms:
                chosen, chosen_ms = configs, ms
            if progress:
                sys.stderr.write(f"\rkiln.autotune: kernel {index + 1}/{len(kernels)} ({kernels[index][0]}), "
                                 f"config {number + 1}/{len(options)}, best {chosen_ms:.4f} ms   ")
                sys.stderr.flush()
    # Every kernel at its own best, when that combination compiles (it needs the compiler unless cached).
    if sum(option is not None for option in per_kernel) > 1:
        ms = measure(per_kernel)
        if ms is not None and ms < chosen_ms:
            chosen, chosen_ms = per_kernel, ms
    if progress:
        sys.stderr.write("\n")
    _record(path, {"target": target, "entry": entry, "configs": _as_json(chosen), "best_ms": chosen_ms,
                   "trials": trials})
    return compile(source, target, entry, configs=chosen)
