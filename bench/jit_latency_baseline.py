"""JIT latency baselines on the GPU machine: Triton's and torch's side of Kiln's Python JIT figures.

Why: the Python API's goals are a cold compile of one kernel in <= 150 ms and <= 20 us per warm call, next to
Triton's figures for a comparable kernel in the same run. bench/python_gpu_latency.py measures Kiln's side of the
same programs (with --cold-jit, compiling on the GPU machine through the installed wheel); a visit runs both.

Measured (one process, fresh Triton cache directory):
- cold: first call of a Triton matmul + bias + SiLU kernel (compile + launch, synchronised), then a second,
  differently specialised kernel, then a 3-matmul MLP whose three shapes each compile, then a flash-attention
  forward kernel;
- warm: host time per call on a cache hit (median of 2000 calls on tiny inputs, no synchronisation inside the
  loop) for those Triton kernels, torch.matmul and SDPA;
- correctness of every Triton result against torch float32, in the same run.
"""
import argparse
import os
import sys
import tempfile
import time

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")

import torch  # noqa: E402
from gpu_visit import per_call_us, report_latency  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton_kernels  # noqa: E402


def triton_linear(a, b, bias, silu=True, block=(64, 64, 32)):
    return triton_kernels.linear(a, b, bias, silu=silu, block=block, warps=4, stages=3)  # Triton's defaults


def triton_attention(q, k, v, block=(64, 64)):
    return triton_kernels.attention(q, k, v, block=block, warps=4, stages=3)


def reference_linear(a, b, bias, silu=True):
    y = a.float() @ b.float() + bias.float()
    return y * torch.sigmoid(y) if silu else y


def timed_ms(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3, out


def rel_error(out, ref):
    return ((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    dev, dt = "cuda", torch.bfloat16
    torch.empty(1, device=dev)  # the CUDA context is not part of any compile time
    rows, errors = {}, {}

    a, b, bias = (torch.randn(s, device=dev, dtype=dt) for s in [(1000, 1000), (1000, 1000), (1000,)])
    b /= 30
    rows["cold: first Triton kernel (matmul+bias+SiLU, incl. launcher build)"], out = timed_ms(
        lambda: triton_linear(a, b, bias))
    errors["matmul+bias+silu"] = rel_error(out, reference_linear(a, b, bias))
    rows["cold: second Triton kernel (other specialisation)"], out = timed_ms(
        lambda: triton_linear(a, b, bias, silu=False, block=(128, 64, 32)))
    errors["matmul+bias"] = rel_error(out, reference_linear(a, b, bias, silu=False))

    x = torch.randn(77, 512, device=dev, dtype=dt)
    w = [torch.randn(s, device=dev, dtype=dt) / 25 for s in [(512, 1536), (1536, 1024), (1024, 512)]]
    bs = [torch.randn(s, device=dev, dtype=dt) for s in (1536, 1024, 512)]

    def mlp(block):
        h = x
        for i, (wi, bi) in enumerate(zip(w, bs)):
            h = triton_linear(h, wi, bi, silu=i < 2, block=block)
        return h

    rows["cold: Triton 3-matmul MLP (3 compiles)"], out = timed_ms(lambda: mlp((32, 128, 64)))
    h = x.float()
    for i, (wi, bi) in enumerate(zip(w, bs)):
        h = reference_linear(h, wi, bi, silu=i < 2)
    errors["mlp"] = rel_error(out, h)

    qkv = [torch.randn(1, 8, 128, 64, device=dev, dtype=dt) for _ in range(3)]
    rows["cold: Triton attention 1x8x128x64 (flash forward)"], out = timed_ms(lambda: triton_attention(*qkv))
    errors["attention"] = rel_error(out, F.scaled_dot_product_attention(*[t.float() for t in qkv]))

    tiny = [torch.randn(s, device=dev, dtype=dt) for s in [(16, 16), (16, 16), (16,)]]
    q = torch.randn(1, 1, 16, 64, device=dev, dtype=dt)
    rows["warm us/call: Triton kernel (cache hit)"] = per_call_us(lambda: triton_linear(*tiny))
    rows["warm us/call: Triton 3-matmul MLP"] = per_call_us(lambda: mlp((32, 128, 64)), calls=500)
    rows["warm us/call: Triton attention 1x1x16x64"] = per_call_us(lambda: triton_attention(q, q, q))
    rows["warm us/call: torch.matmul"] = per_call_us(lambda: torch.matmul(tiny[0], tiny[1]))
    rows["warm us/call: SDPA"] = per_call_us(lambda: F.scaled_dot_product_attention(q, q, q))

    ok = report_latency(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}",
                        rows, errors, os.path.join(args.out, "jit_latency_baseline.json"),
                        {"torch": torch.__version__, "triton": triton.__version__})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
