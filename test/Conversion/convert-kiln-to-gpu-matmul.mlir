// RUN: kiln-opt %s -split-input-file -kiln-tile -canonicalize -kiln-assign-layouts -convert-kiln-to-gpu -verify-diagnostics | FileCheck %s

// An mma_sync matmul is lowered from its tiled loop by its #kiln.mma_layout. A bf16 matmul with a bias + SiLU
// epilogue: one block per output tile (3 x 2 tiles of 128 x 128), the K loop a pipeline over a ring of three
// shared-memory slots (rows padded by 16 bytes: 3 x (128 x 40 + 32 x 136) x 2 bytes) that 16-byte cp.async
// fills two k-tiles ahead (the prologue's two groups, then one group each iteration, the wait leaving one in
// flight), ldmatrix fragments (x4: two B fragments per load, transposed for the [K, N] rhs) and nvvm.mma.sync
// m16n8k16 with bf16 operands packed in i32. After the loop, under each store's bounds check, the epilogue's
// body runs on the accumulator registers it stores (its f32 exp and division as the hardware approximations),
// reading the bias tile from memory, and the valid part is stored two adjacent columns at a time (N is even). The kernel is size-generic: its buffers
// are typed 2^40 elements long and M, N and K follow them as parameters (their values in the launch's sizes);
// the code reads them for the block's tile (M / BM tiles of N / BN), the k-tile count (at least one), the
// clamped tile sizes and the row strides.
// CHECK-LABEL: func.func private @k0_matmul
// CHECK-SAME: kiln.gpu_kernel = @kiln_kernels::@k0_matmul
// CHECK-SAME: kiln.launch = {block = array<i64: 128, 1, 1>, dynamic_shared_bytes = 56832 : i64, grid = array<i64: 6, 1, 1>, sizes = array<i64: 300, 200, 256>}
// CHECK: gpu.module @kiln_kernels
// CHECK: gpu.func @k0_matmul(%{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %[[M:.*]]: index, %[[N:.*]]: index, %[[K:.*]]: index) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: gpu.block_id x
// CHECK: %[[N_UP:.*]] = arith.addi %[[N]], %c127
// CHECK: %[[N_TILES:.*]] = arith.divui %[[N_UP]], %c128
// CHECK: arith.remui %{{.*}}, %[[N_TILES]]
// CHECK: %[[K_UP:.*]] = arith.addi %[[K]], %c31
// CHECK: %[[K_TILES:.*]] = arith.divui %[[K_UP]], %c32
// CHECK: %[[K_TILES_1:.*]] = arith.maxui %[[K_TILES]], %c1
// CHECK-COUNT-2: nvgpu.device_async_create_group
// CHECK: scf.for %{{.*}} = %c0 to %[[K_TILES_1]] step %c1 iter_args
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1}
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<{{.*}}xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<{{.*}}xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: vector.bitcast {{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK: scf.yield
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK: scf.if
// CHECK: memref.load %{{.*}} : memref<1099511627776xbf16>
// CHECK: math.exp {{.*}} fastmath<afn> : f32
// CHECK: nvvm.rcp.approx.ftz.f
// CHECK: vector.store {{.*}} {alignment = 4 : i64} : memref<1099511627776xbf16>, vector<2xbf16>
module {
  func.func private @k0_matmul(%x: tensor<300x256xbf16>, %w: tensor<256x200xbf16>, %b: tensor<200xbf16>, %out: tensor<300x200xbf16>) -> tensor<300x200xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w epilogue(%b : tensor<200xbf16>) {
    ^bb0(%acc: f32, %bias: f32):
      %s = arith.addf %acc, %bias : f32
      %n = arith.negf %s : f32
      %e = math.exp %n : f32
      %one = arith.constant 1.0 : f32
      %d = arith.addf %one, %e : f32
      %r = arith.divf %s, %d : f32
      kiln.yield %r : f32
    } {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<300x256xbf16>, tensor<256x200xbf16> -> tensor<300x200xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<300x200xbf16>, tensor<300x200xbf16>) -> tensor<300x200xbf16>
    return %r : tensor<300x200xbf16>
  }
}

// -----

// f16 operands go to nvvm.mma.sync as vector<2xf16> pairs; a transposed rhs ([N, K]) is read with
// non-transposed ldmatrix (its ring has 8 spare rows); the batch is a dimension of the loop, and so of the
// 1-D grid (2 x 1 x 2 blocks). The f32 result is stored in pairs: N = 136 is even.
// CHECK-LABEL: func.func private @k1_matmul
// CHECK-SAME: dynamic_shared_bytes = 63360 : i64, grid = array<i64: 4, 1, 1>, sizes = array<i64: 77, 136, 128>
// CHECK: gpu.func @k1_matmul
// CHECK-NOT: transpose = true
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<{{.*}}xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK-NOT: transpose = true
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{.*}} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: vector.store {{.*}} : memref<1099511627776xf32>, vector<2xf32>
module {
  func.func private @k1_matmul(%x: tensor<2x77x128xf16>, %w: tensor<136x128xf16>, %out: tensor<2x77x136xf32>) -> tensor<2x77x136xf32> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<2x77x128xf16>, tensor<136x128xf16> -> tensor<2x77x136xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<2x77x136xf32>, tensor<2x77x136xf32>) -> tensor<2x77x136xf32>
    return %r : tensor<2x77x136xf32>
  }
}

