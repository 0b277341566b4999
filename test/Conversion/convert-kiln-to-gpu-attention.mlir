// RUN: kiln-opt %s -split-input-file -kiln-tile -canonicalize -kiln-online-softmax -kiln-split-masked-tiles -kiln-assign-layouts -convert-kiln-to-gpu=chip=sm_80 -verify-diagnostics | FileCheck %s

// An mma_sync attention is lowered from its tiled loop (kiln-tile, kiln-online-softmax, kiln-split-masked-tiles
// and kiln-assign-layouts, as the GPU pipeline runs them) by its #kiln.mma_layout: one column of BQ / 16 warps,
// each owning 16 query rows. The sm_90a "wgmma" attention is in convert-kiln-to-gpu-wgmma-attention.mlir.

// Causal bf16 attention, 300 queries and keys, 64 x 64 tiles, 4 warps: one block per (head, query tile), 2 x 5
// of them. Shared memory holds the Q tile and two-slot K and V rings, rows padded by 16 bytes: 2 x (64 x 72 +
// 2 x 64 x 72 + 2 x 64 x 72) = 46080 bytes. The kernel is size-generic: its buffers are typed 2^40 elements long
// and Sq and Sk are its two index parameters (300 and 300 in the launch's sizes); the block's query tile, the
// causal key bound min(Sk, i + 64 + Sk - Sq) and the split point (the first key tile at or past maskFrom) are
// computed from them. Q's copy (cp.async) starts as soon as its slice is known, before the key bounds are
// computed (a mask's table searches run while it lands), and Q is read once as ldmatrix A fragments; the first
// K/V tile is in flight before the loops, and each iteration issues the next tile's copies into the other slot
// before waiting for its own. Two key loops (kiln-split-masked-tiles; causal over many query rows, several key tiles may cross
// the diagonal): up to the split point with no mask arithmetic, then to the key bound with the position mask
// (keys >= Sk or beyond the diagonal Sk - Sq: -inf). In both: K by ldmatrix, S = Q K^T by mma.sync m16n8k16,
// scaled by 1/8 * log2(e) (the row max taken before the scale and scaled once, the scale contracting into the
// exponent's subtraction: fastmath<contract>), the row max across the quad by shuffles (xor 1 and 2), exp2, P
// rounded to bf16 and
// fed as A fragments to P V with V read by ldmatrix.trans. The row sum l stays each lane's share (no shuffles in
// the loops: QuadPartialSums.h); after the loops the quad adds the shares, and acc / l (rcp.approx) is stored
// two bf16 columns at a time.
// CHECK-LABEL: func.func private @k0_attention
// CHECK-SAME: kiln.gpu_kernel = @kiln_kernels::@k0_attention
// CHECK-SAME: kiln.launch = {block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 46080 : i64, grid = array<i64: 10, 1, 1>, sizes = array<i64: 300, 300>}
// CHECK: gpu.module @kiln_kernels
// CHECK: gpu.func @k0_attention(%{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %[[SQ:[a-zA-Z0-9_]+]]: index, %[[SK:[a-zA-Z0-9_]+]]: index) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.block_id x
// CHECK: arith.addi %[[SQ]], %{{.*}} : index
// CHECK: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1} : memref<1099511627776xbf16> to memref<{{.*}}xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_create_group
// CHECK: %[[KEY_END:[a-zA-Z0-9_]+]] = arith.minsi %[[SK]], %{{.*}} : index
// CHECK: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %{{.*}}, %[[KEY_END]] : index
// CHECK-NOT: scf.for
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[SPLIT]] step %{{.*}} iter_args
// CHECK-NOT: arith.cmpi sge
// CHECK-NOT: arith.cmpi sgt
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<{{.*}}xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK: arith.constant 0.180336878 : f32
// CHECK-NOT: arith.cmpi sge
// CHECK-NOT: arith.cmpi sgt
// CHECK: gpu.shuffle  xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: arith.maximumf
// CHECK: arith.subf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK-NEXT: math.exp2
// CHECK-NOT: gpu.shuffle
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<{{.*}}xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvvm.mma.sync
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: scf.for %{{.*}} = %[[SPLIT]] to %[[KEY_END]] step %{{.*}} iter_args
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync
// CHECK: %[[DIAGONAL:[a-zA-Z0-9_]+]] = arith.subi %[[SK]], %[[SQ]] : index
// CHECK: %[[PAST_END:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY:[a-zA-Z0-9_]+]], %[[SK]] : index
// CHECK-NEXT: %[[LIMIT:[a-zA-Z0-9_]+]] = arith.addi %{{.*}}, %[[DIAGONAL]] : index
// CHECK-NEXT: %[[FUTURE:[a-zA-Z0-9_]+]] = arith.cmpi sgt, %[[KEY]], %[[LIMIT]] : index
// CHECK-NEXT: %[[MASKED:[a-zA-Z0-9_]+]] = arith.ori %[[PAST_END]], %[[FUTURE]] : i1
// CHECK-NEXT: arith.select %[[MASKED]], %{{.*}}, %{{.*}} : f32
// CHECK: gpu.shuffle  xor
// CHECK: math.exp2
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: nvvm.mma.sync
// CHECK: scf.yield
// CHECK-NOT: scf.for
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK: gpu.shuffle  xor
// A row that saw no key (l = 0) divides by 1: zeros, not NaN.
// CHECK: %[[EMPTY:.+]] = arith.cmpf oeq, %[[L:[a-zA-Z0-9_#]+]], %{{.*}} : f32
// CHECK: %[[DIVISOR:.+]] = arith.select %[[EMPTY]], %{{.*}}, %[[L]] : f32
// CHECK: nvvm.rcp.approx.ftz.f %[[DIVISOR]]
// CHECK: scf.if
// CHECK: vector.store {{.*}} {alignment = 4 : i64} : memref<1099511627776xbf16>, vector<2xbf16>
// CHECK: gpu.return
module {
  func.func private @k0_attention(%q: tensor<1x2x300x64xbf16>, %k: tensor<1x2x300x64xbf16>, %v: tensor<1x2x300x64xbf16>, %out: tensor<1x2x300x64xbf16>) -> tensor<1x2x300x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16> -> tensor<1x2x300x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>) -> tensor<1x2x300x64xbf16>
    return %r : tensor<1x2x300x64xbf16>
  }
}

