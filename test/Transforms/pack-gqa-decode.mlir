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

// An output stored seq-major is the same memory with one row: the step packs, and its output is viewed back as
// [B, 1, Hq, Dv].
// CHECK-LABEL: func.func @seq_major_output
// CHECK: %[[Q:.*]] = kiln.reshape %arg0 : tensor<1x8x1x64xbf16> -> tensor<1x2x4x64xbf16>
// CHECK: %[[O:.*]] = kiln.attention %[[Q]], %arg1, %arg1 : {{.*}} -> tensor<1x2x4x64xbf16>
// CHECK-NOT: out_layout
// CHECK: kiln.reshape %[[O]] : tensor<1x2x4x64xbf16> -> tensor<1x1x8x64xbf16>
func.func @seq_major_output(%q: tensor<1x8x1x64xbf16>, %k: tensor<1x2x50x64xbf16>) -> tensor<1x1x8x64xbf16> {
  %o = kiln.attention %q, %k, %k {out_layout = "bshd"} : tensor<1x8x1x64xbf16>, tensor<1x2x50x64xbf16>, tensor<1x2x50x64xbf16> -> tensor<1x1x8x64xbf16>
  return %o : tensor<1x1x8x64xbf16>
}

// -----

// Left alone: multi-head attention (no group to share a KV head).
// CHECK-LABEL: func.func @multi_head
// CHECK-NEXT: kiln.attention %arg0, %arg1, %arg1
func.func @multi_head(%q: tensor<1x8x1x64xbf16>, %k: tensor<1x8x50x64xbf16>) -> tensor<1x8x1x64xbf16> {
  %0 = kiln.attention %q, %k, %k : tensor<1x8x1x64xbf16>, tensor<1x8x50x64xbf16>, tensor<1x8x50x64xbf16> -> tensor<1x8x1x64xbf16>
  return %0 : tensor<1x8x1x64xbf16>
}

// -----

// Left alone: two query rows (the group's rows would interleave two positions).
// CHECK-LABEL: func.func @two_rows
// CHECK-NEXT: kiln.attention %arg0, %arg1, %arg1
func.func @two_rows(%q: tensor<1x8x2x64xbf16>, %k: tensor<1x2x50x64xbf16>) -> tensor<1x8x2x64xbf16> {
  %0 = kiln.attention %q, %k, %k : tensor<1x8x2x64xbf16>, tensor<1x2x50x64xbf16>, tensor<1x2x50x64xbf16> -> tensor<1x8x2x64xbf16>
  return %0 : tensor<1x8x2x64xbf16>
}

// -----

// Left alone: a mask (it broadcasts over the query heads).
// CHECK-LABEL: func.func @masked
// CHECK-NEXT: kiln.attention %arg0, %arg1, %arg1 mask(%arg2
func.func @masked(%q: tensor<1x8x1x64xbf16>, %k: tensor<1x2x50x64xbf16>, %m: tensor<1x1x1x50xbf16>) -> tensor<1x8x1x64xbf16> {
  %0 = kiln.attention %q, %k, %k mask(%m : tensor<1x1x1x50xbf16>) : tensor<1x8x1x64xbf16>, tensor<1x2x50x64xbf16>, tensor<1x2x50x64xbf16> -> tensor<1x8x1x64xbf16>
  return %0 : tensor<1x8x1x64xbf16>
}

// -----

// Left alone: an epilogue (its operands broadcast against the query heads).
// CHECK-LABEL: func.func @with_epilogue
// CHECK-NEXT: kiln.attention %arg0, %arg1, %arg1 epilogue(%arg2
func.func @with_epilogue(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x50x64xf32>, %g: tensor<64xf32>) -> tensor<1x8x1x64xf32> {
  %0 = kiln.attention %q, %k, %k epilogue(%g : tensor<64xf32>) {
  ^bb0(%acc: f32, %gate: f32):
    %m = arith.mulf %acc, %gate : f32
    kiln.yield %m : f32
  } : tensor<1x8x1x64xf32>, tensor<1x2x50x64xf32>, tensor<1x2x50x64xf32> -> tensor<1x8x1x64xf32>
  return %0 : tensor<1x8x1x64xf32>
}

// -----

// Left alone: seq-major q, k and v (k and v keep their [B, Sk, Hkv, D] layout, which the packed q cannot share).
// CHECK-LABEL: func.func @seq_major
// CHECK-NEXT: kiln.attention %arg0, %arg1, %arg1
func.func @seq_major(%q: tensor<1x1x8x64xbf16>, %k: tensor<1x50x2x64xbf16>) -> tensor<1x1x8x64xbf16> {
  %0 = kiln.attention %q, %k, %k {layout = "bshd"} : tensor<1x1x8x64xbf16>, tensor<1x50x2x64xbf16>, tensor<1x50x2x64xbf16> -> tensor<1x1x8x64xbf16>
  return %0 : tensor<1x1x8x64xbf16>
}

// -----

// A mask_mod that reads neither the head nor the query position (a paged sequence's length, as
// kiln-expand-paged-attention writes it) means the same for the packed rows: the attention packs, the mask_mod
// and its operand move over.
// CHECK-LABEL: func.func @paged_length_mask
// CHECK: %[[Q2:.+]] = kiln.reshape %{{.+}} : tensor<2x32x1x64xbf16> -> tensor<2x8x4x64xbf16>
// CHECK: kiln.attention %[[Q2]], %{{.+}}, %{{.+}} mod_operands(%{{.+}} : tensor<2xi32>) mask_mod {
// CHECK: arith.cmpi slt
// CHECK: } {scale = 1.250000e-01 : f32} : tensor<2x8x4x64xbf16>, tensor<2x8x512x64xbf16>, tensor<2x8x512x64xbf16> -> tensor<2x8x4x64xbf16>
func.func @paged_length_mask(%q: tensor<2x32x1x64xbf16>, %k: tensor<2x8x512x64xbf16>, %v: tensor<2x8x512x64xbf16>,
                             %l: tensor<2xi32>) -> tensor<2x32x1x64xbf16> {
  %o = kiln.attention %q, %k, %v mod_operands(%l : tensor<2xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %lens: tensor<2xi32>):
    %n = tensor.extract %lens[%b] : tensor<2xi32>
    %len = arith.index_cast %n : i32 to index
    %seen = arith.cmpi slt, %j, %len : index
    kiln.yield %seen : i1
  } {scale = 0.125 : f32} : tensor<2x32x1x64xbf16>, tensor<2x8x512x64xbf16>, tensor<2x8x512x64xbf16> -> tensor<2x32x1x64xbf16>
  return %o : tensor<2x32x1x64xbf16>
}

// -----

// A mask_mod that reads the query position would see the group's rows as positions: left alone.
// CHECK-LABEL: func.func @query_position_mask
// CHECK-NOT: kiln.reshape
// CHECK: kiln.attention %{{.+}}, %{{.+}}, %{{.+}} mask_mod {
func.func @query_position_mask(%q: tensor<2x32x1x64xbf16>, %k: tensor<2x8x512x64xbf16>, %v: tensor<2x8x512x64xbf16>)
    -> tensor<2x32x1x64xbf16> {
  %o = kiln.attention %q, %k, %v mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %seen = arith.cmpi sle, %j, %i : index
    kiln.yield %seen : i1
  } : tensor<2x32x1x64xbf16>, tensor<2x8x512x64xbf16>, tensor<2x8x512x64xbf16> -> tensor<2x32x1x64xbf16>
  return %o : tensor<2x32x1x64xbf16>
}
