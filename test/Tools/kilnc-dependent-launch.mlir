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
