#!/usr/bin/env bash
# fuzz.sh - libFuzzer over what kiln-opt does with untrusted text (parse, verify and each named pipeline) and over
# the runtime's manifest reader.
#
# Why: Kiln's passes take IR that users, exporters and bug reports write. A mutation fuzzer that knows which
# inputs reach new code in Kiln's passes (coverage from -fsanitize=fuzzer-no-link), under AddressSanitizer and
# UBSan, finds the crashes that hand-written bad inputs miss. This builds tools/kiln-opt-fuzz with clang 22 in
# build-fuzz/ (installing clang-22 and its compiler-rt from Debian when missing), seeds a corpus from every
# split of the lit inputs (test/**/*.mlir, `// -----`), and runs the target for each pipeline in turn with the
# dictionary fuzz/kiln.dict, then prints executions, corpus growth and crashes per pipeline. The target "plan"
# is runtime/tools/kiln-plan-fuzz: kiln_plan_read over manifests, seeded from fuzz/plans with fuzz/plan.dict. The
# target "onnx" is test/Integration/frontend/onnx_fuzz.py, a structural mutation fuzzer over the ONNX importer (Python,
# no libFuzzer) that runs on the main build (build/python, build/bin/kiln-opt: `make` first).
#
#   scripts/fuzz.sh [SECONDS] [PIPELINES]
#
# SECONDS: per pipeline (default 60); PIPELINES: comma-separated among verify, kernel, host, gpu-sm80, gpu-sm90a
# plan and onnx (default all). Crashing inputs land in build-fuzz/fuzz-work/crashes/; replay one with
# `KILN_FUZZ_PIPELINE=<p> build-fuzz/bin/kiln-opt-fuzz <file>`, or `kiln-opt` and the pipeline. Exit status: 1 if
# any pipeline crashed.
set -euo pipefail
seconds=${1:-60}
pipelines=${2:-verify,kernel,host,gpu-sm80,gpu-sm90a,plan,onnx}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KILN_FUZZ_BUILD:-$root/build-fuzz}
work=$build/fuzz-work
llvm=/usr/lib/llvm-22
if ! command -v clang++-22 > /dev/null || ! ls $llvm/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a > /dev/null 2>&1; then
  echo "fuzz.sh: installing clang-22 and libclang-rt-22-dev (Debian)"
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get install -y -q clang-22 libclang-rt-22-dev > /dev/null
fi
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DMLIR_DIR=$llvm/lib/cmake/mlir -DLLVM_DIR=$llvm/lib/cmake/llvm \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=address,undefined -DLLVM_USE_SANITIZE_COVERAGE=ON > /dev/null
ninja -C "$build" kiln-opt-fuzz kiln-plan-fuzz

# The seed corpus: each split of each lit input (not the RUN lines' expectations: the text is the input).
rm -rf "$work/seeds" && mkdir -p "$work/seeds" "$work/crashes"
python3 - "$root/test" "$work/seeds" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[2])
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.mlir")):
    for n, part in enumerate(path.read_text().split("// -----")):
        if part.strip():
            (out / f"{path.stem}_{n}.mlir").write_text(part)
PY

# UBSan reports are crashes here; leaks are not (MLIR's process-lifetime allocations). allow_user_poisoning=0 as in
# `make test-sanitize`: LLVM's BumpPtrAllocator, inlined into Kiln's instrumented code, poisons slabs that
# libMLIR.so's uninstrumented copy then writes.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:allow_user_poisoning=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
printf '%-10s %8s %12s %10s %8s\n' pipeline seconds executions corpus crashes
for p in ${pipelines//,/ }; do
  if [ "$p" = onnx ]; then
    PYTHONPATH="$root/build/python" python3 -W ignore "$root/test/Integration/frontend/onnx_fuzz.py" \
      --seconds "$seconds" --kiln-opt "$root/build/bin/kiln-opt" > "$work/onnx.log" 2>&1 || status=1
    runs=$(grep -o '[0-9]* mutated models' "$work/onnx.log" | grep -o '^[0-9]*' || echo 0)
    findings=$(grep -o '[0-9]* finding' "$work/onnx.log" | grep -o '^[0-9]*' || echo '?')
    printf '%-10s %8s %12s %10s %8s\n' onnx "$seconds" "$runs" - "$findings"
    continue
  fi
  mkdir -p "$work/corpus/$p"
  before=$(ls "$work/crashes" | wc -l)
  target=kiln-opt-fuzz seeds=$work/seeds dict=$root/fuzz/kiln.dict max_len=8192
  if [ "$p" = plan ]; then
    target=kiln-plan-fuzz seeds=$root/fuzz/plans dict=$root/fuzz/plan.dict max_len=32768
  fi
  KILN_FUZZ_PIPELINE=$p "$build/bin/$target" "$work/corpus/$p" "$seeds" \
    -dict="$dict" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=$max_len \
    -artifact_prefix="$work/crashes/$p-" -print_final_stats=1 > "$work/$p.log" 2>&1 || status=1
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$p.log" | grep -o '[0-9]*$' || echo 0)
  corpus=$(ls "$work/corpus/$p" | wc -l)
  crashes=$(( $(ls "$work/crashes" | wc -l) - before ))
  printf '%-10s %8s %12s %10s %8s\n' "$p" "$seconds" "$runs" "$corpus" "$crashes"
done
exit $status
