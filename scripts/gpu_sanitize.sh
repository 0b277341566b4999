#!/usr/bin/env bash
# gpu_sanitize.sh - compute-sanitizer over the GPU cases, one table of errors and hazards per tool.
#
# Why: a kernel that writes past its buffer, races on shared memory or reads uninitialised memory can still pass a
# numerics check. This runs the device suite (bench/gpu_visit.py over a gpu_cases.py build) and the lowering
# benchmarks' correctness sets (bench/matmul_lowering.py, bench/attention_lowering.py, bench/row_kernels.py,
# bench/flex_attention.py, bench/decode_attention.py, bench/paged_attention.py builds: their t_ correctness cases,
# without timings) under memcheck, racecheck, synccheck and initcheck, and prints one line per (set, tool): the cases
# checked and passed, and the sanitizer's error or hazard count. Run it on the GPU machine from the repository root,
# after the builds it names were prepared on the build machine (the suite without --bench: its benchmark shapes take
# hours under racecheck):
#
#   scripts/gpu_sanitize.sh [OUT] [TOOLS] [SETS]
#
# OUT: the log folder (default sanitize_logs); TOOLS and SETS: comma-separated (default every tool and every set:
# suite, matmul, attention, rows, flex, decode, paged).
#
# Sets whose build folder is missing are skipped and said so. Exit status: 1 if any sanitizer reported an
# error or hazard, or a case failed its numerics under it.
set -u
out=${1:-sanitize_logs}
tools=${2:-memcheck,racecheck,synccheck,initcheck}
wanted=${3:-suite,matmul,attention,rows,flex,decode,paged}
sanitizer=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
runtime=build/lib/libkiln_runtime.so
export PYTHONPATH=$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$out"
if [ ! -x "$sanitizer" ]; then
  echo "gpu_sanitize.sh: no compute-sanitizer at $sanitizer (set COMPUTE_SANITIZER)" >&2
  exit 2
fi

# name | build folder | command (the build folder and the log folder appended)
sets=(
  "suite|gpu_build/suite|python3 bench/gpu_visit.py --runtime $runtime --no-bench --build"
  "matmul|gpu_build/matmul|python3 bench/matmul_lowering.py visit --runtime $runtime --no-bench --only t_ --build"
  "attention|gpu_build/attention|python3 bench/attention_lowering.py visit --runtime $runtime --no-bench --only t_ --build"
  "rows|gpu_build/rows|python3 bench/row_kernels.py visit --runtime $runtime --no-bench --only t_ --build"
  "flex|gpu_build/flex|python3 bench/flex_attention.py visit --runtime $runtime --no-bench --only t_ --build"
  "decode|gpu_build/decode|python3 bench/decode_attention.py visit --runtime $runtime --no-bench --only t_ --build"
  "paged|gpu_build/paged|python3 bench/paged_attention.py visit --runtime $runtime --no-bench --only t_ --build"
)

status=0
printf '%-10s %-10s %8s %8s %8s  %s\n' set tool cases passed errors log
for entry in "${sets[@]}"; do
  IFS='|' read -r name build command <<<"$entry"
  [[ ",$wanted," == *",$name,"* ]] || continue
  if [ ! -d "$build" ]; then
    printf '%-10s %-10s %s\n' "$name" - "skipped: no $build"
    continue
  fi
  for tool in ${tools//,/ }; do
    log="$out/${name}_${tool}.log"
    # shellcheck disable=SC2086
    "$sanitizer" --tool "$tool" --error-exitcode 99 $command "$build" --out "$out/${name}_${tool}" >"$log" 2>&1
    rc=$?
    summary=$(grep -E "passed, [0-9]+ failed" "$log" | tail -1)
    passed=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\1/p' <<<"$summary")
    failed=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\2/p' <<<"$summary")
    errors=$(sed -nE 's/.*(ERROR SUMMARY|RACECHECK SUMMARY): ([0-9]+) (errors|hazards).*/\2/p' "$log" | tail -1)
    cases=$(( ${passed:-0} + ${failed:-0} ))
    printf '%-10s %-10s %8s %8s %8s  %s\n' "$name" "$tool" "$cases" "${passed:-?}" "${errors:-?}" "$log"
    if [ "$rc" -ne 0 ] || [ "${errors:-1}" != 0 ] || [ "${failed:-1}" != 0 ]; then
      status=1
    fi
  done
done
exit $status
