// RUN: kiln-opt %s -split-input-file -kiln-tile -canonicalize -kiln-assign-layouts -convert-kiln-to-gpu=chip=sm_90a -verify-diagnostics | FileCheck %s

// A "wgmma" matmul (sm_90a) is lowered from its tiled loop like a "mma_sync" one, with one warp per 16 rows (the
// warpgroup MMA's accumulator) and the K loop fed by TMA. Here bf16 with a bias + SiLU epilogue on 128 x 128 tiles
// (two warpgroups, 256 threads), size-generic: M, N and K follow the buffers, then the tensor maps of A
// ([M][K], boxes of 64 x 128) and of the untransposed B ([K][N], 64 x 64 panels), listed in
// kiln.tensor_map_params; shared memory aligned to the 1024-byte period of the 128-byte swizzle: four ring slots
// of 16 + 16 KiB, then two mbarriers per slot, "full" (one arrival: the copying thread's, with the bytes) and
// "empty" (an arrival per warpgroup). Thread 0 sets them up and starts the first stages - 1 = 3 k-tiles (32768
// bytes expected per slot, A's box and B's two panels). Each k-tile waits on its slot's full mbarrier at the
// parity of its round, then four wgmma.mma_async m64n128k16 read A K-major (row) and B N-major (row); one group
// stays in flight. Then the previous tile's wgmma are done: one thread per warpgroup arrives on that slot's empty
// mbarrier, and thread 0 (from the second k-tile on) waits for that slot's round to complete there and starts
// the copies of tile + 3 into it; no block-wide barrier in the loop. All groups are waited for after the loop.
// Then the accumulators are staged as an f32 tile over the ring (rows padded to 136 floats), and the block
// stores it in chunks of 8 columns, four a thread in each of two iterations: two 16-byte loads, the epilogue per element (reading the bias), one guarded
// 16-byte store (N = 200 is whole chunks).
// CHECK-LABEL: func.func private @w0_matmul
// CHECK-SAME: kiln.launch = {block = array<i64: 256, 1, 1>, dynamic_shared_bytes = 131136 : i64, grid = array<i64: 6, 1, 1>, sizes = array<i64: 300, 200, 256>, tensor_maps = [{box = array<i64: 64, 128, 1>, buffer = 0 : i64, dims = array<i64: 256, 300, 1>, dtype = "bf16", strides = array<i64: 512, 153600>, swizzle = 128 : i64}, {box = array<i64: 64, 64, 1>, buffer = 1 : i64, dims = array<i64: 200, 256, 1>, dtype = "bf16", strides = array<i64: 400, 102400>, swizzle = 128 : i64}]}
// CHECK: memref.global "public" @w0_matmul_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 1024 : i64}
// CHECK: gpu.func @w0_matmul(%{{.*}}, %[[M:.*]]: index, %[[N:.*]]: index, %[[K:.*]]: index, %[[MAPA:.*]]: !llvm.ptr, %[[MAPB:.*]]: !llvm.ptr)
// CHECK-SAME: kiln.tensor_map_params = array<i64: 7, 8>, known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[LEADER:.*]] = arith.cmpi eq, %{{.*}}, %c0 : index
// CHECK: scf.if %[[LEADER]]
// CHECK: nvvm.mbarrier.init %{{.*}}, %c1_i32 :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c2_i32 :
// CHECK-COUNT-6: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[BAR0:.*]], %c32768_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPA]], %[[BAR0]], box[
// CHECK-COUNT-2: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAPB]], %[[BAR0]], box[
// CHECK-COUNT-2: nvvm.mbarrier.arrive.expect_tx
// CHECK: gpu.barrier
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (!llvm.struct<({{(f32, )+}}f32)>)
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// CHECK: %[[ISSUE:.*]] = arith.andi %[[LEADER]]
// CHECK-NEXT: scf.if %[[ISSUE]]
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: gpu.barrier
// CHECK: scf.yield
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: %[[TILE:.*]] = memref.view {{.*}} to memref<17408xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-32: vector.store %{{.*}}, %[[TILE]][%{{.*}}] {alignment = 8 : i64} : memref<17408xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c2048 step %c1024
// CHECK-COUNT-2: vector.load %[[TILE]][%{{.*}}] {alignment = 16 : i64} : memref<17408xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: memref.load %arg2
// CHECK-COUNT-8: math.exp
// CHECK: scf.if
// CHECK-NOT: math.exp
// CHECK: vector.store {{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK-COUNT-2: vector.load %[[TILE]]
// CHECK-COUNT-8: math.exp
// CHECK: scf.if
// CHECK: vector.store {{.*}} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK-COUNT-2: vector.load %[[TILE]]
// CHECK-COUNT-8: math.exp
// CHECK: scf.if
// CHECK: vector.store {{.*}} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK-COUNT-2: vector.load %[[TILE]]
// CHECK-COUNT-8: math.exp
// CHECK: scf.if
// CHECK: vector.store {{.*}} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK-NOT: math.exp
// CHECK: gpu.return
module {
  func.func private @w0_matmul(%x: tensor<300x256xbf16>, %w: tensor<256x200xbf16>, %b: tensor<200xbf16>, %out: tensor<300x200xbf16>) -> tensor<300x200xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w epilogue(%b : tensor<200xbf16>) {
    ^bb0(%acc: f32, %bias: f32):
      %s = arith.addf %acc, %bias : f32
      %n = arith.negf %s : f32
      %e = math.exp %n : f32
      %one = arith.constant 1.0 : f32
      %d = arith.addf %one, %e : f32
      %r = arith.divf %s, %d : f32
      kiln.yield %r : f32
    } {kiln.config = #kiln.config<tile = [128, 128, 64], warps = 8, stages = 4, lowering = "wgmma">} : tensor<300x256xbf16>, tensor<256x200xbf16> -> tensor<300x200xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<300x200xbf16>, tensor<300x200xbf16>) -> tensor<300x200xbf16>
    return %r : tensor<300x200xbf16>
  }
}

