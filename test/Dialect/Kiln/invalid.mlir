// RUN: kiln-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// ODS type and attribute constraints
//===----------------------------------------------------------------------===//

func.func @dynamic_shape_operand(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'kiln.exp' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<?x8xf32>'}}
  %0 = kiln.exp %x : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @unranked_operand(%x: tensor<*xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.add' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<*xf32>'}}
  %0 = "kiln.add"(%x, %y) : (tensor<*xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Arithmetic takes floats and i32/i64; bools only compare and select.
func.func @bool_arithmetic(%x: tensor<4xi1>, %y: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'kiln.add' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = kiln.add %x, %y : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// The custom form parses its types as ranked tensors, so an unranked one is rejected by the parser.
func.func @unranked_operand_custom(%x: tensor<*xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{custom op 'kiln.add' invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %0 = kiln.add %x, %y : tensor<*xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f64_operand(%x: tensor<4xf64>) -> tensor<4xf64> {
  // expected-error @+1 {{'kiln.relu' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xf64>'}}
  %0 = kiln.relu %x : tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

func.func @integer_matmul(%a: tensor<4x8xi32>, %b: tensor<8x16xi32>) -> tensor<4x16xi32> {
  // expected-error @+1 {{'kiln.matmul' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xi32>'}}
  %0 = kiln.matmul %a, %b : tensor<4x8xi32>, tensor<8x16xi32> -> tensor<4x16xi32>
  return %0 : tensor<4x16xi32>
}

// -----

func.func @f64_constant() -> tensor<2xf64> {
  // expected-error @+1 {{'kiln.constant' op result #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer or 1-bit signless integer values, but got 'tensor<2xf64>'}}
  %0 = kiln.constant dense<1.0> : tensor<2xf64>
  return %0 : tensor<2xf64>
}

// -----

func.func @select_i32_condition(%c: tensor<4xi32>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.select' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xi32>'}}
  %0 = kiln.select %c, %a, %b : tensor<4xi32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gather_float_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'kiln.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = kiln.gather %t[%i] axis 0 : tensor<10x4xf32>, tensor<3xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @attention_lse_not_f32(%q: tensor<1x2x4x8xf16>) -> tensor<1x2x4xf16> {
  // expected-error @+1 {{'kiln.attention' op result #1 must be statically shaped tensor of 32-bit float values, but got 'tensor<1x2x4xf16>'}}
  %o, %lse = kiln.attention %q, %q, %q : tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>
      -> tensor<1x2x4x8xf16>, tensor<1x2x4xf16>
  return %lse : tensor<1x2x4xf16>
}

// -----

func.func @unary_result_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'kiln.exp' op requires the same type for all operands and results}}
  %0 = "kiln.exp"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @softmax_result_type(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'kiln.softmax' op requires the same type for all operands and results}}
  %0 = "kiln.softmax"(%x) {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @rms_norm_result_type(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'kiln.rms_norm' op failed to verify that all of {input, result} have same type}}
  %0 = "kiln.rms_norm"(%x, %w) {epsilon = 1.0e-06 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

func.func @softmax_missing_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.softmax' op requires attribute 'axis'}}
  %0 = "kiln.softmax"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_scale_not_f32(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op attribute 'scale' failed to satisfy constraint: 32-bit float attribute}}
  %0 = kiln.attention %q, %q, %q {scale = 0.5 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
      -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.constant
//===----------------------------------------------------------------------===//

func.func @constant_type_mismatch() -> tensor<3xf32> {
  // expected-error @+1 {{'kiln.constant' op value type 'tensor<2xf32>' differs from the result type 'tensor<3xf32>'}}
  %0 = "kiln.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.matmul
//===----------------------------------------------------------------------===//

func.func @matmul_lhs_rank(%a: tensor<8xf32>, %b: tensor<8x16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'kiln.matmul' op operand #0 (lhs) must have rank >= 2, got rank 1}}
  %0 = kiln.matmul %a, %b : tensor<8xf32>, tensor<8x16xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

func.func @matmul_rhs_rank(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.matmul' op operand #1 (rhs) must have rank >= 2, got rank 1}}
  %0 = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @matmul_fp32_precision_value(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.matmul' op fp32_precision must be "tf32" or "ieee", got "highest"}}
  %0 = kiln.matmul %a, %b {fp32_precision = "highest"} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @matmul_fp32_precision_bf16(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  // expected-error @+1 {{'kiln.matmul' op fp32_precision applies to f32 operands, got 'bf16'}}
  %0 = kiln.matmul %a, %b {fp32_precision = "ieee"} : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  return %0 : tensor<4x16xbf16>
}

// -----

func.func @attention_fp32_precision_value(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op fp32_precision must be "tf32" or "ieee", got "fp64"}}
  %o = kiln.attention %q, %q, %q {fp32_precision = "fp64"} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_fp32_precision_f16(%q: tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf16> {
  // expected-error @+1 {{'kiln.attention' op fp32_precision applies to f32 q, k and v, got 'f16'}}
  %o = kiln.attention %q, %q, %q {fp32_precision = "ieee"} : tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16> -> tensor<1x2x4x8xf16>
  return %o : tensor<1x2x4x8xf16>
}

// -----

func.func @matmul_element_types(%a: tensor<4x8xf16>, %b: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.matmul' op lhs element type 'f16' differs from rhs element type 'bf16'}}
  %0 = kiln.matmul %a, %b : tensor<4x8xf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @matmul_contraction(%a: tensor<4x8xf32>, %b: tensor<9x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.matmul' op contraction sizes differ: lhs dimension 1 is 8 but rhs dimension 0 is 9}}
  %0 = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<9x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// transpose_rhs contracts over the last dimension of rhs: a weight stored [N, K] given without the flag is wrong.
func.func @matmul_contraction_transposed(%x: tensor<2x77x512xbf16>, %w: tensor<1024x512xbf16>) -> tensor<2x77x1024xbf16> {
  // expected-error @+1 {{'kiln.matmul' op contraction sizes differ: lhs dimension 2 is 512 but rhs dimension 0 is 1024}}
  %0 = kiln.matmul %x, %w : tensor<2x77x512xbf16>, tensor<1024x512xbf16> -> tensor<2x77x1024xbf16>
  return %0 : tensor<2x77x1024xbf16>
}

// -----

func.func @matmul_contraction_transpose_lhs(%a: tensor<3x8x4xf32>, %b: tensor<3x4x16xf32>) -> tensor<3x4x16xf32> {
  // expected-error @+1 {{'kiln.matmul' op contraction sizes differ: lhs dimension 1 is 8 but rhs dimension 1 is 4}}
  %0 = kiln.matmul %a, %b transpose_lhs : tensor<3x8x4xf32>, tensor<3x4x16xf32> -> tensor<3x4x16xf32>
  return %0 : tensor<3x4x16xf32>
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'kiln.matmul' op batch dimensions [2] (lhs) and [3] (rhs) do not broadcast: 2 vs 3 at batch dimension 0}}
  %0 = kiln.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x16xf32> -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

func.func @matmul_batch_rank4(%a: tensor<5x2x4x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<5x2x4x16xf32> {
  // expected-error @+1 {{'kiln.matmul' op batch dimensions [5, 2] (lhs) and [3] (rhs) do not broadcast: 2 vs 3 at batch dimension 1}}
  %0 = kiln.matmul %a, %b : tensor<5x2x4x8xf32>, tensor<3x8x16xf32> -> tensor<5x2x4x16xf32>
  return %0 : tensor<5x2x4x16xf32>
}

// -----

func.func @matmul_result_shape(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<16x4xf32> {
  // expected-error @+1 {{'kiln.matmul' op result type 'tensor<16x4xf32>' does not match the inferred type 'tensor<4x16xf32>'}}
  %0 = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<16x4xf32>
  return %0 : tensor<16x4xf32>
}

// -----

func.func @matmul_result_missing_batch(%x: tensor<2x77x512xf32>, %w: tensor<512x64xf32>) -> tensor<77x64xf32> {
  // expected-error @+1 {{'kiln.matmul' op result type 'tensor<77x64xf32>' does not match the inferred type 'tensor<2x77x64xf32>'}}
  %0 = kiln.matmul %x, %w : tensor<2x77x512xf32>, tensor<512x64xf32> -> tensor<77x64xf32>
  return %0 : tensor<77x64xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.attention
//===----------------------------------------------------------------------===//

func.func @attention_q_rank(%q: tensor<2x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op operand 'q' must have rank 4 [batch, heads, seq, head_dim], got 'tensor<2x4x8xf32>'}}
  %0 = kiln.attention %q, %k, %k : tensor<2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_k_rank(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op operand 'k' must have rank 4 [batch, heads, seq, head_dim], got 'tensor<1x1x2x4x8xf32>'}}
  %0 = kiln.attention %q, %k, %q : tensor<1x2x4x8xf32>, tensor<1x1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_v_rank(%q: tensor<1x2x4x8xf32>, %v: tensor<4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op operand 'v' must have rank 4 [batch, heads, seq, head_dim], got 'tensor<4x8xf32>'}}
  %0 = kiln.attention %q, %q, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_k_element_type(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op element type of 'k' ('bf16') differs from 'q' ('f32')}}
  %0 = kiln.attention %q, %k, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_v_element_type(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op element type of 'v' ('f16') differs from 'q' ('f32')}}
  %0 = kiln.attention %q, %q, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf16> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_k_batch(%q: tensor<2x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op batch size of 'k' (dimension 0: 1) differs from 'q' (2)}}
  %0 = kiln.attention %q, %k, %v : tensor<2x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----

func.func @attention_v_batch(%q: tensor<2x2x4x8xf32>, %v: tensor<3x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op batch size of 'v' (dimension 0: 3) differs from 'q' (2)}}
  %0 = kiln.attention %q, %q, %v : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<3x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----

func.func @attention_v_heads(%q: tensor<1x8x4x8xf32>, %k: tensor<1x4x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op head count of 'v' (dimension 1: 2) differs from 'k' (4)}}
  %0 = kiln.attention %q, %k, %v : tensor<1x8x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x8x4x8xf32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @attention_layout(%q: tensor<1x8x4x8xf32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op layout must be "bhsd" or "bshd", got "bsdh"}}
  %0 = kiln.attention %q, %q, %q {layout = "bsdh"} : tensor<1x8x4x8xf32>, tensor<1x8x4x8xf32>, tensor<1x8x4x8xf32> -> tensor<1x8x4x8xf32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @attention_out_layout(%q: tensor<1x8x4x8xf32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op out_layout must be "bhsd" or "bshd", got "sbhd"}}
  %0 = kiln.attention %q, %q, %q {out_layout = "sbhd"} : tensor<1x8x4x8xf32>, tensor<1x8x4x8xf32>, tensor<1x8x4x8xf32> -> tensor<1x8x4x8xf32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @attention_out_layout_result(%q: tensor<1x8x4x8xf32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op result type 'tensor<1x8x4x8xf32>' does not match the inferred type 'tensor<1x4x8x8xf32>'}}
  %0 = kiln.attention %q, %q, %q {out_layout = "bshd"} : tensor<1x8x4x8xf32>, tensor<1x8x4x8xf32>, tensor<1x8x4x8xf32> -> tensor<1x8x4x8xf32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @attention_seq_major_rank(%q: tensor<4x8x8xf32>) -> tensor<4x8x8xf32> {
  // expected-error @+1 {{'kiln.attention' op operand 'q' must have rank 4 [batch, seq, heads, head_dim], got 'tensor<4x8x8xf32>'}}
  %0 = kiln.attention %q, %q, %q {layout = "bshd"} : tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
  return %0 : tensor<4x8x8xf32>
}

