#!/usr/bin/env bash
# Kiln demo: the bundled attention block through the compiler, stage by stage, then run and checked.
#
# Why: one command that shows what Kiln does today on a real subgraph — the IR at each stage and a numerical
# check of the compiled program against an independent float64 numpy reference.
set -euo pipefail
build="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
example="$here/examples/attention_block.mlir"
bin="$here/$build/bin"

section() { printf '\n\033[1m== %s\033[0m\n' "$1"; }

section "1. The input: attention written op by op (examples/attention_block.mlir)"
grep -v '^//' "$example"

section "2. Canonicalised graph (kiln-opt -canonicalize)"
"$bin/kiln-opt" "$example" -canonicalize

section "3. The host program after lowering to loops (kiln-opt --kiln-host-loops), first lines"
loops="$("$bin/kiln-opt" "$example" --kiln-host-loops)"
sed -n 1,40p <<<"$loops"
echo "    ... ($(wc -l <<<"$loops") lines)"

section "4. Run on the CPU and check against a float64 numpy reference"
python3 "$here/scripts/demo_check.py" "$bin/kiln-run" "$example"
