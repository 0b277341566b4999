// RUN: kiln-opt %s -canonicalize -split-input-file | FileCheck %s

//===----------------------------------------------------------------------===//
// kiln.constant
//===----------------------------------------------------------------------===//

// Identical constants are uniqued and unused ones disappear.
// CHECK-LABEL: func.func @constant_dedup
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]], %[[C]]
func.func @constant_dedup() -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %unused = kiln.constant dense<3.0> : tensor<4xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}

// -----

// Constants of the same values but other types stay apart.
// CHECK-LABEL: func.func @constant_distinct_types
// CHECK-DAG: kiln.constant dense<1.000000e+00> : tensor<2xf32>
// CHECK-DAG: kiln.constant dense<1.000000e+00> : tensor<2xbf16>
// CHECK: return
func.func @constant_distinct_types() -> (tensor<2xf32>, tensor<2xbf16>) {
  %0 = kiln.constant dense<1.0> : tensor<2xf32>
  %1 = kiln.constant dense<1.0> : tensor<2xbf16>
  return %0, %1 : tensor<2xf32>, tensor<2xbf16>
}

//===----------------------------------------------------------------------===//
// kiln.mul, kiln.div
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @mul_by_one_rhs
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>)
// CHECK-NOT: kiln.mul
// CHECK: return %[[X]]
func.func @mul_by_one_rhs(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = kiln.constant dense<1.0> : tensor<4x8xf32>
  %0 = kiln.mul %x, %one : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @mul_by_one_lhs
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xbf16>)
// CHECK-NOT: kiln.mul
// CHECK-NOT: kiln.constant
// CHECK: return %[[X]]
func.func @mul_by_one_lhs(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %one = kiln.constant dense<1.0> : tensor<4x8xbf16>
  %0 = kiln.mul %one, %x : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// A scalar 1 that broadcasts into the other operand's shape still leaves it unchanged.
// CHECK-LABEL: func.func @mul_by_scalar_one
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x512xf16>)
// CHECK-NOT: kiln.mul
// CHECK: return %[[X]]
func.func @mul_by_scalar_one(%x: tensor<2x77x512xf16>) -> tensor<2x77x512xf16> {
  %one = kiln.constant dense<1.0> : tensor<f16>
  %0 = kiln.mul %one, %x : tensor<f16>, tensor<2x77x512xf16> -> tensor<2x77x512xf16>
  return %0 : tensor<2x77x512xf16>
}

// -----