// -----

func.func @attention_seq_major_v_heads(%q: tensor<1x4x8x8xf32>, %k: tensor<1x4x4x8xf32>, %v: tensor<1x4x2x8xf32>) -> tensor<1x4x8x8xf32> {
  // expected-error @+1 {{'kiln.attention' op head count of 'v' (dimension 2: 2) differs from 'k' (4)}}
  %0 = kiln.attention %q, %k, %v {layout = "bshd"} : tensor<1x4x8x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32> -> tensor<1x4x8x8xf32>
  return %0 : tensor<1x4x8x8xf32>
}

// -----

func.func @attention_seq_major_seq(%q: tensor<1x4x8x8xf32>, %k: tensor<1x6x4x8xf32>, %v: tensor<1x5x4x8xf32>) -> tensor<1x4x8x8xf32> {
  // expected-error @+1 {{'kiln.attention' op sequence length of 'v' (dimension 1: 5) differs from 'k' (6)}}
  %0 = kiln.attention %q, %k, %v {layout = "bshd"} : tensor<1x4x8x8xf32>, tensor<1x6x4x8xf32>, tensor<1x5x4x8xf32> -> tensor<1x4x8x8xf32>
  return %0 : tensor<1x4x8x8xf32>
}

// -----

func.func @attention_seq_major_result(%q: tensor<1x4x8x8xf32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op result type 'tensor<1x8x4x8xf32>' does not match the inferred type 'tensor<1x4x8x8xf32>'}}
  %0 = kiln.attention %q, %q, %q {layout = "bshd"} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x8x4x8xf32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @attention_gqa_groups(%q: tensor<1x8x4x8xf32>, %k: tensor<1x3x4x8xf32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op head count of 'q' (8) is not a multiple of the k/v head count (3)}}
  %0 = kiln.attention %q, %k, %k : tensor<1x8x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x3x4x8xf32> -> tensor<1x8x4x8xf32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

// More k/v heads than q heads is not grouped-query attention either.
func.func @attention_more_kv_heads(%q: tensor<1x2x4x8xf32>, %k: tensor<1x4x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op head count of 'q' (2) is not a multiple of the k/v head count (4)}}
  %0 = kiln.attention %q, %k, %k : tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_v_seq(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x15x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op sequence length of 'v' (dimension 2: 15) differs from 'k' (16)}}
  %0 = kiln.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x15x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// Without keys a softmax row has nothing to normalise over.
func.func @attention_no_keys(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x0x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op sequence length of 'k' (dimension 2) is 0; each query needs at least one key to attend to}}
  %0 = kiln.attention %q, %k, %k : tensor<1x2x4x8xf32>, tensor<1x2x0x8xf32>, tensor<1x2x0x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_seq_major_no_keys(%q: tensor<1x4x2x8xf32>, %k: tensor<1x0x2x8xf32>) -> tensor<1x4x2x8xf32> {
  // expected-error @+1 {{'kiln.attention' op sequence length of 'k' (dimension 1) is 0; each query needs at least one key to attend to}}
  %0 = kiln.attention %q, %k, %k {layout = "bshd"} : tensor<1x4x2x8xf32>, tensor<1x0x2x8xf32>, tensor<1x0x2x8xf32> -> tensor<1x4x2x8xf32>
  return %0 : tensor<1x4x2x8xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<1x2x4x64xf32>, %k: tensor<1x2x4x32xf32>) -> tensor<1x2x4x32xf32> {
  // expected-error @+1 {{'kiln.attention' op head dim of 'k' (dimension 3: 32) differs from 'q' (64)}}
  %0 = kiln.attention %q, %k, %k : tensor<1x2x4x64xf32>, tensor<1x2x4x32xf32>, tensor<1x2x4x32xf32> -> tensor<1x2x4x32xf32>
  return %0 : tensor<1x2x4x32xf32>
}

// -----

func.func @attention_empty_head_dim(%q: tensor<1x2x4x0xf32>) -> tensor<1x2x4x0xf32> {
  // expected-error @+1 {{'kiln.attention' op head dim of 'q' (dimension 3) must be positive}}
  %0 = kiln.attention %q, %q, %q : tensor<1x2x4x0xf32>, tensor<1x2x4x0xf32>, tensor<1x2x4x0xf32> -> tensor<1x2x4x0xf32>
  return %0 : tensor<1x2x4x0xf32>
}

// -----

func.func @attention_empty_value_head_dim(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x0xf32>) -> tensor<1x2x4x0xf32> {
  // expected-error @+1 {{'kiln.attention' op head dim of 'v' (dimension 3) must be positive}}
  %0 = kiln.attention %q, %q, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x0xf32> -> tensor<1x2x4x0xf32>
  return %0 : tensor<1x2x4x0xf32>
}

// -----

func.func @attention_causal_long_query(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x4x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{'kiln.attention' op causal attention aligns the mask bottom-right and needs seq_q <= seq_k, got seq_q = 16 and seq_k = 4}}
  %0 = kiln.attention %q, %k, %k causal : tensor<1x2x16x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  return %0 : tensor<1x2x16x8xf32>
}

// -----

func.func @attention_scale_zero(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op scale must be a finite positive number, got 0.000000e+00}}
  %0 = kiln.attention %q, %q, %q {scale = 0.0 : f32} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
      -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_scale_negative(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op scale must be a finite positive number, got -1.250000e-01}}
  %0 = kiln.attention %q, %q, %q {scale = -0.125 : f32} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
      -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_scale_inf(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op scale must be a finite positive number, got INF}}
  %0 = kiln.attention %q, %q, %q {scale = 0x7F800000 : f32} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
      -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_scale_nan(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op scale must be a finite positive number, got nan}}
  %0 = kiln.attention %q, %q, %q {scale = 0x7FC00000 : f32} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
      -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_mask_rank(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x2x4x4xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op mask must have rank <= 4 to broadcast to [batch, heads, seq_q, seq_k], got 'tensor<1x1x2x4x4xf32>'}}
  %0 = kiln.attention %q, %q, %q mask(%m : tensor<1x1x2x4x4xf32>)
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_mask_seq_k(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x16x8xf32>, %m: tensor<4x4xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op mask dimension 1 (4) does not broadcast to [1, 2, 4, 16] (size 16)}}
  %0 = kiln.attention %q, %k, %k mask(%m : tensor<4x4xf32>)
      : tensor<1x2x4x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// A per-kv-head mask does not broadcast to the q heads of grouped-query attention.
func.func @attention_mask_heads(%q: tensor<1x8x4x8xf32>, %k: tensor<1x2x4x8xf32>, %m: tensor<1x2x4x4xf32>) -> tensor<1x8x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op mask dimension 1 (2) does not broadcast to [1, 8, 4, 4] (size 8)}}
  %0 = kiln.attention %q, %k, %k mask(%m : tensor<1x2x4x4xf32>)
      : tensor<1x8x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x8x4x8xf32>
  return %0 : tensor<1x8x4x8xf32>
}

// -----

func.func @attention_result_type(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op result type 'tensor<1x2x4x8xf32>' does not match the inferred type 'tensor<1x2x4x16xf32>'}}
  %0 = kiln.attention %q, %q, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_result_element_type(%q: tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op result type 'tensor<1x2x4x8xf32>' does not match the inferred type 'tensor<1x2x4x8xbf16>'}}
  %0 = kiln.attention %q, %q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_lse_shape(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x1xf32> {
  // expected-error @+1 {{'kiln.attention' op lse result type 'tensor<1x2x4x1xf32>' does not match the inferred type 'tensor<1x2x4xf32>'}}
  %o, %lse = kiln.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
      -> tensor<1x2x4x8xf32>, tensor<1x2x4x1xf32>
  return %lse : tensor<1x2x4x1xf32>
}

// -----

func.func @attention_kv_chunk_zero(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op kv_chunk must be positive, got 0}}
  %o, %lse = kiln.attention %q, %q, %q {kv_chunk = 0 : i64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>,
      tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_kv_chunk_without_lse(%q: tensor<1x2x4x8xf32>) -> tensor<1x1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op with kv_chunk needs the lse result: the chunks merge by their log-sum-exp}}
  %o = kiln.attention %q, %q, %q {kv_chunk = 4 : i64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>,
      tensor<1x2x4x8xf32> -> tensor<1x1x2x4x8xf32>
  return %o : tensor<1x1x2x4x8xf32>
}

// -----

