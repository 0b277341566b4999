// RUN: kiln-opt %s -kiln-gpu-kernel-pipeline="chip=sm_90a" | FileCheck %s

// Attention kernels read Sq and Sk from their parameters: @b (190 queries, 240 keys) launches @a's kernel (250,
// 250), whose four 64-key tiles are also partial and causal. @c's keys are whole tiles (no keys past the end):
// a kernel of its own. A decode step (one query row) over whole key tiles has no tile to mask (@d: one loop, no
// comparison with the diagonal); over a partial last tile it has an unmasked loop and then the masked last tile
// (@e). A decode step reads its number of key tiles too: @f (1000 keys) launches @e's kernel (300), @g (1024)
// @d's (256).
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
// CHECK-LABEL: func.func private @f_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @e_k0_attention_module::@e_k0_attention
// CHECK-SAME: sizes = array<i64: 1, 1000>
// CHECK-LABEL: func.func private @g_k0_attention(
// CHECK-SAME: kiln.gpu_kernel = @d_k0_attention_module::@d_k0_attention
// CHECK-SAME: sizes = array<i64: 1, 1024>
// CHECK: gpu.module @a_k0_attention_module
// CHECK-NOT: gpu.module @b_k0_attention_module
// CHECK: gpu.module @c_k0_attention_module
// CHECK: gpu.module @d_k0_attention_module
// CHECK: gpu.func @d_k0_attention({{.*}}, %{{.*}}: index, %{{.*}}: index) kernel
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK-NOT: arith.cmpi ugt
// CHECK: gpu.module @e_k0_attention_module
// CHECK: scf.for
// CHECK-NOT: arith.cmpi ugt
// CHECK: scf.yield
// CHECK-NOT: scf.for
// CHECK: arith.cmpi ugt
// CHECK-NOT: scf.for
// CHECK-NOT: gpu.module
func.func @a(%q: tensor<1x2x250x64xbf16>) -> tensor<1x2x250x64xbf16> {
  %o = kiln.attention %q, %q, %q causal : tensor<1x2x250x64xbf16>, tensor<1x2x250x64xbf16>, tensor<1x2x250x64xbf16> -> tensor<1x2x250x64xbf16>
  return %o : tensor<1x2x250x64xbf16>
}
func.func @b(%q: tensor<1x2x190x64xbf16>, %k: tensor<1x2x240x64xbf16>) -> tensor<1x2x190x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x190x64xbf16>, tensor<1x2x240x64xbf16>, tensor<1x2x240x64xbf16> -> tensor<1x2x190x64xbf16>
  return %o : tensor<1x2x190x64xbf16>
}
func.func @c(%q: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = kiln.attention %q, %q, %q causal : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16> -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}
func.func @d(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x256x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x1x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16> -> tensor<1x2x1x64xbf16>
  return %o : tensor<1x2x1x64xbf16>
}
func.func @e(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x300x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x1x64xbf16>, tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16> -> tensor<1x2x1x64xbf16>
  return %o : tensor<1x2x1x64xbf16>
}
func.func @f(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x1000x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x1x64xbf16>, tensor<1x2x1000x64xbf16>, tensor<1x2x1000x64xbf16> -> tensor<1x2x1x64xbf16>
  return %o : tensor<1x2x1x64xbf16>
}
func.func @g(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x1024x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = kiln.attention %q, %k, %k causal : tensor<1x2x1x64xbf16>, tensor<1x2x1024x64xbf16>, tensor<1x2x1024x64xbf16> -> tensor<1x2x1x64xbf16>
  return %o : tensor<1x2x1x64xbf16>
}
