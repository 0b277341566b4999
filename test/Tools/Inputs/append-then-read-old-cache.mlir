// The old v cache is attended over after the append (value semantics allow it; the GPU's in-place append does not).
func.func @stale(%kc: tensor<64x16x2x64xbf16>, %vc: tensor<64x16x2x64xbf16>, %k: tensor<3x2x1x64xbf16>,
                 %v: tensor<3x2x1x64xbf16>, %table: tensor<3x8xi32>, %pos: tensor<3xi32>, %q: tensor<3x8x1x64xbf16>,
                 %lens: tensor<3xi32>) -> (tensor<3x8x1x64xbf16>, tensor<64x16x2x64xbf16>) {
  %kc2, %vc2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<64x16x2x64xbf16>, tensor<64x16x2x64xbf16>,
      tensor<3x2x1x64xbf16>, tensor<3x2x1x64xbf16>, tensor<3x8xi32>, tensor<3xi32>
      -> tensor<64x16x2x64xbf16>, tensor<64x16x2x64xbf16>
  %o = kiln.paged_attention %q, %kc2, %vc, %table, %lens : tensor<3x8x1x64xbf16>, tensor<64x16x2x64xbf16>,
      tensor<64x16x2x64xbf16>, tensor<3x8xi32>, tensor<3xi32> -> tensor<3x8x1x64xbf16>
  return %o, %kc2 : tensor<3x8x1x64xbf16>, tensor<64x16x2x64xbf16>
}
