// A fused q/k/v projection through kilnc: kiln-split-sliced-matmuls runs one GEMM per slice of the weight's rows
// and the bias's columns, each a view of the caller's input from a byte offset (no kernel copies them), and the
// three GEMMs are one launch. A slice of an input returned as an output is copied (kiln-plan-run reads the plan
// up to the missing driver). A manifest whose view starts off a 16-byte line or runs past its storage is refused
// by name.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kilnc %s --target=sm_90a -o %t/qkv > /dev/null
// RUN: %python -c "import json; p = json.load(open('%t/qkv/manifest.json'))['plans'][0]; print([s['kernel'] for s in p['steps']]); print([(v['id'], v['of'], v.get('offset')) for v in p['values'] if v['kind'] == 'view'])" | FileCheck %s
// CHECK: ['qkv_k0_matmul_x3']
// CHECK-NEXT: [(3, 1, 0), (4, 2, 0), (6, 1, 8192), (7, 2, 128), (9, 1, 16384), (10, 2, 256), (12, 5, None), (13, 8, None), (14, 11, None)]
// RUN: %python -c "import numpy as np; [np.save('%t/in%%d.npy' %% i, np.zeros(s, np.uint16)) for i, s in enumerate([(10, 64), (192, 64), (192,)])]"
// RUN: env KILN_LIBCUDA=/nonexistent/libcuda.so.1 not kiln-plan-run %t/qkv -o %t/out %t/in0.npy %t/in1.npy %t/in2.npy 2>&1 | FileCheck %s --check-prefix=READ
// READ: kiln-plan-run: error: no CUDA driver
// RUN: cp -r %t/qkv %t/unaligned && %python -c "import json; p = '%t/unaligned/manifest.json'; m = json.load(open(p)); m['plans'][0]['values'][6]['offset'] = 8200; json.dump(m, open(p, 'w'))"
// RUN: env KILN_LIBCUDA=/nonexistent/libcuda.so.1 not kiln-plan-run %t/unaligned -o %t/out %t/in0.npy %t/in1.npy %t/in2.npy 2>&1 | FileCheck %s --check-prefix=UNALIGNED
// UNALIGNED: kiln-plan-run: error: {{.*}}unaligned/manifest.json: {{.*}}value 6{{.*}} views value 1 from byte 8200, not a multiple of 16
// RUN: cp -r %t/qkv %t/past && %python -c "import json; p = '%t/past/manifest.json'; m = json.load(open(p)); m['plans'][0]['values'][9]['offset'] = 16400; json.dump(m, open(p, 'w'))"
// RUN: env KILN_LIBCUDA=/nonexistent/libcuda.so.1 not kiln-plan-run %t/past -o %t/out %t/in0.npy %t/in1.npy %t/in2.npy 2>&1 | FileCheck %s --check-prefix=PAST
// PAST: kiln-plan-run: error: {{.*}}past/manifest.json: {{.*}}value 9{{.*}} views 8192 bytes of value 1 from byte 16400, past its 24576 bytes
func.func @qkv(%x: tensor<10x64xbf16>, %w: tensor<192x64xbf16>, %b: tensor<192xbf16>)
    -> (tensor<2x5x64xbf16>, tensor<2x5x64xbf16>, tensor<2x5x64xbf16>, tensor<64xbf16>) {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<10x64xbf16>, tensor<192x64xbf16> -> tensor<10x192xbf16>
  %yb = kiln.add %y, %b : tensor<10x192xbf16>, tensor<192xbf16> -> tensor<10x192xbf16>
  %y3 = kiln.reshape %yb : tensor<10x192xbf16> -> tensor<2x5x192xbf16>
  %q = kiln.slice %y3 offsets [0, 0, 0] strides [1, 1, 1] : tensor<2x5x192xbf16> -> tensor<2x5x64xbf16>
  %k = kiln.slice %y3 offsets [0, 0, 64] strides [1, 1, 1] : tensor<2x5x192xbf16> -> tensor<2x5x64xbf16>
  %v = kiln.slice %y3 offsets [0, 0, 128] strides [1, 1, 1] : tensor<2x5x192xbf16> -> tensor<2x5x64xbf16>
  %bv = kiln.slice %b offsets [128] strides [1] : tensor<192xbf16> -> tensor<64xbf16>
  return %q, %k, %v, %bv : tensor<2x5x64xbf16>, tensor<2x5x64xbf16>, tensor<2x5x64xbf16>, tensor<64xbf16>
}