// -----

// f16 with a transposed rhs ([N, K]): B is read K-major too (col) from boxes of 64 x 64, over a batch (A's tensor
// map has it as its third dim); one warpgroup for 64-row tiles; an f32 output stores its chunks of 8 columns as
// 32 bytes.
// CHECK-LABEL: func.func private @w1_matmul
// CHECK-SAME: kiln.launch = {block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 98400 : i64, grid = array<i64: 12, 1, 1>, sizes = array<i64: 77, 136, 128>, tensor_maps = [{box = array<i64: 64, 64, 1>, buffer = 0 : i64, dims = array<i64: 128, 77, 2>, dtype = "f16", strides = array<i64: 256, 19712>, swizzle = 128 : i64}, {box = array<i64: 64, 64, 1>, buffer = 1 : i64, dims = array<i64: 128, 136, 1>, dtype = "f16", strides = array<i64: 256, 34816>, swizzle = 128 : i64}]}
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: memref.view {{.*}} to memref<4608xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c256
// CHECK: vector.store {{.*}} {alignment = 16 : i64} : memref<1099511627776xf32>, vector<8xf32>
module {
  func.func private @w1_matmul(%x: tensor<2x77x128xf16>, %w: tensor<136x128xf16>, %out: tensor<2x77x136xf32>) -> tensor<2x77x136xf32> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 4, stages = 6, lowering = "wgmma">} : tensor<2x77x128xf16>, tensor<136x128xf16> -> tensor<2x77x136xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<2x77x136xf32>, tensor<2x77x136xf32>) -> tensor<2x77x136xf32>
    return %r : tensor<2x77x136xf32>
  }
}

// -----

