// RUN: kiln-opt %s -split-input-file -kiln-outline-kernels -kiln-select-config=target=sm_90a -kiln-tile -canonicalize -kiln-decompose-rows -kiln-assign-layouts -convert-kiln-to-gpu -kiln-group-kernels | FileCheck %s

// kiln-group-kernels launches consecutive independent GPU kernels of the same kind as one kernel.

// Two projections of the same activation: one call of a grouped kernel (inputs of both, then both outputs) whose
// 1-D grid holds both members' blocks (4 + 2); the reshape of the first result moves after the call. Each member
// runs under the test for its block range, with its own block index recomputed. The members' sizes (M, N and K
// of the size-generic matmul kernels) become constants: the grouped kernel takes buffers only. (Pinned to the
// mma_sync kernel: a 64-row GEMM's default on sm_90a is the wgmma one, grouped below.)
// CHECK-LABEL: func.func private @projections_k0_matmul_x2(
// CHECK-SAME: kiln.gpu_kernel = @kiln_kernels::@projections_k0_matmul_x2
// CHECK-SAME: grid = array<i64: 6, 1, 1>}
// CHECK: kiln.matmul
// CHECK: kiln.matmul
// CHECK-LABEL: func.func @projections(
// CHECK: %[[R:.*]]:2 = call @projections_k0_matmul_x2(%arg0, %arg1, %arg0, %arg2, %{{.*}}, %{{.*}})
// CHECK-NEXT: %[[V:.*]] = kiln.reshape %[[R]]#0
// CHECK-NEXT: return %[[V]], %[[R]]#1
// The member kernels are gone; the first member's grid is [4, 1, 1]: x = l % 4, y = (l / 4) % 1, z = l / 4.
// CHECK-NOT: gpu.func @projections_k0_matmul(
// CHECK-NOT: gpu.func @projections_k1_matmul(
// CHECK: gpu.func @projections_k0_matmul_x2(
// CHECK-SAME: memref<1099511627776xbf16>) kernel
// CHECK: %[[B:.*]] = gpu.block_id x
// CHECK: arith.cmpi ult, %[[B]], %c4
// CHECK: scf.if
// CHECK-NEXT: %[[L:.*]] = arith.subi %[[B]], %c0
// CHECK-NEXT: arith.constant 64 : index
// CHECK-NEXT: arith.constant 128 : index
// CHECK-NEXT: arith.constant 128 : index
// CHECK: arith.remui %[[L]], %c4
// CHECK-NEXT: %[[Q:.*]] = arith.divui %[[L]], %c4
// CHECK-NEXT: arith.remui %[[Q]], %c1
// CHECK-NEXT: arith.divui %[[L]], %c4
// CHECK-NOT: gpu.block_id
// CHECK: arith.cmpi ult, %[[B]], %c6
// CHECK: scf.if
// CHECK-NEXT: arith.subi %[[B]], %c4
// CHECK-NOT: gpu.block_id
// CHECK: gpu.return
// CHECK-NOT: gpu.func @projections_k1_matmul(
func.func @projections(%x: tensor<64x128xbf16>, %wq: tensor<128x128xbf16>, %wk: tensor<128x64xbf16>) -> (tensor<64x2x64xbf16>, tensor<64x64xbf16>) {
  %q = kiln.matmul %x, %wq {kiln.config = #kiln.config<tile = [64, 32, 128], warps = 8, stages = 4, lowering = "mma_sync">} : tensor<64x128xbf16>, tensor<128x128xbf16> -> tensor<64x128xbf16>
  %qh = kiln.reshape %q : tensor<64x128xbf16> -> tensor<64x2x64xbf16>
  %k = kiln.matmul %x, %wk {kiln.config = #kiln.config<tile = [64, 32, 128], warps = 8, stages = 4, lowering = "mma_sync">} : tensor<64x128xbf16>, tensor<128x64xbf16> -> tensor<64x64xbf16>
  return %qh, %k : tensor<64x2x64xbf16>, tensor<64x64xbf16>
}

// -----

// Prefill projections take the wgmma kernel, which reads its tiles through tensor maps: the grouped kernel takes
// both members' maps after all the buffers (kiln.tensor_map_params), and the launch lists them with their
// buffers renumbered to the grouped kernel's parameters (x, wq, x, wk: 0 to 3).
// CHECK-LABEL: func.func private @prefill_k0_matmul_x2(
// CHECK-SAME: tensor_maps = [{box = array<i64: 64, 128, 1>, buffer = 0 : i64, dims = array<i64: 128, 200, 1>, {{.*}}}, {box = array<i64: 64, 64, 1>, buffer = 1 : i64, dims = array<i64: 128, 128, 1>, {{.*}}}, {box = array<i64: 64, 128, 1>, buffer = 2 : i64, dims = array<i64: 128, 200, 1>, {{.*}}}, {box = array<i64: 64, 64, 1>, buffer = 3 : i64, dims = array<i64: 64, 128, 1>, {{.*}}}]
// CHECK-LABEL: func.func @prefill(
// CHECK: call @prefill_k0_matmul_x2(%arg0, %arg1, %arg0, %arg2, %{{.*}}, %{{.*}})
// CHECK: gpu.func @prefill_k0_matmul_x2(%{{.*}}: memref<1099511627776xbf16>, %[[MAP0:.*]]: !llvm.ptr, %[[MAP1:.*]]: !llvm.ptr, %[[MAP2:.*]]: !llvm.ptr, %[[MAP3:.*]]: !llvm.ptr) kernel attributes {kiln.tensor_map_params = array<i64: 6, 7, 8, 9>
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP0]],
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP1]],
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP2]],
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP3]],
// CHECK: gpu.return
func.func @prefill(%x: tensor<200x128xbf16>, %wq: tensor<128x128xbf16>, %wk: tensor<128x64xbf16>) -> (tensor<200x128xbf16>, tensor<200x64xbf16>) {
  %q = kiln.matmul %x, %wq : tensor<200x128xbf16>, tensor<128x128xbf16> -> tensor<200x128xbf16>
  %k = kiln.matmul %x, %wk : tensor<200x128xbf16>, tensor<128x64xbf16> -> tensor<200x64xbf16>
  return %q, %k : tensor<200x128xbf16>, tensor<200x64xbf16>
}

