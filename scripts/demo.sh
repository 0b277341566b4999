#!/usr/bin/env bash
# Kiln demo: the bundled attention block through the compiler, stage by stage, then run and checked.
#
# Why: one command that shows what Kiln does today on a real subgraph — the fused kernels, the tiled attention
# kernel with online softmax, and a numerical check of the compiled program against an independent float64
# numpy reference and against Kiln's own unfused, untiled reference lowering.
# It ends with the same block written in Python with @kiln.jit, and a Llama-style block imported from ONNX.
set -euo pipefail
build="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
example="$here/examples/attention_block.mlir"
bin="$here/$build/bin"

section() { printf '\n\033[1m== %s\033[0m\n' "$1"; }

section "1. The input: attention written op by op, then a projection with bias and residual"
grep -v '^//' "$example"

section "2. Fused into kernels (kiln-opt -kiln-fuse-attention -kiln-fuse-epilogue -kiln-outline-kernels)"
fused="$("$bin/kiln-opt" "$example" -canonicalize -kiln-fuse-attention -kiln-fuse-epilogue -kiln-outline-kernels)"
echo "$fused"
echo "    => $(grep -c 'attributes {kiln.kernel}' <<<"$fused") kernels: $(grep -o '@[a-z0-9_]*_k[0-9]*_[a-z_]*(' <<<"$fused" | sort -u | tr -d '(' | tr '\n' ' ')"

section "3. The attention kernel tiled, with online softmax (kiln-opt --kiln-kernel-pipeline)"
tiled="$("$bin/kiln-opt" "$example" --kiln-kernel-pipeline)"
awk '/func.func private @attention_block_k0_attention/,/^  }$/' <<<"$tiled"
echo "    (no kiln.softmax left: $(grep -c 'kiln.softmax' <<<"$tiled" || true) occurrences; exp2 calls: $(grep -c 'math.exp2' <<<"$tiled"))"

section "4. Compiled for the CPU (kiln-run), checked against float64 numpy and the unfused reference"
python3 "$here/scripts/demo_check.py" "$bin/kiln-run" "$example"
"$bin/kiln-run" "$example" --random-inputs --check

section "5. The bf16 block compiled for the H200 (kilnc --target=sm_90a): kernels, launch shapes, registers"
out="$here/$build/demo-gpu"
"$bin/kilnc" "$here/examples/gpu_attention_block.mlir" --target=sm_90a -o "$out"
python3 - "$out/manifest.json" <<'PY'
import json, sys
manifest = json.load(open(sys.argv[1]))
for kernel in manifest["kernels"]:
    print(f"  {kernel['name']:40s} grid {kernel['grid']} block {kernel['block'][0]:3d} "
          f"smem {kernel['dynamic_shared_bytes']:6d} B  {kernel.get('registers', '?')} registers, "
          f"{kernel.get('spill_stores', '?')} B spilled, {kernel['cubin']}")
print("  (bench/gpu_visit.py checks and times such kernels on a GPU)")
PY

section "6. The same block from Python: a @kiln.jit function traced, fused and run on the CPU"
python3 "$here/scripts/demo_python.py" "$here/$build"

section "7. A Llama-style block exported from PyTorch to ONNX: imported, fused into kernels, run, checked"
python3 "$here/scripts/demo_frontend.py" "$here/$build"
