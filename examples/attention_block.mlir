// A GQA attention block written out op by op, as an exporter emits it: q k^T, a scale,
// softmax, times v, then an output projection with a bias and a residual add. `make demo` runs it through Kiln.
func.func @attention_block(%q: tensor<1x8x77x64xf32>, %k: tensor<1x2x77x64xf32>, %v: tensor<1x2x77x64xf32>,
                           %w: tensor<512x512xf32>, %b: tensor<512xf32>, %x: tensor<1x77x512xf32>)
    -> tensor<1x77x512xf32> {
  // GQA 4:1 written as unsqueeze + expand + reshape of k and v.
  %k5 = kiln.reshape %k : tensor<1x2x77x64xf32> -> tensor<1x2x1x77x64xf32>
  %ke = kiln.broadcast %k5 : tensor<1x2x1x77x64xf32> -> tensor<1x2x4x77x64xf32>
  %kr = kiln.reshape %ke : tensor<1x2x4x77x64xf32> -> tensor<1x8x77x64xf32>
  %v5 = kiln.reshape %v : tensor<1x2x77x64xf32> -> tensor<1x2x1x77x64xf32>
  %ve = kiln.broadcast %v5 : tensor<1x2x1x77x64xf32> -> tensor<1x2x4x77x64xf32>
  %vr = kiln.reshape %ve : tensor<1x2x4x77x64xf32> -> tensor<1x8x77x64xf32>
  %kt = kiln.transpose %kr [0, 1, 3, 2] : tensor<1x8x77x64xf32> -> tensor<1x8x64x77xf32>
  %s = kiln.matmul %q, %kt : tensor<1x8x77x64xf32>, tensor<1x8x64x77xf32> -> tensor<1x8x77x77xf32>
  %sqrt_d = kiln.constant dense<8.0> : tensor<f32>
  %scaled = kiln.div %s, %sqrt_d : tensor<1x8x77x77xf32>, tensor<f32> -> tensor<1x8x77x77xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x8x77x77xf32>
  %o = kiln.matmul %p, %vr : tensor<1x8x77x77xf32>, tensor<1x8x77x64xf32> -> tensor<1x8x77x64xf32>
  // Back to [batch, seq, hidden], project, add bias and residual.
  %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<1x8x77x64xf32> -> tensor<1x77x8x64xf32>
  %h = kiln.reshape %ot : tensor<1x77x8x64xf32> -> tensor<1x77x512xf32>
  %y = kiln.matmul %h, %w : tensor<1x77x512xf32>, tensor<512x512xf32> -> tensor<1x77x512xf32>
  %yb = kiln.add %y, %b : tensor<1x77x512xf32>, tensor<512xf32> -> tensor<1x77x512xf32>
  %r = kiln.add %yb, %x : tensor<1x77x512xf32>, tensor<1x77x512xf32> -> tensor<1x77x512xf32>
  return %r : tensor<1x77x512xf32>
}