func.func @attention_kv_chunk_seq_major_output(%q: tensor<1x2x4x8xf32>) -> tensor<1x1x4x2x8xf32> {
  // expected-error @+1 {{'kiln.attention' op with kv_chunk stores [chunks, batch, heads, seq_q, head_dim] f32 partial results; an epilogue or a seq-major output belongs to the kiln.merge_splits}}
  %o, %lse = kiln.attention %q, %q, %q {kv_chunk = 4 : i64, out_layout = "bshd"} : tensor<1x2x4x8xf32>,
      tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x1x4x2x8xf32>, tensor<1x1x2x4xf32>
  return %o : tensor<1x1x4x2x8xf32>
}

// -----

func.func @attention_kv_chunk_parts_type(%q: tensor<1x2x5x8xbf16>) -> tensor<2x1x2x5x8xbf16> {
  // expected-error @+1 {{'kiln.attention' op result type 'tensor<2x1x2x5x8xbf16>' does not match the inferred type 'tensor<2x1x2x5x8xf32>'}}
  %o, %lse = kiln.attention %q, %q, %q {kv_chunk = 4 : i64} : tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>,
      tensor<1x2x5x8xbf16> -> tensor<2x1x2x5x8xbf16>, tensor<2x1x2x5xf32>
  return %o : tensor<2x1x2x5x8xbf16>
}

// -----

func.func @merge_splits_rank(%p: tensor<2x4x8xf32>, %l: tensor<2x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.merge_splits' op operand 'parts' must have rank 5 [chunks, batch, heads, seq, head_dim], got 'tensor<2x4x8xf32>'}}
  %o = kiln.merge_splits %p, %l : tensor<2x4x8xf32>, tensor<2x4xf32> -> tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}

// -----

func.func @merge_splits_no_chunk(%p: tensor<0x1x2x4x8xf32>, %l: tensor<0x1x2x4xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.merge_splits' op operand 'parts' has no chunk to merge (dimension 0 is 0)}}
  %o = kiln.merge_splits %p, %l : tensor<0x1x2x4x8xf32>, tensor<0x1x2x4xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

func.func @merge_splits_lse_shape(%p: tensor<3x1x2x4x8xf32>, %l: tensor<3x1x2x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.merge_splits' op operand 'lse' must be 'tensor<3x1x2x4xf32>' (one per row of each chunk), got 'tensor<3x1x2x8xf32>'}}
  %o = kiln.merge_splits %p, %l : tensor<3x1x2x4x8xf32>, tensor<3x1x2x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

func.func @merge_splits_result_shape(%p: tensor<3x1x2x4x8xf32>, %l: tensor<3x1x2x4xf32>) -> tensor<1x2x8x4xbf16> {
  // expected-error @+1 {{'kiln.merge_splits' op result shape [1, 2, 8, 4] must be that of one chunk of 'parts', [1, 2, 4, 8]}}
  %o = kiln.merge_splits %p, %l : tensor<3x1x2x4x8xf32>, tensor<3x1x2x4xf32> -> tensor<1x2x8x4xbf16>
  return %o : tensor<1x2x8x4xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.softmax, kiln.reduce
//===----------------------------------------------------------------------===//

func.func @softmax_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.softmax' op axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = kiln.softmax %x axis 2 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @softmax_negative_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.softmax' op axis -1 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = kiln.softmax %x axis -1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @softmax_scalar(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'kiln.softmax' op axis 0 is out of range for rank 0 (expected 0 <= axis < 0)}}
  %0 = kiln.softmax %x axis 0 : tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @softmax_empty_axis(%x: tensor<4x0xf32>) -> tensor<4x0xf32> {
  // expected-error @+1 {{'kiln.softmax' op axis 1 of the input has size 0; softmax needs at least one element to normalise over}}
  %0 = kiln.softmax %x axis 1 : tensor<4x0xf32>
  return %0 : tensor<4x0xf32>
}

// -----

func.func @reduce_no_axes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.reduce' op needs at least one axis}}
  %0 = kiln.reduce sum %x axes [] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @reduce_axis_range(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.reduce' op axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = kiln.reduce max %x axes [2] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_axes_descending(%x: tensor<2x4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.reduce' op axes must be unique and ascending, got [2, 0]}}
  %0 = kiln.reduce sum %x axes [2, 0] : tensor<2x4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_axes_duplicate(%x: tensor<2x4x8xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'kiln.reduce' op axes must be unique and ascending, got [2, 2]}}
  %0 = kiln.reduce min %x axes [2, 2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @reduce_element_type(%x: tensor<4x8xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.reduce' op result element type 'f32' differs from the input element type 'bf16'}}
  %0 = kiln.reduce mean %x axes [1] : tensor<4x8xbf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_keep_dims_missing(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.reduce' op result type 'tensor<4xf32>' does not match the inferred type 'tensor<4x1xf32>'}}
  %0 = kiln.reduce mean %x axes [1] keep_dims : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_dims_kept_without_keep_dims(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{'kiln.reduce' op result type 'tensor<4x1xf32>' does not match the inferred type 'tensor<4xf32>'}}
  %0 = kiln.reduce sum %x axes [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

func.func @reduce_empty_axis(%x: tensor<3x0xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'kiln.reduce' op axis 1 of the input has size 0; sum needs at least one element to reduce over}}
  %0 = kiln.reduce sum %x axes [1] : tensor<3x0xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce_empty_second_axis(%x: tensor<2x3x0xf32>) -> tensor<2x1x1xf32> {
  // expected-error @+1 {{'kiln.reduce' op axis 2 of the input has size 0; max needs at least one element to reduce over}}
  %0 = kiln.reduce max %x axes [1, 2] keep_dims : tensor<2x3x0xf32> -> tensor<2x1x1xf32>
  return %0 : tensor<2x1x1xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.rms_norm, kiln.layer_norm
//===----------------------------------------------------------------------===//

func.func @rms_norm_scalar_input(%x: tensor<f32>, %w: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{'kiln.rms_norm' op input must have rank >= 1 to normalise its last dimension}}
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<f32>, tensor<1xf32>
  return %0 : tensor<f32>
}

// -----

func.func @rms_norm_empty_rows(%x: tensor<4x0xf32>, %w: tensor<0xf32>) -> tensor<4x0xf32> {
  // expected-error @+1 {{'kiln.rms_norm' op the last dimension of the input (dimension 1) has size 0; there is nothing to normalise over}}
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<4x0xf32>, tensor<0xf32>
  return %0 : tensor<4x0xf32>
}

// -----

func.func @layer_norm_empty_rows(%x: tensor<2x3x0xf32>, %w: tensor<0xf32>) -> tensor<2x3x0xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op the last dimension of the input (dimension 2) has size 0; there is nothing to normalise over}}
  %0 = kiln.layer_norm %x, %w epsilon 1.0e-05 : tensor<2x3x0xf32>, tensor<0xf32>
  return %0 : tensor<2x3x0xf32>
}

// -----

func.func @rms_norm_negative_epsilon(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.rms_norm' op epsilon must be finite and non-negative, got -1.000000e-06}}
  %0 = kiln.rms_norm %x, %w epsilon -1.0e-06 : tensor<4x8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_infinite_epsilon(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op epsilon must be finite and non-negative, got INF}}
  %0 = kiln.layer_norm %x, %w epsilon 0x7F800000 : tensor<4x8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_nan_epsilon(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op epsilon must be finite and non-negative, got nan}}
  %0 = kiln.layer_norm %x, %w epsilon 0x7FC00000 : tensor<4x8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @rms_norm_weight_size(%x: tensor<4x8xf32>, %w: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.rms_norm' op 'weight' must have shape [8] (the last dimension of the input), got 'tensor<4xf32>'}}
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<4x8xf32>, tensor<4xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @rms_norm_weight_rank(%x: tensor<4x8xf32>, %w: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.rms_norm' op 'weight' must have shape [8] (the last dimension of the input), got 'tensor<1x8xf32>'}}
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<4x8xf32>, tensor<1x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @rms_norm_weight_element_type(%x: tensor<4x8xbf16>, %w: tensor<8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'kiln.rms_norm' op element type of 'weight' ('f32') differs from the input ('bf16')}}
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<4x8xbf16>, tensor<8xf32>
  return %0 : tensor<4x8xbf16>
}

// -----

func.func @layer_norm_weight_size(%x: tensor<4x8xf32>, %w: tensor<16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op 'weight' must have shape [8] (the last dimension of the input), got 'tensor<16xf32>'}}
  %0 = kiln.layer_norm %x, %w epsilon 1.0e-05 : tensor<4x8xf32>, tensor<16xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_bias_size(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.layer_norm' op 'bias' must have shape [8] (the last dimension of the input), got 'tensor<4xf32>'}}
  %0 = kiln.layer_norm %x, %w, %b epsilon 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_bias_element_type(%x: tensor<4x8xf16>, %w: tensor<8xf16>, %b: tensor<8xf32>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'kiln.layer_norm' op element type of 'bias' ('f32') differs from the input ('f16')}}
  %0 = kiln.layer_norm %x, %w, %b epsilon 1.0e-05 : tensor<4x8xf16>, tensor<8xf16>, tensor<8xf32>
  return %0 : tensor<4x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.rope
//===----------------------------------------------------------------------===//

func.func @rope_rank(%x: tensor<8xf32>, %t: tensor<1x4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'kiln.rope' op input must have rank >= 2 [..., seq, head_dim], got 'tensor<8xf32>'}}
  %0 = kiln.rope %x, %t, %t : tensor<8xf32>, tensor<1x4xf32>, tensor<1x4xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @rope_odd_head_dim(%x: tensor<1x4x7xf32>, %t: tensor<4x3xf32>) -> tensor<1x4x7xf32> {
  // expected-error @+1 {{'kiln.rope' op head dim (last dimension of the input) must be even, got 7}}
  %0 = kiln.rope %x, %t, %t interleaved : tensor<1x4x7xf32>, tensor<4x3xf32>, tensor<4x3xf32>
  return %0 : tensor<1x4x7xf32>
}

// -----

func.func @rope_cos_shape(%x: tensor<1x32x77x128xf32>, %cos: tensor<77x96xf32>, %sin: tensor<77x64xf32>) -> tensor<1x32x77x128xf32> {
  // expected-error @+1 {{'kiln.rope' op 'cos' must have shape [77, 64] ([seq, head_dim / 2]) or [77, 128] ([seq, head_dim]), got 'tensor<77x96xf32>'}}
  %0 = kiln.rope %x, %cos, %sin : tensor<1x32x77x128xf32>, tensor<77x96xf32>, tensor<77x64xf32>
  return %0 : tensor<1x32x77x128xf32>
}