// -----

// Causal GQA, 8 q heads over 2 k/v heads, batch 2: one block per (batch, head, query tile), 2 x 8 x 3 = 48; the
// block index is split into the query tile (Sq / 64 rounded up), the head (mod 8) and the batch (what is left:
// the outermost dimension needs no modulo), and the K and V copies read k/v head h floordiv 4.
// CHECK-LABEL: func.func private @k1_attention_gqa
// CHECK-SAME: kiln.launch = {block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 46080 : i64, grid = array<i64: 48, 1, 1>, sizes = array<i64: 144, 144>}
// CHECK: gpu.func @k1_attention_gqa(%{{.*}}: memref<1099511627776xbf16>, %[[K:[a-zA-Z0-9_]+]]: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %[[SQ:[a-zA-Z0-9_]+]]: index, %{{.*}}: index) kernel
// CHECK: %[[BLOCK:[a-zA-Z0-9_]+]] = gpu.block_id x
// CHECK-NEXT: %[[SQ_UP:[a-zA-Z0-9_]+]] = arith.addi %[[SQ]], %{{.*}} : index
// CHECK-NEXT: %[[Q_TILES:[a-zA-Z0-9_]+]] = arith.divui %[[SQ_UP]], %{{.*}} : index
// CHECK-NEXT: arith.remui %[[BLOCK]], %[[Q_TILES]] : index
// CHECK: %[[BH:[a-zA-Z0-9_]+]] = arith.divui %[[BLOCK]], %[[Q_TILES]] : index
// CHECK-NEXT: %[[HEAD:[a-zA-Z0-9_]+]] = arith.remui %[[BH]], %[[C8:[a-zA-Z0-9_]+]] : index
// CHECK-NEXT: %[[B:[a-zA-Z0-9_]+]] = arith.divui %[[BH]], %[[C8]] : index
// CHECK-NOT: arith.remui %[[B]]
// CHECK: %[[C4:[a-zA-Z0-9_]+]] = arith.constant 4 : index
// CHECK: arith.cmpi slt, %[[HEAD]], %{{.*}} : index
// CHECK: arith.divsi %{{.*}}, %[[C4]] : index
// CHECK: nvgpu.device_async_copy %[[K]][%{{.*}}]
// CHECK: scf.for
// CHECK: scf.for
// CHECK: gpu.return
module {
  func.func private @k1_attention_gqa(%q: tensor<2x8x144x64xbf16>, %k: tensor<2x2x144x64xbf16>, %v: tensor<2x2x144x64xbf16>, %out: tensor<2x8x144x64xbf16>) -> tensor<2x8x144x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<2x8x144x64xbf16>, tensor<2x2x144x64xbf16>, tensor<2x2x144x64xbf16> -> tensor<2x8x144x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<2x8x144x64xbf16>, tensor<2x8x144x64xbf16>) -> tensor<2x8x144x64xbf16>
    return %r : tensor<2x8x144x64xbf16>
  }
}

// -----

