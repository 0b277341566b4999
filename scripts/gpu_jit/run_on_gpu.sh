#!/usr/bin/env bash
#===- run_on_gpu.sh - Build the packed GPU JIT on the GPU machine and run the GPU Python suite ===#
#
# One visit of the GPU machine for the Python API, from the repository root there with the archive that
# scripts/pack_gpu_jit.sh wrote: unpacks it, builds the _kiln module for the local Python (build.sh), runs the
# GPU pytest suite with an empty disk cache (so every program compiles on that machine), then the cold-JIT and
# per-call latency benchmarks of Kiln and Triton side by side, and where Kiln's time goes. The host's speed
# drifts between processes, so Kiln's latency benchmark runs again last, in a process of its own
# (OUT/second_process). Logs and JSON go to OUT.
#
#   scripts/gpu_jit/run_on_gpu.sh gpu_jit.tar.xz OUT
#
#===----------------------------------------------------------------------===#
set -uo pipefail
archive=$(realpath "$1")
out=$(realpath -m "$2")
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
tar -C "$unpacked" -xf "$archive" || exit 1
"$unpacked/kiln_gpu_jit/build.sh" 2>&1 | tee "$out/build.log"
[[ ${PIPESTATUS[0]} == 0 ]] || exit 1

export PYTHONPATH="$unpacked/kiln_gpu_jit:$root/examples:$root/bench"
status=0
KILN_CACHE_DIR="$unpacked/cache" python3 -m pytest "$root/test/GPU/python" -q -p no:cacheprovider 2>&1 |
  tee "$out/gpu_python_suite.log" | tail -25
[[ ${PIPESTATUS[0]} == 0 ]] || status=1
cd "$root/bench"
python3 python_gpu_latency.py --cold-jit --out "$out" 2>&1 | tee "$out/python_gpu_cold_jit.log" || status=1
python3 jit_latency_baseline.py --out "$out" 2>&1 | tee "$out/jit_latency_baseline.log" || status=1
python3 jit_latency_breakdown.py --out "$out" 2>&1 | tee "$out/jit_latency_breakdown.log" || status=1
mkdir -p "$out/second_process"
python3 python_gpu_latency.py --cold-jit --out "$out/second_process" 2>&1 |
  tee "$out/second_process/python_gpu_cold_jit.log" || status=1
exit $status