// -----

func.func @rope_full_cos_half_sin(%x: tensor<1x32x77x128xf32>, %cos: tensor<77x128xf32>, %sin: tensor<77x64xf32>) -> tensor<1x32x77x128xf32> {
  // expected-error @+1 {{'kiln.rope' op 'sin' must have the shape of 'cos', [77, 128], got 'tensor<77x64xf32>'}}
  %0 = kiln.rope %x, %cos, %sin : tensor<1x32x77x128xf32>, tensor<77x128xf32>, tensor<77x64xf32>
  return %0 : tensor<1x32x77x128xf32>
}

// -----

func.func @rope_seq_dim(%x: tensor<1x77x32x128xf32>, %t: tensor<77x64xf32>) -> tensor<1x77x32x128xf32> {
  // expected-error @+1 {{'kiln.rope' op seq_dim must name a dimension before the last (0 to 2), got 3}}
  %0 = kiln.rope %x, %t, %t {seq_dim = 3 : i64} : tensor<1x77x32x128xf32>, tensor<77x64xf32>, tensor<77x64xf32>
  return %0 : tensor<1x77x32x128xf32>
}

// -----

func.func @rope_seq_dim_tables(%x: tensor<1x77x32x128xf32>, %t: tensor<32x64xf32>) -> tensor<1x77x32x128xf32> {
  // expected-error @+1 {{'kiln.rope' op 'cos' must have shape [77, 64] ([seq, head_dim / 2]) or [77, 128] ([seq, head_dim]), got 'tensor<32x64xf32>'}}
  %0 = kiln.rope %x, %t, %t {seq_dim = 1 : i64} : tensor<1x77x32x128xf32>, tensor<32x64xf32>, tensor<32x64xf32>
  return %0 : tensor<1x77x32x128xf32>
}

// -----

func.func @rope_sin_shape(%x: tensor<1x32x77x128xf32>, %cos: tensor<77x64xf32>, %sin: tensor<1x77x64xf32>) -> tensor<1x32x77x128xf32> {
  // expected-error @+1 {{'kiln.rope' op 'sin' must have the shape of 'cos', [77, 64], got 'tensor<1x77x64xf32>'}}
  %0 = kiln.rope %x, %cos, %sin : tensor<1x32x77x128xf32>, tensor<77x64xf32>, tensor<1x77x64xf32>
  return %0 : tensor<1x32x77x128xf32>
}

// -----

func.func @rope_seq(%x: tensor<1x32x77x128xf32>, %t: tensor<76x64xf32>) -> tensor<1x32x77x128xf32> {
  // expected-error @+1 {{'kiln.rope' op 'cos' must have shape [77, 64] ([seq, head_dim / 2]) or [77, 128] ([seq, head_dim]), got 'tensor<76x64xf32>'}}
  %0 = kiln.rope %x, %t, %t : tensor<1x32x77x128xf32>, tensor<76x64xf32>, tensor<76x64xf32>
  return %0 : tensor<1x32x77x128xf32>
}

// -----

func.func @rope_cos_element_type(%x: tensor<4x8xbf16>, %cos: tensor<4x4xf32>, %sin: tensor<4x4xbf16>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'kiln.rope' op element type of 'cos' ('f32') differs from the input ('bf16')}}
  %0 = kiln.rope %x, %cos, %sin : tensor<4x8xbf16>, tensor<4x4xf32>, tensor<4x4xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

func.func @rope_sin_element_type(%x: tensor<4x8xbf16>, %cos: tensor<4x4xbf16>, %sin: tensor<4x4xf16>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'kiln.rope' op element type of 'sin' ('f16') differs from the input ('bf16')}}
  %0 = kiln.rope %x, %cos, %sin : tensor<4x8xbf16>, tensor<4x4xbf16>, tensor<4x4xf16>
  return %0 : tensor<4x8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// Broadcasting elementwise ops (verifyBroadcastingElementwise)
//===----------------------------------------------------------------------===//