// A head dim of an odd number of 8-element chunks (24): the Q, K and V rows in shared memory hold whole
// 16-element steps (32 columns, padded by 8: 2 x (64 x 40 + 2 x 64 x 40 + 2 x 64 x 40) bytes), the copies of
// each 8-column chunk copy min(8, 24 - column) elements and zero-fill the rest (columns 24-31), and only the
// three 8-column O fragments of the head dim are stored (two rows each).
// CHECK-LABEL: func.func private @k2_attention_d24
// CHECK-SAME: dynamic_shared_bytes = 25600
// CHECK-SAME: sizes = array<i64: 100, 100>
// CHECK: gpu.func @k2_attention_d24(%{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: index, %{{.*}}: index) kernel
// CHECK: %[[C24:[a-zA-Z0-9_]+]] = arith.constant 24 : index
// CHECK: %[[IN_HEAD:[a-zA-Z0-9_]+]] = arith.minui %{{.*}}, %[[C24]] : index
// CHECK-NEXT: %[[LEFT:[a-zA-Z0-9_]+]] = arith.subi %[[C24]], %[[IN_HEAD]] : index
// CHECK-NEXT: %[[CHUNK:[a-zA-Z0-9_]+]] = arith.minui %[[LEFT]], %{{.*}} : index
// CHECK-NEXT: %[[COPIED:[a-zA-Z0-9_]+]] = arith.select %{{.*}}, %[[CHUNK]], %{{.*}} : index
// CHECK: nvgpu.device_async_copy {{.*}}, 8, %[[COPIED]] {bypassL1}
// CHECK: scf.for
// CHECK: nvvm.mma.sync
// CHECK: scf.for
// CHECK: nvvm.mma.sync
// CHECK: nvvm.rcp.approx.ftz.f
// CHECK-COUNT-6: vector.store
// CHECK-NOT: vector.store
// CHECK: gpu.return
module {
  func.func private @k2_attention_d24(%q: tensor<1x4x100x24xbf16>, %out: tensor<1x4x100x24xbf16>) -> tensor<1x4x100x24xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %q, %q causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x4x100x24xbf16>, tensor<1x4x100x24xbf16>, tensor<1x4x100x24xbf16> -> tensor<1x4x100x24xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x4x100x24xbf16>, tensor<1x4x100x24xbf16>) -> tensor<1x4x100x24xbf16>
    return %r : tensor<1x4x100x24xbf16>
  }
}

// -----

// Head dims must be whole 8-element chunks (the cp.async and fragment width).
module {
  func.func private @k3_attention_d20(%q: tensor<1x4x100x20xbf16>, %out: tensor<1x4x100x20xbf16>) -> tensor<1x4x100x20xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.attention' op the GPU attention kernel needs head dims that are multiples of 8, got 20 and 20}}
    %o = kiln.attention %q, %q, %q causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x4x100x20xbf16>, tensor<1x4x100x20xbf16>, tensor<1x4x100x20xbf16> -> tensor<1x4x100x20xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x4x100x20xbf16>, tensor<1x4x100x20xbf16>) -> tensor<1x4x100x20xbf16>
    return %r : tensor<1x4x100x20xbf16>
  }
}

// -----