// K = 40, under one k-tile: the K loop folded away, the one tile matmul runs the same pipeline for one k-tile (TMA
// zero-fills K from 40 to 64), with no copies past it; the batch (3) is the tensor maps' third dim.
// CHECK-LABEL: func.func private @w_short_k_matmul
// CHECK-SAME: tensor_maps = [{box = array<i64: 64, 128, 1>, buffer = 0 : i64, dims = array<i64: 40, 129, 3>, dtype = "bf16", strides = array<i64: 80, 10320>, swizzle = 128 : i64}, {box = array<i64: 64, 64, 1>, buffer = 1 : i64, dims = array<i64: 72, 40, 3>
// CHECK: gpu.func @w_short_k_matmul
// CHECK-COUNT-2: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: scf.for %{{.*}} = %c0 to %c1 step %c1
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK: gpu.return
module {
  func.func private @w_short_k_matmul(%x: tensor<3x129x40xbf16>, %w: tensor<3x40x72xbf16>, %out: tensor<3x129x72xbf16>) -> tensor<3x129x72xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [128, 64, 64], warps = 8, stages = 4, lowering = "wgmma">} : tensor<3x129x40xbf16>, tensor<3x40x72xbf16> -> tensor<3x129x72xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<3x129x72xbf16>, tensor<3x129x72xbf16>) -> tensor<3x129x72xbf16>
    return %r : tensor<3x129x72xbf16>
  }
}

// -----

// K = 0: canonicalization folds the empty contraction away, and the kernel stores the zero accumulator with no
// tensor maps, TMA or shared memory.
// CHECK-LABEL: func.func private @w_k0_matmul
// CHECK-SAME: dynamic_shared_bytes = 0 : i64
// CHECK-NOT: tensor_maps
// CHECK: gpu.func @w_k0_matmul
// CHECK-NOT: nvvm.cp.async.bulk.tensor
// CHECK-NOT: nvvm.wgmma
// CHECK: gpu.return
module {
  func.func private @w_k0_matmul(%x: tensor<128x0xbf16>, %w: tensor<0x64xbf16>, %out: tensor<128x64xbf16>) -> tensor<128x64xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [128, 64, 64], warps = 8, stages = 3, lowering = "wgmma">} : tensor<128x0xbf16>, tensor<0x64xbf16> -> tensor<128x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x64xbf16>
    return %r : tensor<128x64xbf16>
  }
}

// -----

// M = 0 with K > 0: a tensor map describes no empty array.
module {
  func.func private @w_m0_matmul(%x: tensor<0x64xbf16>, %w: tensor<64x64xbf16>, %out: tensor<0x64xbf16>) -> tensor<0x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{the wgmma lowering reads its tiles through TMA, which needs operands of at least one element (M, N and the batch dims > 0; the mma_sync lowering takes empty ones)}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [128, 64, 64], warps = 8, stages = 3, lowering = "wgmma">} : tensor<0x64xbf16>, tensor<64x64xbf16> -> tensor<0x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<0x64xbf16>, tensor<0x64xbf16>) -> tensor<0x64xbf16>
    return %r : tensor<0x64xbf16>
  }
}

// -----

// N = 201 (a transposed rhs allows it) is not whole chunks: each element of a chunk is checked against the edge
// and stored alone.
// CHECK-LABEL: func.func private @w_odd_n_matmul
// CHECK: gpu.func @w_odd_n_matmul
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c256
// CHECK-COUNT-2: vector.load {{.*}} : memref<4608xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-8: memref.store {{.*}} : memref<1099511627776xbf16>
// CHECK-NOT: vector<8xbf16>
// CHECK: gpu.return
module {
  func.func private @w_odd_n_matmul(%x: tensor<77x128xbf16>, %w: tensor<201x128xbf16>, %out: tensor<77x201xbf16>) -> tensor<77x201xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 4, stages = 3, lowering = "wgmma">} : tensor<77x128xbf16>, tensor<201x128xbf16> -> tensor<77x201xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<77x201xbf16>, tensor<77x201xbf16>) -> tensor<77x201xbf16>
    return %r : tensor<77x201xbf16>
  }
}