// -----

// Rows that 16-byte copies cannot start on: K = 17 (odd) makes the lhs rows element loads, predicated and
// stored to shared memory as 16-byte chunks; N = 66 (even, not a multiple of 4) makes the rhs rows 4-byte
// cp.async (no L1 bypass, which only 16-byte copies take).
// CHECK-LABEL: func.func private @k2_matmul
// CHECK: gpu.func @k2_matmul
// CHECK: memref.load %{{.*}} : memref<1099511627776xbf16>
// CHECK: vector.store %{{.*}} : memref<{{.*}}xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: nvgpu.device_async_copy %{{.*}}, 2, %{{.*}} : memref<1099511627776xbf16> to memref<{{.*}}xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: bypassL1
// CHECK: nvvm.mma.sync
module {
  func.func private @k2_matmul(%x: tensor<64x17xbf16>, %w: tensor<17x66xbf16>, %out: tensor<64x66xbf16>) -> tensor<64x66xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<64x17xbf16>, tensor<17x66xbf16> -> tensor<64x66xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x66xbf16>, tensor<64x66xbf16>) -> tensor<64x66xbf16>
    return %r : tensor<64x66xbf16>
  }
}

// -----

// An odd N (7) stores element by element.
// CHECK-LABEL: gpu.func @k3_matmul
// CHECK-NOT: memref<1099511627776xbf16>, vector<2xbf16>
// CHECK: memref.store %{{.*}} : memref<1099511627776xbf16>
module {
  func.func private @k3_matmul(%x: tensor<5x32xbf16>, %w: tensor<32x7xbf16>, %out: tensor<5x7xbf16>) -> tensor<5x7xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [16, 16, 32], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<5x32xbf16>, tensor<32x7xbf16> -> tensor<5x7xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<5x7xbf16>, tensor<5x7xbf16>) -> tensor<5x7xbf16>
    return %r : tensor<5x7xbf16>
  }
}

// -----

