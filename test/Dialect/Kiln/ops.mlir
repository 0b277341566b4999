// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt --mlir-print-op-generic | kiln-opt | FileCheck %s

// Round-trip tests for every op of the kiln dialect: custom form -> custom form, and through the generic form.

//===----------------------------------------------------------------------===//
// kiln.constant
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @constant
func.func @constant() -> (tensor<2x3xf32>, tensor<2x2xf32>, tensor<f32>, tensor<4xbf16>, tensor<3xi64>,
                          tensor<2xi32>, tensor<4xi1>, tensor<2xf16>, tensor<2xf32>) {
  // CHECK: %[[SPLAT:.*]] = kiln.constant dense<1.000000e+00> : tensor<2x3xf32>
  %splat = kiln.constant dense<1.0> : tensor<2x3xf32>
  // CHECK: %[[DENSE:.*]] = kiln.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  %dense = kiln.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  // CHECK: %[[EPS:.*]] = kiln.constant dense<9.99999974E-6> : tensor<f32>
  %eps = kiln.constant dense<1.0e-05> : tensor<f32>
  // CHECK: %[[BF16:.*]] = kiln.constant dense<[1.000000e+00, -2.000000e+00, 5.000000e-01, 0.000000e+00]> : tensor<4xbf16>
  %bf16 = kiln.constant dense<[1.0, -2.0, 0.5, 0.0]> : tensor<4xbf16>
  // CHECK: %[[IDS:.*]] = kiln.constant dense<[0, 5, 7]> : tensor<3xi64>
  %ids = kiln.constant dense<[0, 5, 7]> : tensor<3xi64>
  // CHECK: %[[I32:.*]] = kiln.constant dense<-3> : tensor<2xi32>
  %i32 = kiln.constant dense<-3> : tensor<2xi32>
  // CHECK: %[[MASK:.*]] = kiln.constant dense<[true, false, false, true]> : tensor<4xi1>
  %mask = kiln.constant dense<[true, false, false, true]> : tensor<4xi1>
  // CHECK: %[[F16:.*]] = kiln.constant dense<[1.500000e+00, 2.500000e+00]> : tensor<2xf16>
  %f16 = kiln.constant dense<[1.5, 2.5]> : tensor<2xf16>
  // CHECK: %[[W:.*]] = kiln.constant dense_resource<blk0_w> : tensor<2xf32>
  %w = kiln.constant dense_resource<blk0_w> : tensor<2xf32>
  // CHECK: return %[[SPLAT]], %[[DENSE]], %[[EPS]], %[[BF16]], %[[IDS]], %[[I32]], %[[MASK]], %[[F16]], %[[W]]
  return %splat, %dense, %eps, %bf16, %ids, %i32, %mask, %f16, %w
      : tensor<2x3xf32>, tensor<2x2xf32>, tensor<f32>, tensor<4xbf16>, tensor<3xi64>, tensor<2xi32>, tensor<4xi1>,
        tensor<2xf16>, tensor<2xf32>
}

//===----------------------------------------------------------------------===//
// kiln.matmul
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<4x8xf32>, %[[B:[a-z0-9_]+]]: tensor<8x16xf32>, %[[AT:[a-z0-9_]+]]: tensor<8x4xf32>, %[[BT:[a-z0-9_]+]]: tensor<16x8xf32>,
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<2x77x512xbf16>, %[[W:[a-z0-9_]+]]: tensor<1024x512xbf16>,
// CHECK-SAME: %[[L4:[a-z0-9_]+]]: tensor<2x1x4x8xf32>, %[[R3:[a-z0-9_]+]]: tensor<3x8x16xf32>,
// CHECK-SAME: %[[H0:[a-z0-9_]+]]: tensor<4x8xf16>, %[[H1:[a-z0-9_]+]]: tensor<8x16xf16>)
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %at: tensor<8x4xf32>, %bt: tensor<16x8xf32>,
                  %x: tensor<2x77x512xbf16>, %w: tensor<1024x512xbf16>,
                  %l4: tensor<2x1x4x8xf32>, %r3: tensor<3x8x16xf32>,
                  %h0: tensor<4x8xf16>, %h1: tensor<8x16xf16>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x77x1024xbf16>,
        tensor<2x3x4x16xf32>, tensor<4x16xf32>, tensor<4x16xf16>) {
  // CHECK: %[[M0:.*]] = kiln.matmul %[[A]], %[[B]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %0 = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: %[[M1:.*]] = kiln.matmul %[[AT]], %[[B]] transpose_lhs : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %1 = kiln.matmul %at, %b transpose_lhs : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: %[[M2:.*]] = kiln.matmul %[[A]], %[[BT]] transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %2 = kiln.matmul %a, %bt transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  // CHECK: %[[M3:.*]] = kiln.matmul %[[AT]], %[[BT]] transpose_lhs transpose_rhs : tensor<8x4xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %3 = kiln.matmul %at, %bt transpose_lhs transpose_rhs : tensor<8x4xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  // A rank-2 weight broadcasts against a rank-3 activation.
  // CHECK: %[[M4:.*]] = kiln.matmul %[[X]], %[[W]] transpose_rhs : tensor<2x77x512xbf16>, tensor<1024x512xbf16> -> tensor<2x77x1024xbf16>
  %4 = kiln.matmul %x, %w transpose_rhs : tensor<2x77x512xbf16>, tensor<1024x512xbf16> -> tensor<2x77x1024xbf16>
  // Batch dimensions [2, 1] and [3] broadcast to [2, 3].
  // CHECK: %[[M5:.*]] = kiln.matmul %[[L4]], %[[R3]] : tensor<2x1x4x8xf32>, tensor<3x8x16xf32> -> tensor<2x3x4x16xf32>
  %5 = kiln.matmul %l4, %r3 : tensor<2x1x4x8xf32>, tensor<3x8x16xf32> -> tensor<2x3x4x16xf32>
  // f16 x f16 accumulating into an f32 result.
  // CHECK: %[[M6:.*]] = kiln.matmul %[[H0]], %[[H1]] : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf32>
  %6 = kiln.matmul %h0, %h1 : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf32>
  // CHECK: %[[M7:.*]] = kiln.matmul %[[H0]], %[[H1]] : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
  %7 = kiln.matmul %h0, %h1 : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
  // CHECK: return %[[M0]], %[[M1]], %[[M2]], %[[M3]], %[[M4]], %[[M5]], %[[M6]], %[[M7]]
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>,
      tensor<2x77x1024xbf16>, tensor<2x3x4x16xf32>, tensor<4x16xf32>, tensor<4x16xf16>
}

//===----------------------------------------------------------------------===//
// kiln.attention
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @attention_mha
// CHECK-SAME: (%[[Q:[a-z0-9_]+]]: tensor<1x8x16x64xbf16>, %[[K:[a-z0-9_]+]]: tensor<1x8x16x64xbf16>, %[[V:[a-z0-9_]+]]: tensor<1x8x16x64xbf16>)
func.func @attention_mha(%q: tensor<1x8x16x64xbf16>, %k: tensor<1x8x16x64xbf16>, %v: tensor<1x8x16x64xbf16>)
    -> (tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>) {
  // CHECK: %[[O0:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] : tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16> -> tensor<1x8x16x64xbf16>
  %0 = kiln.attention %q, %k, %v : tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>
      -> tensor<1x8x16x64xbf16>
  // CHECK: %[[O1:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal : tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16> -> tensor<1x8x16x64xbf16>
  %1 = kiln.attention %q, %k, %v causal : tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>
      -> tensor<1x8x16x64xbf16>
  // CHECK: return %[[O0]], %[[O1]]
  return %0, %1 : tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>
}

