// RUN: kiln-opt %s -kiln-pack-gqa-decode -split-input-file | FileCheck %s

// A causal decode step of grouped-query attention (32 query heads over 8 KV heads): q is viewed as the 4 rows of
// each KV head, the attention has no causal mask (one row sees every key) and keeps its scale, and the output is
// viewed back.
// CHECK-LABEL: func.func @decode_step
// CHECK: %[[Q:.*]] = kiln.reshape %arg0 : tensor<2x32x1x128xbf16> -> tensor<2x8x4x128xbf16>
// CHECK: %[[O:.*]] = kiln.attention %[[Q]], %arg1, %arg2 {scale = 1.250000e-01 : f32} : tensor<2x8x4x128xbf16>, tensor<2x8x900x128xbf16>, tensor<2x8x900x128xbf16> -> tensor<2x8x4x128xbf16>
// CHECK: %[[OUT:.*]] = kiln.reshape %[[O]] : tensor<2x8x4x128xbf16> -> tensor<2x32x1x128xbf16>
// CHECK: return %[[OUT]]
func.func @decode_step(%q: tensor<2x32x1x128xbf16>, %k: tensor<2x8x900x128xbf16>, %v: tensor<2x8x900x128xbf16>) -> tensor<2x32x1x128xbf16> {
  %o = kiln.attention %q, %k, %v causal {scale = 0.125 : f32} : tensor<2x32x1x128xbf16>, tensor<2x8x900x128xbf16>, tensor<2x8x900x128xbf16> -> tensor<2x32x1x128xbf16>
  return %o : tensor<2x32x1x128xbf16>
}

// -----

// Multi-query attention with an lse: all 8 query heads become rows of the one KV head, the lse [1, 8, 1] is
// viewed from [1, 1, 8].
// CHECK-LABEL: func.func @multi_query_lse
// CHECK: %[[Q:.*]] = kiln.reshape %arg0 : tensor<1x8x1x64xf16> -> tensor<1x1x8x64xf16>
// CHECK: %[[O:.*]], %[[LSE:.*]] = kiln.attention %[[Q]], %arg1, %arg1 : {{.*}} -> tensor<1x1x8x64xf16>, tensor<1x1x8xf32>
// CHECK-DAG: kiln.reshape %[[O]] : tensor<1x1x8x64xf16> -> tensor<1x8x1x64xf16>
// CHECK-DAG: kiln.reshape %[[LSE]] : tensor<1x1x8xf32> -> tensor<1x8x1xf32>
func.func @multi_query_lse(%q: tensor<1x8x1x64xf16>, %k: tensor<1x1x77x64xf16>) -> (tensor<1x8x1x64xf16>, tensor<1x8x1xf32>) {
  %o, %lse = kiln.attention %q, %k, %k : tensor<1x8x1x64xf16>, tensor<1x1x77x64xf16>, tensor<1x1x77x64xf16> -> tensor<1x8x1x64xf16>, tensor<1x8x1xf32>
  return %o, %lse : tensor<1x8x1x64xf16>, tensor<1x8x1xf32>
}

// -----

// Left alone: multi-head attention (nothing to share), two query rows, a mask, the seq-major layout.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: kiln.reshape
// CHECK-COUNT-4: kiln.attention
// CHECK-NOT: kiln.reshape
func.func @left_alone(%q: tensor<1x8x1x64xbf16>, %k: tensor<1x8x50x64xbf16>, %q2: tensor<1x8x2x64xbf16>,
                      %k2: tensor<1x2x50x64xbf16>, %m: tensor<1x1x1x50xbf16>, %qs: tensor<1x1x8x64xbf16>,
                      %ks: tensor<1x50x2x64xbf16>)
    -> (tensor<1x8x1x64xbf16>, tensor<1x8x2x64xbf16>, tensor<1x8x1x64xbf16>, tensor<1x1x8x64xbf16>) {
  %0 = kiln.attention %q, %k, %k : tensor<1x8x1x64xbf16>, tensor<1x8x50x64xbf16>, tensor<1x8x50x64xbf16> -> tensor<1x8x1x64xbf16>
  %1 = kiln.attention %q2, %k2, %k2 : tensor<1x8x2x64xbf16>, tensor<1x2x50x64xbf16>, tensor<1x2x50x64xbf16> -> tensor<1x8x2x64xbf16>
  %q1 = kiln.slice %q2 offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<1x8x2x64xbf16> -> tensor<1x8x1x64xbf16>
  %2 = kiln.attention %q1, %k2, %k2 mask(%m : tensor<1x1x1x50xbf16>) : tensor<1x8x1x64xbf16>, tensor<1x2x50x64xbf16>, tensor<1x2x50x64xbf16> -> tensor<1x8x1x64xbf16>
  %3 = kiln.attention %qs, %ks, %ks {layout = "bshd"} : tensor<1x1x8x64xbf16>, tensor<1x50x2x64xbf16>, tensor<1x50x2x64xbf16> -> tensor<1x1x8x64xbf16>
  return %0, %1, %2, %3 : tensor<1x8x1x64xbf16>, tensor<1x8x2x64xbf16>, tensor<1x8x1x64xbf16>, tensor<1x1x8x64xbf16>
}
