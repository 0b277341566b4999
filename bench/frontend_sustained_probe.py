"""Whether the Llama block's graph time above its kernels' sum is gaps between kernels or kernels slowed by
sustained load: times one graph replay cool (after a 50 ms pause) and back to back, and sums the profiler's
kernel times of a cool call and of a call after 100 back-to-back replays.

Why: the frontend visit used to profile one cool call and time sustained replays, and the 0.2 ms between them
read as gaps. Needs a prepared frontend_build (bench/frontend_prepare.py):

    PYTHONPATH=build/python python3 bench/frontend_sustained_probe.py
"""

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "examples")]

import kiln  # noqa: E402
from frontend_visit import kiln_weights, seeded_block  # noqa: E402


def replay_ms(prepared, pause):
    """One graph replay between CUDA events, after a pause of 50 ms when `pause`."""
    if pause:
        torch.cuda.synchronize()
        time.sleep(0.05)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    prepared.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def kernel_sum_ms(prepared, sustained):
    """The profiler's kernel times of one replay summed, after 100 back-to-back replays when `sustained`."""
    for _ in range(100 if sustained else 0):
        prepared.replay()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        prepared.replay()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in events) / 1e3, len(events)


def main():
    folder = ROOT / "frontend_build" / "llama_b1_s2048"
    meta = json.loads((folder / "block.json").read_text())
    config = meta["config"]
    module = seeded_block(config).to("cuda", torch.bfloat16).eval()
    x = torch.randn(config["batch"], config["seq"], config["hidden"], device="cuda", dtype=torch.bfloat16)
    weights = kiln_weights(module)
    prepared = kiln.load(folder).bind(x, *[weights[k].contiguous() for k in meta["weights"]])
    prepared.capture()
    for _ in range(10):
        prepared.replay()
    cool = statistics.median(replay_ms(prepared, True) for _ in range(20))
    hot = statistics.median(replay_ms(prepared, False) for _ in range(200))
    torch.cuda.synchronize()
    time.sleep(0.2)
    print(f"graph replay, cool (50 ms pause before each): {cool:.3f} ms")
    print(f"graph replay, back to back: {hot:.3f} ms")
    print("kernel sum, cool call: %.3f ms (%d kernels)" % kernel_sum_ms(prepared, False))
    print("kernel sum, after 100 back-to-back replays: %.3f ms (%d kernels)" % kernel_sum_ms(prepared, True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