// -----

// Five such projections: a group takes four (eight tensor maps, the most a kernel may take); the fifth launches
// alone.
// CHECK-LABEL: func.func @five(
// CHECK: call @five_k0_matmul_x4(
// CHECK: call @five_k4_matmul(
func.func @five(%x: tensor<200x128xbf16>, %w1: tensor<128x64xbf16>, %w2: tensor<128x64xbf16>, %w3: tensor<128x64xbf16>, %w4: tensor<128x64xbf16>, %w5: tensor<128x64xbf16>) -> (tensor<200x64xbf16>, tensor<200x64xbf16>, tensor<200x64xbf16>, tensor<200x64xbf16>, tensor<200x64xbf16>) {
  %a = kiln.matmul %x, %w1 : tensor<200x128xbf16>, tensor<128x64xbf16> -> tensor<200x64xbf16>
  %b = kiln.matmul %x, %w2 : tensor<200x128xbf16>, tensor<128x64xbf16> -> tensor<200x64xbf16>
  %c = kiln.matmul %x, %w3 : tensor<200x128xbf16>, tensor<128x64xbf16> -> tensor<200x64xbf16>
  %d = kiln.matmul %x, %w4 : tensor<200x128xbf16>, tensor<128x64xbf16> -> tensor<200x64xbf16>
  %e = kiln.matmul %x, %w5 : tensor<200x128xbf16>, tensor<128x64xbf16> -> tensor<200x64xbf16>
  return %a, %b, %c, %d, %e : tensor<200x64xbf16>, tensor<200x64xbf16>, tensor<200x64xbf16>, tensor<200x64xbf16>, tensor<200x64xbf16>
}