// An additive mask (read from memory element by element and added in base 2), an lse result (m ln(2) + ln(l),
// stored by the first lane of each quad) and an epilogue (the gate read from memory under each store). Without
// causal only the last key tile, when it is partial, is position-masked (kiln.one_masked_tile): one key loop up
// to the split point (the first tile at or past maskFrom = Sk - 63, at most Sk), without position mask, then,
// once every copy has landed (numGroups 0), that tile under `scf.if (split < Sk)` from its ring slot (after a
// barrier), with the additive mask and the key-end comparison (sge Sk), no causal one (sgt). The else branch
// yields the loop's state, and the output and lse are computed from the if's results.
// CHECK-LABEL: func.func private @k4_attention_mask_lse
// CHECK-SAME: sizes = array<i64: 64, 64>
// CHECK: gpu.func @k4_attention_mask_lse(%{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xf32>, %{{.*}}: index, %[[SK:[a-zA-Z0-9_]+]]: index) kernel
// CHECK: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %{{.*}}, %[[SK]] : index
// CHECK-NOT: scf.for
// CHECK: %[[LOOP:[a-zA-Z0-9_]+]]:12 = scf.for %{{.*}} = %{{.*}} to %[[SPLIT]] step %{{.*}} iter_args
// CHECK-NOT: arith.cmpi sge
// CHECK: memref.load %{{.*}} : memref<1099511627776xbf16>
// CHECK: arith.constant 1.44269502 : f32
// CHECK-NOT: arith.cmpi sge
// CHECK-NOT: arith.cmpi sgt
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NOT: scf.for
// CHECK: %[[REACHED:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[SPLIT]], %[[SK]] : index
// CHECK-NEXT: %[[LAST:[a-zA-Z0-9_]+]]:12 = scf.if %[[REACHED]] -> (f32, f32, f32, f32, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>) {
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync
// CHECK: memref.load %{{.*}} : memref<1099511627776xbf16>
// CHECK: arith.cmpi sge, %{{.*}}, %[[SK]] : index
// CHECK-NOT: arith.cmpi sgt
// CHECK: arith.constant 1.44269502 : f32
// CHECK-NOT: arith.cmpi sgt
// CHECK: math.exp2
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: nvvm.mma.sync
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2, %[[LOOP]]#3, %[[LOOP]]#4, %[[LOOP]]#5, %[[LOOP]]#6, %[[LOOP]]#7, %[[LOOP]]#8, %[[LOOP]]#9, %[[LOOP]]#10, %[[LOOP]]#11 :
// CHECK-NEXT: }
// CHECK-NOT: scf.for
// CHECK: gpu.shuffle  xor %[[LAST]]#{{[0-9]+}}
// CHECK: nvvm.rcp.approx.ftz.f
// CHECK: arith.constant 0.693147182 : f32
// CHECK: math.log
// CHECK: scf.if
// CHECK: memref.load %{{.*}} : memref<1099511627776xbf16>
// CHECK: arith.mulf
// CHECK: vector.store {{.*}} : memref<1099511627776xbf16>, vector<2xbf16>
// CHECK: memref.store {{.*}} : memref<1099511627776xf32>
// CHECK: gpu.return
module {
  func.func private @k4_attention_mask_lse(%q: tensor<1x2x64x64xbf16>, %m: tensor<64x64xbf16>, %g: tensor<64xbf16>, %out: tensor<1x2x64x64xbf16>, %lse_out: tensor<1x2x64xf32>) -> (tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>) attributes {kiln.kernel} {
    %o, %lse = kiln.attention %q, %q, %q mask(%m : tensor<64x64xbf16>) epilogue(%g : tensor<64xbf16>) {
    ^bb0(%acc: f32, %gate: f32):
      %p = arith.mulf %acc, %gate : f32
      kiln.yield %p : f32
    } {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x2x64x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x64x64xbf16>, tensor<1x2x64x64xbf16>) -> tensor<1x2x64x64xbf16>
    %l = bufferization.materialize_in_destination %lse in %lse_out : (tensor<1x2x64xf32>, tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
    return %r, %l : tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>
  }
}

// -----

// An f32 attention runs m16n8k8 on TF32 tensor cores: 64 x 68 f32 Q tile (rows padded by 16 bytes, 17408
// bytes), two 64 x 68 K and two V slots; Q's A fragments by ldmatrix of 32-bit elements, rounded to TF32 (to
// nearest) once before the loops; V's B fragments element by element from its ring, rounded too.
// CHECK-LABEL: gpu.func @k5_attention_f32
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [87040]
// CHECK: %[[Q:[a-zA-Z0-9_]+]] = memref.view %{{.*}}[%{{.*}}][] : memref<87040xi8, #gpu.address_space<workgroup>> to memref<4352xf32, #gpu.address_space<workgroup>>
// CHECK: %[[K:[a-zA-Z0-9_]+]] = memref.view %{{.*}}[%{{.*}}][] : memref<87040xi8, #gpu.address_space<workgroup>> to memref<8704xf32, #gpu.address_space<workgroup>>
// CHECK: %[[V:[a-zA-Z0-9_]+]] = memref.view %{{.*}}[%{{.*}}][] : memref<87040xi8, #gpu.address_space<workgroup>> to memref<8704xf32, #gpu.address_space<workgroup>>
// CHECK: nvgpu.ldmatrix %[[Q]][%{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<4352xf32, #gpu.address_space<workgroup>> -> vector<4x1xf32>
// CHECK: nvvm.convert.float.to.tf32 %{{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// CHECK: scf.for
// CHECK: nvgpu.ldmatrix %[[K]]
// CHECK: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>
// CHECK: %[[VE:[a-zA-Z0-9_]+]] = memref.load %[[V]][%{{.*}}] : memref<8704xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.convert.float.to.tf32 %[[VE]] {rnd = #nvvm.fp_rnd_mode<rna>}
// CHECK: nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 8>
module {
  func.func private @k5_attention_f32(%q: tensor<1x2x100x64xf32>, %out: tensor<1x2x100x64xf32>) -> tensor<1x2x100x64xf32> attributes {kiln.kernel} {
    %o = kiln.attention %q, %q, %q causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32> -> tensor<1x2x100x64xf32>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32>) -> tensor<1x2x100x64xf32>
    return %r : tensor<1x2x100x64xf32>
  }
}