// CHECK-LABEL: func.func @mul_by_two
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK: %[[TWO:.*]] = kiln.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK: %[[R:.*]] = kiln.mul %[[X]], %[[TWO]] : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK: return %[[R]]
func.func @mul_by_two(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = kiln.constant dense<2.0> : tensor<4xf32>
  %0 = kiln.mul %x, %two : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A non-splat constant is not folded even where one element is 1.
// CHECK-LABEL: func.func @mul_by_non_splat
// CHECK: %[[R:.*]] = kiln.mul
// CHECK: return %[[R]]
func.func @mul_by_non_splat(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = kiln.mul %x, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Multiplying by 1 must not fold when the 1 broadcasts the other operand to a larger shape: %x is not the result.
// CHECK-LABEL: func.func @mul_by_one_broadcasting
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK: %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<2x4xf32>
// CHECK: %[[R:.*]] = kiln.mul %[[X]], %[[ONE]] : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK: return %[[R]]
func.func @mul_by_one_broadcasting(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  %one = kiln.constant dense<1.0> : tensor<2x4xf32>
  %0 = kiln.mul %x, %one : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @div_by_one
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>)
// CHECK-NOT: kiln.div
// CHECK: return %[[X]]
func.func @div_by_one(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = kiln.constant dense<1.0> : tensor<f32>
  %0 = kiln.div %x, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// 1 / x is a reciprocal, not x.
// CHECK-LABEL: func.func @one_div_x
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK: %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK: %[[R:.*]] = kiln.div %[[ONE]], %[[X]]
// CHECK: return %[[R]]
func.func @one_div_x(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = kiln.constant dense<1.0> : tensor<4xf32>
  %0 = kiln.div %one, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @div_by_one_broadcasting
// CHECK: %[[R:.*]] = kiln.div
// CHECK: return %[[R]]
func.func @div_by_one_broadcasting(%x: tensor<8xf32>) -> tensor<3x8xf32> {
  %one = kiln.constant dense<1.0> : tensor<3x1xf32>
  %0 = kiln.div %x, %one : tensor<8xf32>, tensor<3x1xf32> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

//===----------------------------------------------------------------------===//
// kiln.neg
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @neg_neg
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NOT: kiln.neg
// CHECK: return %[[X]]
func.func @neg_neg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.neg %x : tensor<4xf32>
  %1 = kiln.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @neg_neg_neg
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[R:.*]] = kiln.neg %[[X]] : tensor<4xf32>
// CHECK-NOT: kiln.neg
// CHECK: return %[[R]]
func.func @neg_neg_neg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.neg %x : tensor<4xf32>
  %1 = kiln.neg %0 : tensor<4xf32>
  %2 = kiln.neg %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

//===----------------------------------------------------------------------===//
// kiln.cast
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @cast_same_type
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xi64>)
// CHECK-NOT: kiln.cast
// CHECK: return %[[X]]
func.func @cast_same_type(%x: tensor<4xi64>) -> tensor<4xi64> {
  %0 = kiln.cast %x : tensor<4xi64> to tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Widening f16 to f32 and back is exact.
// CHECK-LABEL: func.func @cast_f16_f32_f16
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf16>)
// CHECK-NOT: kiln.cast
// CHECK: return %[[X]]
func.func @cast_f16_f32_f16(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = kiln.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// CHECK-LABEL: func.func @cast_bf16_f32_bf16
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x3xbf16>)
// CHECK-NOT: kiln.cast
// CHECK: return %[[X]]
func.func @cast_bf16_f32_bf16(%x: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %0 = kiln.cast %x : tensor<2x3xbf16> to tensor<2x3xf32>
  %1 = kiln.cast %0 : tensor<2x3xf32> to tensor<2x3xbf16>
  return %1 : tensor<2x3xbf16>
}

// -----

// The widened value is still used: only the narrowing cast goes away.
// CHECK-LABEL: func.func @cast_round_trip_with_other_use
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf16>)
// CHECK-NEXT: %[[W:.*]] = kiln.cast %[[X]] : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT: return %[[X]], %[[W]]
func.func @cast_round_trip_with_other_use(%x: tensor<4xf16>) -> (tensor<4xf16>, tensor<4xf32>) {
  %0 = kiln.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %1, %0 : tensor<4xf16>, tensor<4xf32>
}

// -----

// Narrowing f32 to f16 loses bits: the round trip must stay.
// CHECK-LABEL: func.func @cast_f32_f16_f32
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[N:.*]] = kiln.cast %[[X]] : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[W:.*]] = kiln.cast %[[N]] : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT: return %[[W]]
func.func @cast_f32_f16_f32(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xf32> to tensor<4xf16>
  %1 = kiln.cast %0 : tensor<4xf16> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f32 to bf16 and back is not exact either.
// CHECK-LABEL: func.func @cast_f32_bf16_f32
// CHECK-COUNT-2: kiln.cast
// CHECK: return
func.func @cast_f32_bf16_f32(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = kiln.cast %0 : tensor<4xbf16> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f16 -> f32 -> bf16 does not end at the original type: both casts stay.
// CHECK-LABEL: func.func @cast_f16_f32_bf16
// CHECK: %[[W:.*]] = kiln.cast %{{.*}} : tensor<4xf16> to tensor<4xf32>
// CHECK: %[[N:.*]] = kiln.cast %[[W]] : tensor<4xf32> to tensor<4xbf16>
// CHECK: return %[[N]]
func.func @cast_f16_f32_bf16(%x: tensor<4xf16>) -> tensor<4xbf16> {
  %0 = kiln.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> to tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----

// i32 -> f32 -> i32 is not exact for large integers.
// CHECK-LABEL: func.func @cast_i32_f32_i32
// CHECK-COUNT-2: kiln.cast
// CHECK: return
func.func @cast_i32_f32_i32(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = kiln.cast %x : tensor<4xi32> to tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> to tensor<4xi32>
  return %1 : tensor<4xi32>
}

//===----------------------------------------------------------------------===//
// kiln.transpose
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x3x4xf32>)
// CHECK-NOT: kiln.transpose
// CHECK: return %[[X]]
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = kiln.transpose %x [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// A permutation that swaps two equal dimensions keeps the type but is not the identity.
// CHECK-LABEL: func.func @transpose_same_type_not_identity
// CHECK: %[[T:.*]] = kiln.transpose %{{.*}} [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK: return %[[T]]
func.func @transpose_same_type_not_identity(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = kiln.transpose %x [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// transpose([1, 0, 2]) of transpose([1, 2, 0]) is transpose([2, 1, 0]): result dimension i is input dimension
// inner[outer[i]].
// CHECK-LABEL: func.func @transpose_compose
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[X]] [2, 1, 0] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_compose(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %0 = kiln.transpose %x [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = kiln.transpose %0 [1, 0, 2] : tensor<3x4x2xf32> -> tensor<4x3x2xf32>
  return %1 : tensor<4x3x2xf32>
}

// -----

// The attention layout change [B, S, H, D] -> [B, H, S, D] followed by K^T.
// CHECK-LABEL: func.func @transpose_compose_rank4
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<1x77x8x64xf32>)
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[X]] [0, 2, 3, 1] : tensor<1x77x8x64xf32> -> tensor<1x8x64x77xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_compose_rank4(%x: tensor<1x77x8x64xf32>) -> tensor<1x8x64x77xf32> {
  %0 = kiln.transpose %x [0, 2, 1, 3] : tensor<1x77x8x64xf32> -> tensor<1x8x77x64xf32>
  %1 = kiln.transpose %0 [0, 1, 3, 2] : tensor<1x8x77x64xf32> -> tensor<1x8x64x77xf32>
  return %1 : tensor<1x8x64x77xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_cancel
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<3x5xf32>)
// CHECK-NOT: kiln.transpose
// CHECK: return %[[X]]
func.func @transpose_cancel(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %0 = kiln.transpose %x [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
  %1 = kiln.transpose %0 [1, 0] : tensor<5x3xf32> -> tensor<3x5xf32>
  return %1 : tensor<3x5xf32>
}

// -----

// [2, 0, 1] undoes [1, 2, 0].
// CHECK-LABEL: func.func @transpose_cancel_rank3
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x3x4xi64>)
// CHECK-NOT: kiln.transpose
// CHECK: return %[[X]]
func.func @transpose_cancel_rank3(%x: tensor<2x3x4xi64>) -> tensor<2x3x4xi64> {
  %0 = kiln.transpose %x [1, 2, 0] : tensor<2x3x4xi64> -> tensor<3x4x2xi64>
  %1 = kiln.transpose %0 [2, 0, 1] : tensor<3x4x2xi64> -> tensor<2x3x4xi64>
  return %1 : tensor<2x3x4xi64>
}

// -----

// The inner transpose has another use and stays; the outer one reads %x directly.
// CHECK-LABEL: func.func @transpose_compose_shared
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[X]] [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT: return %[[X]], %[[T]]
func.func @transpose_compose_shared(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>) {
  %0 = kiln.transpose %x [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = kiln.transpose %0 [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
  return %1, %0 : tensor<2x3xf32>, tensor<3x2xf32>
}

//===----------------------------------------------------------------------===//
// kiln.reshape
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @reshape_same_type
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>)
// CHECK-NOT: kiln.reshape
// CHECK: return %[[X]]
func.func @reshape_same_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_reshape
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x512xf32>)
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[X]] : tensor<2x77x512xf32> -> tensor<154x8x64xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_reshape(%x: tensor<2x77x512xf32>) -> tensor<154x8x64xf32> {
  %0 = kiln.reshape %x : tensor<2x77x512xf32> -> tensor<2x77x8x64xf32>
  %1 = kiln.reshape %0 : tensor<2x77x8x64xf32> -> tensor<154x8x64xf32>
  return %1 : tensor<154x8x64xf32>
}

// -----

// Split heads and merge them again: the chain collapses to nothing.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x512xf32>)
// CHECK-NOT: kiln.reshape
// CHECK: return %[[X]]
func.func @reshape_round_trip(%x: tensor<2x77x512xf32>) -> tensor<2x77x512xf32> {
  %0 = kiln.reshape %x : tensor<2x77x512xf32> -> tensor<2x77x8x64xf32>
  %1 = kiln.reshape %0 : tensor<2x77x8x64xf32> -> tensor<2x77x512xf32>
  return %1 : tensor<2x77x512xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_constant
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK-NOT: kiln.reshape
// CHECK-NEXT: return %[[C]]
func.func @reshape_constant() -> tensor<2x3xf32> {
  %c = kiln.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<6xf32>
  %0 = kiln.reshape %c : tensor<6xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_splat_constant
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<7> : tensor<2x1x3xi32>
// CHECK-NEXT: return %[[C]]
func.func @reshape_splat_constant() -> tensor<2x1x3xi32> {
  %c = kiln.constant dense<7> : tensor<6xi32>
  %0 = kiln.reshape %c : tensor<6xi32> -> tensor<2x1x3xi32>
  return %0 : tensor<2x1x3xi32>
}

//===----------------------------------------------------------------------===//
// kiln.broadcast
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @broadcast_same_type
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>)
// CHECK-NOT: kiln.broadcast
// CHECK: return %[[X]]
func.func @broadcast_same_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.broadcast %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_splat_constant
// CHECK-NEXT: %[[C:.*]] = kiln.constant dense<-1.000000e+00> : tensor<2x4x8xbf16>
// CHECK-NOT: kiln.broadcast
// CHECK-NEXT: return %[[C]]
func.func @broadcast_splat_constant() -> tensor<2x4x8xbf16> {
  %c = kiln.constant dense<-1.0> : tensor<8xbf16>
  %0 = kiln.broadcast %c : tensor<8xbf16> -> tensor<2x4x8xbf16>
  return %0 : tensor<2x4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @broadcast_non_splat_constant
// CHECK: %[[C:.*]] = kiln.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[B:.*]] = kiln.broadcast %[[C]] : tensor<2xf32> -> tensor<3x2xf32>
// CHECK: return %[[B]]
func.func @broadcast_non_splat_constant() -> tensor<3x2xf32> {
  %c = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = kiln.broadcast %c : tensor<2xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_not_constant
// CHECK: %[[B:.*]] = kiln.broadcast %{{.*}} : tensor<8xf32> -> tensor<4x8xf32>
// CHECK: return %[[B]]
func.func @broadcast_not_constant(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.broadcast %x : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// kiln.concat
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @concat_single_input
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<1x8x77x32xf32>)
// CHECK-NOT: kiln.concat
// CHECK: return %[[X]]
func.func @concat_single_input(%x: tensor<1x8x77x32xf32>) -> tensor<1x8x77x32xf32> {
  %0 = kiln.concat %x axis 3 : tensor<1x8x77x32xf32> -> tensor<1x8x77x32xf32>
  return %0 : tensor<1x8x77x32xf32>
}

// -----

// CHECK-LABEL: func.func @concat_two_inputs
// CHECK: %[[C:.*]] = kiln.concat %{{.*}}, %{{.*}} axis 0 : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>
// CHECK: return %[[C]]
func.func @concat_two_inputs(%x: tensor<4xf32>) -> tensor<8xf32> {
  %0 = kiln.concat %x, %x axis 0 : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// kiln.slice
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @slice_full
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>)
// CHECK-NOT: kiln.slice
// CHECK: return %[[X]]
func.func @slice_full(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.slice %x offsets [0, 0] strides [1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @slice_partial
// CHECK: %[[S:.*]] = kiln.slice %{{.*}} offsets [0, 0] strides [1, 1] : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK: return %[[S]]
func.func @slice_partial(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %0 = kiln.slice %x offsets [0, 0] strides [1, 1] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Same shape as a full slice but for the offset: the second half of %x.
// CHECK-LABEL: func.func @slice_offset
// CHECK: %[[S:.*]] = kiln.slice %{{.*}} offsets [4] strides [1] : tensor<8xf32> -> tensor<4xf32>
// CHECK: return %[[S]]
func.func @slice_offset(%x: tensor<8xf32>) -> tensor<4xf32> {
  %0 = kiln.slice %x offsets [4] strides [1] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @slice_strided
// CHECK: %[[S:.*]] = kiln.slice %{{.*}} offsets [0] strides [2] : tensor<8xf32> -> tensor<4xf32>
// CHECK: return %[[S]]
func.func @slice_strided(%x: tensor<8xf32>) -> tensor<4xf32> {
  %0 = kiln.slice %x offsets [0] strides [2] : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// kiln.dim does not fold to the static size, unlike tensor.dim: a GPU kernel's lengths stay symbolic.
// CHECK-LABEL: func.func @dim_stays
// CHECK-NOT: arith.constant
// CHECK: %[[D:.*]] = kiln.dim %{{.*}}[2] : tensor<1x2x300x64xbf16>
// CHECK: return %[[D]]
func.func @dim_stays(%x: tensor<1x2x300x64xbf16>) -> index {
  %0 = kiln.dim %x[2] : tensor<1x2x300x64xbf16>
  return %0 : index
}