// Grouped-query (32 q heads over 8 k/v heads) and multi-query (one k/v head) attention.
// CHECK-LABEL: func.func @attention_gqa_mqa
// CHECK-SAME: (%[[Q:[a-z0-9_]+]]: tensor<1x32x16x128xf16>, %[[K:[a-z0-9_]+]]: tensor<1x8x16x128xf16>, %[[V:[a-z0-9_]+]]: tensor<1x8x16x128xf16>,
// CHECK-SAME: %[[K1:[a-z0-9_]+]]: tensor<1x1x16x128xf16>, %[[V1:[a-z0-9_]+]]: tensor<1x1x16x128xf16>)
func.func @attention_gqa_mqa(%q: tensor<1x32x16x128xf16>, %k: tensor<1x8x16x128xf16>, %v: tensor<1x8x16x128xf16>,
                             %k1: tensor<1x1x16x128xf16>, %v1: tensor<1x1x16x128xf16>)
    -> (tensor<1x32x16x128xf16>, tensor<1x32x16x128xf16>) {
  // CHECK: %[[GQA:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal : tensor<1x32x16x128xf16>, tensor<1x8x16x128xf16>, tensor<1x8x16x128xf16> -> tensor<1x32x16x128xf16>
  %gqa = kiln.attention %q, %k, %v causal : tensor<1x32x16x128xf16>, tensor<1x8x16x128xf16>, tensor<1x8x16x128xf16>
      -> tensor<1x32x16x128xf16>
  // CHECK: %[[MQA:.*]] = kiln.attention %[[Q]], %[[K1]], %[[V1]] : tensor<1x32x16x128xf16>, tensor<1x1x16x128xf16>, tensor<1x1x16x128xf16> -> tensor<1x32x16x128xf16>
  %mqa = kiln.attention %q, %k1, %v1 : tensor<1x32x16x128xf16>, tensor<1x1x16x128xf16>, tensor<1x1x16x128xf16>
      -> tensor<1x32x16x128xf16>
  // CHECK: return %[[GQA]], %[[MQA]]
  return %gqa, %mqa : tensor<1x32x16x128xf16>, tensor<1x32x16x128xf16>
}

// Masks, an explicit scale, the log-sum-exp result, seq_q != seq_k and a value head dim != the q/k head dim.
// CHECK-LABEL: func.func @attention_mask_scale_lse
// CHECK-SAME: (%[[Q:[a-z0-9_]+]]: tensor<2x8x4x64xf32>, %[[K:[a-z0-9_]+]]: tensor<2x4x32x64xf32>, %[[V:[a-z0-9_]+]]: tensor<2x4x32x16xf32>,
// CHECK-SAME: %[[M4:[a-z0-9_]+]]: tensor<2x1x4x32xf32>, %[[M2:[a-z0-9_]+]]: tensor<4x32xf32>)
func.func @attention_mask_scale_lse(%q: tensor<2x8x4x64xf32>, %k: tensor<2x4x32x64xf32>, %v: tensor<2x4x32x16xf32>,
                                    %m4: tensor<2x1x4x32xf32>, %m2: tensor<4x32xf32>)
    -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4xf32>,
        tensor<2x8x4x16xf32>, tensor<2x8x4xf32>) {
  // CHECK: %[[A0:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask(%[[M4]] : tensor<2x1x4x32xf32>) : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>
  %0 = kiln.attention %q, %k, %v mask(%m4 : tensor<2x1x4x32xf32>)
      : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>
  // CHECK: %[[A1:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask(%[[M2]] : tensor<4x32xf32>) : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>
  %1 = kiln.attention %q, %k, %v mask(%m2 : tensor<4x32xf32>)
      : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>
  // Causal with seq_q (4) < seq_k (32): the mask is aligned bottom-right.
  // CHECK: %[[A2:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal {scale = 1.250000e-01 : f32} : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>
  %2 = kiln.attention %q, %k, %v causal {scale = 0.125 : f32}
      : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>
  // CHECK: %[[A3:.*]], %[[LSE3:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x8x4xf32>
  %3, %lse3 = kiln.attention %q, %k, %v
      : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x8x4xf32>
  // CHECK: %[[A4:.*]], %[[LSE4:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] mask(%[[M2]] : tensor<4x32xf32>) causal {scale = 5.000000e-01 : f32} : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x8x4xf32>
  %4, %lse4 = kiln.attention %q, %k, %v mask(%m2 : tensor<4x32xf32>) causal {scale = 0.5 : f32}
      : tensor<2x8x4x64xf32>, tensor<2x4x32x64xf32>, tensor<2x4x32x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x8x4xf32>
  // CHECK: return %[[A0]], %[[A1]], %[[A2]], %[[A3]], %[[LSE3]], %[[A4]], %[[LSE4]]
  return %0, %1, %2, %3, %lse3, %4, %lse4 : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>,
      tensor<2x8x4x16xf32>, tensor<2x8x4xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4xf32>
}

// Non-causal attention may have seq_q > seq_k; the lse of a bf16 attention is f32.
// CHECK-LABEL: func.func @attention_long_query
func.func @attention_long_query(%q: tensor<1x2x64x32xbf16>, %k: tensor<1x2x8x32xbf16>, %v: tensor<1x2x8x32xbf16>,
                                %m: tensor<1x2x1x8xbf16>)
    -> (tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<1x2x1x8xbf16>) : tensor<1x2x64x32xbf16>, tensor<1x2x8x32xbf16>, tensor<1x2x8x32xbf16> -> tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
  %o, %lse = kiln.attention %q, %k, %v mask(%m : tensor<1x2x1x8xbf16>)
      : tensor<1x2x64x32xbf16>, tensor<1x2x8x32xbf16>, tensor<1x2x8x32xbf16> -> tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
  return %o, %lse : tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
}

//===----------------------------------------------------------------------===//
// kiln.softmax, kiln.reduce
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[S:[a-z0-9_]+]]: tensor<1x8x77x77xf32>, %[[T:[a-z0-9_]+]]: tensor<16xbf16>)
func.func @softmax(%s: tensor<1x8x77x77xf32>, %t: tensor<16xbf16>) -> (tensor<1x8x77x77xf32>, tensor<1x8x77x77xf32>, tensor<16xbf16>, tensor<16xbf16>) {
  // CHECK: %[[P0:.*]] = kiln.softmax %[[S]] axis 3 : tensor<1x8x77x77xf32>
  %0 = kiln.softmax %s axis 3 : tensor<1x8x77x77xf32>
  // CHECK: %[[P1:.*]] = kiln.softmax %[[S]] axis 0 : tensor<1x8x77x77xf32>
  %1 = kiln.softmax %s axis 0 : tensor<1x8x77x77xf32>
  // CHECK: %[[P2:.*]] = kiln.softmax %[[T]] axis 0 : tensor<16xbf16>
  %2 = kiln.softmax %t axis 0 : tensor<16xbf16>
  // CHECK: %[[P3:.*]] = kiln.softmax %[[T]] axis 0 zero_empty_rows : tensor<16xbf16>
  %3 = kiln.softmax %t axis 0 zero_empty_rows : tensor<16xbf16>
  // CHECK: return %[[P0]], %[[P1]], %[[P2]], %[[P3]]
  return %0, %1, %2, %3 : tensor<1x8x77x77xf32>, tensor<1x8x77x77xf32>, tensor<16xbf16>, tensor<16xbf16>
}