// -----

// With fp32_precision = "ieee" both products run as 3xTF32: Q's fragments split once before the loops (each
// value rounded to TF32 and what that left, rounded too), then per 8-deep step three mma.sync from zero (the
// remainders' products first) whose sum joins the accumulator by an f32 add.
// CHECK-LABEL: gpu.func @k5_attention_f32_ieee
// CHECK: nvgpu.ldmatrix %{{.*}} -> vector<4x1xf32>
// CHECK: %[[QBIG:[a-zA-Z0-9_]+]] = nvvm.convert.float.to.tf32 %[[QE:[a-zA-Z0-9_]+]]
// CHECK-NEXT: %[[QBIGF:[a-zA-Z0-9_]+]] = arith.bitcast %[[QBIG]] : i32 to f32
// CHECK-NEXT: %[[QREST:[a-zA-Z0-9_]+]] = arith.subf %[[QE]], %[[QBIGF]]
// CHECK-NEXT: %[[QRESTR:[a-zA-Z0-9_]+]] = nvvm.convert.float.to.tf32 %[[QREST]]
// CHECK: scf.for
// CHECK: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK: nvvm.mma.sync A[%[[QRESTR]], {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
// CHECK: nvvm.mma.sync A[%[[QBIG]], {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
// CHECK: nvvm.mma.sync A[%[[QBIG]], {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
// CHECK: arith.addf %[[ZERO]], %{{.*}} : vector<4xf32>
module {
  func.func private @k5_attention_f32_ieee(%q: tensor<1x2x100x64xf32>, %out: tensor<1x2x100x64xf32>) -> tensor<1x2x100x64xf32> attributes {kiln.kernel} {
    %o = kiln.attention %q, %q, %q causal {fp32_precision = "ieee", kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32> -> tensor<1x2x100x64xf32>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32>) -> tensor<1x2x100x64xf32>
    return %r : tensor<1x2x100x64xf32>
  }
}

// -----

