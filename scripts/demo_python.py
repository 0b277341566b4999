"""Kiln demo, Python part: the same attention block written as a @kiln.jit function, traced, fused, compiled for
the CPU and checked against the float64 numpy reference of demo_check.py.

Why: most people meet Kiln from Python; the demo shows that the op-by-op Python function becomes the same few
fused kernels as the IR file, and that the answer is right.
"""
import sys
import time
from pathlib import Path

import numpy as np

from demo_check import reference

sys.path.insert(0, str(Path(sys.argv[1]) / "python"))
import kiln  # noqa: E402


@kiln.jit
def block(q, k, v, w, b, x):
    o = kiln.attention(q, k, v)                                  # GQA 8:2 from the head counts
    h = kiln.reshape(kiln.transpose(o, [0, 2, 1, 3]), x.shape)
    return kiln.matmul(h, w) + b + x                             # bias and residual fuse into the epilogue


def main():
    seed = np.random.SeedSequence().entropy % 2**32
    rng = np.random.default_rng(seed)
    shapes = [(1, 8, 77, 64), (1, 2, 77, 64), (1, 2, 77, 64), (512, 512), (512,), (1, 77, 512)]
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    inputs[3] *= 0.05
    start = time.perf_counter()
    result = block(*inputs)
    cold = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    block(*inputs)
    warm = (time.perf_counter() - start) * 1e3
    tiled = kiln.compile(block.source(*inputs)).ir("tiled")
    kernels = tiled.count("attributes {kiln.kernel}")
    expected = reference(*inputs)
    error = np.abs(result - expected).max() / np.abs(expected).max()
    verdict = "ok" if error <= 1e-4 else "FAILED"
    print(f"@kiln.jit block: {kernels} kernels, first call (trace + compile + run) {cold:.1f} ms, "
          f"second call {warm:.1f} ms")
    print(f"seed {seed}: max relative error vs float64 numpy = {error:.2e} ({verdict}, limit 1e-4)")
    return 0 if error <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
