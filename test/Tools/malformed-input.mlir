// RUN: not kiln-opt %s -split-input-file -o /dev/null 2>&1 | FileCheck %s --implicit-check-not=error:

// kiln-opt must reject malformed input with a located diagnostic (file:line:col) and a non-zero exit, never crash:
// `not` without --crash fails the test if kiln-opt dies on a signal. --implicit-check-not=error: makes sure no
// chunk produces an error that is not listed here.

// CHECK: malformed-input.mlir:[[@LINE+2]]:8: error: custom op 'kiln.frobnicate' is unknown
func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.frobnicate %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:8: error: unregistered operation 'kiln.frobnicate' found in dialect ('kiln') that does not allow unknown operations
func.func @unknown_op_generic(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "kiln.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:29: error: custom op 'kiln.softmax' invalid kind of attribute specified
func.func @softmax_string_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.softmax %x axis "x" : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:33: error: floating point value not valid for specified type
func.func @softmax_float_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.softmax %x axis 1.5 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:33: error: custom op 'kiln.gelu' expected string or keyword containing one of the following enum values for attribute 'approximate' [none, tanh]
func.func @gelu_unknown_approximation(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.gelu %x approximate(fast) : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:20: error: custom op 'kiln.reduce' expected string or keyword containing one of the following enum values for attribute 'kind' [sum, mean, max, min]
func.func @reduce_unknown_kind(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = kiln.reduce prod %x axes [0] : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:8: error: 'kiln.reduce' op attribute 'kind' failed to satisfy constraint: reduction combiner
func.func @reduce_unknown_kind_generic(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = "kiln.reduce"(%x) {kind = 9 : i32, axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:31: error: expected '['
func.func @reduce_axes_without_brackets(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = kiln.reduce sum %x axes 1 : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:31: error: expected ']'
func.func @transpose_unclosed_permutation(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %0 = kiln.transpose %x [1, 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// A misspelled keyword: `causual` is neither `mask`, `causal` nor the start of the type list.
// CHECK: malformed-input.mlir:[[@LINE+2]]:33: error: expected ':'
func.func @attention_misspelled_causal(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %0 = kiln.attention %q, %q, %q causual : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %0 : tensor<1x2x4x8xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:17: error: use of undeclared SSA value name
func.func @undeclared_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.exp %y : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:19: error: expected ':'
func.func @missing_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.exp %x
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:17: error: use of value '%x' expects different type than prior uses: 'tensor<8xf32>' vs 'tensor<4xf32>'
func.func @wrong_operand_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.exp %x : tensor<8xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:22: error: inferred shape of elements literal ([2]) does not match type ([3])
func.func @constant_literal_shape() -> tensor<3xf32> {
  %0 = kiln.constant dense<[1.0, 2.0]> : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:22: error: custom op 'kiln.constant' invalid kind of attribute specified
func.func @constant_not_elements() -> f32 {
  %0 = kiln.constant 1.0 : f32
  return %0 : f32
}

// -----

// CHECK: malformed-input.mlir:[[@LINE+2]]:8: error: 'kiln.add' op expected 2 operands, but found 1
func.func @generic_operand_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "kiln.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A verifier error is reported the same way and also fails the run.
// CHECK: malformed-input.mlir:[[@LINE+2]]:8: error: 'kiln.matmul' op contraction sizes differ: lhs dimension 1 is 8 but rhs dimension 0 is 4
func.func @verifier_error(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %0 = kiln.matmul %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