// CHECK-LABEL: func.func @matmul_epilogue
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x64xf32>, %[[W:[a-z0-9_]+]]: tensor<64x33xf32>, %[[B:[a-z0-9_]+]]: tensor<33xf32>, %[[R:[a-z0-9_]+]]: tensor<2x77x33xf32>)
func.func @matmul_epilogue(%x: tensor<2x77x64xf32>, %w: tensor<64x33xf32>, %b: tensor<33xf32>, %r: tensor<2x77x33xf32>) -> (tensor<2x77x33xbf16>, tensor<2x77x33xf32>) {
  // CHECK: kiln.matmul %[[X]], %[[W]] epilogue(%[[B]], %[[R]] : tensor<33xf32>, tensor<2x77x33xf32>) {
  // CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[BIAS:.*]]: f32, %[[RES:.*]]: f32):
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[BIAS]] : f32
  // CHECK-NEXT: %[[T:.*]] = arith.addf %[[S]], %[[RES]] : f32
  // CHECK-NEXT: kiln.yield %[[T]] : f32
  // CHECK-NEXT: } : tensor<2x77x64xf32>, tensor<64x33xf32> -> tensor<2x77x33xbf16>
  %0 = kiln.matmul %x, %w epilogue(%b, %r : tensor<33xf32>, tensor<2x77x33xf32>) {
  ^bb0(%acc: f32, %bias: f32, %res: f32):
    %s = arith.addf %acc, %bias : f32
    %t = arith.addf %s, %res : f32
    kiln.yield %t : f32
  } : tensor<2x77x64xf32>, tensor<64x33xf32> -> tensor<2x77x33xbf16>
  // CHECK: kiln.matmul %[[X]], %[[W]] epilogue() {
  // CHECK: arith.maximumf
  // CHECK: } : tensor<2x77x64xf32>, tensor<64x33xf32> -> tensor<2x77x33xf32>
  %1 = kiln.matmul %x, %w epilogue() {
  ^bb0(%acc: f32):
    %c = arith.constant 0.0 : f32
    %m = arith.maximumf %acc, %c : f32
    kiln.yield %m : f32
  } : tensor<2x77x64xf32>, tensor<64x33xf32> -> tensor<2x77x33xf32>
  return %0, %1 : tensor<2x77x33xbf16>, tensor<2x77x33xf32>
}

// CHECK-LABEL: func.func @attention_epilogue
// CHECK-SAME: (%[[Q:[a-z0-9_]+]]: tensor<1x4x16x8xbf16>, %[[K:[a-z0-9_]+]]: tensor<1x1x16x8xbf16>, %[[G:[a-z0-9_]+]]: tensor<8xf32>)
func.func @attention_epilogue(%q: tensor<1x4x16x8xbf16>, %k: tensor<1x1x16x8xbf16>, %g: tensor<8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = kiln.attention %[[Q]], %[[K]], %[[K]] causal epilogue(%[[G]] : tensor<8xf32>) {
  // CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[GATE:.*]]: f32):
  // CHECK-NEXT: %[[M:.*]] = arith.mulf %[[ACC]], %[[GATE]] : f32
  // CHECK-NEXT: kiln.yield %[[M]] : f32
  // CHECK-NEXT: } : tensor<1x4x16x8xbf16>, tensor<1x1x16x8xbf16>, tensor<1x1x16x8xbf16> -> tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
  %o, %lse = kiln.attention %q, %k, %k causal epilogue(%g : tensor<8xf32>) {
  ^bb0(%acc: f32, %gate: f32):
    %m = arith.mulf %acc, %gate : f32
    kiln.yield %m : f32
  } : tensor<1x4x16x8xbf16>, tensor<1x1x16x8xbf16>, tensor<1x1x16x8xbf16> -> tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
  return %o, %lse : tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
}

// CHECK-LABEL: func.func @logsumexp
// CHECK-SAME: (%[[S:[a-z0-9_]+]]: tensor<64x1024xbf16>)
func.func @logsumexp(%s: tensor<64x1024xbf16>) -> tensor<64xf32> {
  // CHECK: %[[L:.*]] = kiln.logsumexp %[[S]] axis 1 : tensor<64x1024xbf16> -> tensor<64xf32>
  %0 = kiln.logsumexp %s axis 1 : tensor<64x1024xbf16> -> tensor<64xf32>
  // CHECK: return %[[L]]
  return %0 : tensor<64xf32>
}

// CHECK-LABEL: func.func @reduce
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x512xf32>)
func.func @reduce(%x: tensor<2x77x512xf32>)
    -> (tensor<2x77x1xf32>, tensor<2x77x1xf32>, tensor<77xf32>, tensor<1x77x1xf32>, tensor<f32>, tensor<2x512xf32>) {
  // CHECK: %[[R0:.*]] = kiln.reduce sum %[[X]] axes [2] keep_dims : tensor<2x77x512xf32> -> tensor<2x77x1xf32>
  %0 = kiln.reduce sum %x axes [2] keep_dims : tensor<2x77x512xf32> -> tensor<2x77x1xf32>
  // CHECK: %[[R1:.*]] = kiln.reduce mean %[[X]] axes [2] keep_dims : tensor<2x77x512xf32> -> tensor<2x77x1xf32>
  %1 = kiln.reduce mean %x axes [2] keep_dims : tensor<2x77x512xf32> -> tensor<2x77x1xf32>
  // CHECK: %[[R2:.*]] = kiln.reduce max %[[X]] axes [0, 2] : tensor<2x77x512xf32> -> tensor<77xf32>
  %2 = kiln.reduce max %x axes [0, 2] : tensor<2x77x512xf32> -> tensor<77xf32>
  // CHECK: %[[R3:.*]] = kiln.reduce min %[[X]] axes [0, 2] keep_dims : tensor<2x77x512xf32> -> tensor<1x77x1xf32>
  %3 = kiln.reduce min %x axes [0, 2] keep_dims : tensor<2x77x512xf32> -> tensor<1x77x1xf32>
  // CHECK: %[[R4:.*]] = kiln.reduce sum %[[X]] axes [0, 1, 2] : tensor<2x77x512xf32> -> tensor<f32>
  %4 = kiln.reduce sum %x axes [0, 1, 2] : tensor<2x77x512xf32> -> tensor<f32>
  // CHECK: %[[R5:.*]] = kiln.reduce mean %[[X]] axes [1] : tensor<2x77x512xf32> -> tensor<2x512xf32>
  %5 = kiln.reduce mean %x axes [1] : tensor<2x77x512xf32> -> tensor<2x512xf32>
  // CHECK: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]]
  return %0, %1, %2, %3, %4, %5
      : tensor<2x77x1xf32>, tensor<2x77x1xf32>, tensor<77xf32>, tensor<1x77x1xf32>, tensor<f32>, tensor<2x512xf32>
}

