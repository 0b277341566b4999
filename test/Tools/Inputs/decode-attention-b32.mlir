// A decode step's append and paged attention at batch 32 over 4096 keys (128-row pages), after a small kernel.
func.func @step(%x: tensor<32x8x1x128xbf16>, %kc: tensor<1031x128x8x128xbf16>, %vc: tensor<1031x128x8x128xbf16>,
                %v: tensor<32x8x1x128xbf16>, %table: tensor<32x32xi32>, %pos: tensor<32xi32>,
                %q: tensor<32x32x1x128xbf16>, %lens: tensor<32xi32>)
    -> (tensor<32x32x1x128xbf16>, tensor<1031x128x8x128xbf16>, tensor<1031x128x8x128xbf16>) {
  %k = kiln.silu %x : tensor<32x8x1x128xbf16>
  %kc2, %vc2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<1031x128x8x128xbf16>,
      tensor<1031x128x8x128xbf16>, tensor<32x8x1x128xbf16>, tensor<32x8x1x128xbf16>, tensor<32x32xi32>,
      tensor<32xi32> -> tensor<1031x128x8x128xbf16>, tensor<1031x128x8x128xbf16>
  %o = kiln.paged_attention %q, %kc2, %vc2, %table, %lens : tensor<32x32x1x128xbf16>, tensor<1031x128x8x128xbf16>,
      tensor<1031x128x8x128xbf16>, tensor<32x32xi32>, tensor<32xi32> -> tensor<32x32x1x128xbf16>
  return %o, %kc2, %vc2 : tensor<32x32x1x128xbf16>, tensor<1031x128x8x128xbf16>, tensor<1031x128x8x128xbf16>
}
