// RUN: kiln-opt %s -kiln-fuse-attention -split-input-file | FileCheck %s

// kiln-fuse-attention replaces matmul(softmax(mask(scale(matmul(q, k^T)))), v), written op by op, with one
// kiln.attention. Positive cases check the operands (the un-expanded k and v for GQA/MQA), `causal`, the mask
// operand and the scale, and that the function is left with nothing but the attention (the unfused chain is
// erased). Negative cases, at the end, check that the softmax and both matmuls survive and no attention appears.

//===----------------------------------------------------------------------===//
// Positive: scale, k^T, head expansion
//===----------------------------------------------------------------------===//

// The attention of examples/attention_block.mlir: GQA 4:1 (8 q heads over 2 kv heads) written as
// reshape/broadcast/reshape of k and v, an explicit transpose of k, a divide by sqrt(d) = 8.
// CHECK-LABEL: func.func @gqa_example_block
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x8x77x64xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x77x64xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x77x64xf32>)
// CHECK-NOT: kiln.{{reshape|broadcast|transpose|matmul|div|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f32} : tensor<1x8x77x64xf32>, tensor<1x2x77x64xf32>, tensor<1x2x77x64xf32> -> tensor<1x8x77x64xf32>
// CHECK-NEXT: return %[[OUT]] : tensor<1x8x77x64xf32>
func.func @gqa_example_block(%q: tensor<1x8x77x64xf32>, %k: tensor<1x2x77x64xf32>, %v: tensor<1x2x77x64xf32>)
    -> tensor<1x8x77x64xf32> {
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
  return %o : tensor<1x8x77x64xf32>
}

// -----

// Multiply by a scalar constant of rank 0.
// CHECK-LABEL: func.func @scale_mul_rank0
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<2x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<2x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<2x4x8x16xf32>)
// CHECK-NOT: kiln.{{transpose|matmul|mul|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @scale_mul_rank0(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>)
    -> tensor<2x4x8x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<2x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Multiply by a rank-4 splat, with the constant on the left.