// K = 0: the contraction folds away, and the kernel stores the epilogue of zeros without shared memory (a
// kernel of its shape alone: nothing it reads has a size to generalise).
// CHECK-LABEL: func.func private @k4_matmul
// CHECK-SAME: dynamic_shared_bytes = 0 : i64
// CHECK: gpu.func @k4_matmul
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.return
module {
  func.func private @k4_matmul(%x: tensor<64x0xbf16>, %w: tensor<0x64xbf16>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [64, 64, 16], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<64x0xbf16>, tensor<0x64xbf16> -> tensor<64x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// f32 operands run on TF32 tensor cores: 16-byte cp.async copies of 4 elements, rows padded by 16 bytes (A) and
// 32 bytes ([K, N] B, whose fragments are read element by element: ldmatrix transposes only 16-bit elements),
// 3 x (64 x 36 + 32 x 72) x 4 bytes; A fragments by ldmatrix (4 x 1 f32 each), every element rounded to TF32 as
// it is loaded, and nvvm.mma.sync m16n8k8 tf32; the f32 result stored two columns at a time.
// CHECK-LABEL: func.func private @k5_matmul
// CHECK-SAME: dynamic_shared_bytes = 55296
// CHECK: gpu.func @k5_matmul(%{{.*}}: memref<1099511627776xf32>
// CHECK: nvgpu.device_async_copy {{.*}}, 4, %{{.*}} {bypassL1}
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<{{.*}}xf32, #gpu.address_space<workgroup>> -> vector<4x1xf32>
// CHECK: nvvm.convert.float.to.tf32 {{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// CHECK: memref.load {{.*}} : memref<{{.*}}xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.convert.float.to.tf32
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>}
// CHECK: vector.store {{.*}} {alignment = 8 : i64} : memref<1099511627776xf32>, vector<2xf32>
module {
  func.func private @k5_matmul(%x: tensor<100x64xf32>, %w: tensor<64x64xf32>, %out: tensor<100x64xf32>) -> tensor<100x64xf32> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<100x64xf32>, tensor<64x64xf32> -> tensor<100x64xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<100x64xf32>, tensor<100x64xf32>) -> tensor<100x64xf32>
    return %r : tensor<100x64xf32>
  }
}

// -----

// fp32_precision = "ieee" (3xTF32): each loaded f32 element split into its TF32 rounding and the TF32 rounding
// of the remainder, and three mma.sync per fragment pair from zero, the two small products first, their sum
// added to the accumulator by a rounded f32 add (the tensor core truncates what it accumulates).
// CHECK-LABEL: func.func private @k5_matmul_ieee
// CHECK: nvvm.convert.float.to.tf32
// CHECK: arith.bitcast {{.*}} : i32 to f32
// CHECK: arith.subf
// CHECK: nvvm.convert.float.to.tf32
// CHECK-COUNT-3: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 8>
// CHECK: arith.addf {{.*}} : vector<4xf32>
module {
  func.func private @k5_matmul_ieee(%x: tensor<100x64xf32>, %w: tensor<64x64xf32>, %out: tensor<100x64xf32>) -> tensor<100x64xf32> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {fp32_precision = "ieee", kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<100x64xf32>, tensor<64x64xf32> -> tensor<100x64xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<100x64xf32>, tensor<100x64xf32>) -> tensor<100x64xf32>
    return %r : tensor<100x64xf32>
  }
}

// -----

// An f32 matmul by a transposed rhs (an nn.Linear weight [N, K]) whose K = 30 is not a whole number of 16-byte
// chunks: 8-byte cp.async copies, and B's fragments by ldmatrix from its [N, K] rows like A's (N + 8 rows:
// 3 x (64 x 36 + 72 x 36) x 4 bytes).
// CHECK-LABEL: func.func private @k6_matmul
// CHECK-SAME: dynamic_shared_bytes = 58752
// CHECK: nvgpu.device_async_copy {{.*}}, 2, %{{.*}} :
// CHECK-NOT: bypassL1
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<4x1xf32>
// CHECK: nvgpu.ldmatrix {{.*}} -> vector<4x1xf32>
// CHECK: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 8>
module {
  func.func private @k6_matmul(%x: tensor<64x30xf32>, %w: tensor<50x30xf32>, %out: tensor<64x50xf32>) -> tensor<64x50xf32> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w transpose_rhs {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<64x30xf32>, tensor<50x30xf32> -> tensor<64x50xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x50xf32>, tensor<64x50xf32>) -> tensor<64x50xf32>
    return %r : tensor<64x50xf32>
  }
}

// -----

