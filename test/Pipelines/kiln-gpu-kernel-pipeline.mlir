// RUN: kiln-opt %s -kiln-gpu-kernel-pipeline="chip=sm_90a" | FileCheck %s

// Attention kernels read Sq and Sk from their parameters: @b (190 queries, 240 keys) launches @a's kernel (250,
// 250), whose four 64-key tiles are also partial and causal. @c's keys are whole tiles (no keys past the end):
// a kernel of its own. @a to @c are sm_90a "wgmma" kernels (head dim 64), lowered from their tiled loops (with
// distinct q and k: an attention of one tensor with itself reads it through one parameter, a kernel of its own).
//
// A decode step (one query row; 4 x 128 heads, enough query tiles that kiln-split-kv leaves it whole) is an
// "mma_sync" attention, tiled and lowered from its tiled IR: the key loop
// bound and maskFrom are computed in the kernel from Sk. The one row sees every key, so only the last key tile,
// when it is partial, is masked (kiln.one_masked_tile): kiln-split-masked-tiles leaves one key loop of the tiles
// before the split point, without mask arithmetic, and the GPU lowering runs the tile at the split point once
// after it, when the split point is below the key bound: after the last copies have landed (numGroups 0), an
// scf.if whose first op is a barrier, with the key-end (sge Sk) and causal (sgt) comparisons, and no copies of
// its own (the loop's last prefetch, or the prologue's, brought its K/V tile). The kernel serves every length
// with the same whole or partial last key tile: over whole key tiles (@d) the K/V tile copies are not clamped to
// the keys left; over a partial last tile (@e) the loop clamps them (arith.minsi). @f (1000 keys) launches @e's
// kernel (300), @g (1024) @d's (256).
// CHECK-LABEL: func.func private @a_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @a_k0_attention_module::@a_k0_attention
// CHECK-SAME: sizes = array<i64: 250, 250>
// CHECK-LABEL: func.func private @b_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @a_k0_attention_module::@a_k0_attention
// CHECK-SAME: sizes = array<i64: 190, 240>
// CHECK-LABEL: func.func private @c_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @c_k0_attention_module::@c_k0_attention
// CHECK-LABEL: func.func private @d_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @d_k0_attention_module::@d_k0_attention
// CHECK-SAME: sizes = array<i64: 1, 256>
// CHECK-LABEL: func.func private @e_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @e_k0_attention_module::@e_k0_attention
// CHECK-SAME: sizes = array<i64: 1, 300>
// CHECK-LABEL: func.func private @f_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @e_k0_attention_module::@e_k0_attention
// CHECK-SAME: sizes = array<i64: 1, 1000>
// CHECK-LABEL: func.func private @g_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @d_k0_attention_module::@d_k0_attention
// CHECK-SAME: sizes = array<i64: 1, 1024>
// Decode steps of batch 1 and two heads (two query tiles) are split by kiln-split-kv into 256-key chunks: 4 of
// them over @h's 1000 keys, 6 over @i's 1300, one block per (chunk, head). The chunk loop is the outermost
// dimension of the block index, so the kernel does not depend on the number of chunks: @i launches @h's kernel.
// Each is followed by its merge of the chunks.
// CHECK-LABEL: func.func private @h_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @h_k0_attention_module::@h_k0_attention
// CHECK-SAME: grid = array<i64: 8, 1, 1>, sizes = array<i64: 1, 1000>
// CHECK-LABEL: func.func private @h_k1_merge_splits(
// CHECK-LABEL: func.func private @i_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @h_k0_attention_module::@h_k0_attention
// CHECK-SAME: grid = array<i64: 12, 1, 1>, sizes = array<i64: 1, 1300>
// CHECK-LABEL: func.func private @i_k1_merge_splits(
// CHECK: gpu.module @a_k0_attention_module
// CHECK-NOT: gpu.module @b_k0_attention_module
// CHECK: gpu.module @c_k0_attention_module
// CHECK: gpu.module @d_k0_attention_module
// CHECK: gpu.func @d_k0_attention({{.*}}, %{{.*}}: index, %[[D_SK:[a-zA-Z0-9_]+]]: index) kernel
// CHECK: %[[D_KEY_END:[a-zA-Z0-9_]+]] = arith.minsi %{{.*}}, %[[D_SK]] : index
// CHECK: %[[D_SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %{{.*}}, %[[D_KEY_END]] : index
// CHECK-NOT: arith.minsi
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[D_SPLIT]] step
// CHECK-NOT: arith.minsi
// CHECK-NOT: arith.cmpi sge
// CHECK-NOT: arith.cmpi sgt
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NOT: scf.for
// CHECK: %[[D_REACHED:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[D_SPLIT]], %[[D_KEY_END]] : index
// CHECK-NEXT: scf.if %[[D_REACHED]] -> (
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: arith.minsi
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: arith.cmpi sge, %{{.*}}, %[[D_SK]] : index
// CHECK: arith.cmpi sgt
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// CHECK-NOT: scf.for
// CHECK: gpu.return
// CHECK: gpu.module @e_k0_attention_module
// CHECK: gpu.func @e_k0_attention({{.*}}, %{{.*}}: index, %[[E_SK:[a-zA-Z0-9_]+]]: index) kernel
// CHECK: %[[E_C64:[a-zA-Z0-9_]+]] = arith.constant 64 : index
// CHECK: %[[E_KEY_END:[a-zA-Z0-9_]+]] = arith.minsi %{{.*}}, %[[E_SK]] : index
// CHECK: %[[E_SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %{{.*}}, %[[E_KEY_END]] : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[E_SPLIT]] step
// CHECK-NOT: arith.cmpi sge
// CHECK: arith.minsi %{{.*}}, %[[E_C64]] : index
// CHECK-NOT: arith.cmpi sge
// CHECK-NOT: arith.cmpi sgt
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NOT: scf.for
// CHECK: %[[E_REACHED:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[E_SPLIT]], %[[E_KEY_END]] : index
// CHECK-NEXT: scf.if %[[E_REACHED]] -> (
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: arith.cmpi sge, %{{.*}}, %[[E_SK]] : index
// CHECK: arith.cmpi sgt
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// CHECK-NOT: scf.for
// CHECK: gpu.return
// CHECK-NOT: gpu.module @{{[fg]}}_k0_attention_module
// CHECK: gpu.module @h_k0_attention_module
// CHECK: gpu.module @h_k1_merge_splits_module
// CHECK-NOT: gpu.module @i_k0_attention_module
func.func @a(%q: tensor<1x2x250x64xbf16>, %k: tensor<1x2x250x64xbf16>) -> tensor<1x2x250x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x250x64xbf16>, tensor<1x2x250x64xbf16>, tensor<1x2x250x64xbf16> -> tensor<1x2x250x64xbf16>
  return %o : tensor<1x2x250x64xbf16>
}
func.func @b(%q: tensor<1x2x190x64xbf16>, %k: tensor<1x2x240x64xbf16>) -> tensor<1x2x190x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x190x64xbf16>, tensor<1x2x240x64xbf16>, tensor<1x2x240x64xbf16> -> tensor<1x2x190x64xbf16>
  return %o : tensor<1x2x190x64xbf16>
}
func.func @c(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16> -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}
func.func @d(%q: tensor<4x128x1x64xbf16>, %k: tensor<4x128x256x64xbf16>) -> tensor<4x128x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<4x128x1x64xbf16>, tensor<4x128x256x64xbf16>, tensor<4x128x256x64xbf16> -> tensor<4x128x1x64xbf16>
  return %o : tensor<4x128x1x64xbf16>
}
func.func @e(%q: tensor<4x128x1x64xbf16>, %k: tensor<4x128x300x64xbf16>) -> tensor<4x128x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<4x128x1x64xbf16>, tensor<4x128x300x64xbf16>, tensor<4x128x300x64xbf16> -> tensor<4x128x1x64xbf16>
  return %o : tensor<4x128x1x64xbf16>
}
func.func @f(%q: tensor<4x128x1x64xbf16>, %k: tensor<4x128x1000x64xbf16>) -> tensor<4x128x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<4x128x1x64xbf16>, tensor<4x128x1000x64xbf16>, tensor<4x128x1000x64xbf16> -> tensor<4x128x1x64xbf16>
  return %o : tensor<4x128x1x64xbf16>
}
func.func @g(%q: tensor<4x128x1x64xbf16>, %k: tensor<4x128x1024x64xbf16>) -> tensor<4x128x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<4x128x1x64xbf16>, tensor<4x128x1024x64xbf16>, tensor<4x128x1024x64xbf16> -> tensor<4x128x1x64xbf16>
  return %o : tensor<4x128x1x64xbf16>
}
func.func @h(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x1000x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = kiln.attention %q, %k, %k : tensor<1x2x1x64xbf16>, tensor<1x2x1000x64xbf16>, tensor<1x2x1000x64xbf16> -> tensor<1x2x1x64xbf16>
  return %o : tensor<1x2x1x64xbf16>
}
func.func @i(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x1300x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = kiln.attention %q, %k, %k : tensor<1x2x1x64xbf16>, tensor<1x2x1300x64xbf16>, tensor<1x2x1300x64xbf16> -> tensor<1x2x1x64xbf16>
  return %o : tensor<1x2x1x64xbf16>
}