// A split attention (kv_chunk = 256, 1000 keys: 4 chunks) over a packed decode step: one block per (chunk, head),
// 4 x 8 = 32 of them, the chunk the slowest part of the block index, taken without a modulo so that the kernel does
// not depend on the number of chunks. The key loop starts at the chunk's first key
// and ends at min(Sk, its last + 1) (only the last chunk reaches the partial tile, run once after the loop); the
// f32 output and the lse are stored into the chunk's slice of their buffers.
// CHECK-LABEL: func.func private @k2_split_kv
// CHECK-SAME: kiln.launch = {block = array<i64: 32, 1, 1>, dynamic_shared_bytes = 39168 : i64, grid = array<i64: 32, 1, 1>, sizes = array<i64: 4, 1000>}
// CHECK: gpu.func @k2_split_kv(%{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %[[PARTS:[a-zA-Z0-9_]+]]: memref<1099511627776xf32>, %[[LSE:[a-zA-Z0-9_]+]]: memref<1099511627776xf32>, %{{.*}}: index, %[[SK:[a-zA-Z0-9_]+]]: index) kernel
// CHECK: gpu.block_id x
// CHECK: %[[CHUNK:.+]] = arith.divui %{{.*}}, %c8 : index
// CHECK-NOT: arith.remui %[[CHUNK]]
// CHECK: %[[FIRST:.+]] = arith.muli %[[CHUNK]], %[[C256:[a-zA-Z0-9_]+]] : index
// CHECK: %[[NEXT:.+]] = arith.addi %[[FIRST]], %[[C256]] : index
// CHECK: %[[END:.+]] = arith.minsi %[[SK]], %[[NEXT]] : index
// CHECK: scf.for %{{.*}} = %[[FIRST]] to %{{.*}} step %c64
// CHECK: scf.if
// CHECK: vector.store %{{.*}}, %[[PARTS]][%{{.*}}] {alignment = 8 : i64} : memref<1099511627776xf32>, vector<2xf32>
// CHECK: memref.store %{{.*}}, %[[LSE]]
module {
  func.func private @k2_split_kv(%q: tensor<1x8x4x64xbf16>, %k: tensor<1x8x1000x64xbf16>, %v: tensor<1x8x1000x64xbf16>, %parts: tensor<4x1x8x4x64xf32>, %lses: tensor<4x1x8x4xf32>) -> (tensor<4x1x8x4x64xf32>, tensor<4x1x8x4xf32>) attributes {kiln.kernel} {
    %o, %lse = kiln.attention %q, %k, %v {kv_chunk = 256 : i64, kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<1x8x4x64xbf16>, tensor<1x8x1000x64xbf16>, tensor<1x8x1000x64xbf16> -> tensor<4x1x8x4x64xf32>, tensor<4x1x8x4xf32>
    %r = bufferization.materialize_in_destination %o in %parts : (tensor<4x1x8x4x64xf32>, tensor<4x1x8x4x64xf32>) -> tensor<4x1x8x4x64xf32>
    %r2 = bufferization.materialize_in_destination %lse in %lses : (tensor<4x1x8x4xf32>, tensor<4x1x8x4xf32>) -> tensor<4x1x8x4xf32>
    return %r, %r2 : tensor<4x1x8x4x64xf32>, tensor<4x1x8x4xf32>
  }
}

// -----

// A chunk that is not a whole number of key tiles: chunk s would start inside a tile.
module {
  func.func private @k3_split_kv_unaligned(%q: tensor<1x8x4x64xbf16>, %k: tensor<1x8x1000x64xbf16>, %parts: tensor<10x1x8x4x64xf32>, %lses: tensor<10x1x8x4xf32>) -> (tensor<10x1x8x4x64xf32>, tensor<10x1x8x4xf32>) attributes {kiln.kernel} {
    // expected-error @+2 {{'kiln.attention' op kv_chunk 100 must be a multiple of the key tile 64 of #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}}
    // expected-error @+1 {{kiln-tile: cannot tile this op with #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}}
    %o, %lse = kiln.attention %q, %k, %k {kv_chunk = 100 : i64, kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<1x8x4x64xbf16>, tensor<1x8x1000x64xbf16>, tensor<1x8x1000x64xbf16> -> tensor<10x1x8x4x64xf32>, tensor<10x1x8x4xf32>
    %r = bufferization.materialize_in_destination %o in %parts : (tensor<10x1x8x4x64xf32>, tensor<10x1x8x4x64xf32>) -> tensor<10x1x8x4x64xf32>
    %r2 = bufferization.materialize_in_destination %lse in %lses : (tensor<10x1x8x4xf32>, tensor<10x1x8x4xf32>) -> tensor<10x1x8x4xf32>
    return %r, %r2 : tensor<10x1x8x4x64xf32>, tensor<10x1x8x4xf32>
  }
}

// -----

// K and V read from a paged cache: the kernel takes the caches, the block table and seq_lens (i32 buffers). It
// reads its sequence's length once (the key loops' bound); each key tile's copy reads its page id from the
// table first (table[b, keyStart / 32]), then copies the tile's rows from that page of the cache.
// CHECK-LABEL: gpu.func @k0_paged
// CHECK-SAME: (%[[Q:.+]]: memref<1099511627776xbf16>, %[[KC:.+]]: memref<1099511627776xbf16>, %[[T:.+]]: memref<1099511627776xi32>, %[[L:.+]]: memref<1099511627776xi32>, %[[VC:.+]]: memref<1099511627776xbf16>, %{{.+}}: memref<1099511627776xbf16>, %{{.+}}: index, %{{.+}}: index)
// CHECK: memref.load %[[L]][%{{.+}}] : memref<1099511627776xi32>
// CHECK: nvgpu.device_async_copy %[[Q]]
// CHECK: memref.load %[[T]][%{{.+}}] : memref<1099511627776xi32>
// CHECK: arith.index_cast %{{.+}} : i32 to index
// CHECK: nvgpu.device_async_copy %[[KC]]
// CHECK: memref.load %[[T]][%{{.+}}] : memref<1099511627776xi32>
// CHECK: nvgpu.device_async_copy %[[VC]]
module {
  func.func private @k0_paged(%q: tensor<2x8x4x128xbf16>, %kc: tensor<64x32x8x128xbf16>, %t: tensor<2x16xi32>, %l: tensor<2xi32>, %vc: tensor<64x32x8x128xbf16>, %out: tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16> attributes {kiln.kernel} {
    %k = kiln.gather_pages %kc, %t, %l : tensor<64x32x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
    %v = kiln.gather_pages %vc, %t, %l : tensor<64x32x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
    %o = kiln.attention %q, %k, %v mod_operands(%l : tensor<2xi32>) mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %lens: tensor<2xi32>):
      %n = tensor.extract %lens[%b] : tensor<2xi32>
      %len = arith.index_cast %n : i32 to index
      %seen = arith.cmpi slt, %j, %len : index
      kiln.yield %seen : i1
    } {scale = 0.125 : f32, kiln.config = #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<2x8x4x128xbf16>, tensor<2x8x512x128xbf16>, tensor<2x8x512x128xbf16> -> tensor<2x8x4x128xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<2x8x4x128xbf16>, tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16>
    return %r : tensor<2x8x4x128xbf16>
  }
}

// -----

// Sorted document ids: the block searches the table for its documents' keys (MaskBounds.cpp) before it knows
// which key tile to copy first. Q's copy does not wait for that: it is in flight before the table's first read,
// so the search's rounds of loads run while Q lands.
// CHECK-LABEL: gpu.func @k0_document_ids
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: memref<1099511627776xbf16>, %[[K:[a-z0-9]+]]: memref<1099511627776xbf16>, %{{[a-z0-9]+}}: memref<1099511627776xbf16>, %[[DOCS:[a-z0-9]+]]: memref<1099511627776xi32>
// CHECK-NOT: memref.load %[[DOCS]]
// CHECK: nvgpu.device_async_copy %[[Q]]
// CHECK: nvgpu.device_async_create_group
// CHECK: memref.load %[[DOCS]]
// CHECK: scf.while
// CHECK-COUNT-32: memref.load %[[DOCS]]
// CHECK: scf.yield
// CHECK: nvgpu.device_async_copy %[[K]]
module {
  func.func private @k0_document_ids(%q: tensor<1x2x300x64xbf16>, %k: tensor<1x2x300x64xbf16>, %v: tensor<1x2x300x64xbf16>, %docs: tensor<300xi32>, %out: tensor<1x2x300x64xbf16>) -> tensor<1x2x300x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %k, %v mod_operands(%docs : tensor<300xi32>) mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<300xi32>):
      %di = tensor.extract %d[%i] : tensor<300xi32>
      %dj = tensor.extract %d[%j] : tensor<300xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      kiln.yield %same : i1
    } {nondecreasing_tables = array<i64: 0>, kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16> -> tensor<1x2x300x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>) -> tensor<1x2x300x64xbf16>
    return %r : tensor<1x2x300x64xbf16>
  }
}