// -----

// N = 202 is even but not whole chunks: a chunk's elements are stored in 4 guarded pairs.
// CHECK-LABEL: func.func private @w_even_n_matmul
// CHECK: gpu.func @w_even_n_matmul
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c256
// CHECK-COUNT-2: vector.load {{.*}} : memref<4608xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-4: vector.store {{.*}} {alignment = 4 : i64} : memref<1099511627776xbf16>, vector<2xbf16>
// CHECK-NOT: memref.store
// CHECK: gpu.return
module {
  func.func private @w_even_n_matmul(%x: tensor<77x128xbf16>, %w: tensor<202x128xbf16>, %out: tensor<77x202xbf16>) -> tensor<77x202xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 4, stages = 3, lowering = "wgmma">} : tensor<77x128xbf16>, tensor<202x128xbf16> -> tensor<77x202xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<77x202xbf16>, tensor<77x202xbf16>) -> tensor<77x202xbf16>
    return %r : tensor<77x202xbf16>
  }
}

// -----

// A residual read by the epilogue (another buffer of the output's shape, N = 136 whole chunks): each chunk's 8
// elements of it come in one 16-byte load, and the loads of all of an iteration's chunks (128 x 128 tile, 256
// threads: 8 chunks a thread, 4 an iteration) are issued before the first store, which could alias them.
// CHECK-LABEL: func.func private @w_residual_matmul
// CHECK: gpu.func @w_residual_matmul(%{{.*}}, %{{.*}}, %[[RES:[^:]*]]: memref<1099511627776xbf16>, %[[OUT:[^:]*]]: memref<1099511627776xbf16>
// CHECK: scf.for %{{.*}} = %c0 to %c2048 step %c1024
// CHECK: vector.load %[[RES]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK-NOT: %[[OUT]]
// CHECK: vector.load %[[RES]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK-NOT: memref.load %[[RES]]
// CHECK: vector.store {{.*}}, %[[OUT]]
// CHECK-NOT: %[[RES]]
// CHECK: gpu.return
module {
  func.func private @w_residual_matmul(%x: tensor<77x128xbf16>, %w: tensor<136x128xbf16>, %res: tensor<77x136xbf16>, %out: tensor<77x136xbf16>) -> tensor<77x136xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs epilogue(%res : tensor<77x136xbf16>) {
    ^bb0(%acc: f32, %r: f32):
      %s = arith.addf %acc, %r : f32
      kiln.yield %s : f32
    } {kiln.config = #kiln.config<tile = [128, 128, 64], warps = 8, stages = 3, lowering = "wgmma">} : tensor<77x128xbf16>, tensor<136x128xbf16> -> tensor<77x136xbf16>
    %o = bufferization.materialize_in_destination %y in %out : (tensor<77x136xbf16>, tensor<77x136xbf16>) -> tensor<77x136xbf16>
    return %o : tensor<77x136xbf16>
  }
}

// -----

// A 256 x 256 tile on three stages: its ring fits (192 KiB), the f32 tile its stores are staged in (264 KiB) does
// not fit in a block's shared memory.
module {
  func.func private @w_tile_too_big_matmul(%x: tensor<256x256xbf16>, %w: tensor<256x256xbf16>, %out: tensor<256x256xbf16>) -> tensor<256x256xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.matmul' op config needs 270384 bytes of shared memory per block; sm_90a allows 232448}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [256, 256, 64], warps = 16, stages = 3, lowering = "wgmma">} : tensor<256x256xbf16>, tensor<256x256xbf16> -> tensor<256x256xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<256x256xbf16>, tensor<256x256xbf16>) -> tensor<256x256xbf16>
    return %r : tensor<256x256xbf16>
  }
}

// -----