//===----------------------------------------------------------------------===//
// kiln.rms_norm, kiln.layer_norm, kiln.rope
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @norms
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<1x77x4096xbf16>, %[[W:[a-z0-9_]+]]: tensor<4096xbf16>, %[[Y:[a-z0-9_]+]]: tensor<1x77x768xf32>,
// CHECK-SAME: %[[G:[a-z0-9_]+]]: tensor<768xf32>, %[[B:[a-z0-9_]+]]: tensor<768xf32>)
func.func @norms(%x: tensor<1x77x4096xbf16>, %w: tensor<4096xbf16>, %y: tensor<1x77x768xf32>, %g: tensor<768xf32>,
                 %b: tensor<768xf32>) -> (tensor<1x77x4096xbf16>, tensor<1x77x768xf32>, tensor<1x77x768xf32>, tensor<1x77x768xf32>, tensor<1x77x768xf32>) {
  // CHECK: %[[N0:.*]] = kiln.rms_norm %[[X]], %[[W]] epsilon 9.99999997E-7 : tensor<1x77x4096xbf16>, tensor<4096xbf16>
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<1x77x4096xbf16>, tensor<4096xbf16>
  // CHECK: %[[N1:.*]] = kiln.layer_norm %[[Y]], %[[G]], %[[B]] epsilon 9.99999974E-6 : tensor<1x77x768xf32>, tensor<768xf32>, tensor<768xf32>
  %1 = kiln.layer_norm %y, %g, %b epsilon 1.0e-05 : tensor<1x77x768xf32>, tensor<768xf32>, tensor<768xf32>
  // CHECK: %[[N2:.*]] = kiln.layer_norm %[[Y]], %[[G]] epsilon 9.99999974E-6 : tensor<1x77x768xf32>, tensor<768xf32>
  %2 = kiln.layer_norm %y, %g epsilon 1.0e-05 : tensor<1x77x768xf32>, tensor<768xf32>
  // A zero epsilon is allowed, and so is a negated zero (an exporter's -0.0).
  // CHECK: %[[N3:.*]] = kiln.layer_norm %[[Y]], %[[G]] epsilon 0.000000e+00 : tensor<1x77x768xf32>, tensor<768xf32>
  %3 = kiln.layer_norm %y, %g epsilon 0.0 : tensor<1x77x768xf32>, tensor<768xf32>
  // CHECK: %[[N4:.*]] = kiln.layer_norm %[[Y]], %[[G]] epsilon -0.000000e+00 : tensor<1x77x768xf32>, tensor<768xf32>
  %4 = kiln.layer_norm %y, %g epsilon -0.0 : tensor<1x77x768xf32>, tensor<768xf32>
  // CHECK: return %[[N0]], %[[N1]], %[[N2]], %[[N3]], %[[N4]]
  return %0, %1, %2, %3, %4 : tensor<1x77x4096xbf16>, tensor<1x77x768xf32>, tensor<1x77x768xf32>, tensor<1x77x768xf32>, tensor<1x77x768xf32>
}

// CHECK-LABEL: func.func @rope
// CHECK-SAME: (%[[Q:[a-z0-9_]+]]: tensor<1x32x77x128xf32>, %[[COS:[a-z0-9_]+]]: tensor<77x64xf32>, %[[SIN:[a-z0-9_]+]]: tensor<77x64xf32>,
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<4x8xf16>, %[[C2:[a-z0-9_]+]]: tensor<4x4xf16>, %[[S2:[a-z0-9_]+]]: tensor<4x4xf16>)
func.func @rope(%q: tensor<1x32x77x128xf32>, %cos: tensor<77x64xf32>, %sin: tensor<77x64xf32>,
                %x: tensor<4x8xf16>, %c2: tensor<4x4xf16>, %s2: tensor<4x4xf16>)
    -> (tensor<1x32x77x128xf32>, tensor<1x32x77x128xf32>, tensor<4x8xf16>) {
  // CHECK: %[[R0:.*]] = kiln.rope %[[Q]], %[[COS]], %[[SIN]] : tensor<1x32x77x128xf32>, tensor<77x64xf32>, tensor<77x64xf32>
  %0 = kiln.rope %q, %cos, %sin : tensor<1x32x77x128xf32>, tensor<77x64xf32>, tensor<77x64xf32>
  // CHECK: %[[R1:.*]] = kiln.rope %[[Q]], %[[COS]], %[[SIN]] interleaved : tensor<1x32x77x128xf32>, tensor<77x64xf32>, tensor<77x64xf32>
  %1 = kiln.rope %q, %cos, %sin interleaved : tensor<1x32x77x128xf32>, tensor<77x64xf32>, tensor<77x64xf32>
  // CHECK: %[[R2:.*]] = kiln.rope %[[X]], %[[C2]], %[[S2]] interleaved : tensor<4x8xf16>, tensor<4x4xf16>, tensor<4x4xf16>
  %2 = kiln.rope %x, %c2, %s2 interleaved : tensor<4x8xf16>, tensor<4x4xf16>, tensor<4x4xf16>
  // CHECK: return %[[R0]], %[[R1]], %[[R2]]
  return %0, %1, %2 : tensor<1x32x77x128xf32>, tensor<1x32x77x128xf32>, tensor<4x8xf16>
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops and kiln.select
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x512xf32>, %[[B:[a-z0-9_]+]]: tensor<512xf32>, %[[S:[a-z0-9_]+]]: tensor<f32>,
// CHECK-SAME: %[[COL:[a-z0-9_]+]]: tensor<4x1xbf16>, %[[ROW:[a-z0-9_]+]]: tensor<1x8xbf16>)
func.func @binary(%x: tensor<2x77x512xf32>, %b: tensor<512xf32>, %s: tensor<f32>, %col: tensor<4x1xbf16>,
                  %row: tensor<1x8xbf16>)
    -> (tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>,
        tensor<4x8xbf16>, tensor<2x77x512xf32>, tensor<512xf32>, tensor<f32>) {
  // CHECK: %[[ADD:.*]] = kiln.add %[[X]], %[[B]] : tensor<2x77x512xf32>, tensor<512xf32> -> tensor<2x77x512xf32>
  %add = kiln.add %x, %b : tensor<2x77x512xf32>, tensor<512xf32> -> tensor<2x77x512xf32>
  // CHECK: %[[SUB:.*]] = kiln.sub %[[B]], %[[X]] : tensor<512xf32>, tensor<2x77x512xf32> -> tensor<2x77x512xf32>
  %sub = kiln.sub %b, %x : tensor<512xf32>, tensor<2x77x512xf32> -> tensor<2x77x512xf32>
  // CHECK: %[[MUL:.*]] = kiln.mul %[[X]], %[[S]] : tensor<2x77x512xf32>, tensor<f32> -> tensor<2x77x512xf32>
  %mul = kiln.mul %x, %s : tensor<2x77x512xf32>, tensor<f32> -> tensor<2x77x512xf32>
  // CHECK: %[[DIV:.*]] = kiln.div %[[X]], %[[X]] : tensor<2x77x512xf32>, tensor<2x77x512xf32> -> tensor<2x77x512xf32>
  %div = kiln.div %x, %x : tensor<2x77x512xf32>, tensor<2x77x512xf32> -> tensor<2x77x512xf32>
  // CHECK: %[[MAX:.*]] = kiln.max %[[S]], %[[X]] : tensor<f32>, tensor<2x77x512xf32> -> tensor<2x77x512xf32>
  %max = kiln.max %s, %x : tensor<f32>, tensor<2x77x512xf32> -> tensor<2x77x512xf32>
  // Both operands stretch: [4, 1] and [1, 8] broadcast to [4, 8].
  // CHECK: %[[MIN:.*]] = kiln.min %[[COL]], %[[ROW]] : tensor<4x1xbf16>, tensor<1x8xbf16> -> tensor<4x8xbf16>
  %min = kiln.min %col, %row : tensor<4x1xbf16>, tensor<1x8xbf16> -> tensor<4x8xbf16>
  // CHECK: %[[POW:.*]] = kiln.pow %[[X]], %[[B]] : tensor<2x77x512xf32>, tensor<512xf32> -> tensor<2x77x512xf32>
  %pow = kiln.pow %x, %b : tensor<2x77x512xf32>, tensor<512xf32> -> tensor<2x77x512xf32>
  // CHECK: %[[POW2:.*]] = kiln.pow %[[B]], %[[S]] : tensor<512xf32>, tensor<f32> -> tensor<512xf32>
  %pow2 = kiln.pow %b, %s : tensor<512xf32>, tensor<f32> -> tensor<512xf32>
  // CHECK: %[[ADD2:.*]] = kiln.add %[[S]], %[[S]] : tensor<f32>, tensor<f32> -> tensor<f32>
  %add2 = kiln.add %s, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  // CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[MAX]], %[[MIN]], %[[POW]], %[[POW2]], %[[ADD2]]
  return %add, %sub, %mul, %div, %max, %min, %pow, %pow2, %add2
      : tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>,
        tensor<4x8xbf16>, tensor<2x77x512xf32>, tensor<512xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[C:[a-z0-9_]+]]: tensor<77x77xi1>, %[[S:[a-z0-9_]+]]: tensor<1x8x77x77xf32>, %[[NEG:[a-z0-9_]+]]: tensor<f32>, %[[C1:[a-z0-9_]+]]: tensor<4xi1>)