module {
  func.func private @k6_matmul(%x: tensor<64x64xbf16>, %w: tensor<64x64xbf16>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{#kiln.config<tile = [48, 40, 24], warps = 4, stages = 3, lowering = "mma_sync"> does not fit the mma_sync kernel: need BM a multiple of 16 x warp rows, BN of 8 x warp columns, BK of 16 and stages >= 2}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [48, 40, 24], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// A config whose pipeline needs more shared memory than the chip allows a block is an error here, not at launch.
module {
  func.func private @k7_oversize(%x: tensor<512x512xbf16>, %w: tensor<512x512xbf16>, %out: tensor<512x512xbf16>) -> tensor<512x512xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.matmul' op config needs 409600 bytes of shared memory per block; sm_90a allows 232448}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [128, 256, 128], warps = 8, stages = 4, lowering = "mma_sync">} : tensor<512x512xbf16>, tensor<512x512xbf16> -> tensor<512x512xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<512x512xbf16>, tensor<512x512xbf16>) -> tensor<512x512xbf16>
    return %r : tensor<512x512xbf16>
  }
}

// -----

// A split matmul (k_chunk = 256): the chunk is the grid's slowest index (block / (N tiles) / (M tiles), never
// reduced modulo the chunk count, so that kernels of any K share the code), its K loop starts at chunk * 256 and
// counts the k-tiles up to min(start + 256, K) with K the size parameter (clamped to the start: a chunk that
// starts past K reads one zero-filled k-tile instead of wrapping the unsigned count); the f32 partial tile is stored at the
// chunk's offset of the parts.
// CHECK-LABEL: func.func private @k8_matmul
// CHECK-SAME: grid = array<i64: 8, 1, 1>, sizes = array<i64: 32, 256, 1000>
// CHECK: gpu.func @k8_matmul(%{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xbf16>, %{{.*}}: memref<1099511627776xf32>, %[[M:.*]]: index, %[[N:.*]]: index, %[[K:.*]]: index) kernel
// CHECK: %[[BLOCK:.*]] = gpu.block_id x
// CHECK: %[[N_TILES:.*]] = arith.divui %{{.*}}, %c128
// CHECK: %[[REST:.*]] = arith.divui %[[BLOCK]], %[[N_TILES]]
// CHECK: %[[M_TILES:.*]] = arith.divui %{{.*}}, %c32
// CHECK: %[[CHUNK:.*]] = arith.divui %[[REST]], %[[M_TILES]]
// CHECK: %[[START:.*]] = arith.muli %[[CHUNK]], %c256
// CHECK: %[[NEXT:.*]] = arith.addi %[[START]], %c256
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[NEXT]], %[[K]]
// CHECK: %[[END:.*]] = arith.maxui %[[CLAMPED]], %[[START]]
// CHECK: %[[LEN:.*]] = arith.subi %[[END]], %[[START]]
// CHECK: %[[LEN_UP:.*]] = arith.addi %[[LEN]], %c127
// CHECK: %[[K_TILES:.*]] = arith.divui %[[LEN_UP]], %c128
// CHECK: %[[K_TILES_1:.*]] = arith.maxui %[[K_TILES]], %c1
// CHECK: scf.for %{{.*}} = %c0 to %[[K_TILES_1]] step %c1 iter_args
// CHECK: nvvm.mma.sync
// CHECK: vector.store {{.*}} : memref<1099511627776xf32>, vector<2xf32>
module {
  func.func private @k8_matmul(%x: tensor<32x1000xbf16>, %w: tensor<1000x256xbf16>, %out: tensor<4x32x256xf32>) -> tensor<4x32x256xf32> attributes {kiln.kernel} {
    %p = kiln.matmul %x, %w {k_chunk = 256 : i64, kiln.config = #kiln.config<tile = [32, 128, 128], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<32x1000xbf16>, tensor<1000x256xbf16> -> tensor<4x32x256xf32>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<4x32x256xf32>, tensor<4x32x256xf32>) -> tensor<4x32x256xf32>
    return %r : tensor<4x32x256xf32>
  }
}

// -----

// A chunk that is not a whole number of the config's k-tiles is refused by kiln-tile.
module {
  func.func private @k9_matmul(%x: tensor<32x1000xbf16>, %w: tensor<1000x256xbf16>, %out: tensor<10x32x256xf32>) -> tensor<10x32x256xf32> attributes {kiln.kernel} {
    // expected-error @+2 {{'kiln.matmul' op k_chunk = 100 is not a whole number of 128-deep k-tiles (the config's BK)}}
    // expected-error @+1 {{kiln-tile: cannot tile this op with #kiln.config<tile = [32, 128, 128], warps = 4, stages = 3, lowering = "mma_sync">}}
    %p = kiln.matmul %x, %w {k_chunk = 100 : i64, kiln.config = #kiln.config<tile = [32, 128, 128], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<32x1000xbf16>, tensor<1000x256xbf16> -> tensor<10x32x256xf32>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<10x32x256xf32>, tensor<10x32x256xf32>) -> tensor<10x32x256xf32>
    return %r : tensor<10x32x256xf32>
  }
}

// -----

// A config's group orders the blocks: in groups of `group` tile rows (2 here), the rows of a group fastest, the
// last group as many rows as are left (5 tile rows of M = 300: 2, 2, 1). The batch is the block index over the
// tiles of one slice (5 x 4), so that each slice's tiles are grouped alike.
// CHECK-LABEL: gpu.func @k9_matmul
// CHECK-SAME: %[[M:[^:]*]]: index, %[[N:[^:]*]]: index, %{{[^:]*}}: index) kernel
// CHECK: %[[BLOCK:.*]] = gpu.block_id x
// CHECK: %[[M_UP:.*]] = arith.addi %[[M]], %c63
// CHECK: %[[M_TILES:.*]] = arith.divui %[[M_UP]], %c64
// CHECK: %[[N_UP:.*]] = arith.addi %[[N]], %c63
// CHECK: %[[N_TILES:.*]] = arith.divui %[[N_UP]], %c64
// CHECK: %[[TILES:.*]] = arith.muli %[[M_TILES]], %[[N_TILES]]
// CHECK: %[[INNER:.*]] = arith.remui %[[BLOCK]], %[[TILES]]
// CHECK: arith.divui %[[BLOCK]], %[[TILES]]
// CHECK: %[[PER_GROUP:.*]] = arith.muli %[[N_TILES]], %c2
// CHECK: %[[GROUP:.*]] = arith.divui %[[INNER]], %[[PER_GROUP]]
// CHECK: %[[FIRST:.*]] = arith.muli %[[GROUP]], %c2
// CHECK: %[[LEFT:.*]] = arith.subi %[[M_TILES]], %[[FIRST]]
// CHECK: %[[SIZE:.*]] = arith.minui %[[LEFT]], %c2
// CHECK: %[[WITHIN:.*]] = arith.remui %[[INNER]], %[[PER_GROUP]]
// CHECK: %[[IN_GROUP:.*]] = arith.remui %[[WITHIN]], %[[SIZE]]
// CHECK: %[[ROW:.*]] = arith.addi %[[FIRST]], %[[IN_GROUP]]
// CHECK: %[[COLUMN:.*]] = arith.divui %[[WITHIN]], %[[SIZE]]
// CHECK: arith.muli %[[ROW]], %c64
// CHECK: arith.muli %[[COLUMN]], %c64
module {
  func.func private @k9_matmul(%x: tensor<2x300x64xbf16>, %w: tensor<64x200xbf16>, %out: tensor<2x300x200xbf16>) -> tensor<2x300x200xbf16> attributes {kiln.kernel} {
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync", group = 2>} : tensor<2x300x64xbf16>, tensor<64x200xbf16> -> tensor<2x300x200xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<2x300x200xbf16>, tensor<2x300x200xbf16>) -> tensor<2x300x200xbf16>
    return %r : tensor<2x300x200xbf16>
  }
}
