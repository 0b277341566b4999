// RUN: kiln-opt %s -kiln-fold-head-transposes -split-input-file | FileCheck %s

// kiln-fold-head-transposes lets RoPE and attention read the [B, S, H, D] tensors projections write: transposes
// move from rope inputs to rope results, an attention of three [0, 2, 1, 3] transposes becomes seq-major, and the
// transposes left back to back fold away.

// The Llama pattern: RoPE on q and k after the head transposes, GQA causal attention, the transpose back. The
// ropes read positions from dim 1, the attention reads [B, S, H, D], and no transpose is left.
// CHECK-LABEL: func.func @llama_heads
// CHECK-NEXT: %[[Q:.*]] = kiln.rope %arg0, %arg3, %arg4 {seq_dim = 1 : i64} : tensor<2x7x4x16xbf16>
// CHECK-NEXT: %[[K:.*]] = kiln.rope %arg1, %arg3, %arg4 {seq_dim = 1 : i64} : tensor<2x7x2x16xbf16>
// CHECK-NEXT: %[[O:.*]] = kiln.attention %[[Q]], %[[K]], %arg2 causal {layout = "bshd"} : {{.*}} -> tensor<2x7x4x16xbf16>
// CHECK-NEXT: return %[[O]]
func.func @llama_heads(%q: tensor<2x7x4x16xbf16>, %k: tensor<2x7x2x16xbf16>, %v: tensor<2x7x2x16xbf16>,
                       %cos: tensor<7x8xbf16>, %sin: tensor<7x8xbf16>) -> tensor<2x7x4x16xbf16> {
  %qt = kiln.transpose %q [0, 2, 1, 3] : tensor<2x7x4x16xbf16> -> tensor<2x4x7x16xbf16>
  %kt = kiln.transpose %k [0, 2, 1, 3] : tensor<2x7x2x16xbf16> -> tensor<2x2x7x16xbf16>
  %vt = kiln.transpose %v [0, 2, 1, 3] : tensor<2x7x2x16xbf16> -> tensor<2x2x7x16xbf16>
  %qr = kiln.rope %qt, %cos, %sin : tensor<2x4x7x16xbf16>, tensor<7x8xbf16>, tensor<7x8xbf16>
  %kr = kiln.rope %kt, %cos, %sin : tensor<2x2x7x16xbf16>, tensor<7x8xbf16>, tensor<7x8xbf16>
  %o = kiln.attention %qr, %kr, %vt causal : tensor<2x4x7x16xbf16>, tensor<2x2x7x16xbf16>, tensor<2x2x7x16xbf16> -> tensor<2x4x7x16xbf16>
  %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<2x4x7x16xbf16> -> tensor<2x7x4x16xbf16>
  return %ot : tensor<2x7x4x16xbf16>
}

// -----

// The mask and the lse keep their [B, H, Sq, ...] layout; an output used in [B, H, S, D] gets one transpose.
// CHECK-LABEL: func.func @lse_and_mask
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = kiln.attention %arg0, %arg1, %arg2 mask(%arg3 : tensor<1x1x5x9xf32>) {layout = "bshd", scale = 5.000000e-01 : f32} : {{.*}} -> tensor<1x5x2x8xf32>, tensor<1x2x5xf32>
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %[[O]] [0, 2, 1, 3] : tensor<1x5x2x8xf32> -> tensor<1x2x5x8xf32>
// CHECK-NEXT: return %[[T]], %[[LSE]]
func.func @lse_and_mask(%q: tensor<1x5x2x8xf32>, %k: tensor<1x9x2x8xf32>, %v: tensor<1x9x2x8xf32>,
                        %m: tensor<1x1x5x9xf32>) -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>) {
  %qt = kiln.transpose %q [0, 2, 1, 3] : tensor<1x5x2x8xf32> -> tensor<1x2x5x8xf32>
  %kt = kiln.transpose %k [0, 2, 1, 3] : tensor<1x9x2x8xf32> -> tensor<1x2x9x8xf32>
  %vt = kiln.transpose %v [0, 2, 1, 3] : tensor<1x9x2x8xf32> -> tensor<1x2x9x8xf32>
  %o, %lse = kiln.attention %qt, %kt, %vt mask(%m : tensor<1x1x5x9xf32>) {scale = 0.5 : f32} : tensor<1x2x5x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32> -> tensor<1x2x5x8xf32>, tensor<1x2x5xf32>
  return %o, %lse : tensor<1x2x5x8xf32>, tensor<1x2x5xf32>
}

// -----