func.func @select(%c: tensor<77x77xi1>, %s: tensor<1x8x77x77xf32>, %neg: tensor<f32>, %c1: tensor<4xi1>)
    -> (tensor<1x8x77x77xf32>, tensor<4xf32>) {
  // CHECK: %[[SEL:.*]] = kiln.select %[[C]], %[[S]], %[[NEG]] : tensor<77x77xi1>, tensor<1x8x77x77xf32>, tensor<f32> -> tensor<1x8x77x77xf32>
  %0 = kiln.select %c, %s, %neg : tensor<77x77xi1>, tensor<1x8x77x77xf32>, tensor<f32> -> tensor<1x8x77x77xf32>
  // The condition alone sets the result shape.
  // CHECK: %[[SEL2:.*]] = kiln.select %[[C1]], %[[NEG]], %[[NEG]] : tensor<4xi1>, tensor<f32>, tensor<f32> -> tensor<4xf32>
  %1 = kiln.select %c1, %neg, %neg : tensor<4xi1>, tensor<f32>, tensor<f32> -> tensor<4xf32>
  // CHECK: return %[[SEL]], %[[SEL2]]
  return %0, %1 : tensor<1x8x77x77xf32>, tensor<4xf32>
}

// Comparisons of floats, integers and bools; a select between integers; both remainders.
// CHECK-LABEL: func.func @compare_and_remainders
func.func @compare_and_remainders(%x: tensor<2x77xf32>, %b: tensor<77xf32>, %m: tensor<2x77xi64>, %z: tensor<i64>,
                                  %p: tensor<2x77xi1>) -> (tensor<2x77xi1>, tensor<2x77xi1>, tensor<2x77xi64>,
                                                          tensor<2x77xf32>, tensor<2x77xf32>) {
  // CHECK: kiln.compare ge %{{.*}}, %{{.*}} : tensor<2x77xf32>, tensor<77xf32> -> tensor<2x77xi1>
  %ge = kiln.compare ge %x, %b : tensor<2x77xf32>, tensor<77xf32> -> tensor<2x77xi1>
  // CHECK: kiln.compare ne %{{.*}}, %{{.*}} : tensor<2x77xi64>, tensor<i64> -> tensor<2x77xi1>
  %ne = kiln.compare ne %m, %z : tensor<2x77xi64>, tensor<i64> -> tensor<2x77xi1>
  // CHECK: kiln.compare eq %{{.*}}, %{{.*}} : tensor<2x77xi1>, tensor<2x77xi1> -> tensor<2x77xi1>
  %eq = kiln.compare eq %ge, %p : tensor<2x77xi1>, tensor<2x77xi1> -> tensor<2x77xi1>
  // CHECK: kiln.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x77xi1>, tensor<2x77xi64>, tensor<i64> -> tensor<2x77xi64>
  %sel = kiln.select %ne, %m, %z : tensor<2x77xi1>, tensor<2x77xi64>, tensor<i64> -> tensor<2x77xi64>
  // CHECK: kiln.fmod %{{.*}}, %{{.*}} : tensor<2x77xf32>, tensor<77xf32> -> tensor<2x77xf32>
  %fmod = kiln.fmod %x, %b : tensor<2x77xf32>, tensor<77xf32> -> tensor<2x77xf32>
  // CHECK: kiln.remainder %{{.*}}, %{{.*}} : tensor<2x77xf32>, tensor<77xf32> -> tensor<2x77xf32>
  %rem = kiln.remainder %x, %b : tensor<2x77xf32>, tensor<77xf32> -> tensor<2x77xf32>
  return %ge, %eq, %sel, %fmod, %rem : tensor<2x77xi1>, tensor<2x77xi1>, tensor<2x77xi64>, tensor<2x77xf32>,
                                       tensor<2x77xf32>
}