// -----

// A 64-key tile over 16-row pages spans four pages: the tile is assembled from four pieces, so its copy reads
// four page ids from the table (four more for V's tile), all issued before the copies, and each row of the tile
// is copied from its piece's page.
// CHECK-LABEL: gpu.func @k0_paged_pieces
// CHECK-SAME: (%{{[a-z0-9]+}}: memref<1099511627776xbf16>, %[[KC:[a-z0-9]+]]: memref<1099511627776xbf16>, %[[T:[a-z0-9]+]]: memref<1099511627776xi32>
// CHECK-COUNT-8: memref.load %[[T]][%{{.+}}] : memref<1099511627776xi32>
// CHECK-NOT: memref.load %[[T]]
// CHECK: nvgpu.device_async_copy %[[KC]]
module {
  func.func private @k0_paged_pieces(%q: tensor<2x8x4x128xbf16>, %kc: tensor<64x16x8x128xbf16>, %t: tensor<2x32xi32>, %l: tensor<2xi32>, %vc: tensor<64x16x8x128xbf16>, %out: tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16> attributes {kiln.kernel} {
    %k = kiln.gather_pages %kc, %t, %l : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
    %v = kiln.gather_pages %vc, %t, %l : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
    %o = kiln.attention %q, %k, %v mod_operands(%l : tensor<2xi32>) mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %lens: tensor<2xi32>):
      %n = tensor.extract %lens[%b] : tensor<2xi32>
      %len = arith.index_cast %n : i32 to index
      %seen = arith.cmpi slt, %j, %len : index
      kiln.yield %seen : i1
    } {scale = 0.125 : f32, kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<2x8x4x128xbf16>, tensor<2x8x512x128xbf16>, tensor<2x8x512x128xbf16> -> tensor<2x8x4x128xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<2x8x4x128xbf16>, tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16>
    return %r : tensor<2x8x4x128xbf16>
  }
}

// -----