func.func @add_lhs_element_type(%a: tensor<4xf16>, %b: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.add' op operand #0 element type 'f16' differs from the result element type 'f32'}}
  %0 = kiln.add %a, %b : tensor<4xf16>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @sub_rhs_element_type(%a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.sub' op operand #1 element type 'bf16' differs from the result element type 'f32'}}
  %0 = kiln.sub %a, %b : tensor<4xf32>, tensor<4xbf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @mul_result_element_type(%a: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'kiln.mul' op operand #0 element type 'f32' differs from the result element type 'f16'}}
  %0 = kiln.mul %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @div_no_broadcast(%a: tensor<4x8xf32>, %b: tensor<4x7xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.div' op operand #1 does not broadcast: size 7 meets size 8 at broadcast dimension 1}}
  %0 = kiln.div %a, %b : tensor<4x8xf32>, tensor<4x7xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Broadcasting aligns on the right: a [4] bias does not fit the leading dimension of [4, 8].
func.func @max_right_aligned(%a: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.max' op operand #1 does not broadcast: size 4 meets size 8 at broadcast dimension 1}}
  %0 = kiln.max %a, %b : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @min_result_shape(%a: tensor<4x1xf32>, %b: tensor<1x8xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{'kiln.min' op result type 'tensor<4x1xf32>' does not match the broadcast shape 'tensor<4x8xf32>'}}
  %0 = kiln.min %a, %b : tensor<4x1xf32>, tensor<1x8xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

func.func @pow_result_rank(%a: tensor<8xf32>, %b: tensor<f32>) -> tensor<1x8xf32> {
  // expected-error @+1 {{'kiln.pow' op result type 'tensor<1x8xf32>' does not match the broadcast shape 'tensor<8xf32>'}}
  %0 = kiln.pow %a, %b : tensor<8xf32>, tensor<f32> -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

func.func @select_bool_branch_into_float(%c: tensor<4xi1>, %a: tensor<4xi1>, %b: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.select' op operand #1 element type 'i1' differs from the result element type 'f32'}}
  %0 = kiln.select %c, %a, %b : tensor<4xi1>, tensor<4xi1>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @compare_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xi1> {
  // expected-error @+1 {{'kiln.compare' op operand #1 element type 'f16' differs from operand #0's, 'f32'}}
  %0 = kiln.compare lt %a, %b : tensor<4xf32>, tensor<4xf16> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @compare_shapes(%a: tensor<4xi64>, %b: tensor<3xi64>) -> tensor<4xi1> {
  // expected-error @+1 {{'kiln.compare' op operand #1 does not broadcast: size 3 meets size 4 at broadcast dimension 0}}
  %0 = kiln.compare eq %a, %b : tensor<4xi64>, tensor<3xi64> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @compare_result_shape(%a: tensor<4xi64>, %b: tensor<i64>) -> tensor<1x4xi1> {
  // expected-error @+1 {{'kiln.compare' op result type 'tensor<1x4xi1>' does not match the broadcast shape 'tensor<4xi1>'}}
  %0 = kiln.compare eq %a, %b : tensor<4xi64>, tensor<i64> -> tensor<1x4xi1>
  return %0 : tensor<1x4xi1>
}

// -----

func.func @select_branch_element_type(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.select' op operand #2 element type 'f16' differs from the result element type 'f32'}}
  %0 = kiln.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @select_no_broadcast(%c: tensor<3xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.select' op operand #1 does not broadcast: size 4 meets size 3 at broadcast dimension 0}}
  %0 = kiln.select %c, %a, %a : tensor<3xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @select_result_shape(%c: tensor<2x4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.select' op result type 'tensor<4xf32>' does not match the broadcast shape 'tensor<2x4xf32>'}}
  %0 = kiln.select %c, %a, %a : tensor<2x4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.cast, kiln.gelu
//===----------------------------------------------------------------------===//

func.func @cast_shape(%x: tensor<4x8xf32>) -> tensor<32xbf16> {
  // expected-error @+1 {{'kiln.cast' op changes the shape from [4, 8] to [32]; a cast only converts elements}}
  %0 = kiln.cast %x : tensor<4x8xf32> to tensor<32xbf16>
  return %0 : tensor<32xbf16>
}

// -----

func.func @gelu_unknown_approximation(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.gelu' op attribute 'approximate' failed to satisfy constraint: GELU formula}}
  %0 = "kiln.gelu"(%x) {approximate = 7 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.transpose
//===----------------------------------------------------------------------===//

func.func @transpose_permutation_size(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  // expected-error @+1 {{'kiln.transpose' op permutation [1, 0] has 2 entries but the input has rank 3}}
  %0 = kiln.transpose %x [1, 0] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return %0 : tensor<3x2x4xf32>
}

// -----

func.func @transpose_duplicate_entry(%x: tensor<2x3x4xf32>) -> tensor<3x3x4xf32> {
  // expected-error @+1 {{'kiln.transpose' op permutation [1, 1, 2] is not a permutation of 0..2}}
  %0 = kiln.transpose %x [1, 1, 2] : tensor<2x3x4xf32> -> tensor<3x3x4xf32>
  return %0 : tensor<3x3x4xf32>
}

// -----

func.func @transpose_entry_out_of_range(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{'kiln.transpose' op permutation [2, 0] is not a permutation of 0..1}}
  %0 = kiln.transpose %x [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @transpose_negative_entry(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{'kiln.transpose' op permutation [-1, 0] is not a permutation of 0..1}}
  %0 = kiln.transpose %x [-1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @transpose_result_type(%x: tensor<2x3x4xf32>) -> tensor<2x4x3xf32> {
  // expected-error @+1 {{'kiln.transpose' op result type 'tensor<2x4x3xf32>' does not match the inferred type 'tensor<4x3x2xf32>'}}
  %0 = kiln.transpose %x [2, 1, 0] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

func.func @transpose_element_type(%x: tensor<2x3xi32>) -> tensor<3x2xi64> {
  // expected-error @+1 {{'kiln.transpose' op result type 'tensor<3x2xi64>' does not match the inferred type 'tensor<3x2xi32>'}}
  %0 = kiln.transpose %x [1, 0] : tensor<2x3xi32> -> tensor<3x2xi64>
  return %0 : tensor<3x2xi64>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.reshape, kiln.broadcast
//===----------------------------------------------------------------------===//

func.func @reshape_element_type(%x: tensor<4x8xf32>) -> tensor<32xf16> {
  // expected-error @+1 {{'kiln.reshape' op result element type 'f16' differs from the input element type 'f32'}}
  %0 = kiln.reshape %x : tensor<4x8xf32> -> tensor<32xf16>
  return %0 : tensor<32xf16>
}

// -----

func.func @reshape_element_count(%x: tensor<2x77x512xf32>) -> tensor<2x77x8x32xf32> {
  // expected-error @+1 {{'kiln.reshape' op cannot reshape [2, 77, 512] (78848 elements) to [2, 77, 8, 32] (39424 elements)}}
  %0 = kiln.reshape %x : tensor<2x77x512xf32> -> tensor<2x77x8x32xf32>
  return %0 : tensor<2x77x8x32xf32>
}

// -----

// 2^32 * (2^32 + 1) elements wrap to 2^32 in int64: without a checked product this reshape would pass.
func.func @reshape_input_count_overflows(%x: tensor<4294967296x4294967297xf32>) -> tensor<4294967296xf32> {
  // expected-error @+1 {{'kiln.reshape' op input type 'tensor<4294967296x4294967297xf32>' has more elements than int64 can count}}
  %0 = kiln.reshape %x : tensor<4294967296x4294967297xf32> -> tensor<4294967296xf32>
  return %0 : tensor<4294967296xf32>
}

// -----

func.func @reshape_result_count_overflows(%x: tensor<4294967296xf32>) -> tensor<4294967296x4294967297xf32> {
  // expected-error @+1 {{'kiln.reshape' op result type 'tensor<4294967296x4294967297xf32>' has more elements than int64 can count}}
  %0 = kiln.reshape %x : tensor<4294967296xf32> -> tensor<4294967296x4294967297xf32>
  return %0 : tensor<4294967296x4294967297xf32>
}

// -----

func.func @broadcast_element_type(%x: tensor<8xi32>) -> tensor<4x8xi64> {
  // expected-error @+1 {{'kiln.broadcast' op result element type 'i64' differs from the input element type 'i32'}}
  %0 = kiln.broadcast %x : tensor<8xi32> -> tensor<4x8xi64>
  return %0 : tensor<4x8xi64>
}

// -----

func.func @broadcast_to_smaller_rank(%x: tensor<1x4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.broadcast' op cannot broadcast rank 3 to the smaller rank 2}}
  %0 = kiln.broadcast %x : tensor<1x4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @broadcast_dimension(%x: tensor<1x8x2x77x64xf32>) -> tensor<1x8x4x77x64xf32> {
  // expected-error @+1 {{'kiln.broadcast' op input dimension 2 (2) does not broadcast to result dimension 2 (4)}}
  %0 = kiln.broadcast %x : tensor<1x8x2x77x64xf32> -> tensor<1x8x4x77x64xf32>
  return %0 : tensor<1x8x4x77x64xf32>
}

// -----

func.func @broadcast_right_aligned(%x: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kiln.broadcast' op input dimension 0 (4) does not broadcast to result dimension 1 (8)}}
  %0 = kiln.broadcast %x : tensor<4xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.dim
//===----------------------------------------------------------------------===//

func.func @dim_out_of_range(%x: tensor<1x2x300x64xbf16>) -> index {
  // expected-error @+1 {{'kiln.dim' op dimension 4 is out of range for a tensor of rank 4}}
  %0 = kiln.dim %x[4] : tensor<1x2x300x64xbf16>
  return %0 : index
}

// -----

// A negative dimension is out of range too.
func.func @dim_negative(%x: tensor<1x2x300x64xbf16>) -> index {
  // expected-error @+1 {{'kiln.dim' op dimension -1 is out of range for a tensor of rank 4}}
  %0 = kiln.dim %x[-1] : tensor<1x2x300x64xbf16>
  return %0 : index
}

// -----

//===----------------------------------------------------------------------===//
// kiln.concat
//===----------------------------------------------------------------------===//

func.func @concat_no_inputs() -> tensor<2xf32> {
  // expected-error @+1 {{'kiln.concat' op needs at least one input}}
  %0 = "kiln.concat"() {axis = 0 : i64} : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @concat_axis(%a: tensor<4x8xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.concat' op axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = kiln.concat %a, %a axis 2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @concat_element_type(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.concat' op input #1 has element type 'bf16' but input #0 has 'f32'}}
  %0 = kiln.concat %a, %b axis 1 : tensor<4x8xf32>, tensor<4x8xbf16> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @concat_rank(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<1x4x8xf32>) -> tensor<4x24xf32> {
  // expected-error @+1 {{'kiln.concat' op input #2 has rank 3 but input #0 has rank 2}}
  %0 = kiln.concat %a, %b, %c axis 1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x4x8xf32> -> tensor<4x24xf32>
  return %0 : tensor<4x24xf32>
}

// -----

func.func @concat_other_dimension(%a: tensor<1x8x77x32xf32>, %b: tensor<1x4x77x32xf32>) -> tensor<1x8x77x64xf32> {
  // expected-error @+1 {{'kiln.concat' op input #1 dimension 1 is 4 but input #0 has 8 (only axis 3 may differ)}}
  %0 = kiln.concat %a, %b axis 3 : tensor<1x8x77x32xf32>, tensor<1x4x77x32xf32> -> tensor<1x8x77x64xf32>
  return %0 : tensor<1x8x77x64xf32>
}

// -----

func.func @concat_result_type(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'kiln.concat' op result type 'tensor<4x16xf32>' does not match the inferred type 'tensor<4x10xf32>'}}
  %0 = kiln.concat %a, %b axis 1 : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @concat_result_element_type(%a: tensor<4xi32>) -> tensor<8xi64> {
  // expected-error @+1 {{'kiln.concat' op result type 'tensor<8xi64>' does not match the inferred type 'tensor<8xi32>'}}
  %0 = kiln.concat %a, %a axis 0 : tensor<4xi32>, tensor<4xi32> -> tensor<8xi64>
  return %0 : tensor<8xi64>
}

// -----

// Two halves of 2^62 add up to 2^63, one past int64.
func.func @concat_size_overflows(%a: tensor<4611686018427387904xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{'kiln.concat' op the inputs' sizes along axis 0 add up to more than int64 can count}}
  %0 = kiln.concat %a, %a axis 0 : tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32> -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.slice
//===----------------------------------------------------------------------===//

func.func @slice_element_type(%x: tensor<8xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'kiln.slice' op result element type 'bf16' differs from the input element type 'f32'}}
  %0 = kiln.slice %x offsets [0] strides [1] : tensor<8xf32> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

func.func @slice_rank(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'kiln.slice' op result rank 1 differs from the input rank 2}}
  %0 = kiln.slice %x offsets [0, 0] strides [1, 1] : tensor<4x8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @slice_offsets_count(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'kiln.slice' op needs one offset and one stride per input dimension (2), got 1 offsets and 2 strides}}
  %0 = kiln.slice %x offsets [0] strides [1, 1] : tensor<4x8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @slice_strides_count(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'kiln.slice' op needs one offset and one stride per input dimension (2), got 2 offsets and 3 strides}}
  %0 = kiln.slice %x offsets [0, 0] strides [1, 1, 1] : tensor<4x8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @slice_negative_offset(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'kiln.slice' op offset -1 of dimension 0 is negative}}
  %0 = kiln.slice %x offsets [-1, 0] strides [1, 1] : tensor<4x8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @slice_zero_stride(%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'kiln.slice' op stride 0 of dimension 1 is not positive}}
  %0 = kiln.slice %x offsets [0, 0] strides [1, 0] : tensor<4x8xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @slice_negative_stride(%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'kiln.slice' op stride -2 of dimension 1 is not positive}}
  %0 = kiln.slice %x offsets [0, 7] strides [1, -2] : tensor<4x8xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @slice_out_of_bounds(%x: tensor<1x8x77x64xf32>) -> tensor<1x8x77x32xf32> {
  // expected-error @+1 {{'kiln.slice' op dimension 3 reads past the input size 64 (offset 33, size 32, stride 1)}}
  %0 = kiln.slice %x offsets [0, 0, 0, 33] strides [1, 1, 1, 1] : tensor<1x8x77x64xf32> -> tensor<1x8x77x32xf32>
  return %0 : tensor<1x8x77x32xf32>
}

// -----

func.func @slice_strided_out_of_bounds(%x: tensor<10xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kiln.slice' op dimension 0 reads past the input size 10 (offset 1, size 4, stride 3)}}
  %0 = kiln.slice %x offsets [1] strides [3] : tensor<10xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

//===----------------------------------------------------------------------===//
// kiln.gather
//===----------------------------------------------------------------------===//

func.func @gather_axis(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<10x3xf32> {
  // expected-error @+1 {{'kiln.gather' op axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = kiln.gather %t[%i] axis 2 : tensor<10x4xf32>, tensor<3xi64> -> tensor<10x3xf32>
  return %0 : tensor<10x3xf32>
}

// -----

func.func @gather_negative_axis(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<10x3xf32> {
  // expected-error @+1 {{'kiln.gather' op axis -1 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = kiln.gather %t[%i] axis -1 : tensor<10x4xf32>, tensor<3xi64> -> tensor<10x3xf32>
  return %0 : tensor<10x3xf32>
}

// -----

func.func @gather_result_type(%t: tensor<50257x768xf32>, %i: tensor<2x77xi64>) -> tensor<154x768xf32> {
  // expected-error @+1 {{'kiln.gather' op result type 'tensor<154x768xf32>' does not match the inferred type 'tensor<2x77x768xf32>'}}
  %0 = kiln.gather %t[%i] axis 0 : tensor<50257x768xf32>, tensor<2x77xi64> -> tensor<154x768xf32>
  return %0 : tensor<154x768xf32>
}

// -----

func.func @gather_result_element_type(%t: tensor<10x4xbf16>, %i: tensor<3xi32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'kiln.gather' op result type 'tensor<3x4xf32>' does not match the inferred type 'tensor<3x4xbf16>'}}
  %0 = kiln.gather %t[%i] axis 0 : tensor<10x4xbf16>, tensor<3xi32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @slice_stride_overflow(%x: tensor<10xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'kiln.slice' op dimension 0 reads past the input size 10 (offset 0, size 3, stride 4611686018427387904)}}
  %0 = kiln.slice %x offsets [0] strides [4611686018427387904] : tensor<10xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @slice_offset_past_end(%x: tensor<10xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{'kiln.slice' op dimension 0 reads past the input size 10 (offset 10, size 1, stride 1)}}
  %0 = kiln.slice %x offsets [10] strides [1] : tensor<10xf32> -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

func.func @attention_zero_kv_heads(%q: tensor<1x2x4x8xf32>, %k: tensor<1x0x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op head count of 'k' (dimension 1) must be positive}}
  %0 = kiln.attention %q, %k, %k : tensor<1x2x4x8xf32>, tensor<1x0x4x8xf32>, tensor<1x0x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @matmul_narrowing_result(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) -> tensor<4x2xf16> {
  // expected-error @+1 {{'kiln.matmul' op result element type 'f16' must be the operands' ('f32') or f32}}
  %0 = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf16>
  return %0 : tensor<4x2xf16>
}

// -----

func.func @config_bad_lowering(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.config lowering must be "host", "mma_sync", "wgmma" or "rows", got "simt"}}
  %0 = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [4], warps = 1, stages = 1, lowering = "simt">} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @config_rows_warps(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.config lowering "rows" needs tile = [rows] whose rows split the warps' threads into a power of two up to 32, or a multiple of 32, per row; got 1 tile sizes and 3 warps}}
  %0 = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [4], warps = 3, stages = 1, lowering = "rows">} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @row_layout_threads(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.row_layout threads_per_row must be a power of two up to 32 or a multiple of 32 up to 1024, got 48}}
  %0 = kiln.exp %x {kiln.layout = #kiln.row_layout<threads_per_row = 48, vector = 4>} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @row_layout_vector(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.row_layout vector must be 1, 2, 4 or 8, got 3}}
  %0 = kiln.exp %x {kiln.layout = #kiln.row_layout<threads_per_row = 32, vector = 3>} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @mma_layout_warps(%a: tensor<64x32xbf16>, %b: tensor<32x64xbf16>) -> tensor<64x64xf32> {
  // expected-error @+1 {{#kiln.mma_layout needs at least one warp each way and at most 32 warps, got 0 x 4}}
  %0 = kiln.matmul %a, %b {kiln.layout = #kiln.mma_layout<warps_m = 0, warps_n = 4>} : tensor<64x32xbf16>, tensor<32x64xbf16> -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

func.func @config_bad_tile(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.config tile sizes must be positive, got 0}}
  %0 = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [0], warps = 1, stages = 1, lowering = "host">} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @config_too_many_tiles(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.config needs 1 to 3 tile sizes, got 4}}
  %0 = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [1, 2, 3, 4], warps = 1, stages = 1, lowering = "host">} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @config_bad_warps(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.config warps must be in [1, 32], got 64}}
  %0 = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [4], warps = 64, stages = 1, lowering = "host">} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @config_bad_stages(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.config stages must be in [1, 8] for lowering "host", got 0}}
  %0 = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [4], warps = 1, stages = 0, lowering = "host">} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A wgmma ring takes up to 16 stages, a cp.async one 8.
func.func @config_too_many_stages(%a: tensor<64x64xbf16>, %b: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  // expected-error @+1 {{#kiln.config stages must be in [1, 8] for lowering "mma_sync", got 9}}
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 9, lowering = "mma_sync">} : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xbf16>
  return %0 : tensor<64x64xbf16>
}

// -----

func.func @config_too_many_wgmma_stages(%a: tensor<64x64xbf16>, %b: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  // expected-error @+1 {{#kiln.config stages must be in [1, 16] for lowering "wgmma", got 17}}
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 4, stages = 17, lowering = "wgmma">} : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xbf16>
  return %0 : tensor<64x64xbf16>
}

// -----

func.func @config_bad_group(%a: tensor<256x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<256x256xbf16> {
  // expected-error @+1 {{#kiln.config group must be in [1, 64], got 0}}
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 3, lowering = "mma_sync", group = 0>} : tensor<256x64xbf16>, tensor<64x256xbf16> -> tensor<256x256xbf16>
  return %0 : tensor<256x256xbf16>
}

// -----

func.func @config_group_of_a_row_kernel(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{#kiln.config group orders a GPU matmul's tiles (lowering "mma_sync" or "wgmma", three tile sizes); got group = 4 with lowering "rows" and 1 tile sizes}}
  %0 = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [4], warps = 1, stages = 1, lowering = "rows", group = 4>} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @config_bad_k_splits(%a: tensor<64x4096xbf16>, %b: tensor<4096x256xbf16>) -> tensor<64x256xbf16> {
  // expected-error @+1 {{#kiln.config k_splits must be in [1, 8] (the blocks of one cluster), got 16}}
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma", k_splits = 16>} : tensor<64x4096xbf16>, tensor<4096x256xbf16> -> tensor<64x256xbf16>
  return %0 : tensor<64x256xbf16>
}

// -----

func.func @config_entries_out_of_order(%a: tensor<64x4096xbf16>, %b: tensor<4096x256xbf16>) -> tensor<64x256xbf16> {
  // expected-error @+1 {{expected 'group' or 'k_splits' (in that order, each at most once), got 'group'}}
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma", k_splits = 2, group = 4>} : tensor<64x4096xbf16>, tensor<4096x256xbf16> -> tensor<64x256xbf16>
  return %0 : tensor<64x256xbf16>
}

// -----

func.func @config_k_splits_on_mma_sync(%a: tensor<64x4096xbf16>, %b: tensor<4096x256xbf16>) -> tensor<64x256xbf16> {
  // expected-error @+1 {{#kiln.config k_splits splits a wgmma matmul's contraction over a cluster (lowering "wgmma", three tile sizes); got k_splits = 4 with lowering "mma_sync" and 3 tile sizes}}
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 3, lowering = "mma_sync", k_splits = 4>} : tensor<64x4096xbf16>, tensor<4096x256xbf16> -> tensor<64x256xbf16>
  return %0 : tensor<64x256xbf16>
}

// -----

func.func @logsumexp_axis(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.logsumexp' op axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = kiln.logsumexp %x axis 2 : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @logsumexp_empty_axis(%x: tensor<3x0xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'kiln.logsumexp' op axis 1 of the input has size 0; logsumexp needs at least one element to reduce over}}
  %0 = kiln.logsumexp %x axis 1 : tensor<3x0xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @logsumexp_result(%x: tensor<4x8xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'kiln.logsumexp' op result #0 must be statically shaped tensor of 32-bit float values}}
  %0 = kiln.logsumexp %x axis 1 : tensor<4x8xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

func.func @logsumexp_shape(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'kiln.logsumexp' op result type 'tensor<8xf32>' does not match the inferred type 'tensor<4xf32>'}}
  %0 = kiln.logsumexp %x axis 1 : tensor<4x8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @epilogue_arg_count(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %b: tensor<2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'kiln.matmul' op epilogue takes 1 block arguments but needs the accumulator plus one per epilogue operand (2)}}
  %0 = kiln.matmul %x, %w epilogue(%b : tensor<2xf32>) {
  ^bb0(%acc: f32):
    kiln.yield %acc : f32
  } : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @epilogue_arg_type(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'kiln.matmul' op epilogue block argument #0 must be f32, got 'f16'}}
  %0 = kiln.matmul %x, %w epilogue() {
  ^bb0(%acc: f16):
    %e = arith.extf %acc : f16 to f32
    kiln.yield %e : f32
  } : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @epilogue_yield(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'kiln.matmul' op epilogue must end in kiln.yield of one f32 value}}
  %0 = kiln.matmul %x, %w epilogue() {
  ^bb0(%acc: f32):
    kiln.yield %acc, %acc : f32, f32
  } : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @epilogue_operand_shape(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %b: tensor<3xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'kiln.matmul' op epilogue operand #0 of shape [3] does not broadcast to the result shape [4, 2]}}
  %0 = kiln.matmul %x, %w epilogue(%b : tensor<3xf32>) {
  ^bb0(%acc: f32, %v: f32):
    kiln.yield %acc : f32
  } : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @epilogue_operands_without_region(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %b: tensor<2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'kiln.matmul' op has epilogue operands but no epilogue region}}
  %0 = "kiln.matmul"(%x, %w, %b) ({}) : (tensor<4x8xf32>, tensor<8x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @yield_outside_matmul() {
  // expected-error @+1 {{'kiln.yield' op expects parent op to be one of 'kiln.matmul, kiln.attention, kiln.sum_splits, kiln.elementwise'}}
  kiln.yield
}

// -----

func.func @attention_epilogue_operand_shape(%q: tensor<1x2x4x8xf32>, %g: tensor<4xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op epilogue operand #0 of shape [4] does not broadcast to the result shape [1, 2, 4, 8]}}
  %0 = kiln.attention %q, %q, %q epilogue(%g : tensor<4xf32>) {
  ^bb0(%acc: f32, %x: f32):
    kiln.yield %acc : f32
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_epilogue_yield(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op epilogue must end in kiln.yield of one f32 value}}
  %0 = kiln.attention %q, %q, %q epilogue() {
  ^bb0(%acc: f32):
    %h = arith.truncf %acc : f32 to f16
    kiln.yield %h : f16
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_narrow_output_without_epilogue(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xbf16> {
  // expected-error @+1 {{'kiln.attention' op result type 'tensor<1x2x4x8xbf16>' does not match the inferred type 'tensor<1x2x4x8xf32>'}}
  %0 = kiln.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xbf16>
  return %0 : tensor<1x2x4x8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// Paged KV cache
//===----------------------------------------------------------------------===//

func.func @paged_fp32_precision(%q: tensor<2x4x1x8xbf16>, %kc: tensor<4x16x2x8xbf16>, %vc: tensor<4x16x2x8xbf16>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xbf16> {
  // expected-error @+1 {{'kiln.paged_attention' op fp32_precision applies to f32 q, k_cache and v_cache, got 'bf16'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l {fp32_precision = "ieee"} : tensor<2x4x1x8xbf16>, tensor<4x16x2x8xbf16>, tensor<4x16x2x8xbf16>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xbf16>
  return %0 : tensor<2x4x1x8xbf16>
}

// -----

func.func @paged_q_rank(%q: tensor<2x4x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op operand 'q' must have rank 4 [batch, heads, seq, head_dim], got 'tensor<2x4x8xf32>'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

func.func @paged_k_cache_rank(%q: tensor<2x4x1x8xf32>, %kc: tensor<64x2x8xf32>, %vc: tensor<64x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op operand 'k_cache' must have rank 4 [num_pages, page_size, kv_heads, head_dim], got 'tensor<64x2x8xf32>'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_v_cache_type(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x32x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op 'v_cache' type 'tensor<4x32x2x8xf32>' differs from 'k_cache' type 'tensor<4x16x2x8xf32>'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x32x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_no_pages(%q: tensor<2x4x1x8xf32>, %kc: tensor<0x16x2x8xf32>, %vc: tensor<0x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op 'k_cache' has no pages (dimension 0 is 0)}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<0x16x2x8xf32>, tensor<0x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_page_size_small(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x8x2x8xf32>, %vc: tensor<4x8x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op page size of 'k_cache' (dimension 1: 8) must be in [16, 256]}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_page_size_large(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x512x2x8xf32>, %vc: tensor<4x512x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op page size of 'k_cache' (dimension 1: 512) must be in [16, 256]}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x512x2x8xf32>, tensor<4x512x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_no_kv_heads(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x0x8xf32>, %vc: tensor<4x16x0x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op head count of 'k_cache' (dimension 2) must be positive}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x0x8xf32>, tensor<4x16x0x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_zero_head_dim(%q: tensor<2x4x1x0xf32>, %kc: tensor<4x16x2x0xf32>, %vc: tensor<4x16x2x0xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x0xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op head dim of 'k_cache' (dimension 3) must be positive}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x0xf32>, tensor<4x16x2x0xf32>, tensor<4x16x2x0xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x0xf32>
  return %0 : tensor<2x4x1x0xf32>
}

// -----

func.func @paged_cache_dtype(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xbf16>, %vc: tensor<4x16x2x8xbf16>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op element type of 'k_cache' ('bf16') differs from 'q' ('f32')}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xbf16>, tensor<4x16x2x8xbf16>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_head_dim(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x16xf32>, %vc: tensor<4x16x2x16xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op head dim of 'k_cache' (dimension 3: 16) differs from 'q' (8)}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x16xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_gqa_heads(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x3x8xf32>, %vc: tensor<4x16x3x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op head count of 'q' (4) is not a multiple of the cache's head count (3)}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x3x8xf32>, tensor<4x16x3x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_block_table_rank(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<6xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op operand 'block_table' must have rank 2 [batch, max_pages], got 'tensor<6xi32>'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<6xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_block_table_dtype(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi64>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op operand 'block_table' must have element type i32, got 'i64'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi64>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_block_table_batch(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<3x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op batch size of 'block_table' (dimension 0: 3) differs from the batch (2)}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<3x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_block_table_empty(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x0xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op 'block_table' has no page columns (dimension 1 is 0)}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x0xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_seq_lens_rank(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2x1xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op operand 'seq_lens' must have rank 1 [batch], got 'tensor<2x1xi32>'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<2x1xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_seq_lens_dtype(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xf32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op operand 'seq_lens' must have element type i32, got 'f32'}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<2xf32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_seq_lens_batch(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<1xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op batch size of 'seq_lens' (dimension 0: 1) differs from the batch (2)}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<1xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_queries_past_table(%q: tensor<2x4x49x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x49x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op 'q' has 49 new tokens per sequence (dimension 2) but the block table holds 48 keys per sequence (max_pages * page_size)}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x49x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x49x8xf32>
  return %0 : tensor<2x4x49x8xf32>
}

// -----

func.func @paged_scale(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xf32> {
  // expected-error @+1 {{'kiln.paged_attention' op scale must be a finite positive number, got -1.000000e+00}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l {scale = -1.0 : f32} : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xf32>
  return %0 : tensor<2x4x1x8xf32>
}

// -----

func.func @paged_result_type(%q: tensor<2x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x1x8xbf16> {
  // expected-error @+1 {{'kiln.paged_attention' op result type 'tensor<2x4x1x8xbf16>' differs from the type of 'q' ('tensor<2x4x1x8xf32>')}}
  %0 = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x4x1x8xf32>, tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x1x8xbf16>
  return %0 : tensor<2x4x1x8xbf16>
}

// -----

func.func @append_cache_page_size(%kc: tensor<4x8x2x8xf32>, %vc: tensor<4x8x2x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op page size of 'k_cache' (dimension 1: 8) must be in [16, 256]}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>
  return %0#0, %0#1 : tensor<4x8x2x8xf32>, tensor<4x8x2x8xf32>
}

// -----

func.func @append_k_rank(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op operand 'k' must have rank 4 [batch, kv_heads, seq, head_dim], got 'tensor<2x3x8xf32>'}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_v_type(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x4x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op 'v' type 'tensor<2x2x4x8xf32>' differs from 'k' type 'tensor<2x2x3x8xf32>'}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_k_dtype(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x8xf16>, %v: tensor<2x2x3x8xf16>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op element type of 'k' ('f16') differs from 'k_cache' ('f32')}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x8xf16>, tensor<2x2x3x8xf16>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_k_heads(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x4x3x8xf32>, %v: tensor<2x4x3x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op head count of 'k' (dimension 1: 4) differs from 'k_cache' (dimension 2: 2)}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_k_head_dim(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op head dim of 'k' (dimension 3: 4) differs from 'k_cache' (8)}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_block_table_batch(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x8xf32>, %t: tensor<1x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op batch size of 'block_table' (dimension 0: 1) differs from the batch (2)}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<1x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_positions_rank(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2x3xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op operand 'positions' must have rank 1 [batch], got 'tensor<2x3xi32>'}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x3xi32>, tensor<2x3xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_positions_dtype(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi64>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op operand 'positions' must have element type i32, got 'i64'}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x3xi32>, tensor<2xi64> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_positions_batch(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x8xf32>, %t: tensor<2x3xi32>, %p: tensor<4xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op batch size of 'positions' (dimension 0: 4) differs from the batch (2)}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x3xi32>, tensor<4xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_rows_past_table(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x49x8xf32>, %v: tensor<2x2x49x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>) {
  // expected-error @+1 {{'kiln.append_kv' op 'k' has 49 new tokens per sequence (dimension 2) but the block table holds 48 keys per sequence (max_pages * page_size)}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x49x8xf32>, tensor<2x2x49x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>
}

// -----

func.func @append_result_type(%kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x8xf32>, %t: tensor<2x3xi32>, %p: tensor<2xi32>) -> (tensor<4x16x2x8xf32>, tensor<4x16x2x8xf16>) {
  // expected-error @+1 {{'kiln.append_kv' op result type 'tensor<4x16x2x8xf16>' differs from the type of the caches ('tensor<4x16x2x8xf32>')}}
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %t, %p : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<4x16x2x8xf32>, tensor<4x16x2x8xf16>
  return %0#0, %0#1 : tensor<4x16x2x8xf32>, tensor<4x16x2x8xf16>
}

// -----

func.func @attention_nondecreasing_table_out_of_range(%q: tensor<1x2x4x8xf32>, %t0: tensor<4xi32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op nondecreasing_tables names mod operand 1, but the op has 1}}
  %0 = kiln.attention %q, %q, %q mod_operands(%t0 : tensor<4xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %a0: tensor<4xi32>):
    %in = arith.cmpi sle, %j, %i : index
    kiln.yield %in : i1
  } {nondecreasing_tables = array<i64: 1>} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_nondecreasing_tables_unordered(%q: tensor<1x2x4x8xf32>, %t0: tensor<4xi32>, %t1: tensor<4xi32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op nondecreasing_tables must list mod operands in increasing order, once each}}
  %0 = kiln.attention %q, %q, %q mod_operands(%t0, %t1 : tensor<4xi32>, tensor<4xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %a0: tensor<4xi32>, %a1: tensor<4xi32>):
    %in = arith.cmpi sle, %j, %i : index
    kiln.yield %in : i1
  } {nondecreasing_tables = array<i64: 1, 0>} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_nondecreasing_table_per_query(%q: tensor<1x2x4x8xf32>, %t0: tensor<3xi32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op nondecreasing table (mod operand 0) must be a 1-D i32 or i64 tensor with at least one entry per query (4), got 'tensor<3xi32>'}}
  %0 = kiln.attention %q, %q, %q mod_operands(%t0 : tensor<3xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %a0: tensor<3xi32>):
    %in = arith.cmpi sle, %j, %i : index
    kiln.yield %in : i1
  } {nondecreasing_tables = array<i64: 0>} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_nondecreasing_table_float(%q: tensor<1x2x4x8xf32>, %t0: tensor<4xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op nondecreasing table (mod operand 0) must be a 1-D i32 or i64 tensor with at least one entry per query (4), got 'tensor<4xf32>'}}
  %0 = kiln.attention %q, %q, %q mod_operands(%t0 : tensor<4xf32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %a0: tensor<4xf32>):
    %in = arith.cmpi sle, %j, %i : index
    kiln.yield %in : i1
  } {nondecreasing_tables = array<i64: 0>} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_mod_operands_without_mod(%q: tensor<1x2x4x8xf32>, %t: tensor<2xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op has mod operands but no score_mod or mask_mod region}}
  %0 = kiln.attention %q, %q, %q mod_operands(%t : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_score_mod_arg_count(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op score_mod takes 4 block arguments but needs (score: f32, b, h, q_idx, kv_idx: index) and one per mod operand (5)}}
  %0 = kiln.attention %q, %q, %q score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index):
    kiln.yield %s : f32
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_mask_mod_arg_type(%q: tensor<1x2x4x8xf32>, %t: tensor<2xi32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op mask_mod block argument #4 must be 'tensor<2xi32>', got 'tensor<2xf32>'}}
  %0 = kiln.attention %q, %q, %q mod_operands(%t : tensor<2xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %u: tensor<2xf32>):
    %c = arith.cmpi sle, %j, %i : index
    kiln.yield %c : i1
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_mask_mod_yield_type(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op mask_mod must end in kiln.yield of one 'i1' value}}
  %0 = kiln.attention %q, %q, %q mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 1.0 : f32
    kiln.yield %c : f32
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_score_mod_impure(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op score_mod may hold only pure scalar ops without regions, got 'memref.alloc'}}
  %0 = kiln.attention %q, %q, %q score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %x = memref.alloc() : memref<2xf32>
    kiln.yield %s : f32
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @attention_score_mod_tensor_value(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'kiln.attention' op score_mod may compute only scalars, got 'tensor.from_elements' giving 'tensor<2xf32>'}}
  %0 = kiln.attention %q, %q, %q score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %t = tensor.from_elements %s, %s : tensor<2xf32>
    kiln.yield %s : f32
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

func.func @gather_cache_rank(%c: tensor<64x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x2x48x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op operand 'cache' must have rank 4 [num_pages, page_size, kv_heads, head_dim], got 'tensor<64x2x8xf32>'}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<64x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x2x48x8xf32>
  return %0 : tensor<2x2x48x8xf32>
}

// -----

func.func @gather_no_pages(%c: tensor<0x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x2x48x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op 'cache' has no pages (dimension 0 is 0)}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<0x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x2x48x8xf32>
  return %0 : tensor<2x2x48x8xf32>
}

// -----

func.func @gather_page_size(%c: tensor<4x8x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x2x24x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op page size of 'cache' (dimension 1: 8) must be in [16, 256]}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<4x8x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x2x24x8xf32>
  return %0 : tensor<2x2x24x8xf32>
}