// CHECK-LABEL: func.func @scale_mul_splat_rank4_lhs
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.{{transpose|matmul|mul|softmax|constant}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 5.000000e-01 : f32}
// CHECK-NEXT: return %[[OUT]]
func.func @scale_mul_splat_rank4_lhs(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32> -> tensor<1x4x8x8xf32>
  %c = kiln.constant dense<0.5> : tensor<1x1x1x1xf32>
  %scaled = kiln.mul %c, %s : tensor<1x1x1x1xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// No scale at all: the attention still carries an explicit scale of 1.
// CHECK-LABEL: func.func @no_scale
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.{{transpose|matmul|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 1.000000e+00 : f32} : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @no_scale(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// k^T as a transpose_rhs matmul instead of an explicit transpose; seq_q (4) != seq_k (8) and a value head dim
// (32) that differs from the q/k head dim (16).
// CHECK-LABEL: func.func @transpose_rhs
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x32xf32>)
// CHECK-NOT: kiln.{{matmul|div|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32} : tensor<1x4x4x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x32xf32> -> tensor<1x4x4x32xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @transpose_rhs(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x32xf32>)
    -> tensor<1x4x4x32xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x4x8xf32>
  %c = kiln.constant dense<4.0> : tensor<f32>
  %scaled = kiln.div %s, %c : tensor<1x4x4x8xf32>, tensor<f32> -> tensor<1x4x4x8xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x4x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x8xf32>, tensor<1x4x8x32xf32> -> tensor<1x4x4x32xf32>
  return %o : tensor<1x4x4x32xf32>
}

// -----

// f32 matmuls that ask for f32 accuracy make an attention that does: "ieee" over "tf32".
// CHECK-LABEL: func.func @fp32_precision
// CHECK: kiln.attention {{.*}} {fp32_precision = "ieee", scale = 2.500000e-01 : f32}
func.func @fp32_precision(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x32xf32>)
    -> tensor<1x4x4x32xf32> {
  %s = kiln.matmul %q, %k transpose_rhs {fp32_precision = "tf32"} : tensor<1x4x4x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x4x8xf32>
  %c = kiln.constant dense<4.0> : tensor<f32>
  %scaled = kiln.div %s, %c : tensor<1x4x4x8xf32>, tensor<f32> -> tensor<1x4x4x8xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x4x8xf32>
  %o = kiln.matmul %p, %v {fp32_precision = "ieee"} : tensor<1x4x4x8xf32>, tensor<1x4x8x32xf32> -> tensor<1x4x4x32xf32>
  return %o : tensor<1x4x4x32xf32>
}

// -----

// MQA: one kv head expanded to 4 q heads.
// CHECK-LABEL: func.func @mqa
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x1x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x1x8x16xf32>)
// CHECK-NOT: kiln.{{reshape|broadcast|transpose|matmul|mul|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32} : tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @mqa(%q: tensor<1x4x8x16xf32>, %k: tensor<1x1x8x16xf32>, %v: tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %k5 = kiln.reshape %k : tensor<1x1x8x16xf32> -> tensor<1x1x1x8x16xf32>
  %ke = kiln.broadcast %k5 : tensor<1x1x1x8x16xf32> -> tensor<1x1x4x8x16xf32>
  %kr = kiln.reshape %ke : tensor<1x1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  %v5 = kiln.reshape %v : tensor<1x1x8x16xf32> -> tensor<1x1x1x8x16xf32>
  %ve = kiln.broadcast %v5 : tensor<1x1x1x8x16xf32> -> tensor<1x1x4x8x16xf32>
  %vr = kiln.reshape %ve : tensor<1x1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  %kt = kiln.transpose %kr [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32> -> tensor<1x4x8x8xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %vr : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// bf16 throughout, with a bf16 scale constant.
// CHECK-LABEL: func.func @bf16
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xbf16>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xbf16>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xbf16>)
// CHECK-NOT: kiln.{{transpose|matmul|mul|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32} : tensor<1x4x8x16xbf16>, tensor<1x4x8x16xbf16>, tensor<1x4x8x16xbf16> -> tensor<1x4x8x16xbf16>
// CHECK-NEXT: return %[[OUT]]
func.func @bf16(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x4x8x16xbf16>, %v: tensor<1x4x8x16xbf16>) -> tensor<1x4x8x16xbf16> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x8x16xbf16> -> tensor<1x4x16x8xbf16>
  %s = kiln.matmul %q, %kt : tensor<1x4x8x16xbf16>, tensor<1x4x16x8xbf16> -> tensor<1x4x8x8xbf16>
  %c = kiln.constant dense<0.25> : tensor<bf16>
  %scaled = kiln.mul %s, %c : tensor<1x4x8x8xbf16>, tensor<bf16> -> tensor<1x4x8x8xbf16>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x8x8xbf16>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xbf16>, tensor<1x4x8x16xbf16> -> tensor<1x4x8x16xbf16>
  return %o : tensor<1x4x8x16xbf16>
}

//===----------------------------------------------------------------------===//
// Positive: masks
//===----------------------------------------------------------------------===//

// -----

// An additive mask argument is kept as the attention's mask operand.
// CHECK-LABEL: func.func @additive_mask_argument
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<2x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<2x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<2x4x8x16xf32>, %[[MASK:[a-zA-Z0-9_]+]]: tensor<2x1x8x8xf32>)
// CHECK-NOT: kiln.{{transpose|matmul|mul|add|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask(%[[MASK]] : tensor<2x1x8x8xf32>) {scale = 2.500000e-01 : f32} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @additive_mask_argument(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>,
                                  %mask: tensor<2x1x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %masked = kiln.add %scaled, %mask : tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32> -> tensor<2x4x8x8xf32>
  %p = kiln.softmax %masked axis 3 : tensor<2x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// The mask may be the left operand of the add, and of rank 2; no scale.