//===----------------------------------------------------------------------===//
// Unary ops and activations
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>, %[[H:[a-z0-9_]+]]: tensor<16xbf16>)
func.func @unary(%x: tensor<4x8xf32>, %h: tensor<16xbf16>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
        tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<16xbf16>) {
  // CHECK: %[[NEG:.*]] = kiln.neg %[[X]] : tensor<4x8xf32>
  %neg = kiln.neg %x : tensor<4x8xf32>
  // CHECK: %[[EXP:.*]] = kiln.exp %[[X]] : tensor<4x8xf32>
  %exp = kiln.exp %x : tensor<4x8xf32>
  // CHECK: %[[LOG:.*]] = kiln.log %[[X]] : tensor<4x8xf32>
  %log = kiln.log %x : tensor<4x8xf32>
  // CHECK: %[[SQRT:.*]] = kiln.sqrt %[[X]] : tensor<4x8xf32>
  %sqrt = kiln.sqrt %x : tensor<4x8xf32>
  // CHECK: %[[RSQRT:.*]] = kiln.rsqrt %[[X]] : tensor<4x8xf32>
  %rsqrt = kiln.rsqrt %x : tensor<4x8xf32>
  // CHECK: %[[RECIP:.*]] = kiln.reciprocal %[[X]] : tensor<4x8xf32>
  %recip = kiln.reciprocal %x : tensor<4x8xf32>
  // CHECK: %[[ABS:.*]] = kiln.abs %[[X]] : tensor<4x8xf32>
  %abs = kiln.abs %x : tensor<4x8xf32>
  // CHECK: %[[TANH:.*]] = kiln.tanh %[[X]] : tensor<4x8xf32>
  %tanh = kiln.tanh %x : tensor<4x8xf32>
  // CHECK: %[[ERF:.*]] = kiln.erf %[[X]] : tensor<4x8xf32>
  %erf = kiln.erf %x : tensor<4x8xf32>
  // CHECK: kiln.sin %[[X]] : tensor<4x8xf32>
  %sin = kiln.sin %x : tensor<4x8xf32>
  // CHECK: kiln.cos %[[X]] : tensor<4x8xf32>
  %cos = kiln.cos %x : tensor<4x8xf32>
  // CHECK: kiln.floor %[[H]] : tensor<16xbf16>
  %floor = kiln.floor %h : tensor<16xbf16>
  // CHECK: kiln.ceil %[[H]] : tensor<16xbf16>
  %ceil = kiln.ceil %h : tensor<16xbf16>
  // CHECK: %[[SIG:.*]] = kiln.sigmoid %[[X]] : tensor<4x8xf32>
  %sig = kiln.sigmoid %x : tensor<4x8xf32>
  // CHECK: %[[RELU:.*]] = kiln.relu %[[X]] : tensor<4x8xf32>
  %relu = kiln.relu %x : tensor<4x8xf32>
  // CHECK: %[[SILU:.*]] = kiln.silu %[[H]] : tensor<16xbf16>
  %silu = kiln.silu %h : tensor<16xbf16>
  // CHECK: return %[[NEG]], %[[EXP]], %[[LOG]], %[[SQRT]], %[[RSQRT]], %[[RECIP]], %[[ABS]], %[[TANH]], %[[ERF]], %[[SIG]], %[[RELU]], %[[SILU]]
  return %neg, %exp, %log, %sqrt, %rsqrt, %recip, %abs, %tanh, %erf, %sig, %relu, %silu
      : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
        tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<16xbf16>
}

// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x3072xf32>)
func.func @gelu(%x: tensor<2x77x3072xf32>) -> (tensor<2x77x3072xf32>, tensor<2x77x3072xf32>, tensor<2x77x3072xf32>) {
  // CHECK: %[[G0:.*]] = kiln.gelu %[[X]] : tensor<2x77x3072xf32>
  %0 = kiln.gelu %x : tensor<2x77x3072xf32>
  // CHECK: %[[G1:.*]] = kiln.gelu %[[X]] approximate(tanh) : tensor<2x77x3072xf32>
  %1 = kiln.gelu %x approximate(tanh) : tensor<2x77x3072xf32>
  // The default is elided when printed.
  // CHECK: %[[G2:.*]] = kiln.gelu %[[X]] : tensor<2x77x3072xf32>
  %2 = kiln.gelu %x approximate(none) : tensor<2x77x3072xf32>
  // CHECK: return %[[G0]], %[[G1]], %[[G2]]
  return %0, %1, %2 : tensor<2x77x3072xf32>, tensor<2x77x3072xf32>, tensor<2x77x3072xf32>
}

// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x512xf32>, %[[IDS:[a-z0-9_]+]]: tensor<2x77xi64>, %[[C:[a-z0-9_]+]]: tensor<4xi1>, %[[H:[a-z0-9_]+]]: tensor<4xf16>)
func.func @cast(%x: tensor<2x77x512xf32>, %ids: tensor<2x77xi64>, %c: tensor<4xi1>, %h: tensor<4xf16>)
    -> (tensor<2x77x512xbf16>, tensor<2x77xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x77x512xi32>) {
  // CHECK: %[[C0:.*]] = kiln.cast %[[X]] : tensor<2x77x512xf32> to tensor<2x77x512xbf16>
  %0 = kiln.cast %x : tensor<2x77x512xf32> to tensor<2x77x512xbf16>
  // CHECK: %[[C1:.*]] = kiln.cast %[[IDS]] : tensor<2x77xi64> to tensor<2x77xf32>
  %1 = kiln.cast %ids : tensor<2x77xi64> to tensor<2x77xf32>
  // CHECK: %[[C2:.*]] = kiln.cast %[[C]] : tensor<4xi1> to tensor<4xf32>
  %2 = kiln.cast %c : tensor<4xi1> to tensor<4xf32>
  // CHECK: %[[C3:.*]] = kiln.cast %[[H]] : tensor<4xf16> to tensor<4xf32>
  %3 = kiln.cast %h : tensor<4xf16> to tensor<4xf32>
  // CHECK: %[[C4:.*]] = kiln.cast %[[X]] : tensor<2x77x512xf32> to tensor<2x77x512xi32>
  %4 = kiln.cast %x : tensor<2x77x512xf32> to tensor<2x77x512xi32>
  // CHECK: return %[[C0]], %[[C1]], %[[C2]], %[[C3]], %[[C4]]
  return %0, %1, %2, %3, %4 : tensor<2x77x512xbf16>, tensor<2x77xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x77x512xi32>
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[K:[a-z0-9_]+]]: tensor<1x8x77x64xf32>, %[[I:[a-z0-9_]+]]: tensor<3x5xi64>)
func.func @transpose(%k: tensor<1x8x77x64xf32>, %i: tensor<3x5xi64>)
    -> (tensor<1x8x64x77xf32>, tensor<1x77x8x64xf32>, tensor<5x3xi64>, tensor<1x8x77x64xf32>) {
  // CHECK: %[[T0:.*]] = kiln.transpose %[[K]] [0, 1, 3, 2] : tensor<1x8x77x64xf32> -> tensor<1x8x64x77xf32>
  %0 = kiln.transpose %k [0, 1, 3, 2] : tensor<1x8x77x64xf32> -> tensor<1x8x64x77xf32>
  // CHECK: %[[T1:.*]] = kiln.transpose %[[K]] [0, 2, 1, 3] : tensor<1x8x77x64xf32> -> tensor<1x77x8x64xf32>
  %1 = kiln.transpose %k [0, 2, 1, 3] : tensor<1x8x77x64xf32> -> tensor<1x77x8x64xf32>
  // CHECK: %[[T2:.*]] = kiln.transpose %[[I]] [1, 0] : tensor<3x5xi64> -> tensor<5x3xi64>
  %2 = kiln.transpose %i [1, 0] : tensor<3x5xi64> -> tensor<5x3xi64>
  // CHECK: %[[T3:.*]] = kiln.transpose %[[K]] [0, 1, 2, 3] : tensor<1x8x77x64xf32> -> tensor<1x8x77x64xf32>
  %3 = kiln.transpose %k [0, 1, 2, 3] : tensor<1x8x77x64xf32> -> tensor<1x8x77x64xf32>
  // CHECK: return %[[T0]], %[[T1]], %[[T2]], %[[T3]]
  return %0, %1, %2, %3 : tensor<1x8x64x77xf32>, tensor<1x77x8x64xf32>, tensor<5x3xi64>, tensor<1x8x77x64xf32>
}

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<2x77x512xf32>, %[[S:[a-z0-9_]+]]: tensor<1xi32>)
func.func @reshape(%x: tensor<2x77x512xf32>, %s: tensor<1xi32>)
    -> (tensor<2x77x8x64xf32>, tensor<154x512xf32>, tensor<i32>) {
  // CHECK: %[[R0:.*]] = kiln.reshape %[[X]] : tensor<2x77x512xf32> -> tensor<2x77x8x64xf32>
  %0 = kiln.reshape %x : tensor<2x77x512xf32> -> tensor<2x77x8x64xf32>
  // CHECK: %[[R1:.*]] = kiln.reshape %[[X]] : tensor<2x77x512xf32> -> tensor<154x512xf32>
  %1 = kiln.reshape %x : tensor<2x77x512xf32> -> tensor<154x512xf32>
  // CHECK: %[[R2:.*]] = kiln.reshape %[[S]] : tensor<1xi32> -> tensor<i32>
  %2 = kiln.reshape %s : tensor<1xi32> -> tensor<i32>
  // CHECK: return %[[R0]], %[[R1]], %[[R2]]
  return %0, %1, %2 : tensor<2x77x8x64xf32>, tensor<154x512xf32>, tensor<i32>
}

