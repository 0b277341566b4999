// RUN: kiln-opt %s -kiln-split-sliced-matmuls -split-input-file | FileCheck %s

// kiln-split-sliced-matmuls runs a fused projection whose output is only sliced apart by columns as one GEMM per
// slice of its [N, K] weight's rows (and of the bias's columns), contiguous runs that the run plan views.

// GPT-2's c_attn: [B*S, K] x [3H, K]^T + bias, viewed as [B, S, 3H] and split into q, k and v.
// CHECK-LABEL: func.func @gpt2_qkv
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<10x64xbf16>, %[[W:[a-z0-9]+]]: tensor<192x64xbf16>, %[[B:[a-z0-9]+]]: tensor<192xbf16>)
// CHECK: %[[WQ:.*]] = kiln.slice %[[W]] offsets [0, 0] strides [1, 1] : tensor<192x64xbf16> -> tensor<64x64xbf16>
// CHECK: %[[Q:.*]] = kiln.matmul %[[X]], %[[WQ]] transpose_rhs : tensor<10x64xbf16>, tensor<64x64xbf16> -> tensor<10x64xbf16>
// CHECK: %[[BQ:.*]] = kiln.slice %[[B]] offsets [0] strides [1] : tensor<192xbf16> -> tensor<64xbf16>
// CHECK: %[[QB:.*]] = kiln.add %[[Q]], %[[BQ]] : tensor<10x64xbf16>, tensor<64xbf16> -> tensor<10x64xbf16>
// CHECK: kiln.reshape %[[QB]] : tensor<10x64xbf16> -> tensor<2x5x64xbf16>
// CHECK: %[[WK:.*]] = kiln.slice %[[W]] offsets [64, 0] strides [1, 1] : tensor<192x64xbf16> -> tensor<64x64xbf16>
// CHECK: kiln.matmul %[[X]], %[[WK]] transpose_rhs
// CHECK: kiln.slice %[[B]] offsets [64] strides [1]
// CHECK: %[[WV:.*]] = kiln.slice %[[W]] offsets [128, 0] strides [1, 1] : tensor<192x64xbf16> -> tensor<64x64xbf16>
// CHECK: kiln.matmul %[[X]], %[[WV]] transpose_rhs
// CHECK-NOT: tensor<10x192xbf16>
func.func @gpt2_qkv(%x: tensor<10x64xbf16>, %w: tensor<192x64xbf16>, %b: tensor<192xbf16>)
    -> (tensor<2x5x64xbf16>, tensor<2x5x64xbf16>, tensor<2x5x64xbf16>) {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<10x64xbf16>, tensor<192x64xbf16> -> tensor<10x192xbf16>
  %yb = kiln.add %y, %b : tensor<10x192xbf16>, tensor<192xbf16> -> tensor<10x192xbf16>
  %y3 = kiln.reshape %yb : tensor<10x192xbf16> -> tensor<2x5x192xbf16>
  %q = kiln.slice %y3 offsets [0, 0, 0] strides [1, 1, 1] : tensor<2x5x192xbf16> -> tensor<2x5x64xbf16>
  %k = kiln.slice %y3 offsets [0, 0, 64] strides [1, 1, 1] : tensor<2x5x192xbf16> -> tensor<2x5x64xbf16>
  %v = kiln.slice %y3 offsets [0, 0, 128] strides [1, 1, 1] : tensor<2x5x192xbf16> -> tensor<2x5x64xbf16>
  return %q, %k, %v : tensor<2x5x64xbf16>, tensor<2x5x64xbf16>, tensor<2x5x64xbf16>
}

// -----

