"""Compiles the GPU Python suite's programs here into a package folder that travels to the GPU machine.

    python3 test/GPU/python/prepare.py --build build --out gpu_python

writes gpu_python/kiln (the package from the build, without the compiler extension: the GPU machine's Python
cannot load it and does not need it) and gpu_python/cache (KILN_CACHE_DIR with every program of gpu_cases.py,
compiled for sm_90a). Then, on the GPU machine: PYTHONPATH=gpu_python KILN_CACHE_DIR=gpu_python/cache
python3 -m pytest test/GPU/python -q.
"""

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default="gpu_python")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    os.environ["KILN_CACHE_DIR"] = str(out / "cache")
    sys.path[:0] = [str(Path(args.build).resolve() / "python"), str(Path(__file__).resolve().parent)]
    import ml_dtypes

    import gpu_cases
    import kiln
    from kiln import frontend

    dtypes = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}

    def spec(value):
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple):
            return np.zeros(value[0], dtypes[value[1]])
        return value

    timings = {}
    for name, fn, arguments, constants in gpu_cases.JIT_CASES + gpu_cases.KERNEL_REUSE_CASES + gpu_cases.ATTENTION_REUSE_CASES:
        start = time.perf_counter()
        source = fn.source(*[spec(a) for a in arguments], **{k: spec(v) for k, v in constants.items()})
        kiln.compile(source, target="sm_90a")
        timings[name] = time.perf_counter() - start
    # test_the_runtime_checks_tensor_map_specs: a plain wgmma matmul's program, traced from torch-like arguments.
    kiln.compile(kiln.ops.matmul.source(np.zeros((200, 264), ml_dtypes.bfloat16),
                                        np.zeros((264, 136), ml_dtypes.bfloat16)), target="sm_90a")
    for case in gpu_cases.VARLEN_CASES:
        start = time.perf_counter()
        for source in gpu_cases.varlen_sources(case):
            kiln.compile(source, target="sm_90a")
        timings[case[0]] = time.perf_counter() - start
    for case in gpu_cases.PAGED_CASES:
        start = time.perf_counter()
        kiln.compile(gpu_cases.paged_source(case), target="sm_90a")
        timings[case[0]] = time.perf_counter() - start
    for case in gpu_cases.APPEND_CASES:
        start = time.perf_counter()
        for source in gpu_cases.append_sources(case):
            kiln.compile(source, target="sm_90a")
        timings[case[0]] = time.perf_counter() - start
    # The split sums computed by their readers, and the same programs with the sums as kernels (keep_sums).
    for cases, step, placeholders in ((gpu_cases.PROJECTION_CASES, gpu_cases.projections_step,
                                       gpu_cases.projection_placeholders),
                                      (gpu_cases.RESIDUAL_NORM_CASES, gpu_cases.residual_norm_step,
                                       gpu_cases.residual_norm_placeholders),
                                      (gpu_cases.TWO_NORMS_CASES, gpu_cases.residual_two_norms,
                                       gpu_cases.two_norms_placeholders)):
        for case in cases:
            start = time.perf_counter()
            for keep_sums in (False, True):
                kiln.compile(step.source(*placeholders(case), keep_sums=keep_sums), target="sm_90a")
            timings[case[0]] = time.perf_counter() - start
    for name, path in gpu_cases.SOURCE_CASES:
        start = time.perf_counter()
        kiln.compile(path.read_text(), target="sm_90a")
        timings[name] = time.perf_counter() - start
    start = time.perf_counter()
    kiln.autotune(gpu_cases.SOURCE_CASES[0][1].read_text(), "sm_90a", prepare=True)
    timings["autotune space of gpu_attention_block"] = time.perf_counter() - start
    _, (model, _, _) = gpu_cases.llama_model()
    start = time.perf_counter()
    frontend.from_onnx(model, target="sm_90a")
    timings["llama_block"] = time.perf_counter() - start
    package = out / "kiln"
    shutil.copytree(Path(args.build) / "python" / "kiln", package,
                    ignore=shutil.ignore_patterns("_kiln*.so", "__pycache__"))
    for name, seconds in timings.items():
        print(f"{name:24} compiled for sm_90a in {seconds * 1000:7.1f} ms (cold, this machine)")
    print(f"wrote {package} and {out / 'cache'} ({len(list((out / 'cache').iterdir()))} programs)")


if __name__ == "__main__":
    main()