// CHECK-LABEL: func.func @dim
// CHECK-SAME: (%[[K:[a-z0-9_]+]]: tensor<1x8x300x64xbf16>)
func.func @dim(%k: tensor<1x8x300x64xbf16>) -> index {
  // CHECK: %[[SK:.*]] = kiln.dim %[[K]][2] : tensor<1x8x300x64xbf16>
  %0 = kiln.dim %k[2] : tensor<1x8x300x64xbf16>
  // CHECK: return %[[SK]]
  return %0 : index
}

// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: (%[[K:[a-z0-9_]+]]: tensor<1x8x1x77x64xf32>, %[[B:[a-z0-9_]+]]: tensor<512xbf16>, %[[C:[a-z0-9_]+]]: tensor<i1>)
func.func @broadcast(%k: tensor<1x8x1x77x64xf32>, %b: tensor<512xbf16>, %c: tensor<i1>)
    -> (tensor<1x8x4x77x64xf32>, tensor<2x77x512xbf16>, tensor<3x3xi1>) {
  // CHECK: %[[B0:.*]] = kiln.broadcast %[[K]] : tensor<1x8x1x77x64xf32> -> tensor<1x8x4x77x64xf32>
  %0 = kiln.broadcast %k : tensor<1x8x1x77x64xf32> -> tensor<1x8x4x77x64xf32>
  // CHECK: %[[B1:.*]] = kiln.broadcast %[[B]] : tensor<512xbf16> -> tensor<2x77x512xbf16>
  %1 = kiln.broadcast %b : tensor<512xbf16> -> tensor<2x77x512xbf16>
  // CHECK: %[[B2:.*]] = kiln.broadcast %[[C]] : tensor<i1> -> tensor<3x3xi1>
  %2 = kiln.broadcast %c : tensor<i1> -> tensor<3x3xi1>
  // CHECK: return %[[B0]], %[[B1]], %[[B2]]
  return %0, %1, %2 : tensor<1x8x4x77x64xf32>, tensor<2x77x512xbf16>, tensor<3x3xi1>
}

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<1x8x77x32xf32>, %[[B:[a-z0-9_]+]]: tensor<1x8x77x32xf32>, %[[C:[a-z0-9_]+]]: tensor<1x8x77x16xf32>, %[[I:[a-z0-9_]+]]: tensor<3xi64>)
func.func @concat(%a: tensor<1x8x77x32xf32>, %b: tensor<1x8x77x32xf32>, %c: tensor<1x8x77x16xf32>, %i: tensor<3xi64>)
    -> (tensor<1x8x77x32xf32>, tensor<1x8x77x80xf32>, tensor<1x16x77x32xf32>, tensor<6xi64>) {
  // CHECK: %[[C0:.*]] = kiln.concat %[[A]] axis 3 : tensor<1x8x77x32xf32> -> tensor<1x8x77x32xf32>
  %0 = kiln.concat %a axis 3 : tensor<1x8x77x32xf32> -> tensor<1x8x77x32xf32>
  // CHECK: %[[C1:.*]] = kiln.concat %[[A]], %[[B]], %[[C]] axis 3 : tensor<1x8x77x32xf32>, tensor<1x8x77x32xf32>, tensor<1x8x77x16xf32> -> tensor<1x8x77x80xf32>
  %1 = kiln.concat %a, %b, %c axis 3 : tensor<1x8x77x32xf32>, tensor<1x8x77x32xf32>, tensor<1x8x77x16xf32>
      -> tensor<1x8x77x80xf32>
  // CHECK: %[[C2:.*]] = kiln.concat %[[A]], %[[B]] axis 1 : tensor<1x8x77x32xf32>, tensor<1x8x77x32xf32> -> tensor<1x16x77x32xf32>
  %2 = kiln.concat %a, %b axis 1 : tensor<1x8x77x32xf32>, tensor<1x8x77x32xf32> -> tensor<1x16x77x32xf32>
  // CHECK: %[[C3:.*]] = kiln.concat %[[I]], %[[I]] axis 0 : tensor<3xi64>, tensor<3xi64> -> tensor<6xi64>
  %3 = kiln.concat %i, %i axis 0 : tensor<3xi64>, tensor<3xi64> -> tensor<6xi64>
  // CHECK: return %[[C0]], %[[C1]], %[[C2]], %[[C3]]
  return %0, %1, %2, %3 : tensor<1x8x77x32xf32>, tensor<1x8x77x80xf32>, tensor<1x16x77x32xf32>, tensor<6xi64>
}

// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<1x8x77x64xf32>, %[[V:[a-z0-9_]+]]: tensor<10xi32>)
func.func @slice(%x: tensor<1x8x77x64xf32>, %v: tensor<10xi32>)
    -> (tensor<1x8x77x32xf32>, tensor<1x8x77x32xf32>, tensor<1x4x1x32xf32>, tensor<4xi32>, tensor<0xi32>) {
  // CHECK: %[[S0:.*]] = kiln.slice %[[X]] offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<1x8x77x64xf32> -> tensor<1x8x77x32xf32>
  %0 = kiln.slice %x offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<1x8x77x64xf32> -> tensor<1x8x77x32xf32>
  // CHECK: %[[S1:.*]] = kiln.slice %[[X]] offsets [0, 0, 0, 32] strides [1, 1, 1, 1] : tensor<1x8x77x64xf32> -> tensor<1x8x77x32xf32>
  %1 = kiln.slice %x offsets [0, 0, 0, 32] strides [1, 1, 1, 1] : tensor<1x8x77x64xf32> -> tensor<1x8x77x32xf32>
  // CHECK: %[[S2:.*]] = kiln.slice %[[X]] offsets [0, 1, 76, 0] strides [1, 2, 1, 2] : tensor<1x8x77x64xf32> -> tensor<1x4x1x32xf32>
  %2 = kiln.slice %x offsets [0, 1, 76, 0] strides [1, 2, 1, 2] : tensor<1x8x77x64xf32> -> tensor<1x4x1x32xf32>
  // CHECK: %[[S3:.*]] = kiln.slice %[[V]] offsets [0] strides [3] : tensor<10xi32> -> tensor<4xi32>
  %3 = kiln.slice %v offsets [0] strides [3] : tensor<10xi32> -> tensor<4xi32>
  // An empty slice reads nothing, so its offset may be at the end.
  // CHECK: %[[S4:.*]] = kiln.slice %[[V]] offsets [10] strides [1] : tensor<10xi32> -> tensor<0xi32>
  %4 = kiln.slice %v offsets [10] strides [1] : tensor<10xi32> -> tensor<0xi32>
  // CHECK: return %[[S0]], %[[S1]], %[[S2]], %[[S3]], %[[S4]]
  return %0, %1, %2, %3, %4 : tensor<1x8x77x32xf32>, tensor<1x8x77x32xf32>, tensor<1x4x1x32xf32>, tensor<4xi32>, tensor<0xi32>
}

// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[E:[a-z0-9_]+]]: tensor<50257x768xf32>, %[[IDS:[a-z0-9_]+]]: tensor<2x77xi64>, %[[IDX:[a-z0-9_]+]]: tensor<4xi32>, %[[S:[a-z0-9_]+]]: tensor<i32>)
func.func @gather(%embed: tensor<50257x768xf32>, %ids: tensor<2x77xi64>, %idx: tensor<4xi32>, %s: tensor<i32>)
    -> (tensor<2x77x768xf32>, tensor<50257x4xf32>, tensor<768xf32>) {
  // CHECK: %[[G0:.*]] = kiln.gather %[[E]][%[[IDS]]] axis 0 : tensor<50257x768xf32>, tensor<2x77xi64> -> tensor<2x77x768xf32>
  %0 = kiln.gather %embed[%ids] axis 0 : tensor<50257x768xf32>, tensor<2x77xi64> -> tensor<2x77x768xf32>
  // CHECK: %[[G1:.*]] = kiln.gather %[[E]][%[[IDX]]] axis 1 : tensor<50257x768xf32>, tensor<4xi32> -> tensor<50257x4xf32>
  %1 = kiln.gather %embed[%idx] axis 1 : tensor<50257x768xf32>, tensor<4xi32> -> tensor<50257x4xf32>
  // A scalar index drops the gathered axis.
  // CHECK: %[[G2:.*]] = kiln.gather %[[E]][%[[S]]] axis 0 : tensor<50257x768xf32>, tensor<i32> -> tensor<768xf32>
  %2 = kiln.gather %embed[%s] axis 0 : tensor<50257x768xf32>, tensor<i32> -> tensor<768xf32>
  // CHECK: return %[[G0]], %[[G1]], %[[G2]]
  return %0, %1, %2 : tensor<2x77x768xf32>, tensor<50257x4xf32>, tensor<768xf32>
}

//===----------------------------------------------------------------------===//
// kiln.append_kv, kiln.paged_attention, kiln.gather_pages
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @gather_pages
// CHECK: %[[K:.*]] = kiln.gather_pages %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16x2x64xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x2x64x64xbf16>
// CHECK: return %[[K]]
func.func @gather_pages(%kc: tensor<16x16x2x64xbf16>, %table: tensor<2x4xi32>, %lens: tensor<2xi32>)
    -> tensor<2x2x64x64xbf16> {
  %k = kiln.gather_pages %kc, %table, %lens : tensor<16x16x2x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<2x2x64x64xbf16>
  return %k : tensor<2x2x64x64xbf16>
}

// A decode step: append the new rows, then attend over the pages.

// CHECK-LABEL: func.func @paged_decode_step
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<2x8x1x64xbf16>, %[[KC:[a-zA-Z0-9_]+]]: tensor<16x16x2x64xbf16>, %[[VC:[a-zA-Z0-9_]+]]: tensor<16x16x2x64xbf16>, %[[K:[a-zA-Z0-9_]+]]: tensor<2x2x1x64xbf16>, %[[V:[a-zA-Z0-9_]+]]: tensor<2x2x1x64xbf16>, %[[TABLE:[a-zA-Z0-9_]+]]: tensor<2x4xi32>, %[[POS:[a-zA-Z0-9_]+]]: tensor<2xi32>, %[[LENS:[a-zA-Z0-9_]+]]: tensor<2xi32>)
func.func @paged_decode_step(%q: tensor<2x8x1x64xbf16>, %kc: tensor<16x16x2x64xbf16>, %vc: tensor<16x16x2x64xbf16>,
                             %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>,
                             %pos: tensor<2xi32>, %lens: tensor<2xi32>) -> tensor<2x8x1x64xbf16> {
  // CHECK: %[[NEW_K:[a-zA-Z0-9_]+]], %[[NEW_V:[a-zA-Z0-9_]+]] = kiln.append_kv %[[KC]], %[[VC]], %[[K]], %[[V]], %[[TABLE]], %[[POS]] : tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>
  %caches:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos
      : tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>,
        tensor<2x4xi32>, tensor<2xi32> -> tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>
  // CHECK: %[[O:.*]] = kiln.paged_attention %[[Q]], %[[NEW_K]], %[[NEW_V]], %[[TABLE]], %[[LENS]] {scale = 1.250000e-01 : f32} : tensor<2x8x1x64xbf16>, tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x8x1x64xbf16>
  %o = kiln.paged_attention %q, %caches#0, %caches#1, %table, %lens {scale = 0.125 : f32}
      : tensor<2x8x1x64xbf16>, tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<2x8x1x64xbf16>
  // CHECK: return %[[O]]
  return %o : tensor<2x8x1x64xbf16>
}

// CHECK-LABEL: func.func @attention_mods
// CHECK-SAME: (%[[Q:[a-z0-9_]+]]: tensor<1x4x64x32xbf16>, %[[S:[a-z0-9_]+]]: tensor<4xf32>)
func.func @attention_mods(%q: tensor<1x4x64x32xbf16>, %slopes: tensor<4xf32>) -> tensor<1x4x64x32xbf16> {
  // CHECK: kiln.attention %[[Q]], %[[Q]], %[[Q]] causal mod_operands(%[[S]] : tensor<4xf32>) score_mod {
  // CHECK-NEXT: ^bb0(%{{[a-z0-9]+}}: f32, %{{[a-z0-9]+}}: index, %[[H:[a-z0-9]+]]: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %[[T:[a-z0-9]+]]: tensor<4xf32>):
  // CHECK: tensor.extract %[[T]][%[[H]]] : tensor<4xf32>
  // CHECK: kiln.yield %{{.*}} : f32
  // CHECK-NEXT: } mask_mod {
  // CHECK-NEXT: ^bb0(%{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: index, %{{[a-z0-9]+}}: tensor<4xf32>):
  // CHECK: arith.cmpi slt
  // CHECK: kiln.yield %{{.*}} : i1
  // CHECK-NEXT: } {scale = 1.250000e-01 : f32} : tensor<1x4x64x32xbf16>
  %0 = kiln.attention %q, %q, %q causal mod_operands(%slopes : tensor<4xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<4xf32>):
    %slope = tensor.extract %t[%h] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    kiln.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %t: tensor<4xf32>):
    %w = arith.constant 16 : index
    %d = arith.subi %i, %j : index
    %in = arith.cmpi slt, %d, %w : index
    kiln.yield %in : i1
  } {scale = 0.125 : f32} : tensor<1x4x64x32xbf16>, tensor<1x4x64x32xbf16>, tensor<1x4x64x32xbf16> -> tensor<1x4x64x32xbf16>
  return %0 : tensor<1x4x64x32xbf16>
}

// CHECK: dialect_resources
// CHECK: blk0_w: "0x040000000000803F00000040"
{-#
  dialect_resources: {
    builtin: {
      blk0_w: "0x040000000000803F00000040"
    }
  }
#-}
