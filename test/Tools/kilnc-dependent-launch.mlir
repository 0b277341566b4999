// kilnc marks every sm_90a kernel of a run plan but the first `dependent_launch` (programmatic dependent launch:
// the kernel waits for its predecessor itself); sm_80 kernels launch the ordinary way. A decode GEMM split by
// kiln-split-k is two kernels: the chunks' matmul and their sum.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kilnc %s --target=sm_90a -o %t/sm90 > /dev/null
// RUN: %python -c "import json; m = json.load(open('%t/sm90/manifest.json')); print([(k['name'], k.get('dependent_launch', False)) for k in m['kernels']])" | FileCheck %s --check-prefix=SM90
// RUN: kilnc %s --target=sm_80 -o %t/sm80 > /dev/null
// RUN: %python -c "import json; m = json.load(open('%t/sm80/manifest.json')); print([(k['name'], k.get('dependent_launch', False)) for k in m['kernels']])" | FileCheck %s --check-prefix=SM80
// SM90: [('decode_k0_matmul', False), ('decode_k1_sum_splits', True)]
// SM80: [('decode_k0_matmul', False), ('decode_k1_sum_splits', False)]
func.func @decode(%x: tensor<32x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<32x4096xbf16> {
  %y = kiln.matmul %x, %w : tensor<32x4096xbf16>, tensor<4096x4096xbf16> -> tensor<32x4096xbf16>
  return %y : tensor<32x4096xbf16>
}

// A batch-32 decode attention over a 4096-key paged cache streams 537 MB with 256 blocks of 74 KB, three to a
// multiprocessor: launched to overlap its predecessor, its blocks would spread unevenly over the multiprocessors
// the predecessor still holds, so it launches the ordinary way; the append before it overlaps its own.
// RUN: kilnc %S/Inputs/decode-attention-b32.mlir --target=sm_90a -o %t/b32 > /dev/null
// RUN: %python -c "import json; m = json.load(open('%t/b32/manifest.json')); print([(k['name'], k.get('dependent_launch', False)) for k in m['kernels']])" | FileCheck %s --check-prefix=B32
// B32: [('step_k0_silu', False), ('step_k1_append_kv', True), ('step_k2_attention', False)]