// -----

func.func @gather_no_heads(%c: tensor<4x16x0x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x0x48x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op head count of 'cache' (dimension 2) must be positive}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<4x16x0x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x0x48x8xf32>
  return %0 : tensor<2x0x48x8xf32>
}

// -----

func.func @gather_no_head_dim(%c: tensor<4x16x2x0xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x2x48x0xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op head dim of 'cache' (dimension 3) must be positive}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<4x16x2x0xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x2x48x0xf32>
  return %0 : tensor<2x2x48x0xf32>
}

// -----

func.func @gather_table_rank(%c: tensor<4x16x2x8xf32>, %t: tensor<6xi32>, %l: tensor<6xi32>) -> tensor<6x2x96x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op operand 'block_table' must have rank 2 [batch, max_pages], got 'tensor<6xi32>'}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<4x16x2x8xf32>, tensor<6xi32>, tensor<6xi32> -> tensor<6x2x96x8xf32>
  return %0 : tensor<6x2x96x8xf32>
}

// -----

func.func @gather_lens_batch(%c: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<3xi32>) -> tensor<2x2x48x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op batch size of 'seq_lens' (dimension 0: 3) differs from the batch (2)}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<3xi32> -> tensor<2x2x48x8xf32>
  return %0 : tensor<2x2x48x8xf32>
}