// v already [B, H, S, D]: nothing changes.
// CHECK-LABEL: func.func @v_not_transposed
// CHECK: kiln.transpose
// CHECK: kiln.transpose
// CHECK: kiln.attention
// CHECK-NOT: layout
func.func @v_not_transposed(%q: tensor<1x5x2x8xf32>, %k: tensor<1x5x2x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32> {
  %qt = kiln.transpose %q [0, 2, 1, 3] : tensor<1x5x2x8xf32> -> tensor<1x2x5x8xf32>
  %kt = kiln.transpose %k [0, 2, 1, 3] : tensor<1x5x2x8xf32> -> tensor<1x2x5x8xf32>
  %o = kiln.attention %qt, %kt, %v : tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// -----

// The transpose has another user: it stays before the rope (moving it would add a kernel).
// CHECK-LABEL: func.func @rope_transpose_shared
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %arg0
// CHECK-NEXT: kiln.rope %[[T]], %arg1, %arg1 :
func.func @rope_transpose_shared(%x: tensor<1x5x2x8xf32>, %t: tensor<5x4xf32>) -> (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) {
  %xt = kiln.transpose %x [0, 2, 1, 3] : tensor<1x5x2x8xf32> -> tensor<1x2x5x8xf32>
  %r = kiln.rope %xt, %t, %t : tensor<1x2x5x8xf32>, tensor<5x4xf32>, tensor<5x4xf32>
  return %r, %xt : tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>
}

// -----

// A transpose that moves the rotated (last) dimension stays.
// CHECK-LABEL: func.func @rope_transpose_moves_last
// CHECK-NEXT: %[[T:.*]] = kiln.transpose %arg0 [0, 1, 3, 2]
// CHECK-NEXT: kiln.rope %[[T]], %arg1, %arg1 interleaved {seq_dim = 1 : i64} :
func.func @rope_transpose_moves_last(%x: tensor<1x5x8x2xf32>, %t: tensor<5x4xf32>) -> tensor<1x5x2x8xf32> {
  %y = kiln.transpose %x [0, 1, 3, 2] : tensor<1x5x8x2xf32> -> tensor<1x5x2x8xf32>
  %r = kiln.rope %y, %t, %t interleaved {seq_dim = 1 : i64} : tensor<1x5x2x8xf32>, tensor<5x4xf32>, tensor<5x4xf32>
  return %r : tensor<1x5x2x8xf32>
}

// -----

// Inputs already [B, H, S, D] (function arguments), the output only transposed back to merge the heads: the
// attention stores [B, S, H, D] itself and the merge is a view.
// CHECK-LABEL: func.func @output_only
// CHECK-NEXT: %[[O:.*]] = kiln.attention %arg0, %arg1, %arg2 causal {out_layout = "bshd"} : {{.*}} -> tensor<1x77x8x64xbf16>
// CHECK-NEXT: %[[H:.*]] = kiln.reshape %[[O]] : tensor<1x77x8x64xbf16> -> tensor<1x77x512xbf16>
// CHECK-NEXT: return %[[H]]
func.func @output_only(%q: tensor<1x8x77x64xbf16>, %k: tensor<1x2x77x64xbf16>, %v: tensor<1x2x77x64xbf16>) -> tensor<1x77x512xbf16> {
  %o = kiln.attention %q, %k, %v causal : tensor<1x8x77x64xbf16>, tensor<1x2x77x64xbf16>, tensor<1x2x77x64xbf16> -> tensor<1x8x77x64xbf16>
  %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<1x8x77x64xbf16> -> tensor<1x77x8x64xbf16>
  %h = kiln.reshape %ot : tensor<1x77x8x64xbf16> -> tensor<1x77x512xbf16>
  return %h : tensor<1x77x512xbf16>
}

// -----

// The output is also used as [B, H, S, D]: nothing changes.
// CHECK-LABEL: func.func @output_used_both_ways
// CHECK: kiln.attention
// CHECK-NOT: out_layout
func.func @output_used_both_ways(%q: tensor<1x2x5x8xf32>) -> (tensor<1x2x5x8xf32>, tensor<1x5x2x8xf32>) {
  %o = kiln.attention %q, %q, %q : tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x2x5x8xf32>
  %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<1x2x5x8xf32> -> tensor<1x5x2x8xf32>
  return %o, %ot : tensor<1x2x5x8xf32>, tensor<1x5x2x8xf32>
}

// -----

// Swapped inputs and an output already stored [B, S, H, D]: the attention reads [B, S, H, D] too and the
// out_layout becomes the default.
// CHECK-LABEL: func.func @inputs_swapped_output_seq_major
// CHECK-NEXT: %[[O:.*]] = kiln.attention %arg0, %arg0, %arg0 {layout = "bshd"} : {{.*}} -> tensor<1x5x2x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @inputs_swapped_output_seq_major(%x: tensor<1x5x2x8xf32>) -> tensor<1x5x2x8xf32> {
  %t = kiln.transpose %x [0, 2, 1, 3] : tensor<1x5x2x8xf32> -> tensor<1x2x5x8xf32>
  %o = kiln.attention %t, %t, %t {out_layout = "bshd"} : tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x5x2x8xf32>
  return %o : tensor<1x5x2x8xf32>
}

// -----

// Swapped inputs and an output explicitly kept [B, H, S, D]: the attribute stays, no transpose appears.
// CHECK-LABEL: func.func @inputs_swapped_output_kept
// CHECK-NEXT: %[[O:.*]] = kiln.attention %arg0, %arg0, %arg0 {layout = "bshd", out_layout = "bhsd"} : {{.*}} -> tensor<1x2x5x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @inputs_swapped_output_kept(%x: tensor<1x5x2x8xf32>) -> tensor<1x2x5x8xf32> {
  %t = kiln.transpose %x [0, 2, 1, 3] : tensor<1x5x2x8xf32> -> tensor<1x2x5x8xf32>
  %o = kiln.attention %t, %t, %t {out_layout = "bhsd"} : tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// -----

// Output-only, with the lse: the lse keeps [B, H, Sq].
// CHECK-LABEL: func.func @output_only_with_lse
// CHECK-NEXT: %[[O:.*]], %[[L:.*]] = kiln.attention %arg0, %arg0, %arg0 {out_layout = "bshd"} : {{.*}} -> tensor<1x5x2x8xf32>, tensor<1x2x5xf32>
// CHECK-NEXT: return %[[O]], %[[L]]
func.func @output_only_with_lse(%q: tensor<1x2x5x8xf32>) -> (tensor<1x5x2x8xf32>, tensor<1x2x5xf32>) {
  %o, %lse = kiln.attention %q, %q, %q : tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x2x5x8xf32>, tensor<1x2x5xf32>
  %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<1x2x5x8xf32> -> tensor<1x5x2x8xf32>
  return %ot, %lse : tensor<1x5x2x8xf32>, tensor<1x2x5xf32>
}