// -----

// The second matmul reads the first's result: two launches.
// CHECK-LABEL: func.func @dependent(
// CHECK: call @dependent_k0_matmul(
// CHECK: call @dependent_k1_matmul(
func.func @dependent(%x: tensor<64x128xbf16>, %w1: tensor<128x128xbf16>, %w2: tensor<128x64xbf16>) -> tensor<64x64xbf16> {
  %h = kiln.matmul %x, %w1 : tensor<64x128xbf16>, tensor<128x128xbf16> -> tensor<64x128xbf16>
  %y = kiln.matmul %h, %w2 : tensor<64x128xbf16>, tensor<128x64xbf16> -> tensor<64x64xbf16>
  return %y : tensor<64x64xbf16>
}

// -----

// GPT-2's three slices of the fused qkv: one launch.
// CHECK-LABEL: func.func @slices(
// CHECK: %[[R:.*]]:3 = call @slices_k0_slice_x3(
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @slices(%qkv: tensor<2x20x96xbf16>) -> (tensor<2x20x32xbf16>, tensor<2x20x32xbf16>, tensor<2x20x32xbf16>) {
  %q = kiln.slice %qkv offsets [0, 0, 0] strides [1, 1, 1] : tensor<2x20x96xbf16> -> tensor<2x20x32xbf16>
  %k = kiln.slice %qkv offsets [0, 0, 32] strides [1, 1, 1] : tensor<2x20x96xbf16> -> tensor<2x20x32xbf16>
  %v = kiln.slice %qkv offsets [0, 0, 64] strides [1, 1, 1] : tensor<2x20x96xbf16> -> tensor<2x20x32xbf16>
  return %q, %k, %v : tensor<2x20x32xbf16>, tensor<2x20x32xbf16>, tensor<2x20x32xbf16>
}

// -----

// A matmul and a rope are different kinds of kernel (different registers and shared memory): two launches.
// CHECK-LABEL: func.func @different_kinds(
// CHECK: call @different_kinds_k0_matmul(
// CHECK: call @different_kinds_k1_rope(
func.func @different_kinds(%x: tensor<64x128xbf16>, %w: tensor<128x128xbf16>, %r: tensor<1x77x2x64xbf16>, %t: tensor<77x32xbf16>) -> (tensor<64x128xbf16>, tensor<1x77x2x64xbf16>) {
  %y = kiln.matmul %x, %w : tensor<64x128xbf16>, tensor<128x128xbf16> -> tensor<64x128xbf16>
  %z = kiln.rope %r, %t, %t {seq_dim = 1 : i64} : tensor<1x77x2x64xbf16>, tensor<77x32xbf16>, tensor<77x32xbf16>
  return %y, %z : tensor<64x128xbf16>, tensor<1x77x2x64xbf16>
}

// -----

// The second projection reads a view of the first one's result: two launches.
// CHECK-LABEL: func.func @reads_a_view(
// CHECK: call @reads_a_view_k0_matmul(
// CHECK: kiln.reshape
// CHECK: call @reads_a_view_k1_matmul(
func.func @reads_a_view(%x: tensor<64x128xbf16>, %w: tensor<128x128xbf16>) -> tensor<128x128xbf16> {
  %y = kiln.matmul %x, %w : tensor<64x128xbf16>, tensor<128x128xbf16> -> tensor<64x128xbf16>
  %v = kiln.reshape %y : tensor<64x128xbf16> -> tensor<128x64xbf16>
  %z = kiln.matmul %v, %x : tensor<128x64xbf16>, tensor<64x128xbf16> -> tensor<128x128xbf16>
  return %z : tensor<128x128xbf16>
}