module {
  func.func private @w_bk32_matmul(%x: tensor<256x256xbf16>, %w: tensor<256x256xbf16>, %out: tensor<256x256xbf16>) -> tensor<256x256xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.matmul' op #kiln.config<tile = [128, 128, 32], warps = 8, stages = 4, lowering = "wgmma"> does not fit the wgmma lowering: need bf16 or f16 operands (got 'bf16'), BM a multiple of 64 up to 256 with one warpgroup (4 warps) per 64 rows, BN up to 256 and a multiple of 64 (of 16 with transpose_rhs), BK = 64 and stages >= 3}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 8, stages = 4, lowering = "wgmma">} : tensor<256x256xbf16>, tensor<256x256xbf16> -> tensor<256x256xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<256x256xbf16>, tensor<256x256xbf16>) -> tensor<256x256xbf16>
    return %r : tensor<256x256xbf16>
  }
}

// -----

// A TMA box spans at most 256 rows.
module {
  func.func private @w_bm512_matmul(%x: tensor<512x256xbf16>, %w: tensor<256x64xbf16>, %out: tensor<512x64xbf16>) -> tensor<512x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{BM a multiple of 64 up to 256}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [512, 64, 64], warps = 32, stages = 3, lowering = "wgmma">} : tensor<512x256xbf16>, tensor<256x64xbf16> -> tensor<512x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<512x64xbf16>, tensor<512x64xbf16>) -> tensor<512x64xbf16>
    return %r : tensor<512x64xbf16>
  }
}

// -----

module {
  func.func private @w_f32_matmul(%x: tensor<256x256xf32>, %w: tensor<256x256xf32>, %out: tensor<256x256xf32>) -> tensor<256x256xf32> attributes {kiln.kernel} {
    // expected-error @+1 {{does not fit the wgmma lowering: need bf16 or f16 operands (got 'f32')}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [128, 128, 64], warps = 8, stages = 4, lowering = "wgmma">} : tensor<256x256xf32>, tensor<256x256xf32> -> tensor<256x256xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
    return %r : tensor<256x256xf32>
  }
}

// -----

// A decode step against an [N, K] weight on 112-column tiles (kiln-select-config narrows them to fill a wave):
// B's tile is one TMA box of 112 K-major rows, and each k16 step one wgmma of N = 112 (14 fragments).
// CHECK-LABEL: func.func private @w_n112_matmul
// CHECK-SAME: dynamic_shared_bytes = 135264 : i64, grid = array<i64: 3, 1, 1>, sizes = array<i64: 32, 300, 256>
// CHECK-SAME: {box = array<i64: 64, 112, 1>, buffer = 1 : i64, dims = array<i64: 256, 300, 1>
// CHECK: gpu.func @w_n112_matmul
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 112, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
module {
  func.func private @w_n112_matmul(%x: tensor<32x256xbf16>, %w: tensor<300x256xbf16>, %out: tensor<32x300xbf16>) -> tensor<32x300xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs {kiln.config = #kiln.config<tile = [64, 112, 64], warps = 4, stages = 6, lowering = "wgmma">} : tensor<32x256xbf16>, tensor<300x256xbf16> -> tensor<32x300xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<32x300xbf16>, tensor<32x300xbf16>) -> tensor<32x300xbf16>
    return %r : tensor<32x300xbf16>
  }
}

// -----

// Without transpose_rhs B's tile is 64-column panels of [K, N]: 112 columns are not whole panels.
module {
  func.func private @w_n112_panels_matmul(%x: tensor<32x256xbf16>, %w: tensor<256x300xbf16>, %out: tensor<32x300xbf16>) -> tensor<32x300xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{BN up to 256 and a multiple of 64 (of 16 with transpose_rhs)}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [64, 112, 64], warps = 4, stages = 6, lowering = "wgmma">} : tensor<32x256xbf16>, tensor<256x300xbf16> -> tensor<32x300xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<32x300xbf16>, tensor<32x300xbf16>) -> tensor<32x300xbf16>
    return %r : tensor<32x300xbf16>
  }
}

// -----

