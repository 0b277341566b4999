// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-decompose-rows -kiln-assign-layouts -convert-kiln-to-gpu=chip=sm_90a -split-input-file -verify-diagnostics | FileCheck %s

// Row kernels reach the GPU as their tiled loop (kiln-tile with a "rows" config, decomposed and laid out) and
// convert-kiln-to-gpu lowers that loop: one thread block per iteration, each tile value in registers by its
// #kiln.row_layout. The configs are explicit here so that the tests do not depend on kiln-select-config.

// RMSNorm over bf16 rows of 4096, one row per block of 8 warps (256 threads per row, 8-element runs): each
// thread loads its two 16-byte runs once (offset by the block's (batch, row) iteration), squares and sums them,
// the warp folds by five butterfly shuffles, the 8 warps through 32 bytes of shared memory between barriers
// (each warp reads the 8 posts, one a lane, and folds them by three shuffles); then rsqrt, the weight's runs,
// and two 16-byte stores. No scf.for: the row stays in registers.
// CHECK-LABEL: func.func private @rms_norm
// CHECK-SAME: kiln.launch = {block = array<i64: 256, 1, 1>, dynamic_shared_bytes = 32 : i64, grid = array<i64: 154, 1, 1>}
// CHECK: gpu.func @rms_norm(%[[X:.*]]: memref<630784xbf16>, %[[W:.*]]: memref<4096xbf16>, %[[OUT:.*]]: memref<630784xbf16>) kernel
// CHECK-NOT: scf.for
// CHECK: gpu.thread_id x
// CHECK: gpu.block_id x
// CHECK-COUNT-2: vector.load %[[X]][%{{.*}}] {alignment = 16 : i64} : memref<630784xbf16>, vector<8xbf16>
// CHECK: arith.mulf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: scf.if
// CHECK: memref.store {{.*}} : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load {{.*}} : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-3: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: math.rsqrt
// CHECK: vector.load %[[W]]
// CHECK: vector.store %{{.*}}, %[[OUT]][%{{.*}}] {alignment = 16 : i64} : memref<630784xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %[[OUT]][%{{.*}}] {alignment = 16 : i64} : memref<630784xbf16>, vector<8xbf16>
// CHECK-NOT: scf.for
// CHECK: gpu.return
module {
  func.func private @rms_norm(%x: tensor<2x77x4096xbf16>, %w: tensor<4096xbf16>, %out: tensor<2x77x4096xbf16>) -> tensor<2x77x4096xbf16> attributes {kiln.kernel} {
    %n = kiln.rms_norm %x, %w epsilon 1.0e-06 {kiln.config = #kiln.config<tile = [1], warps = 8, stages = 1, lowering = "rows">} : tensor<2x77x4096xbf16>, tensor<4096xbf16>
    %r = bufferization.materialize_in_destination %n in %out : (tensor<2x77x4096xbf16>, tensor<2x77x4096xbf16>) -> tensor<2x77x4096xbf16>
    return %r : tensor<2x77x4096xbf16>
  }
}

// -----

// logsumexp (one value per row) over 4 rows of 1000 per block, one warp each (2 x 20 blocks, the last of each
// batch with one padding row): the max and the sum of exp fold by shuffles within the warp, and the row's first
// thread stores its value.
// CHECK-LABEL: func.func private @logsumexp
// CHECK-SAME: grid = array<i64: 40, 1, 1>
// CHECK: gpu.func @logsumexp(%{{.*}}: memref<154000xbf16>, %[[OUT:.*]]: memref<154xf32>) kernel
// CHECK: arith.maximumf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: math.exp
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: math.log
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<154xf32>
module {
  func.func private @logsumexp(%x: tensor<2x77x1000xbf16>, %out: tensor<2x77xf32>) -> tensor<2x77xf32> attributes {kiln.kernel} {
    %l = kiln.logsumexp %x axis 2 {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">} : tensor<2x77x1000xbf16> -> tensor<2x77xf32>
    %r = bufferization.materialize_in_destination %l in %out : (tensor<2x77xf32>, tensor<2x77xf32>) -> tensor<2x77xf32>
    return %r : tensor<2x77xf32>
  }
}

// -----

// A kept-dimension mean of f16 rows of 100 (4-element runs: 8 do not divide 100), 77 rows in blocks of 4: the
// last block's fourth row is padding, its loads read 0 and its store is skipped; the mean divides by 100.
// CHECK-LABEL: func.func private @reduce_mean
// CHECK: gpu.func @reduce_mean(%{{.*}}: memref<7700xf16>, %{{.*}}: memref<77xf16>) kernel
// CHECK: vector.load {{.*}} vector<4xf16>
// CHECK: arith.addf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: nvvm.rcp.approx.ftz.f
// CHECK: scf.if
// CHECK: arith.truncf
// CHECK: memref.store
module {
  func.func private @reduce_mean(%x: tensor<77x100xf16>, %out: tensor<77x1xf16>) -> tensor<77x1xf16> attributes {kiln.kernel} {
    %m = kiln.reduce mean %x axes [1] keep_dims {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">} : tensor<77x100xf16> -> tensor<77x1xf16>
    %r = bufferization.materialize_in_destination %m in %out : (tensor<77x1xf16>, tensor<77x1xf16>) -> tensor<77x1xf16>
    return %r : tensor<77x1xf16>
  }
}

// -----

// Short rows share a warp: 8 threads per row of 128 (two 8-element runs each), 16 rows per block of 4 warps;
// the row folds by three shuffles within its group of 8 lanes, with no shared memory.
// CHECK-LABEL: func.func private @short_rows
// CHECK-SAME: kiln.launch = {block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 0 : i64, grid = array<i64: 64, 1, 1>}
// CHECK: gpu.func @short_rows
// CHECK-COUNT-2: vector.load {{.*}} vector<8xbf16>
// CHECK-COUNT-3: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK: math.exp
// CHECK-COUNT-3: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
module {
  func.func private @short_rows(%x: tensor<1024x128xbf16>, %out: tensor<1024x128xbf16>) -> tensor<1024x128xbf16> attributes {kiln.kernel} {
    %p = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [16], warps = 4, stages = 1, lowering = "rows">} : tensor<1024x128xbf16>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<1024x128xbf16>, tensor<1024x128xbf16>) -> tensor<1024x128xbf16>
    return %r : tensor<1024x128xbf16>
  }
}

// -----

// A single row (rank 1) is a [1, D] view of the same buffers: one block of one warp.
// CHECK-LABEL: func.func private @one_row
// CHECK-SAME: kiln.launch = {block = array<i64: 32, 1, 1>, dynamic_shared_bytes = 0 : i64, grid = array<i64: 1, 1, 1>}
// CHECK: gpu.func @one_row(%{{.*}}: memref<100xf32>, %{{.*}}: memref<100xf32>) kernel
// CHECK: math.exp
module {
  func.func private @one_row(%x: tensor<100xf32>, %out: tensor<100xf32>) -> tensor<100xf32> attributes {kiln.kernel} {
    %p = kiln.softmax %x axis 0 {kiln.config = #kiln.config<tile = [1], warps = 1, stages = 1, lowering = "rows">} : tensor<100xf32>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<100xf32>, tensor<100xf32>) -> tensor<100xf32>
    return %r : tensor<100xf32>
  }
}

// -----

// A row op that was not tiled is an error naming the passes it needs.
module {
  func.func private @untiled(%x: tensor<4x8xf32>, %out: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kiln.kernel} {
    // expected-error @+1 {{is a row kernel: the GPU lowers it from its tiled loop (kiln-select-config, kiln-tile, kiln-decompose-rows, kiln-assign-layouts first)}}
    %p = kiln.softmax %x axis 1 : tensor<4x8xf32>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
}