// A 32-key tile over 48-row pages would straddle two pages without spanning whole ones.
module {
  func.func private @k1_paged_tile_straddles(%q: tensor<2x8x4x128xbf16>, %kc: tensor<64x48x8x128xbf16>, %t: tensor<2x16xi32>, %l: tensor<2xi32>, %l2: tensor<2xi32>, %vc: tensor<64x48x8x128xbf16>, %out: tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16> attributes {kiln.kernel} {
    %k = kiln.gather_pages %kc, %t, %l : tensor<64x48x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x768x128xbf16>
    %v = kiln.gather_pages %vc, %t, %l : tensor<64x48x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x768x128xbf16>
    // expected-error @+2 {{'kiln.attention' op the key tile 32 of #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync"> and the page size 48 of the paged cache it reads must divide one another}}
    // expected-error @+1 {{kiln-tile: cannot tile this op with #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">}}
    %o = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<2x8x4x128xbf16>, tensor<2x8x768x128xbf16>, tensor<2x8x768x128xbf16> -> tensor<2x8x4x128xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<2x8x4x128xbf16>, tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16>
    return %r : tensor<2x8x4x128xbf16>
  }
}

// -----

// K and V views of different lengths tables: one key tile cannot be valid in one and not the other.
module {
  func.func private @k2_paged_two_lengths(%q: tensor<2x8x4x128xbf16>, %kc: tensor<64x32x8x128xbf16>, %t: tensor<2x16xi32>, %l: tensor<2xi32>, %l2: tensor<2xi32>, %vc: tensor<64x32x8x128xbf16>, %out: tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16> attributes {kiln.kernel} {
    %k = kiln.gather_pages %kc, %t, %l : tensor<64x32x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
    %v = kiln.gather_pages %vc, %t, %l2 : tensor<64x32x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
    // expected-error @+2 {{'kiln.attention' op k and v are read from paged caches of different seq_lens}}
    // expected-error @+1 {{kiln-tile: cannot tile this op with #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">}}
    %o = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<2x8x4x128xbf16>, tensor<2x8x512x128xbf16>, tensor<2x8x512x128xbf16> -> tensor<2x8x4x128xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<2x8x4x128xbf16>, tensor<2x8x4x128xbf16>) -> tensor<2x8x4x128xbf16>
    return %r : tensor<2x8x4x128xbf16>
  }
}

// -----

// A paged view is [B, Hkv, keys, D]: read as seq-major ("bshd") its heads would be taken for positions.
module {
  func.func private @k3_paged_seq_major(%q: tensor<1x1x512x128xbf16>, %kc: tensor<64x32x8x128xbf16>, %t: tensor<1x16xi32>, %l: tensor<1xi32>, %vc: tensor<64x32x8x128xbf16>, %out: tensor<1x1x512x128xbf16>) -> tensor<1x1x512x128xbf16> attributes {kiln.kernel} {
    %k = kiln.gather_pages %kc, %t, %l : tensor<64x32x8x128xbf16>, tensor<1x16xi32>, tensor<1xi32> -> tensor<1x8x512x128xbf16>
    %v = kiln.gather_pages %vc, %t, %l : tensor<64x32x8x128xbf16>, tensor<1x16xi32>, tensor<1xi32> -> tensor<1x8x512x128xbf16>
    // expected-error @+2 {{'kiln.attention' op k and v read from a paged cache must be in the [B, H, S, D] layout}}
    // expected-error @+1 {{kiln-tile: cannot tile this op with #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">}}
    %o = kiln.attention %q, %k, %v {layout = "bshd", kiln.config = #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<1x1x512x128xbf16>, tensor<1x8x512x128xbf16>, tensor<1x8x512x128xbf16> -> tensor<1x1x512x128xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x1x512x128xbf16>, tensor<1x1x512x128xbf16>) -> tensor<1x1x512x128xbf16>
    return %r : tensor<1x1x512x128xbf16>
  }
}

// -----

// Constant scalings fold (ConstantScales.cpp) whatever their sign: the softmax scale 1/8, * -2 and / 4 make one
// multiply by -1/16 on each score. The division by zero stays a division (by an approximate reciprocal of 0):
// its reciprocal is no normal number. The score with two users is left as it is.
// CHECK-LABEL: gpu.func @k4_constant_scales
// CHECK: %[[FOLDED:.*]] = arith.constant -6.250000e-02 : f32
// CHECK: %[[Y:.*]] = arith.mulf %{{.*}}, %[[FOLDED]] fastmath<contract> : f32
// CHECK-NEXT: %[[RCP:.*]] = nvvm.rcp.approx.ftz.f %{{.*}} : f32
// CHECK-NEXT: %[[W:.*]] = arith.mulf %[[Y]], %[[RCP]] : f32
// CHECK-NEXT: arith.addf %[[W]], %[[Y]] fastmath<contract> : f32
module {
  func.func private @k4_constant_scales(%q: tensor<1x1x64x64xbf16>, %k: tensor<1x1x64x64xbf16>, %v: tensor<1x1x64x64xbf16>, %out: tensor<1x1x64x64xbf16>) -> tensor<1x1x64x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %k, %v score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %m = arith.constant -2.0 : f32
      %d = arith.constant 4.0 : f32
      %z = arith.constant 0.0 : f32
      %x = arith.mulf %s, %m : f32
      %y = arith.divf %x, %d : f32
      %w = arith.divf %y, %z : f32
      %r = arith.addf %w, %y : f32
      kiln.yield %r : f32
    } {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16> -> tensor<1x1x64x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x1x64x64xbf16>, tensor<1x1x64x64xbf16>) -> tensor<1x1x64x64xbf16>
    return %r : tensor<1x1x64x64xbf16>
  }
}