// A contraction split over a cluster (k_splits = 3): the grid has 3 blocks per output tile (1 tile here, so 3),
// the kernel asks for clusters of 3 (nvvm.cluster_dim), and block b runs chunk b % 3 of K = 1000 (384 deep,
// the last one to K) through the TMA + wgmma pipeline. The block stages its partial tile over its ring and waits
// at a cluster barrier; then it stores its share of the rows (22 of the 64: 352 chunks of 8 columns, the last
// of the 3 loop trips of 128 guarded): each chunk is the sum, rank 0 to 2, of that chunk in every block's staging
// tile (mapa to the rank, two 16-byte loads from shared::cluster), read only for rows within M, then the bias
// epilogue and one 16-byte store. A last cluster barrier keeps each block's tile until every block has read it.
// CHECK-LABEL: func.func private @w9_matmul
// CHECK-SAME: grid = array<i64: 3, 1, 1>, sizes = array<i64: 40, 72, 1000>
// CHECK: gpu.func @w9_matmul
// CHECK-SAME: nvvm.cluster_dim = array<i32: 3, 1, 1>
// CHECK: %[[BLOCK:.*]] = gpu.block_id  x
// CHECK: %[[RANK:.*]] = arith.remui %[[BLOCK]], %c3 : index
// CHECK: %[[START:.*]] = arith.muli %[[RANK]], %c384
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.barrier
// CHECK-COUNT-32: vector.store %{{.*}} {alignment = 8 : i64} : memref<8704xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK: %[[SHARE:.*]] = arith.remui %{{.*}}, %c3 : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[SHARE]], %c352 : index
// CHECK: scf.for %[[I:.*]] = %c0 to %c384 step %c128
// CHECK: %[[LOCAL:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: %[[IN_SHARE:.*]] = arith.cmpi ult, %[[LOCAL]], %c352 : index
// CHECK: scf.if %[[IN_SHARE]]
// CHECK: scf.if %{{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK: nvvm.mapa %{{.*}}, %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<7> -> vector<4xf32>
// CHECK: nvvm.mapa %{{.*}}, %c1_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: nvvm.mapa %{{.*}}, %c2_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NOT: nvvm.mapa
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NEXT: gpu.return
module {
  func.func private @w9_matmul(%x: tensor<40x1000xbf16>, %w: tensor<72x1000xbf16>, %b: tensor<72xbf16>, %out: tensor<40x72xbf16>) -> tensor<40x72xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs epilogue(%b : tensor<72xbf16>) {
    ^bb0(%acc: f32, %bias: f32):
      %s = arith.addf %acc, %bias : f32
      kiln.yield %s : f32
    } {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma", k_splits = 3>} : tensor<40x1000xbf16>, tensor<72x1000xbf16> -> tensor<40x72xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<40x72xbf16>, tensor<40x72xbf16>) -> tensor<40x72xbf16>
    return %r : tensor<40x72xbf16>
  }
}

// -----

// A split matmul (k_chunk) cannot also split over a cluster: kiln-tile refuses the config's k_splits.
module {
  func.func private @w10_matmul(%x: tensor<32x1024xbf16>, %w: tensor<1024x256xbf16>, %out: tensor<4x32x256xf32>) -> tensor<4x32x256xf32> attributes {kiln.kernel} {
    // expected-error @+2 {{'kiln.matmul' op is already split into chunks of 256 (k_chunk); its config's k_splits = 2 cannot split it again}}
    // expected-error @+1 {{kiln-tile: cannot tile this op with #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma", k_splits = 2>}}
    %p = kiln.matmul %x, %w {k_chunk = 256 : i64, kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma", k_splits = 2>} : tensor<32x1024xbf16>, tensor<1024x256xbf16> -> tensor<4x32x256xf32>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<4x32x256xf32>, tensor<4x32x256xf32>) -> tensor<4x32x256xf32>
    return %r : tensor<4x32x256xf32>
  }
}
