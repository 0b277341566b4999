// The attention block of attention_block.mlir in bf16, for the GPU: GQA 4:1 written as expand + reshape, a
// scale, softmax, times v, a transpose back to [batch, seq, hidden], then a projection with bias and residual.
// kilnc turns it into three kernels: attention, the transpose, and a matmul with its epilogue.
func.func @gpu_attention_block(%q: tensor<1x8x77x64xbf16>, %k: tensor<1x2x77x64xbf16>, %v: tensor<1x2x77x64xbf16>,
                               %w: tensor<512x512xbf16>, %b: tensor<512xbf16>, %x: tensor<1x77x512xbf16>)
    -> tensor<1x77x512xbf16> {
  %k5 = kiln.reshape %k : tensor<1x2x77x64xbf16> -> tensor<1x2x1x77x64xbf16>
  %ke = kiln.broadcast %k5 : tensor<1x2x1x77x64xbf16> -> tensor<1x2x4x77x64xbf16>
  %kr = kiln.reshape %ke : tensor<1x2x4x77x64xbf16> -> tensor<1x8x77x64xbf16>
  %v5 = kiln.reshape %v : tensor<1x2x77x64xbf16> -> tensor<1x2x1x77x64xbf16>
  %ve = kiln.broadcast %v5 : tensor<1x2x1x77x64xbf16> -> tensor<1x2x4x77x64xbf16>
  %vr = kiln.reshape %ve : tensor<1x2x4x77x64xbf16> -> tensor<1x8x77x64xbf16>
  %kt = kiln.transpose %kr [0, 1, 3, 2] : tensor<1x8x77x64xbf16> -> tensor<1x8x64x77xbf16>
  %s = kiln.matmul %q, %kt : tensor<1x8x77x64xbf16>, tensor<1x8x64x77xbf16> -> tensor<1x8x77x77xbf16>
  %sqrt_d = kiln.constant dense<8.0> : tensor<bf16>
  %scaled = kiln.div %s, %sqrt_d : tensor<1x8x77x77xbf16>, tensor<bf16> -> tensor<1x8x77x77xbf16>
  %p = kiln.softmax %scaled axis 3 : tensor<1x8x77x77xbf16>
  %o = kiln.matmul %p, %vr : tensor<1x8x77x77xbf16>, tensor<1x8x77x64xbf16> -> tensor<1x8x77x64xbf16>
  %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<1x8x77x64xbf16> -> tensor<1x77x8x64xbf16>
  %h = kiln.reshape %ot : tensor<1x77x8x64xbf16> -> tensor<1x77x512xbf16>
  %y = kiln.matmul %h, %w : tensor<1x77x512xbf16>, tensor<512x512xbf16> -> tensor<1x77x512xbf16>
  %yb = kiln.add %y, %b : tensor<1x77x512xbf16>, tensor<512xbf16> -> tensor<1x77x512xbf16>
  %r = kiln.add %yb, %x : tensor<1x77x512xbf16>, tensor<1x77x512xbf16> -> tensor<1x77x512xbf16>
  return %r : tensor<1x77x512xbf16>
}
