// RUN: kiln-opt %s -kiln-expand-paged-attention -split-input-file | FileCheck %s

// A decode step (one query row): attention over kiln.gather_pages views of the two caches, masked to the keys
// j < seq_lens[b] by a mask_mod that reads neither the head nor the query position, not causal (the one row
// sees its whole sequence), the scale made explicit.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[Q:.+]]: tensor<2x32x1x128xbf16>, %[[KC:.+]]: tensor<64x16x8x128xbf16>, %[[VC:.+]]: tensor<64x16x8x128xbf16>, %[[T:.+]]: tensor<2x32xi32>, %[[L:.+]]: tensor<2xi32>)
// CHECK: %[[K:.+]] = kiln.gather_pages %[[KC]], %[[T]], %[[L]] : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
// CHECK: %[[V:.+]] = kiln.gather_pages %[[VC]], %[[T]], %[[L]] : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
// CHECK: %[[O:.+]] = kiln.attention %[[Q]], %[[K]], %[[V]] mod_operands(%[[L]] : tensor<2xi32>) mask_mod {
// CHECK-NEXT: ^bb0(%[[B:.+]]: index, %{{.+}}: index, %{{.+}}: index, %[[J:.+]]: index, %[[LENS:.+]]: tensor<2xi32>):
// CHECK-NEXT: %[[N:.+]] = tensor.extract %[[LENS]][%[[B]]] : tensor<2xi32>
// CHECK-NEXT: %[[LEN:.+]] = arith.index_cast %[[N]] : i32 to index
// CHECK-NEXT: %[[SEEN:.+]] = arith.cmpi slt, %[[J]], %[[LEN]] : index
// CHECK-NEXT: kiln.yield %[[SEEN]] : i1
// CHECK-NEXT: } {scale = 0.0883883461 : f32} : tensor<2x32x1x128xbf16>, tensor<2x8x512x128xbf16>, tensor<2x8x512x128xbf16> -> tensor<2x32x1x128xbf16>
// CHECK-NOT: causal
// CHECK: return %[[O]]
func.func @decode(%q: tensor<2x32x1x128xbf16>, %kc: tensor<64x16x8x128xbf16>, %vc: tensor<64x16x8x128xbf16>,
                  %t: tensor<2x32xi32>, %l: tensor<2xi32>) -> tensor<2x32x1x128xbf16> {
  %o = kiln.paged_attention %q, %kc, %vc, %t, %l : tensor<2x32x1x128xbf16>, tensor<64x16x8x128xbf16>,
      tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x32x1x128xbf16>
  return %o : tensor<2x32x1x128xbf16>
}

// -----

// Several new tokens per sequence (a chunk of prefill): query i sees j <= seq_lens[b] - 3 + i, causal within
// its sequence; an explicit scale is kept.
// CHECK-LABEL: func.func @chunk
// CHECK: kiln.attention %{{.+}}, %{{.+}}, %{{.+}} mod_operands(%{{.+}} : tensor<2xi32>) mask_mod {
// CHECK-NEXT: ^bb0(%[[B:.+]]: index, %{{.+}}: index, %[[I:.+]]: index, %[[J:.+]]: index, %[[LENS:.+]]: tensor<2xi32>):
// CHECK-NEXT: %[[N:.+]] = tensor.extract %[[LENS]][%[[B]]] : tensor<2xi32>
// CHECK-NEXT: %[[LEN:.+]] = arith.index_cast %[[N]] : i32 to index
// CHECK-NEXT: %[[C3:.+]] = arith.constant 3 : index
// CHECK-NEXT: %[[FIRST:.+]] = arith.subi %[[LEN]], %[[C3]] : index
// CHECK-NEXT: %[[LAST:.+]] = arith.addi %[[FIRST]], %[[I]] : index
// CHECK-NEXT: %[[SEEN:.+]] = arith.cmpi sle, %[[J]], %[[LAST]] : index
// CHECK-NEXT: kiln.yield %[[SEEN]] : i1
// CHECK-NEXT: } {scale = 5.000000e-01 : f32}
func.func @chunk(%q: tensor<2x4x3x8xf32>, %kc: tensor<5x16x2x8xf32>, %vc: tensor<5x16x2x8xf32>,
                 %t: tensor<2x3xi32>, %l: tensor<2xi32>) -> tensor<2x4x3x8xf32> {
  %o = kiln.paged_attention %q, %kc, %vc, %t, %l {scale = 0.5 : f32} : tensor<2x4x3x8xf32>, tensor<5x16x2x8xf32>,
      tensor<5x16x2x8xf32>, tensor<2x3xi32>, tensor<2xi32> -> tensor<2x4x3x8xf32>
  return %o : tensor<2x4x3x8xf32>
}

// -----

// An f32 attention's fp32_precision moves to the attention over the page views.
// CHECK-LABEL: func.func @f32_precision
// CHECK: kiln.attention
// CHECK: } {fp32_precision = "ieee", scale = 0.353553385 : f32} : tensor<1x4x1x8xf32>
func.func @f32_precision(%q: tensor<1x4x1x8xf32>, %kc: tensor<4x16x2x8xf32>, %vc: tensor<4x16x2x8xf32>,
                         %t: tensor<1x4xi32>, %l: tensor<1xi32>) -> tensor<1x4x1x8xf32> {
  %o = kiln.paged_attention %q, %kc, %vc, %t, %l {fp32_precision = "ieee"} : tensor<1x4x1x8xf32>,
      tensor<4x16x2x8xf32>, tensor<4x16x2x8xf32>, tensor<1x4xi32>, tensor<1xi32> -> tensor<1x4x1x8xf32>
  return %o : tensor<1x4x1x8xf32>
}

