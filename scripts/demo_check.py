"""Kiln demo check: run examples/attention_block.mlir with kiln-run on random inputs and compare it with an
independent float64 numpy implementation of the same block.

Why: the demo should prove the compiled program computes the right thing, not just that it runs.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def reference(q, k, v, w, b, x):
    q, k, v, w, b, x = (t.astype(np.float64) for t in (q, k, v, w, b, x))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(x.shape)
    return o @ w + b + x


def main(kiln_run: str, example: str) -> int:
    seed = np.random.SeedSequence().entropy % 2**32
    rng = np.random.default_rng(seed)
    shapes = [(1, 8, 77, 64), (1, 2, 77, 64), (1, 2, 77, 64), (512, 512), (512,), (1, 77, 512)]
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    inputs[3] *= 0.05
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"in{i}.npy" for i in range(len(inputs))]
        for path, array in zip(paths, inputs):
            np.save(path, array)
        out = Path(tmp) / "out.npy"
        cmd = [kiln_run, example, *[f"--input={p}" for p in paths], f"--output={out}", "--time"]
        subprocess.run(cmd, check=True)
        result = np.load(out)
    expected = reference(*inputs)
    error = np.abs(result - expected).max() / np.abs(expected).max()
    verdict = "ok" if error <= 1e-4 else "FAILED"
    print(f"seed {seed}: max relative error vs float64 numpy = {error:.2e} ({verdict}, limit 1e-4)")
    return 0 if error <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
