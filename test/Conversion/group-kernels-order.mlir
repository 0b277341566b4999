// RUN: kiln-opt %s --kiln-gpu-kernel-pipeline="chip=sm_90a" | FileCheck %s

// kiln-group-kernels first brings independent calls of one kernel kind next to each other: a decode step's q and
// k chains (a projection, then RoPE at each sequence's position) are written chain by chain, and become the two
// projections in one launch, then the two RoPEs in one launch. The append that updates the caches in place
// keeps every call on its side: the attention, reading the appended caches, comes after it.
// CHECK-LABEL: func.func @qk_chains
// CHECK-NOT: call
// CHECK: call @qk_chains_k0_matmul_x2(
// CHECK-NOT: call
// CHECK: call @qk_chains_k1_rope_x2(
// CHECK: call @qk_chains_k{{[0-9]+}}_append_kv(
// CHECK: call @qk_chains_k{{[0-9]+}}_attention(
// CHECK-NOT: call
// CHECK: return
func.func @qk_chains(%x: tensor<2x256xbf16>, %wq: tensor<256x256xbf16>, %wk: tensor<256x128xbf16>,
                     %cos: tensor<2x32xbf16>, %sin: tensor<2x32xbf16>, %kc: tensor<16x16x2x64xbf16>,
                     %vc: tensor<16x16x2x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x8xi32>,
                     %pos: tensor<2xi32>, %lens: tensor<2xi32>)
    -> (tensor<2x4x1x64xbf16>, tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>) {
  %q0 = kiln.matmul %x, %wq : tensor<2x256xbf16>, tensor<256x256xbf16> -> tensor<2x256xbf16>
  %q1 = kiln.reshape %q0 : tensor<2x256xbf16> -> tensor<2x4x64xbf16>
  %q2 = kiln.rope %q1, %cos, %sin {seq_dim = 0 : i64} : tensor<2x4x64xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>
  %k0 = kiln.matmul %x, %wk : tensor<2x256xbf16>, tensor<256x128xbf16> -> tensor<2x128xbf16>
  %k1 = kiln.reshape %k0 : tensor<2x128xbf16> -> tensor<2x2x64xbf16>
  %k2 = kiln.rope %k1, %cos, %sin {seq_dim = 0 : i64} : tensor<2x2x64xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>
  %k3 = kiln.reshape %k2 : tensor<2x2x64xbf16> -> tensor<2x2x1x64xbf16>
  %kc2, %vc2 = kiln.append_kv %kc, %vc, %k3, %v, %table, %pos : tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x8xi32>, tensor<2xi32>
      -> tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>
  %q3 = kiln.reshape %q2 : tensor<2x4x64xbf16> -> tensor<2x4x1x64xbf16>
  %o = kiln.paged_attention %q3, %kc2, %vc2, %table, %lens : tensor<2x4x1x64xbf16>, tensor<16x16x2x64xbf16>,
      tensor<16x16x2x64xbf16>, tensor<2x8xi32>, tensor<2xi32> -> tensor<2x4x1x64xbf16>
  return %o, %kc2, %vc2 : tensor<2x4x1x64xbf16>, tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>
}

// A call that updates buffers in place keeps every call on its side: the projection after the append, though
// independent of it and of the same kind as the one before, is not pulled ahead of it (nor the attention over the
// old caches, before it, behind it).
// CHECK-LABEL: func.func @in_place_barrier
// CHECK: call @in_place_barrier_k0_matmul(
// CHECK-NOT: call
// CHECK: call @in_place_barrier_k1_attention(
// CHECK-NOT: call
// CHECK: call @in_place_barrier_k2_append_kv(
// CHECK-NOT: call
// CHECK: call @in_place_barrier_k3_matmul(
func.func @in_place_barrier(%x: tensor<2x256xbf16>, %w1: tensor<256x256xbf16>, %w2: tensor<256x256xbf16>,
                            %q: tensor<2x4x1x64xbf16>, %kc: tensor<16x16x2x64xbf16>, %vc: tensor<16x16x2x64xbf16>,
                            %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x8xi32>,
                            %pos: tensor<2xi32>, %lens: tensor<2xi32>)
    -> (tensor<2x256xbf16>, tensor<2x4x1x64xbf16>, tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>, tensor<2x256xbf16>) {
  %a = kiln.matmul %x, %w1 : tensor<2x256xbf16>, tensor<256x256xbf16> -> tensor<2x256xbf16>
  %o = kiln.paged_attention %q, %kc, %vc, %table, %lens : tensor<2x4x1x64xbf16>, tensor<16x16x2x64xbf16>,
      tensor<16x16x2x64xbf16>, tensor<2x8xi32>, tensor<2xi32> -> tensor<2x4x1x64xbf16>
  %kc2, %vc2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x8xi32>, tensor<2xi32>
      -> tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>
  %b = kiln.matmul %x, %w2 : tensor<2x256xbf16>, tensor<256x256xbf16> -> tensor<2x256xbf16>
  return %a, %o, %kc2, %vc2, %b : tensor<2x256xbf16>, tensor<2x4x1x64xbf16>, tensor<16x16x2x64xbf16>, tensor<16x16x2x64xbf16>, tensor<2x256xbf16>
}