// -----

func.func @gather_result(%c: tensor<4x16x2x8xf32>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x2x32x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op result type 'tensor<2x2x32x8xf32>' differs from 'tensor<2x2x48x8xf32>' ([batch, kv_heads, max_pages * page_size, head_dim] of the cache's element type)}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<4x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x2x32x8xf32>
  return %0 : tensor<2x2x32x8xf32>
}

// -----

func.func @gather_result_type(%c: tensor<4x16x2x8xbf16>, %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x2x48x8xf32> {
  // expected-error @+1 {{'kiln.gather_pages' op result type 'tensor<2x2x48x8xf32>' differs from 'tensor<2x2x48x8xbf16>' ([batch, kv_heads, max_pages * page_size, head_dim] of the cache's element type)}}
  %0 = kiln.gather_pages %c, %t, %l : tensor<4x16x2x8xbf16>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x2x48x8xf32>
  return %0 : tensor<2x2x48x8xf32>
}

// -----

func.func @matmul_k_chunk_zero(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> tensor<1x4x6xf32> {
  // expected-error @+1 {{'kiln.matmul' op k_chunk must be positive, got 0}}
  %p = kiln.matmul %x, %w {k_chunk = 0 : i64} : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<1x4x6xf32>
  return %p : tensor<1x4x6xf32>
}

// -----

func.func @matmul_k_chunk_with_epilogue(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'kiln.matmul' op with k_chunk stores [chunks, ..., M, N] f32 partial products; an epilogue belongs to the kiln.sum_splits}}
  %p = kiln.matmul %x, %w epilogue() {
  ^bb0(%acc: f32):
    kiln.yield %acc : f32
  } {k_chunk = 4 : i64} : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<2x4x6xf32>
  return %p : tensor<2x4x6xf32>
}

// -----

func.func @matmul_k_chunk_result_type(%x: tensor<4x8xbf16>, %w: tensor<8x6xbf16>) -> tensor<3x4x6xf32> {
  // expected-error @+1 {{'kiln.matmul' op result type 'tensor<3x4x6xf32>' does not match the inferred type 'tensor<2x4x6xf32>'}}
  %p = kiln.matmul %x, %w {k_chunk = 4 : i64} : tensor<4x8xbf16>, tensor<8x6xbf16> -> tensor<3x4x6xf32>
  return %p : tensor<3x4x6xf32>
}

// -----

func.func @sum_splits_no_chunk(%p: tensor<0x4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'kiln.sum_splits' op operand 'parts' must have a leading chunk dimension of at least one chunk, got 'tensor<0x4x6xf32>'}}
  %y = kiln.sum_splits %p : tensor<0x4x6xf32> -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