// CHECK-LABEL: func.func @additive_mask_argument_lhs
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[MASK:[a-zA-Z0-9_]+]]: tensor<8x8xf32>)
// CHECK-NOT: kiln.{{transpose|matmul|add|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask(%[[MASK]] : tensor<8x8xf32>) {scale = 1.000000e+00 : f32}
// CHECK-NEXT: return %[[OUT]]
func.func @additive_mask_argument_lhs(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>,
                                      %mask: tensor<8x8xf32>) -> tensor<1x4x8x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32> -> tensor<1x4x8x8xf32>
  %masked = kiln.add %mask, %s : tensor<8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// Causal as select(causal pattern, scores, -inf), Sq == Sk == 4 (the pattern is lower-triangular).
// CHECK-LABEL: func.func @causal_select_square
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.{{constant|transpose|matmul|mul|select|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal {scale = 2.500000e-01 : f32} : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @causal_select_square(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x4x16xf32> -> tensor<1x4x16x4xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x4x16xf32>, tensor<1x4x16x4xf32> -> tensor<1x4x4x4xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %keep = kiln.constant dense<[[true, false, false, false], [true, true, false, false],
                               [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %masked = kiln.select %keep, %scaled, %ninf : tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// Causal select with a -1e9 fill and Sq (2) < Sk (4): the pattern is aligned bottom-right (query i sees keys
// j <= i + 2), with a rank-4 condition.
// CHECK-LABEL: func.func @causal_select_bottom_right
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x2x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.{{constant|transpose|matmul|div|select|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal {scale = 2.500000e-01 : f32} : tensor<1x4x2x16xf32>, tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x2x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @causal_select_bottom_right(%q: tensor<1x4x2x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x2x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x4x16xf32> -> tensor<1x4x16x4xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x2x16xf32>, tensor<1x4x16x4xf32> -> tensor<1x4x2x4xf32>
  %c = kiln.constant dense<4.0> : tensor<f32>
  %scaled = kiln.div %s, %c : tensor<1x4x2x4xf32>, tensor<f32> -> tensor<1x4x2x4xf32>
  %keep = kiln.constant dense<[[[[true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x2x4xi1>
  %fill = kiln.constant dense<-1.0e9> : tensor<f32>
  %masked = kiln.select %keep, %scaled, %fill : tensor<1x1x2x4xi1>, tensor<1x4x2x4xf32>, tensor<f32> -> tensor<1x4x2x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x2x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x2x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x2x16xf32>
  return %o : tensor<1x4x2x16xf32>
}

// -----

// Causal as an additive constant with 0 on and below the diagonal and -inf above (the f32 bit pattern of -inf
// is 0xFF800000, so the hex blob holds rows [0, -inf, -inf, -inf], [0, 0, -inf, -inf], ...).
// CHECK-LABEL: func.func @causal_additive_inf
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.{{constant|transpose|matmul|mul|add|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal {scale = 2.500000e-01 : f32} : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @causal_additive_inf(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x4x16xf32> -> tensor<1x4x16x4xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x4x16xf32>, tensor<1x4x16x4xf32> -> tensor<1x4x4x4xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %causal = kiln.constant dense<"0x00000000000080FF000080FF000080FF0000000000000000000080FF000080FF000000000000000000000000000080FF00000000000000000000000000000000"> : tensor<4x4xf32>
  %masked = kiln.add %scaled, %causal : tensor<1x4x4x4xf32>, tensor<4x4xf32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// Causal as an additive constant with -1e9 above the diagonal, bottom-right aligned (Sq = 2, Sk = 4), GQA 2:1.
// CHECK-LABEL: func.func @causal_additive_large_negative_gqa
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x2x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x4x16xf32>)
// CHECK-NOT: kiln.{{constant|reshape|broadcast|transpose|matmul|add|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal {scale = 1.000000e+00 : f32} : tensor<1x4x2x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x4x2x16xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @causal_additive_large_negative_gqa(%q: tensor<1x4x2x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>)
    -> tensor<1x4x2x16xf32> {
  %k5 = kiln.reshape %k : tensor<1x2x4x16xf32> -> tensor<1x2x1x4x16xf32>
  %ke = kiln.broadcast %k5 : tensor<1x2x1x4x16xf32> -> tensor<1x2x2x4x16xf32>
  %kr = kiln.reshape %ke : tensor<1x2x2x4x16xf32> -> tensor<1x4x4x16xf32>
  %v5 = kiln.reshape %v : tensor<1x2x4x16xf32> -> tensor<1x2x1x4x16xf32>
  %ve = kiln.broadcast %v5 : tensor<1x2x1x4x16xf32> -> tensor<1x2x2x4x16xf32>
  %vr = kiln.reshape %ve : tensor<1x2x2x4x16xf32> -> tensor<1x4x4x16xf32>
  %s = kiln.matmul %q, %kr transpose_rhs : tensor<1x4x2x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x2x4xf32>
  %causal = kiln.constant dense<[[0.0, 0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0, 0.0]]> : tensor<2x4xf32>
  %masked = kiln.add %s, %causal : tensor<1x4x2x4xf32>, tensor<2x4xf32> -> tensor<1x4x2x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x2x4xf32>
  %o = kiln.matmul %p, %vr : tensor<1x4x2x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x2x16xf32>
  return %o : tensor<1x4x2x16xf32>
}

// -----

// An additive constant that is not a causal pattern (a padding mask hiding the last key) stays a mask operand.
// CHECK-LABEL: func.func @additive_constant_not_causal
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK: %[[MASK:[a-zA-Z0-9_]+]] = kiln.constant dense<{{\[}}[0.000000e+00, 0.000000e+00, 0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00, 0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00, 0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00, 0.000000e+00, -1.000000e+09]]> : tensor<4x4xf32>
// CHECK-NOT: kiln.{{transpose|matmul|add|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask(%[[MASK]] : tensor<4x4xf32>) {scale = 1.000000e+00 : f32}
// CHECK-NEXT: return %[[OUT]]
func.func @additive_constant_not_causal(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %pad = kiln.constant dense<[[0.0, 0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0, -1.0e9],
                              [0.0, 0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0, -1.0e9]]> : tensor<4x4xf32>
  %masked = kiln.add %s, %pad : tensor<1x4x4x4xf32>, tensor<4x4xf32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// A causal select around an additive mask argument: both `causal` and the mask operand.
// CHECK-LABEL: func.func @causal_select_and_mask
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[MASK:[a-zA-Z0-9_]+]]: tensor<1x1x4x4xf32>)
// CHECK-NOT: kiln.{{constant|matmul|mul|add|select|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask(%[[MASK]] : tensor<1x1x4x4xf32>) causal {scale = 2.500000e-01 : f32}
// CHECK-NEXT: return %[[OUT]]
func.func @causal_select_and_mask(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>,
                                  %mask: tensor<1x1x4x4xf32>) -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %biased = kiln.add %scaled, %mask : tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32> -> tensor<1x4x4x4xf32>
  %keep = kiln.constant dense<[[true, false, false, false], [true, true, false, false],
                               [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %masked = kiln.select %keep, %biased, %ninf : tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// bf16 causal select with a bf16 -inf fill (0xFF80).
// CHECK-LABEL: func.func @causal_select_bf16
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xbf16>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xbf16>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xbf16>)
// CHECK-NOT: kiln.{{constant|transpose|matmul|select|softmax}}
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal {scale = 1.000000e+00 : f32} : tensor<1x4x4x16xbf16>, tensor<1x4x4x16xbf16>, tensor<1x4x4x16xbf16> -> tensor<1x4x4x16xbf16>
// CHECK-NEXT: return %[[OUT]]
func.func @causal_select_bf16(%q: tensor<1x4x4x16xbf16>, %k: tensor<1x4x4x16xbf16>, %v: tensor<1x4x4x16xbf16>)
    -> tensor<1x4x4x16xbf16> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x4x16xbf16> -> tensor<1x4x16x4xbf16>
  %s = kiln.matmul %q, %kt : tensor<1x4x4x16xbf16>, tensor<1x4x16x4xbf16> -> tensor<1x4x4x4xbf16>
  %keep = kiln.constant dense<[[true, false, false, false], [true, true, false, false],
                               [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = kiln.constant dense<0xFF80> : tensor<bf16>
  %masked = kiln.select %keep, %s, %ninf : tensor<4x4xi1>, tensor<1x4x4x4xbf16>, tensor<bf16> -> tensor<1x4x4x4xbf16>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xbf16>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xbf16>, tensor<1x4x4x16xbf16> -> tensor<1x4x4x16xbf16>
  return %o : tensor<1x4x4x16xbf16>
}

// -----

// Two attentions in one function are both fused, each with its own operands.
// CHECK-LABEL: func.func @two_attentions
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.softmax
// CHECK: %[[FIRST:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 1.000000e+00 : f32}
// CHECK-NOT: kiln.softmax
// CHECK: %[[SECOND:[a-zA-Z0-9_]+]] = kiln.attention %[[FIRST]], %[[K]], %[[V]] {scale = 1.000000e+00 : f32}
// CHECK-NEXT: return %[[SECOND]]
func.func @two_attentions(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %s0 = kiln.matmul %q, %k transpose_rhs : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %p0 = kiln.softmax %s0 axis 3 : tensor<1x4x8x8xf32>
  %o0 = kiln.matmul %p0, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  %s1 = kiln.matmul %o0, %k transpose_rhs : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %p1 = kiln.softmax %s1 axis 3 : tensor<1x4x8x8xf32>
  %o1 = kiln.matmul %p1, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o1 : tensor<1x4x8x16xf32>
}

// -----

// The scaled scores have a second user: the attention is still fused (only the softmax must be single-use),
// and the score chain stays for its other user.
// CHECK-LABEL: func.func @scores_second_user
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.softmax
// CHECK-DAG: %[[C:[a-zA-Z0-9_]+]] = kiln.constant dense<2.500000e-01> : tensor<f32>
// CHECK-DAG: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK: %[[SCALED:[a-zA-Z0-9_]+]] = kiln.mul %[[S]], %[[C]]
// CHECK-NOT: kiln.softmax
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32}
// CHECK-NEXT: return %[[OUT]], %[[SCALED]]
func.func @scores_second_user(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>)
    -> (tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>) {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o, %scaled : tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>
}

//===----------------------------------------------------------------------===//
// Positive: variants written out become score_mod / mask_mod regions
//===----------------------------------------------------------------------===//

// Gemma 2's tanh softcap after the scale, cap * tanh(s / cap), then a causal select: a score_mod.
// CHECK-LABEL: func.func @softcap
// CHECK-NOT: kiln.{{transpose|matmul|tanh|softmax}}
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} causal score_mod {
// CHECK-NEXT: ^bb0(%[[S:[a-z0-9]+]]: f32, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index):
// CHECK-NEXT: %[[CAP:.*]] = arith.constant 5.000000e+01 : f32
// CHECK-NEXT: %[[R:.*]] = arith.divf %[[S]], %[[CAP]] : f32
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[R]] : f32
// CHECK-NEXT: %[[C:.*]] = arith.mulf %[[T]], %[[CAP]] : f32
// CHECK-NEXT: kiln.yield %[[C]] : f32
// CHECK-NEXT: } {scale = 2.500000e-01 : f32}
func.func @softcap(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>)
    -> tensor<1x2x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x4xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %scaled = kiln.mul %s, %c : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %cap = kiln.constant dense<50.0> : tensor<f32>
  %r = kiln.div %scaled, %cap : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %t = kiln.tanh %r : tensor<1x2x4x4xf32>
  %capped = kiln.mul %t, %cap : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %keep = kiln.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %masked = kiln.select %keep, %capped, %ninf : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// A causal select whose keep pattern is a band of 2 keys (j <= i and i - j < 2): causal and a sliding-window
// mask_mod.
// CHECK-LABEL: func.func @sliding_window_select
// CHECK-NOT: kiln.{{transpose|matmul|select|softmax}}
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} causal mask_mod {
// CHECK-NEXT: ^bb0(%{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %[[I:[a-z0-9]+]]: index, %[[J:[a-z0-9]+]]: index):
// CHECK-NEXT: %[[SHIFT:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[AT:.*]] = arith.addi %[[I]], %[[SHIFT]] : index
// CHECK-NEXT: %[[D:.*]] = arith.subi %[[AT]], %[[J]] : index
// CHECK-NEXT: %[[W:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[D]], %[[W]] : index
// CHECK-NEXT: kiln.yield %[[IN]] : i1
func.func @sliding_window_select(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>)
    -> tensor<1x2x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x4xf32>
  %keep = kiln.constant dense<[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]> : tensor<4x4xi1>
  %ninf = kiln.constant dense<-1.0e9> : tensor<f32>
  %masked = kiln.select %keep, %s, %ninf : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

// A constant additive mask that is ALiBi's slope[h] * j (slopes 0.5 and 0.25): a score_mod reading the slopes
// from a constant table.
// CHECK-LABEL: func.func @alibi_constant
// CHECK: %[[SLOPES:.*]] = kiln.constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mod_operands(%[[SLOPES]] : tensor<2xf32>) score_mod {
// CHECK-NEXT: ^bb0(%[[S:[a-z0-9]+]]: f32, %{{[a-z0-9]+}}: index, %[[H:[a-z0-9]+]]: index, %{{[a-z0-9]+}}: index, %[[J:[a-z0-9]+]]: index, %[[T:[a-z0-9]+]]: tensor<2xf32>):
// CHECK-NEXT: %[[SLOPE:.*]] = tensor.extract %[[T]][%[[H]]] : tensor<2xf32>
// CHECK-NEXT: %[[JI:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK-NEXT: %[[JF:.*]] = arith.sitofp %[[JI]] : i32 to f32
// CHECK-NEXT: %[[B:.*]] = arith.mulf %[[SLOPE]], %[[JF]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[S]], %[[B]] : f32
// CHECK-NEXT: kiln.yield %[[R]] : f32
// CHECK-NOT: mask(
func.func @alibi_constant(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>)
    -> tensor<1x2x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x4xf32>
  %bias = kiln.constant dense<[[[[0.0, 0.5, 1.0, 1.5]], [[0.0, 0.25, 0.5, 0.75]]]]> : tensor<1x2x1x4xf32>
  %biased = kiln.add %s, %bias : tensor<1x2x4x4xf32>, tensor<1x2x1x4xf32> -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %biased axis 3 : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return %o : tensor<1x2x4x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Negative: the pass must not fire
//===----------------------------------------------------------------------===//

// -----

// A softmax over axis 2 (the queries) is not attention.
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[S]] axis 2 : tensor<1x4x8x8xf32>
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @softmax_over_queries(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s axis 2 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// A scale that differs per key (a non-splat constant) is not a scalar scale.
// CHECK-LABEL: func.func @non_splat_scale
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK-DAG: %[[C:[a-zA-Z0-9_]+]] = kiln.constant dense<[2.500000e-01, 5.000000e-01, 2.500000e-01, 5.000000e-01]> : tensor<4xf32>
// CHECK-DAG: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK: %[[SCALED:[a-zA-Z0-9_]+]] = kiln.mul %[[S]], %[[C]]
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[SCALED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @non_splat_scale(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %c = kiln.constant dense<[0.25, 0.5, 0.25, 0.5]> : tensor<4xf32>
  %scaled = kiln.mul %s, %c : tensor<1x4x4x4xf32>, tensor<4xf32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// A scale that is a function argument (not a constant) is not fused either.
// CHECK-LABEL: func.func @scale_not_constant
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[T:[a-zA-Z0-9_]+]]: tensor<f32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK-NEXT: %[[SCALED:[a-zA-Z0-9_]+]] = kiln.div %[[S]], %[[T]]
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[SCALED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @scale_not_constant(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>,
                              %t: tensor<f32>) -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %scaled = kiln.div %s, %t : tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// An all-true condition masks nothing: it is not causal.
// CHECK-LABEL: func.func @select_all_true
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK-DAG: %[[KEEP:[a-zA-Z0-9_]+]] = kiln.constant dense<true> : tensor<4x4xi1>
// CHECK-DAG: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK: %[[MASKED:[a-zA-Z0-9_]+]] = kiln.select %[[KEEP]], %[[S]], %{{[a-zA-Z0-9_]+}}
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[MASKED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @select_all_true(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %keep = kiln.constant dense<true> : tensor<4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %masked = kiln.select %keep, %s, %ninf : tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// An anti-causal (upper-triangular) condition is not causal.
// CHECK-LABEL: func.func @select_anti_causal
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[MASKED:[a-zA-Z0-9_]+]] = kiln.select
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[MASKED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @select_anti_causal(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %keep = kiln.constant dense<[[true, true, true, true], [false, true, true, true],
                               [false, false, true, true], [false, false, false, true]]> : tensor<4x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %masked = kiln.select %keep, %s, %ninf : tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// With Sq (2) < Sk (4), a top-left aligned triangle (j <= i) is not kiln's bottom-right causal mask.
// CHECK-LABEL: func.func @select_causal_top_left
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x2x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[MASKED:[a-zA-Z0-9_]+]] = kiln.select
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[MASKED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @select_causal_top_left(%q: tensor<1x4x2x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x2x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x2x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x2x4xf32>
  %keep = kiln.constant dense<[[true, false, false, false], [true, true, false, false]]> : tensor<2x4xi1>
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %masked = kiln.select %keep, %s, %ninf : tensor<2x4xi1>, tensor<1x4x2x4xf32>, tensor<f32> -> tensor<1x4x2x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x2x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x2x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x2x16xf32>
  return %o : tensor<1x4x2x16xf32>
}

// -----

// A causal condition whose fill is not a masking value (-100 > -1e4) is a real bias, not a mask.
// CHECK-LABEL: func.func @select_fill_not_masking
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK-DAG: %[[FILL:[a-zA-Z0-9_]+]] = kiln.constant dense<-1.000000e+02> : tensor<f32>
// CHECK-DAG: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK: %[[MASKED:[a-zA-Z0-9_]+]] = kiln.select %{{[a-zA-Z0-9_]+}}, %[[S]], %[[FILL]]
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[MASKED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @select_fill_not_masking(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %keep = kiln.constant dense<[[true, false, false, false], [true, true, false, false],
                               [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = kiln.constant dense<-100.0> : tensor<f32>
  %masked = kiln.select %keep, %s, %fill : tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// A select whose condition is a function argument cannot be proven causal.
// CHECK-LABEL: func.func @select_condition_argument
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[KEEP:[a-zA-Z0-9_]+]]: tensor<4x4xi1>)
// CHECK-NOT: kiln.attention
// CHECK: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK-NEXT: %[[MASKED:[a-zA-Z0-9_]+]] = kiln.select %[[KEEP]], %[[S]]
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[MASKED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @select_condition_argument(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>, %v: tensor<1x4x4x16xf32>,
                                     %keep: tensor<4x4xi1>) -> tensor<1x4x4x16xf32> {
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x4xf32>
  %masked = kiln.select %keep, %s, %ninf : tensor<4x4xi1>, tensor<1x4x4x4xf32>, tensor<f32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// Causal (bottom-right) with more queries (4) than keys (2) leaves rows with no key: left alone.
// CHECK-LABEL: func.func @causal_more_queries_than_keys
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x2x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x2x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[MASKED:[a-zA-Z0-9_]+]] = kiln.select
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[MASKED]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @causal_more_queries_than_keys(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x2x16xf32>, %v: tensor<1x4x2x16xf32>)
    -> tensor<1x4x4x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x4x16xf32>, tensor<1x4x2x16xf32> -> tensor<1x4x4x2xf32>
  %keep = kiln.constant dense<[[false, false], [false, false], [true, false], [true, true]]> : tensor<4x2xi1>
  %fill = kiln.constant dense<-1.0e9> : tensor<f32>
  %masked = kiln.select %keep, %s, %fill : tensor<4x2xi1>, tensor<1x4x4x2xf32>, tensor<f32> -> tensor<1x4x4x2xf32>
  %p = kiln.softmax %masked axis 3 : tensor<1x4x4x2xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x2xf32>, tensor<1x4x2x16xf32> -> tensor<1x4x4x16xf32>
  return %o : tensor<1x4x4x16xf32>
}

// -----

// The probabilities are also returned: the softmax has a second user, so it must stay.
// CHECK-LABEL: func.func @softmax_second_user
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[S]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]], %[[P]]
func.func @softmax_second_user(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>)
    -> (tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>) {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o, %p : tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>
}

// -----

// f16 q and k whose scores accumulate into f32, with f32 values: the element types differ.
// CHECK-LABEL: func.func @element_types_differ
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf16>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf16>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs : tensor<1x4x8x16xf16>, tensor<1x4x8x16xf16> -> tensor<1x4x8x8xf32>
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[S]] axis 3
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @element_types_differ(%q: tensor<1x4x8x16xf16>, %k: tensor<1x4x8x16xf16>, %v: tensor<1x4x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x8x16xf16>, tensor<1x4x8x16xf16> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// The second matmul's lhs is a sigmoid, not a softmax.
// CHECK-LABEL: func.func @lhs_not_softmax
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>)
// CHECK-NOT: kiln.attention
// CHECK: %[[S:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q]], %[[K]] transpose_rhs
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.sigmoid %[[S]]
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @lhs_not_softmax(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %s = kiln.matmul %q, %k transpose_rhs : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.sigmoid %s : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// A score rhs transposed as [0, 2, 1, 3] is still k^T for k = transpose(k, [0, 2, 3, 1]): attention fuses and
// that transpose produces its k.
// CHECK-LABEL: func.func @transpose_not_last_two
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x4x4xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x4x4x4xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x4x4x4xf32>)
// CHECK-NEXT: %[[KK:[a-zA-Z0-9_]+]] = kiln.transpose %[[K]] [0, 2, 3, 1]
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[KK]], %[[V]]
// CHECK-NEXT: return %[[O]]
func.func @transpose_not_last_two(%q: tensor<1x4x4x4xf32>, %k: tensor<1x4x4x4xf32>, %v: tensor<1x4x4x4xf32>)
    -> tensor<1x4x4x4xf32> {
  %kt = kiln.transpose %k [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %s axis 3 : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %o : tensor<1x4x4x4xf32>
}

// -----

// k expanded for GQA but v not: the head counts of k and v disagree.
// CHECK-LABEL: func.func @gqa_only_k_expanded
// CHECK-NOT: kiln.attention
// CHECK: kiln.broadcast
// CHECK: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax
// CHECK-NEXT: %[[O:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]]
// CHECK-NEXT: return %[[O]]
func.func @gqa_only_k_expanded(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x4x8x16xf32>)
    -> tensor<1x4x8x16xf32> {
  %k5 = kiln.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ke = kiln.broadcast %k5 : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = kiln.reshape %ke : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %s = kiln.matmul %q, %kr transpose_rhs : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x8xf32>
  %p = kiln.softmax %s axis 3 : tensor<1x4x8x8xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// k^T written as one transpose that also moves the heads ([B, S, H, D] -> [B, H, D, S], what canonicalization
// makes of an exporter's two transposes): the head move stays as a transpose producing k.
// CHECK-LABEL: func.func @composed_key_transpose
// CHECK: %[[K:.*]] = kiln.transpose %arg1 [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
// CHECK: kiln.attention %arg0, %[[K]], %arg2 {scale = 5.000000e-01 : f32}
// CHECK-NOT: kiln.softmax
func.func @composed_key_transpose(%q: tensor<1x2x16x8xf32>, %k: tensor<1x16x2x8xf32>, %v: tensor<1x2x16x8xf32>)
    -> tensor<1x2x16x8xf32> {
  %kt = kiln.transpose %k [0, 2, 3, 1] : tensor<1x16x2x8xf32> -> tensor<1x2x8x16xf32>
  %s = kiln.matmul %q, %kt : tensor<1x2x16x8xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x16x16xf32>
  %c = kiln.constant dense<0.5> : tensor<f32>
  %m = kiln.mul %s, %c : tensor<1x2x16x16xf32>, tensor<f32> -> tensor<1x2x16x16xf32>
  %p = kiln.softmax %m axis 3 : tensor<1x2x16x16xf32>
  %o = kiln.matmul %p, %v : tensor<1x2x16x16xf32>, tensor<1x2x16x8xf32> -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}
