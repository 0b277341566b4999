// RUN: kiln-opt %s -kiln-fold-matmul-batch -split-input-file | FileCheck %s

// kiln-fold-matmul-batch runs a batched lhs against a 2-D weight as one GEMM over all of its rows, between
// reshapes, keeping the epilogue; it leaves batched weights and batch-broadcasting epilogue operands alone.

// CHECK-LABEL: func.func @decode_projection
// CHECK-NEXT: %[[X:.*]] = kiln.reshape %arg0 : tensor<32x1x64xbf16> -> tensor<32x64xbf16>
// CHECK-NEXT: %[[Y:.*]] = kiln.matmul %[[X]], %arg1 : tensor<32x64xbf16>, tensor<64x48xbf16> -> tensor<32x48xbf16>
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[Y]] : tensor<32x48xbf16> -> tensor<32x1x48xbf16>
// CHECK-NEXT: return %[[R]]
func.func @decode_projection(%x: tensor<32x1x64xbf16>, %w: tensor<64x48xbf16>) -> tensor<32x1x48xbf16> {
  %y = kiln.matmul %x, %w : tensor<32x1x64xbf16>, tensor<64x48xbf16> -> tensor<32x1x48xbf16>
  return %y : tensor<32x1x48xbf16>
}

// -----

// The epilogue stays; a full-shape residual becomes a [rows, N] view, a bias is kept as it is.
// CHECK-LABEL: func.func @epilogue_operands
// CHECK-DAG: %[[X:.*]] = kiln.reshape %arg0 : tensor<2x3x8xf32> -> tensor<6x8xf32>
// CHECK-DAG: %[[RES:.*]] = kiln.reshape %arg3 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[Y:.*]] = kiln.matmul %[[X]], %arg1 epilogue(%arg2, %[[RES]] : tensor<4xf32>, tensor<6x4xf32>)
// CHECK: arith.addf
// CHECK: } {kiln.config = #kiln.config<tile = [32, 32, 32], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<6x8xf32>, tensor<8x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: kiln.reshape %[[Y]] : tensor<6x4xf32> -> tensor<2x3x4xf32>
func.func @epilogue_operands(%x: tensor<2x3x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>, %r: tensor<2x3x4xf32>)
    -> tensor<2x3x4xf32> {
  %y = kiln.matmul %x, %w epilogue(%b, %r : tensor<4xf32>, tensor<2x3x4xf32>) {
  ^bb0(%acc: f32, %bias: f32, %res: f32):
    %s = arith.addf %acc, %bias : f32
    %t = arith.addf %s, %res : f32
    kiln.yield %t : f32
  } {kiln.config = #kiln.config<tile = [32, 32, 32], warps = 4, stages = 2, lowering = "mma_sync">}
    : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// A batched weight: a real batched matmul, left alone.
// CHECK-LABEL: func.func @batched_rhs
// CHECK-NOT: kiln.reshape
// CHECK: kiln.matmul %arg0, %arg1 : tensor<2x3x8xf32>, tensor<2x8x4xf32>
func.func @batched_rhs(%x: tensor<2x3x8xf32>, %w: tensor<2x8x4xf32>) -> tensor<2x3x4xf32> {
  %y = kiln.matmul %x, %w : tensor<2x3x8xf32>, tensor<2x8x4xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// An epilogue operand that broadcasts over the batch ([3, 4] against [2, 3, 4]): left alone.
// CHECK-LABEL: func.func @batch_broadcast_operand
// CHECK-NOT: kiln.reshape
func.func @batch_broadcast_operand(%x: tensor<2x3x8xf32>, %w: tensor<8x4xf32>, %r: tensor<3x4xf32>)
    -> tensor<2x3x4xf32> {
  %y = kiln.matmul %x, %w epilogue(%r : tensor<3x4xf32>) {
  ^bb0(%acc: f32, %res: f32):
    %t = arith.addf %acc, %res : f32
    kiln.yield %t : f32
  } : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// K = 0: the rows are the product of the leading dims (the element count over K would divide by zero); the
// folded matmul is an empty sum per output, as numpy's.
// CHECK-LABEL: func.func @empty_contraction
// CHECK-NEXT: %[[X:.*]] = kiln.reshape %arg0 : tensor<2x3x0xf32> -> tensor<6x0xf32>
// CHECK-NEXT: %[[Y:.*]] = kiln.matmul %[[X]], %arg1 : tensor<6x0xf32>, tensor<0x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %[[Y]] : tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @empty_contraction(%x: tensor<2x3x0xf32>, %w: tensor<0x4xf32>) -> tensor<2x3x4xf32> {
  %y = kiln.matmul %x, %w : tensor<2x3x0xf32>, tensor<0x4xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// The folded GEMM keeps the matmul's fp32_precision.
// CHECK-LABEL: func.func @keeps_precision
// CHECK: kiln.matmul {{.*}} {fp32_precision = "ieee"} : tensor<6x8xf32>, tensor<8x4xf32> -> tensor<6x4xf32>
func.func @keeps_precision(%x: tensor<2x3x8xf32>, %w: tensor<8x4xf32>) -> tensor<2x3x4xf32> {
  %y = kiln.matmul %x, %w {fp32_precision = "ieee"} : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