func.func @sum_splits_result_shape(%p: tensor<2x4x6xf32>) -> tensor<4x7xf32> {
  // expected-error @+1 {{'kiln.sum_splits' op result shape [4, 7] must be that of one chunk of 'parts', [4, 6]}}
  %y = kiln.sum_splits %p : tensor<2x4x6xf32> -> tensor<4x7xf32>
  return %y : tensor<4x7xf32>
}

// -----

func.func @sum_splits_epilogue_operand(%p: tensor<2x4x6xf32>, %b: tensor<5xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'kiln.sum_splits' op epilogue operand #0 of shape [5] does not broadcast to the result shape [4, 6]}}
  %y = kiln.sum_splits %p epilogue(%b : tensor<5xf32>) {
  ^bb0(%acc: f32, %bias: f32):
    %s = arith.addf %acc, %bias : f32
    kiln.yield %s : f32
  } : tensor<2x4x6xf32> -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

func.func @sum_splits_epilogue_arguments(%p: tensor<2x4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'kiln.sum_splits' op epilogue takes 2 block arguments but needs the accumulator plus one per epilogue operand (1)}}
  %y = kiln.sum_splits %p epilogue() {
  ^bb0(%acc: f32, %extra: f32):
    kiln.yield %acc : f32
  } : tensor<2x4x6xf32> -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

func.func @elementwise_input_shape(%x: tensor<4x6xbf16>, %b: tensor<5xbf16>) -> tensor<4x6xbf16> {
  // expected-error @+1 {{'kiln.elementwise' op input #1 of shape [5] does not broadcast to the result shape [4, 6]}}
  %y = kiln.elementwise %x, %b : (tensor<4x6xbf16>, tensor<5xbf16>) -> tensor<4x6xbf16> {
  ^bb0(%xs: f32, %bs: f32):
    %s = arith.addf %xs, %bs : f32
    kiln.yield %s : f32
  }
  return %y : tensor<4x6xbf16>
}

// -----

func.func @elementwise_arguments(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'kiln.elementwise' op body takes 2 block arguments but has 1 inputs}}
  %y = kiln.elementwise %x : (tensor<4x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%xs: f32, %extra: f32):
    kiln.yield %xs : f32
  }
  return %y : tensor<4x6xf32>
}

// -----

// A bf16 input reaches the body widened to f32.
func.func @elementwise_argument_type(%x: tensor<4x6xbf16>) -> tensor<4x6xbf16> {
  // expected-error @+1 {{'kiln.elementwise' op body block argument #0 must be 'f32' (the compute type of input #0), got 'bf16'}}
  %y = kiln.elementwise %x : (tensor<4x6xbf16>) -> tensor<4x6xbf16> {
  ^bb0(%xs: bf16):
    %w = arith.extf %xs : bf16 to f32
    kiln.yield %w : f32
  }
  return %y : tensor<4x6xbf16>
}

// -----

func.func @elementwise_yield_type(%i: tensor<4x6xi32>) -> tensor<4x6xi32> {
  // expected-error @+1 {{'kiln.elementwise' op body must end in kiln.yield of one 'i32' value (the compute type of the result)}}
  %y = kiln.elementwise %i : (tensor<4x6xi32>) -> tensor<4x6xi32> {
  ^bb0(%is: i32):
    %f = arith.sitofp %is : i32 to f32
    kiln.yield %f : f32
  }
  return %y : tensor<4x6xi32>
}

// -----

func.func @elementwise_memory_effect(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.elementwise' op body may hold only arith and math ops without memory effects or regions, got 'memref.alloc'}}
  %y = kiln.elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%xs: f32):
    %m = memref.alloc() : memref<4xf32>
    kiln.yield %xs : f32
  }
  return %y : tensor<4xf32>
}

// -----

func.func @elementwise_tensor_in_body(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.elementwise' op body may compute only scalars, got 'arith.constant' giving 'tensor<2xf32>'}}
  %y = kiln.elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%xs: f32):
    %t = arith.constant dense<1.0> : tensor<2xf32>
    kiln.yield %xs : f32
  }
  return %y : tensor<4xf32>
}

// -----

// Only arith and math: a GPU thread index has no value per element.
func.func @elementwise_other_dialect(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kiln.elementwise' op body may hold only arith and math ops without memory effects or regions, got 'gpu.thread_id'}}
  %y = kiln.elementwise %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%xs: f32):
    %t = gpu.thread_id x
    kiln.yield %xs : f32
  }
  return %y : tensor<4xf32>
}
