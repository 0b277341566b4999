#!/usr/bin/env bash
#===- gpu_wheel_suite.sh - Install Kiln's wheel on the GPU machine and run the GPU Python suite against it ===#
#
# One visit of the GPU machine for the Python API, from the repository root there with the wheel that
# `python3.12 -m pip wheel . --no-deps -w dist` wrote here: installs it with pip into the environment of $PYTHON
# (default python3, the one that has torch; numpy and ml_dtypes must be there already, since no index is used: no
# network and no LLVM are needed), runs the GPU pytest
# suite against the installed package with an empty disk cache (so every program compiles on that machine), and
# with --bench the cold-JIT and per-call latency benchmarks of Kiln and Triton side by side and where Kiln's time
# goes; the host's speed drifts between processes, so Kiln's latency benchmark runs again last, in a process of
# its own (OUT/second_process). Logs and JSON go to OUT; install.txt has the wheel's size and install time.
#
#   scripts/gpu_wheel_suite.sh WHEEL OUT [--bench]
#
#===----------------------------------------------------------------------===#
set -uo pipefail
wheel=$(realpath "$1")
out=$(realpath -m "$2")
bench=${3:-}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python=${PYTHON:-python3}
start=$EPOCHREALTIME
"$python" -m pip install -q --no-index --disable-pip-version-check --force-reinstall --no-deps "$wheel" 2>&1 |
  tee "$out/install.log"
[[ ${PIPESTATUS[0]} == 0 ]] || exit 1
"$python" -m pip check 2>&1 | grep -i '^kiln' && exit 1
awk -v name="$(basename "$wheel")" -v bytes="$(stat -c %s "$wheel")" -v start="$start" -v end="$EPOCHREALTIME" \
  'BEGIN { printf "wheel %s: %d bytes, installed in %.1f s\n", name, bytes, end - start }' |
  tee "$out/install.txt"

# The suite must import the installed package, not a source tree: run from outside the repository.
cd "$work"
export PYTHONPATH="$root/examples:$root/bench:$root/test/GPU/python"
status=0
KILN_CACHE_DIR="$work/cache" "$python" -m pytest "$root/test/GPU/python" -q -p no:cacheprovider 2>&1 |
  tee "$out/gpu_python_suite.log" | tail -25
[[ ${PIPESTATUS[0]} == 0 ]] || status=1
[[ $bench == --bench ]] || exit $status
cd "$root/bench"
"$python" python_gpu_latency.py --cold-jit --out "$out" 2>&1 | tee "$out/python_gpu_cold_jit.log" || status=1
"$python" jit_latency_baseline.py --out "$out" 2>&1 | tee "$out/jit_latency_baseline.log" || status=1
"$python" jit_latency_breakdown.py --out "$out" 2>&1 | tee "$out/jit_latency_breakdown.log" || status=1
mkdir -p "$out/second_process"
"$python" python_gpu_latency.py --cold-jit --out "$out/second_process" 2>&1 |
  tee "$out/second_process/python_gpu_cold_jit.log" || status=1
exit $status