// gpt-fast's w13 (no bias), split into unequal parts read straight from the product.
// CHECK-LABEL: func.func @w13
// CHECK: kiln.slice %arg1 offsets [0, 0] strides [1, 1] : tensor<96x32xf32> -> tensor<64x32xf32>
// CHECK: kiln.matmul %arg0, %{{.*}} transpose_rhs : tensor<4x32xf32>, tensor<64x32xf32> -> tensor<4x64xf32>
// CHECK: kiln.slice %arg1 offsets [64, 0] strides [1, 1] : tensor<96x32xf32> -> tensor<32x32xf32>
// CHECK: kiln.matmul %arg0, %{{.*}} transpose_rhs : tensor<4x32xf32>, tensor<32x32xf32> -> tensor<4x32xf32>
// CHECK-NOT: tensor<4x96xf32>
func.func @w13(%x: tensor<4x32xf32>, %w: tensor<96x32xf32>) -> (tensor<4x64xf32>, tensor<4x32xf32>) {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<4x32xf32>, tensor<96x32xf32> -> tensor<4x96xf32>
  %g1 = kiln.slice %y offsets [0, 0] strides [1, 1] : tensor<4x96xf32> -> tensor<4x64xf32>
  %g3 = kiln.slice %y offsets [0, 64] strides [1, 1] : tensor<4x96xf32> -> tensor<4x32xf32>
  return %g1, %g3 : tensor<4x64xf32>, tensor<4x32xf32>
}

// -----

// Left alone: a product read whole as well as sliced; a [K, N] weight that is no constant (its columns are no
// contiguous run); a part whose weight rows start off a 16-byte line (row 3 of 4 bf16: byte 24).
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-3: kiln.matmul
// CHECK-NOT: kiln.matmul
func.func @left_alone(%x: tensor<4x32xf32>, %w: tensor<96x32xf32>, %wt: tensor<32x96xf32>, %h: tensor<4x4xbf16>,
                      %wh: tensor<8x4xbf16>) -> (tensor<4x96xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x5xbf16>) {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<4x32xf32>, tensor<96x32xf32> -> tensor<4x96xf32>
  %p = kiln.slice %y offsets [0, 0] strides [1, 1] : tensor<4x96xf32> -> tensor<4x32xf32>
  %z = kiln.matmul %x, %wt : tensor<4x32xf32>, tensor<32x96xf32> -> tensor<4x96xf32>
  %r = kiln.slice %z offsets [0, 32] strides [1, 1] : tensor<4x96xf32> -> tensor<4x32xf32>
  %u = kiln.matmul %h, %wh transpose_rhs : tensor<4x4xbf16>, tensor<8x4xbf16> -> tensor<4x8xbf16>
  %s = kiln.slice %u offsets [0, 3] strides [1, 1] : tensor<4x8xbf16> -> tensor<4x5xbf16>
  return %y, %p, %r, %s : tensor<4x96xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x5xbf16>
}

// -----

// A constant [K, N] weight and bias (an ONNX MatMul's initializers) are cut into constants of their columns.
// CHECK-LABEL: func.func @constant_weight
// CHECK: %[[W0:.*]] = kiln.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [5.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
// CHECK: kiln.matmul %arg0, %[[W0]] : tensor<3x2xf32>, tensor<2x2xf32> -> tensor<3x2xf32>
// CHECK: %[[W1:.*]] = kiln.constant dense<{{\[}}[3.000000e+00, 4.000000e+00], [7.000000e+00, 8.000000e+00]]> : tensor<2x2xf32>
// CHECK: %[[P1:.*]] = kiln.matmul %arg0, %[[W1]] : tensor<3x2xf32>, tensor<2x2xf32> -> tensor<3x2xf32>
// CHECK: %[[B1:.*]] = kiln.constant dense<[3.000000e-01, 4.000000e-01]> : tensor<2xf32>
// CHECK: kiln.add %[[P1]], %[[B1]]
func.func @constant_weight(%x: tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %w = kiln.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %b = kiln.constant dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %y = kiln.matmul %x, %w : tensor<3x2xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
  %yb = kiln.add %b, %y : tensor<4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %lo = kiln.slice %yb offsets [0, 0] strides [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  %hi = kiln.slice %yb offsets [0, 2] strides [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  return %lo, %hi : tensor<3x2xf32>, tensor<3x2xf32>
}
