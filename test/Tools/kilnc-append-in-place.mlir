// A decode step's append and attention through kilnc: the plan hands the append kernel the caches themselves as
// its destinations (kiln-update-caches-in-place), so the caches it returns are the caller's inputs, which the
// manifest marks updated_in_place; the attention reads the appended caches. Reading the old cache after the
// append is an error that names it.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kilnc %s --target=sm_90a -o %t/step > /dev/null
// RUN: %python -c "import json; p = json.load(open('%t/step/manifest.json'))['plans'][0]; print([(v['index'], v.get('updated_in_place', False)) for v in p['values'] if v['kind'] == 'input']); print([s['kernel'] for s in p['steps']], [s['args'] for s in p['steps']], p['outputs'])" | FileCheck %s
// CHECK: [(0, True), (1, True), (2, False), (3, False), (4, False), (5, False), (6, False), (7, False)]
// CHECK-NEXT: ['step_k0_append_kv', 'step_k1_attention'] {{\[}}[0, 1, 2, 3, 4, 5, 0, 1], [{{[0-9]+}}, 0, 4, 7, 1, {{[0-9]+}}]] [{{[0-9]+}}, 0, 1]
// RUN: not kilnc %S/Inputs/append-then-read-old-cache.mlir --target=sm_90a -o %t/bad 2>&1 | FileCheck %s --check-prefix=OLD
// OLD: error: kiln.append_kv on the GPU writes its caches in place, but the old 'v_cache' is used after the append; use the appended cache (its result) instead
// OLD: note: the later use
func.func @step(%kc: tensor<64x16x2x64xbf16>, %vc: tensor<64x16x2x64xbf16>, %k: tensor<3x2x1x64xbf16>,
                %v: tensor<3x2x1x64xbf16>, %table: tensor<3x8xi32>, %pos: tensor<3xi32>, %q: tensor<3x8x1x64xbf16>,
                %lens: tensor<3xi32>) -> (tensor<3x8x1x64xbf16>, tensor<64x16x2x64xbf16>, tensor<64x16x2x64xbf16>) {
  %kc2, %vc2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<64x16x2x64xbf16>, tensor<64x16x2x64xbf16>,
      tensor<3x2x1x64xbf16>, tensor<3x2x1x64xbf16>, tensor<3x8xi32>, tensor<3xi32>
      -> tensor<64x16x2x64xbf16>, tensor<64x16x2x64xbf16>
  %o = kiln.paged_attention %q, %kc2, %vc2, %table, %lens : tensor<3x8x1x64xbf16>, tensor<64x16x2x64xbf16>,
      tensor<64x16x2x64xbf16>, tensor<3x8xi32>, tensor<3xi32> -> tensor<3x8x1x64xbf16>
  return %o, %kc2, %vc2 : tensor<3x8x1x64xbf16>, tensor<64x16x2x64xbf16>, tensor<64x16x2x64xbf16>
}
