// RUN: kiln-opt %s -convert-kiln-to-gpu -split-input-file -verify-diagnostics | FileCheck %s

// Matmuls reach this pass tiled (convert-kiln-to-gpu-matmul.mlir, convert-kiln-to-gpu-wgmma-matmul.mlir).
module {
  func.func private @k4_matmul(%x: tensor<64x64xbf16>, %w: tensor<64x64xbf16>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{needs a #kiln.config with lowering "mma_sync" or "wgmma" and its tiled loop (kiln-select-config, kiln-tile, kiln-assign-layouts first), for the GPU backend}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 1, stages = 1, lowering = "host">} : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// An integer table moves as it is: the thread reads its index, clamps it and copies its element of that row.
// CHECK-LABEL: gpu.func @k5_gather
// CHECK: %[[RAW:.*]] = memref.load {{.*}} : memref<4xi64>
// CHECK: arith.index_cast %[[RAW]] : i64 to index
// CHECK: %[[ROW:.*]] = memref.load {{.*}} : memref<512xi64>
// CHECK: memref.store %[[ROW]], {{.*}} : memref<32xi64>
module {
  func.func private @k5_gather(%t: tensor<64x8xi64>, %i: tensor<4xi64>, %out: tensor<4x8xi64>) -> tensor<4x8xi64> attributes {kiln.kernel} {
    %g = kiln.gather %t[%i] axis 0 : tensor<64x8xi64>, tensor<4xi64> -> tensor<4x8xi64>
    %r = bufferization.materialize_in_destination %g in %out : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi64>
    return %r : tensor<4x8xi64>
  }
}

// -----

// Softmax over a leading axis: one thread per element, a max pass and a sum-of-exp pass along the axis.
// CHECK-LABEL: gpu.func @k5_softmax
// CHECK: scf.for
// CHECK: arith.maximumf
// CHECK: scf.for
// CHECK: math.exp
// CHECK: nvvm.rcp.approx.ftz.f
module {
  func.func private @k5_softmax(%x: tensor<64x64xbf16>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    %p = kiln.softmax %x axis 0 : tensor<64x64xbf16>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// A reduction over a leading axis is not a row kernel: one thread per output element loops over the column.
// CHECK-LABEL: gpu.func @k5_reduce
// CHECK: scf.for %{{.*}} = %{{.*}} to %c64{{.*}} step
// CHECK: arith.addf
// CHECK: memref.store
module {
  func.func private @k5_reduce(%x: tensor<64x64xbf16>, %out: tensor<64xbf16>) -> tensor<64xbf16> attributes {kiln.kernel} {
    %p = kiln.reduce sum %x axes [0] : tensor<64x64xbf16> -> tensor<64xbf16>
    %r = bufferization.materialize_in_destination %p in %out : (tensor<64xbf16>, tensor<64xbf16>) -> tensor<64xbf16>
    return %r : tensor<64xbf16>
  }
}

// -----

// Concat: each input read at the position clamped into its extent, the one holding it selected.
// CHECK-LABEL: gpu.func @k6_concat
// CHECK-COUNT-2: memref.load
// CHECK: arith.select
// CHECK: memref.store
module {
  func.func private @k6_concat(%a: tensor<4x24xf16>, %b: tensor<4x40xf16>, %out: tensor<4x64xf16>) -> tensor<4x64xf16> attributes {kiln.kernel} {
    %c = kiln.concat %a, %b axis 1 : tensor<4x24xf16>, tensor<4x40xf16> -> tensor<4x64xf16>
    %r = bufferization.materialize_in_destination %c in %out : (tensor<4x64xf16>, tensor<4x64xf16>) -> tensor<4x64xf16>
    return %r : tensor<4x64xf16>
  }
}

// -----

// Gather: the index (i64) picks the table row, wrapped when negative and clamped into range.
// CHECK-LABEL: gpu.func @k7_gather
// CHECK: memref.load {{.*}} : memref<6xi64>
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: memref.load {{.*}} : memref<6400xbf16>
module {
  func.func private @k7_gather(%t: tensor<100x64xbf16>, %i: tensor<2x3xi64>, %out: tensor<2x3x64xbf16>) -> tensor<2x3x64xbf16> attributes {kiln.kernel} {
    %g = kiln.gather %t[%i] axis 0 : tensor<100x64xbf16>, tensor<2x3xi64> -> tensor<2x3x64xbf16>
    %r = bufferization.materialize_in_destination %g in %out : (tensor<2x3x64xbf16>, tensor<2x3x64xbf16>) -> tensor<2x3x64xbf16>
    return %r : tensor<2x3x64xbf16>
  }
}

// -----

// The merge of a split attention's chunks: a thread per output element loops over the 3 chunks twice, for the
// largest lse of its row (row = element / 8), then for the weights exp(lse - max) (0 where lse = -inf, and the
// part, whatever it holds, selected away) and the weighted parts, and stores their quotient as bf16.
// CHECK-LABEL: gpu.func @k9_merge_splits
// CHECK-SAME: (%[[PARTS:[a-zA-Z0-9_]+]]: memref<192xf32>, %[[LSE:[a-zA-Z0-9_]+]]: memref<24xf32>, %[[OUT:[a-zA-Z0-9_]+]]: memref<64xbf16>)
// CHECK: %[[ROW:.+]] = arith.divui %[[E:[a-zA-Z0-9_]+]], %c8 : index
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1
// CHECK: memref.load %[[LSE]]
// CHECK: arith.maximumf
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1
// CHECK: %[[NONE:.+]] = arith.cmpf oeq, %{{.*}}, %cst : f32
// CHECK: math.exp
// CHECK: %[[W:.+]] = arith.select %[[NONE]], %{{.*}}, %{{.*}} : f32
// CHECK: %[[USED:.+]] = arith.cmpf one, %[[W]]
// CHECK: memref.load %[[PARTS]]
// CHECK: arith.select %[[USED]]
// A row no chunk gives a key (total weight 0) divides by 1: zeros.
// CHECK: %[[EMPTY:.+]] = arith.cmpf oeq, %[[TOTAL:[a-zA-Z0-9_#]+]], %{{.*}} : f32
// CHECK: %[[DIVISOR:.+]] = arith.select %[[EMPTY]], %{{.*}}, %[[TOTAL]] : f32
// CHECK: nvvm.rcp.approx.ftz.f %[[DIVISOR]]
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[E]]]
module {
  func.func private @k9_merge_splits(%p: tensor<3x1x2x4x8xf32>, %l: tensor<3x1x2x4xf32>, %out: tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xbf16> attributes {kiln.kernel} {
    %o = kiln.merge_splits %p, %l : tensor<3x1x2x4x8xf32>, tensor<3x1x2x4xf32> -> tensor<1x2x4x8xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xbf16>
    return %r : tensor<1x2x4x8xbf16>
  }
}

// -----

// An attention reaches this pass as its tiled loop (kiln-tile, kiln-online-softmax, kiln-split-masked-tiles,
// kiln-assign-layouts: convert-kiln-to-gpu-attention.mlir, convert-kiln-to-gpu-wgmma-attention.mlir), for either
// lowering: an untiled attention is an error on the op.
module {
  func.func private @k6_attention(%q: tensor<2x8x144x64xbf16>, %k: tensor<2x2x144x64xbf16>, %v: tensor<2x2x144x64xbf16>, %out: tensor<2x8x144x64xbf16>) -> tensor<2x8x144x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.attention' op needs a #kiln.config with lowering "mma_sync" or "wgmma" and its tiled loop (kiln-select-config, kiln-tile, kiln-online-softmax, kiln-split-masked-tiles, kiln-assign-layouts first), for the GPU backend}}
    %o = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<2x8x144x64xbf16>, tensor<2x2x144x64xbf16>, tensor<2x2x144x64xbf16> -> tensor<2x8x144x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<2x8x144x64xbf16>, tensor<2x8x144x64xbf16>) -> tensor<2x8x144x64xbf16>
    return %r : tensor<2x8x144x64xbf16>
  }
}

// -----

// Glue kernels: one thread per output element, reading each operand at its permuted or broadcast index; or one
// thread per 16-byte run of an output row, where every operand reads the run contiguously or as one element. The
// transpose keeps the innermost dimension (64 columns): 39424 / 8 runs in 20 blocks, each run one vector load and
// one vector store. The GELU's rows (300 columns) are not whole runs: an element a thread.
// CHECK-LABEL: func.func private @k8_transpose
// CHECK-SAME: kiln.launch = {block = array<i64: 256, 1, 1>, dynamic_shared_bytes = 0 : i64, grid = array<i64: 20, 1, 1>}
// CHECK: func.func private @k9_gelu
// CHECK-SAME: grid = array<i64: 91, 1, 1>
// CHECK: gpu.func @k8_transpose(%{{.*}}: memref<39424xbf16>, %{{.*}}: memref<39424xbf16>) kernel
// CHECK-NOT: memref.global
// CHECK: scf.if
// CHECK: vector.load {{.*}} : memref<39424xbf16>, vector<8xbf16>
// CHECK: vector.store {{.*}} : memref<39424xbf16>, vector<8xbf16>
// CHECK: gpu.func @k9_gelu
// CHECK: memref.load
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: math.tanh
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: memref.store
module {
  func.func private @k8_transpose(%x: tensor<1x8x77x64xbf16>, %out: tensor<1x77x8x64xbf16>) -> tensor<1x77x8x64xbf16> attributes {kiln.kernel} {
    %t = kiln.transpose %x [0, 2, 1, 3] : tensor<1x8x77x64xbf16> -> tensor<1x77x8x64xbf16>
    %r = bufferization.materialize_in_destination %t in %out : (tensor<1x77x8x64xbf16>, tensor<1x77x8x64xbf16>) -> tensor<1x77x8x64xbf16>
    return %r : tensor<1x77x8x64xbf16>
  }
  func.func private @k9_gelu(%x: tensor<77x300xbf16>, %out: tensor<77x300xbf16>) -> tensor<77x300xbf16> attributes {kiln.kernel} {
    %g = kiln.gelu %x approximate(tanh) : tensor<77x300xbf16>
    %r = bufferization.materialize_in_destination %g in %out : (tensor<77x300xbf16>, tensor<77x300xbf16>) -> tensor<77x300xbf16>
    return %r : tensor<77x300xbf16>
  }
}

// -----

// GPT-2's q/k/v slices of the fused projection (rows of 2304, the slice at column 768): runs of 8 from the
// aligned column. A slice at column 4 is not aligned to the runs: an element a thread. An f32 add of a row
// vector [77, 1] (one element for the whole run) to [77, 64]: runs of 4 (16 bytes of f32), the row vector read
// once and used for the four.
// CHECK-LABEL: gpu.func @k10_slice
// CHECK: vector.load {{.*}} : memref<1536xbf16>, vector<8xbf16>
// CHECK: vector.store {{.*}} : memref<512xbf16>, vector<8xbf16>
// CHECK-LABEL: gpu.func @k11_slice
// CHECK-NOT: vector.load
// CHECK: memref.load
// CHECK: memref.store
// CHECK-LABEL: gpu.func @k12_add
// CHECK: vector.load {{.*}} : memref<4928xf32>, vector<4xf32>
// CHECK: %[[ROW:.*]] = memref.load {{.*}} : memref<77xf32>
// CHECK-COUNT-4: arith.addf {{.*}}, %[[ROW]] : f32
// CHECK: vector.store {{.*}} : memref<4928xf32>, vector<4xf32>
module {
  func.func private @k10_slice(%x: tensor<2x3x256xbf16>, %out: tensor<2x1x256xbf16>) -> tensor<2x1x256xbf16> attributes {kiln.kernel} {
    %s = kiln.slice %x offsets [0, 1, 0] strides [1, 1, 1] : tensor<2x3x256xbf16> -> tensor<2x1x256xbf16>
    %r = bufferization.materialize_in_destination %s in %out : (tensor<2x1x256xbf16>, tensor<2x1x256xbf16>) -> tensor<2x1x256xbf16>
    return %r : tensor<2x1x256xbf16>
  }
  func.func private @k11_slice(%x: tensor<2x256xbf16>, %out: tensor<2x64xbf16>) -> tensor<2x64xbf16> attributes {kiln.kernel} {
    %s = kiln.slice %x offsets [0, 4] strides [1, 1] : tensor<2x256xbf16> -> tensor<2x64xbf16>
    %r = bufferization.materialize_in_destination %s in %out : (tensor<2x64xbf16>, tensor<2x64xbf16>) -> tensor<2x64xbf16>
    return %r : tensor<2x64xbf16>
  }
  func.func private @k12_add(%x: tensor<77x64xf32>, %b: tensor<77x1xf32>, %out: tensor<77x64xf32>) -> tensor<77x64xf32> attributes {kiln.kernel} {
    %y = kiln.add %x, %b : tensor<77x64xf32>, tensor<77x1xf32> -> tensor<77x64xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<77x64xf32>, tensor<77x64xf32>) -> tensor<77x64xf32>
    return %r : tensor<77x64xf32>
  }
}

// -----

// A bool tensor cast to a float: 0 or 1 (uitofp), an element a thread (an i1 in memory is a byte; a vector of
// i1 would read packed bits).
// CHECK-LABEL: gpu.func @k13_cast_bool
// CHECK-NOT: vector.load
// CHECK: %[[BIT:.*]] = memref.load {{.*}} : memref<4096xi1>
// CHECK: %[[ONE:.*]] = arith.uitofp %[[BIT]] : i1 to bf16
// CHECK: memref.store %[[ONE]], {{.*}} : memref<4096xbf16>
module {
  func.func private @k13_cast_bool(%c: tensor<64x64xi1>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    %f = kiln.cast %c : tensor<64x64xi1> to tensor<64x64xbf16>
    %r = bufferization.materialize_in_destination %f in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// A comparison stores a byte per element (an i1), an element a thread even over 16-byte-aligned bf16 rows.
// CHECK-LABEL: gpu.func @k14_compare
// CHECK-NOT: vector.load
// CHECK: %[[X:.*]] = memref.load {{.*}} : memref<4096xbf16>
// CHECK: %[[WX:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK: %[[Y:.*]] = memref.load {{.*}} : memref<64xbf16>
// CHECK: %[[WY:.*]] = arith.extf %[[Y]] : bf16 to f32
// CHECK: %[[LT:.*]] = arith.cmpf olt, %[[WX]], %[[WY]] : f32
// CHECK: memref.store %[[LT]], {{.*}} : memref<4096xi1>
module {
  func.func private @k14_compare(%x: tensor<64x64xbf16>, %y: tensor<64xbf16>, %out: tensor<64x64xi1>) -> tensor<64x64xi1> attributes {kiln.kernel} {
    %c = kiln.compare lt %x, %y : tensor<64x64xbf16>, tensor<64xbf16> -> tensor<64x64xi1>
    %r = bufferization.materialize_in_destination %c in %out : (tensor<64x64xi1>, tensor<64x64xi1>) -> tensor<64x64xi1>
    return %r : tensor<64x64xi1>
  }
}

// -----

// A select between integers (a Trilu of an i64 tensor) reads and stores them unconverted.
// CHECK-LABEL: gpu.func @k15_select_i64
// CHECK: %[[C:.*]] = memref.load {{.*}} : memref<64xi1>
// CHECK: %[[V:.*]] = memref.load {{.*}} : memref<64xi64>
// CHECK: %[[Z:.*]] = memref.load {{.*}} : memref<1xi64>
// CHECK: %[[S:.*]] = arith.select %[[C]], %[[V]], %[[Z]] : i64
// CHECK: memref.store %[[S]], {{.*}} : memref<64xi64>
module {
  func.func private @k15_select_i64(%c: tensor<8x8xi1>, %v: tensor<8x8xi64>, %z: tensor<i64>, %out: tensor<8x8xi64>) -> tensor<8x8xi64> attributes {kiln.kernel} {
    %s = kiln.select %c, %v, %z : tensor<8x8xi1>, tensor<8x8xi64>, tensor<i64> -> tensor<8x8xi64>
    %r = bufferization.materialize_in_destination %s in %out : (tensor<8x8xi64>, tensor<8x8xi64>) -> tensor<8x8xi64>
    return %r : tensor<8x8xi64>
  }
}

// -----

// A fused chain (kiln.elementwise): 8 bf16 elements a thread, one 16-byte load of x and one element of the
// broadcast column, the body inlined per element on the widened values, one 16-byte store.
// CHECK-LABEL: gpu.func @k17_elementwise
// CHECK: vector.load {{.*}} : memref<4096xbf16>, vector<8xbf16>
// CHECK: memref.load {{.*}} : memref<64xbf16>
// CHECK-COUNT-8: math.tanh {{.*}} : f32
// CHECK: vector.store {{.*}} : memref<4096xbf16>, vector<8xbf16>
module {
  func.func private @k17_elementwise(%x: tensor<64x64xbf16>, %c: tensor<64x1xbf16>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    %y = kiln.elementwise %x, %c : (tensor<64x64xbf16>, tensor<64x1xbf16>) -> tensor<64x64xbf16> {
    ^bb0(%xs: f32, %cs: f32):
      %p = arith.mulf %xs, %cs : f32
      %t = math.tanh %p : f32
      kiln.yield %t : f32
    }
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// Integer arithmetic computes in its own type, 16 bytes a thread (4 i32 values), through the same formula as
// the host: the remainder's divisor guarded against 0 and -1 before arith.remsi.
// CHECK-LABEL: gpu.func @k16_remainder_i32
// CHECK: vector.load {{.*}} : memref<4096xi32>, vector<4xi32>
// CHECK-NOT: arith.sitofp
// CHECK-COUNT-4: arith.remsi {{.*}} : i32
// CHECK: vector.store {{.*}} : memref<4096xi32>, vector<4xi32>
module {
  func.func private @k16_remainder_i32(%x: tensor<64x64xi32>, %y: tensor<64xi32>, %out: tensor<64x64xi32>) -> tensor<64x64xi32> attributes {kiln.kernel} {
    %m = kiln.remainder %x, %y : tensor<64x64xi32>, tensor<64xi32> -> tensor<64x64xi32>
    %r = bufferization.materialize_in_destination %m in %out : (tensor<64x64xi32>, tensor<64x64xi32>) -> tensor<64x64xi32>
    return %r : tensor<64x64xi32>
  }
}

// -----

module {
  func.func private @w4_softmax(%x: tensor<64x64xbf16>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{the wgmma lowering is for matmuls and attention only}}
    %y = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "wgmma">} : tensor<64x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// RoPE is one thread per rotation pair, here rotate-half on [B, S, H, D] = [2, 3, 5, 8] with seq_dim = 1: 120
// pairs in one block. The thread splits its index into the pair (mod D / 2) and the row, the row's position
// (its index along S), reads both elements of the pair (c and c + D / 2) and the pair's angle once, and writes
// (a cos - b sin, a sin + b cos).
// CHECK-LABEL: func.func private @k12_rope
// CHECK-SAME: grid = array<i64: 1, 1, 1>
// CHECK: gpu.func @k12_rope(%[[X:.*]]: memref<240xbf16>, %[[COS:.*]]: memref<12xbf16>, %[[SIN:.*]]: memref<12xbf16>, %[[OUT:.*]]: memref<240xbf16>) kernel
// CHECK: arith.cmpi ult, %[[LINEAR:.*]], %c120
// CHECK: %[[PAIR:.*]] = arith.remui %[[LINEAR]], %c4
// CHECK: %[[ROW:.*]] = arith.divui %[[LINEAR]], %c4
// CHECK: %[[BATCHANDPOSITION:.*]] = arith.divui %[[ROW]], %c5
// CHECK: %[[POSITION:.*]] = arith.remui %[[BATCHANDPOSITION]], %c3
// CHECK-NOT: arith.divui
// CHECK: %[[ROWSTART:.*]] = arith.muli %[[ROW]], %c8
// CHECK: %[[FIRST:.*]] = arith.addi %[[ROWSTART]], %[[PAIR]]
// CHECK: %[[SECOND:.*]] = arith.addi %[[FIRST]], %c4
// CHECK: %[[A16:.*]] = memref.load %[[X]][%[[FIRST]]]
// CHECK: %[[A:.*]] = arith.extf %[[A16]]
// CHECK: %[[B16:.*]] = memref.load %[[X]][%[[SECOND]]]
// CHECK: %[[B:.*]] = arith.extf %[[B16]]
// CHECK: %[[ANGLE0:.*]] = arith.muli %[[POSITION]], %c4
// CHECK: %[[ANGLE:.*]] = arith.addi %[[ANGLE0]], %[[PAIR]]
// CHECK: %[[C16:.*]] = memref.load %[[COS]][%[[ANGLE]]]
// CHECK: %[[C:.*]] = arith.extf %[[C16]]
// CHECK: %[[S16:.*]] = memref.load %[[SIN]][%[[ANGLE]]]
// CHECK: %[[S:.*]] = arith.extf %[[S16]]
// CHECK-DAG: %[[BS:.*]] = arith.mulf %[[B]], %[[S]]
// CHECK-DAG: %[[AC:.*]] = arith.mulf %[[A]], %[[C]]
// CHECK: %[[FIRSTOUT:.*]] = arith.subf %[[AC]], %[[BS]]
// CHECK: %[[FIRST16:.*]] = arith.truncf %[[FIRSTOUT]]
// CHECK: memref.store %[[FIRST16]], %[[OUT]][%[[FIRST]]]
// CHECK-DAG: %[[BC:.*]] = arith.mulf %[[B]], %[[C]]
// CHECK-DAG: %[[AS:.*]] = arith.mulf %[[A]], %[[S]]
// CHECK: %[[SECONDOUT:.*]] = arith.addf %[[AS]], %[[BC]]
// CHECK: %[[SECOND16:.*]] = arith.truncf %[[SECONDOUT]]
// CHECK: memref.store %[[SECOND16]], %[[OUT]][%[[SECOND]]]
// CHECK-NOT: memref.load
module {
  func.func private @k12_rope(%x: tensor<2x3x5x8xbf16>, %c: tensor<3x4xbf16>, %s: tensor<3x4xbf16>, %out: tensor<2x3x5x8xbf16>) -> tensor<2x3x5x8xbf16> attributes {kiln.kernel} {
    %r = kiln.rope %x, %c, %s {seq_dim = 1 : i64} : tensor<2x3x5x8xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>
    %o = bufferization.materialize_in_destination %r in %out : (tensor<2x3x5x8xbf16>, tensor<2x3x5x8xbf16>) -> tensor<2x3x5x8xbf16>
    return %o : tensor<2x3x5x8xbf16>
  }
}

// -----

// Interleaved RoPE pairs (2i, 2i + 1) on [S, D] = [6, 10]: 30 pairs; the first element of pair i is at 2i of its
// row, the second next to it; the angle is the pair's in the row's position.
// CHECK-LABEL: func.func private @k13_rope
// CHECK-SAME: grid = array<i64: 1, 1, 1>
// CHECK: gpu.func @k13_rope(%[[X:.*]]: memref<60xf32>, %[[COS:.*]]: memref<30xf32>, %[[SIN:.*]]: memref<30xf32>, %[[OUT:.*]]: memref<60xf32>) kernel
// CHECK: arith.cmpi ult, %[[LINEAR:.*]], %c30
// CHECK: %[[PAIR:.*]] = arith.remui %[[LINEAR]], %c5
// CHECK: %[[ROW:.*]] = arith.divui %[[LINEAR]], %c5
// CHECK: %[[POSITION:.*]] = arith.remui %[[ROW]], %c6
// CHECK: %[[ROWSTART:.*]] = arith.muli %[[ROW]], %c10
// CHECK: %[[TWICE:.*]] = arith.muli %[[PAIR]], %c2
// CHECK: %[[FIRST:.*]] = arith.addi %[[ROWSTART]], %[[TWICE]]
// CHECK: %[[SECOND:.*]] = arith.addi %[[FIRST]], %c1
// CHECK: memref.load %[[X]][%[[FIRST]]]
// CHECK: memref.load %[[X]][%[[SECOND]]]
// CHECK: %[[ANGLE0:.*]] = arith.muli %[[POSITION]], %c5
// CHECK: %[[ANGLE:.*]] = arith.addi %[[ANGLE0]], %[[PAIR]]
// CHECK: memref.load %[[COS]][%[[ANGLE]]]
// CHECK: memref.load %[[SIN]][%[[ANGLE]]]
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[FIRST]]]
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[SECOND]]]
module {
  func.func private @k13_rope(%x: tensor<6x10xf32>, %c: tensor<6x5xf32>, %s: tensor<6x5xf32>, %out: tensor<6x10xf32>) -> tensor<6x10xf32> attributes {kiln.kernel} {
    %r = kiln.rope %x, %c, %s interleaved : tensor<6x10xf32>, tensor<6x5xf32>, tensor<6x5xf32>
    %o = bufferization.materialize_in_destination %r in %out : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32>
    return %o : tensor<6x10xf32>
  }
}

// -----

// Full [S, D] tables (a factor per element): the thread reads the factors at each element's own column of its
// position's table row, cos and sin at the first element's column for the first output, at the second's for the
// second.
// CHECK-LABEL: func.func private @k14_rope
// CHECK: gpu.func @k14_rope(%[[X:.*]]: memref<48xf32>, %[[COS:.*]]: memref<24xf32>, %[[SIN:.*]]: memref<24xf32>, %[[OUT:.*]]: memref<48xf32>) kernel
// CHECK: %[[PAIR:.*]] = arith.remui %[[LINEAR:.*]], %c4
// CHECK: %[[ROW:.*]] = arith.divui %[[LINEAR]], %c4
// CHECK: %[[POSITION:.*]] = arith.remui %[[ROW]], %c3
// CHECK: %[[ROWSTART:.*]] = arith.muli %[[ROW]], %c8
// CHECK: %[[FIRST:.*]] = arith.addi %[[ROWSTART]], %[[PAIR]]
// CHECK: %[[SECOND:.*]] = arith.addi %[[FIRST]], %c4
// CHECK: %[[A:.*]] = memref.load %[[X]][%[[FIRST]]]
// CHECK: %[[B:.*]] = memref.load %[[X]][%[[SECOND]]]
// CHECK: %[[TABLEROW:.*]] = arith.muli %[[POSITION]], %c8
// CHECK: %[[COLA:.*]] = arith.subi %[[FIRST]], %[[ROWSTART]]
// CHECK: %[[ATA:.*]] = arith.addi %[[TABLEROW]], %[[COLA]]
// CHECK: %[[COLB:.*]] = arith.subi %[[SECOND]], %[[ROWSTART]]
// CHECK: %[[ATB:.*]] = arith.addi %[[TABLEROW]], %[[COLB]]
// CHECK: %[[CA:.*]] = memref.load %[[COS]][%[[ATA]]]
// CHECK: %[[SA:.*]] = memref.load %[[SIN]][%[[ATA]]]
// CHECK: %[[CB:.*]] = memref.load %[[COS]][%[[ATB]]]
// CHECK: %[[SB:.*]] = memref.load %[[SIN]][%[[ATB]]]
// CHECK-DAG: %[[AC:.*]] = arith.mulf %[[A]], %[[CA]]
// CHECK-DAG: %[[BS:.*]] = arith.mulf %[[B]], %[[SA]]
// CHECK: %[[FIRSTOUT:.*]] = arith.subf %[[AC]], %[[BS]]
// CHECK: memref.store %[[FIRSTOUT]], %[[OUT]][%[[FIRST]]]
// CHECK-DAG: %[[AS:.*]] = arith.mulf %[[A]], %[[SB]]
// CHECK-DAG: %[[BC:.*]] = arith.mulf %[[B]], %[[CB]]
// CHECK: %[[SECONDOUT:.*]] = arith.addf %[[AS]], %[[BC]]
// CHECK: memref.store %[[SECONDOUT]], %[[OUT]][%[[SECOND]]]
module {
  func.func private @k14_rope(%x: tensor<2x3x8xf32>, %c: tensor<3x8xf32>, %s: tensor<3x8xf32>, %out: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> attributes {kiln.kernel} {
    %r = kiln.rope %x, %c, %s : tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>
    %o = bufferization.materialize_in_destination %r in %out : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
    return %o : tensor<2x3x8xf32>
  }
}

// -----

// Head dim 128 (D/2 = 64, a multiple of 8): a thread takes 8 consecutive pairs of a row, [B, H, S, D] = [1, 2, 3,
// 128] is 384 pairs, 48 threads. Its 8 first elements, their 8 partners (64 further) and the 8 pairs' factors
// are one 16-byte load each, and each rotated run one 16-byte store.
// CHECK-LABEL: func.func private @k15_rope
// CHECK: gpu.func @k15_rope(%[[X:.*]]: memref<768xbf16>, %[[COS:.*]]: memref<192xbf16>, %[[SIN:.*]]: memref<192xbf16>, %[[OUT:.*]]: memref<768xbf16>) kernel
// CHECK: arith.cmpi ult, %[[LINEAR:.*]], %c48
// CHECK: %[[FIRSTPAIR:.*]] = arith.muli %[[LINEAR]], %c8
// CHECK: %[[PAIR:.*]] = arith.remui %[[FIRSTPAIR]], %c64
// CHECK: %[[ROW:.*]] = arith.divui %[[FIRSTPAIR]], %c64
// CHECK: %[[ROWSTART:.*]] = arith.muli %[[ROW]], %c128
// CHECK: %[[FIRST:.*]] = arith.addi %[[ROWSTART]], %[[PAIR]]
// CHECK: %[[SECOND:.*]] = arith.addi %[[FIRST]], %c64
// CHECK: vector.load %[[X]][%[[FIRST]]] {alignment = 16 : i64} : memref<768xbf16>, vector<8xbf16>
// CHECK: vector.load %[[X]][%[[SECOND]]] {alignment = 16 : i64} : memref<768xbf16>, vector<8xbf16>
// CHECK: vector.load %[[COS]][%{{.*}}] {alignment = 16 : i64} : memref<192xbf16>, vector<8xbf16>
// CHECK: vector.load %[[SIN]][%{{.*}}] {alignment = 16 : i64} : memref<192xbf16>, vector<8xbf16>
// CHECK-COUNT-8: arith.subf
// CHECK: vector.store %{{.*}}, %[[OUT]][%[[FIRST]]] {alignment = 16 : i64} : memref<768xbf16>, vector<8xbf16>
// CHECK-COUNT-8: arith.addf
// CHECK: vector.store %{{.*}}, %[[OUT]][%[[SECOND]]] {alignment = 16 : i64} : memref<768xbf16>, vector<8xbf16>
// CHECK-NOT: memref.load
// CHECK: gpu.return
module {
  func.func private @k15_rope(%x: tensor<1x2x3x128xbf16>, %c: tensor<3x64xbf16>, %s: tensor<3x64xbf16>, %out: tensor<1x2x3x128xbf16>) -> tensor<1x2x3x128xbf16> attributes {kiln.kernel} {
    %r = kiln.rope %x, %c, %s : tensor<1x2x3x128xbf16>, tensor<3x64xbf16>, tensor<3x64xbf16>
    %o = bufferization.materialize_in_destination %r in %out : (tensor<1x2x3x128xbf16>, tensor<1x2x3x128xbf16>) -> tensor<1x2x3x128xbf16>
    return %o : tensor<1x2x3x128xbf16>
  }
}

// -----

// The sum of a split matmul's chunks: a thread per output element adds its element of the 3 chunks (chunk n at
// n * 24 + element: consecutive threads read consecutive words), then runs the epilogue on the sum and its
// element of the bias (broadcast along the rows), and stores bf16. Like every sm_90a kernel it first waits for the
// kernel before it and then lets the next one be scheduled (programmatic dependent launch), and its launch says
// so.
// CHECK-LABEL: func.func private @k10_sum_splits
// CHECK-SAME: kiln.dependent_launch
// CHECK-LABEL: gpu.func @k10_sum_splits
// CHECK-SAME: (%[[PARTS:[a-zA-Z0-9_]+]]: memref<72xf32>, %[[BIAS:[a-zA-Z0-9_]+]]: memref<6xbf16>, %[[OUT:[a-zA-Z0-9_]+]]: memref<24xbf16>)
// CHECK-NOT: memref.load
// CHECK: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK: %[[COLUMN:.+]] = arith.remui %[[E:[a-zA-Z0-9_]+]], %c6 : index
// CHECK: %[[SUM:.+]] = scf.for %[[N:.+]] = %c0 to %c3 step %c1 iter_args(%[[ACC:.+]] = %{{.*}}) -> (f32)
// CHECK: %[[AT:.+]] = arith.muli %[[N]], %c24 : index
// CHECK: %[[AT2:.+]] = arith.addi %[[AT]], %[[E]] : index
// CHECK: %[[PART:.+]] = memref.load %[[PARTS]][%[[AT2]]]
// CHECK: arith.addf %[[ACC]], %[[PART]] : f32
// CHECK: %[[B:.+]] = memref.load %[[BIAS]][%[[COLUMN]]]
// CHECK: %[[BF:.+]] = arith.extf %[[B]] : bf16 to f32
// CHECK: %[[Y:.+]] = arith.addf %[[SUM]], %[[BF]] : f32
// CHECK: %[[YB:.+]] = arith.truncf %[[Y]] : f32 to bf16
// CHECK: memref.store %[[YB]], %[[OUT]][%[[E]]]
module {
  func.func private @k10_sum_splits(%p: tensor<3x4x6xf32>, %b: tensor<6xbf16>, %out: tensor<4x6xbf16>) -> tensor<4x6xbf16> attributes {kiln.kernel} {
    %y = kiln.sum_splits %p epilogue(%b : tensor<6xbf16>) {
    ^bb0(%acc: f32, %bias: f32):
      %s = arith.addf %acc, %bias : f32
      kiln.yield %s : f32
    } : tensor<3x4x6xf32> -> tensor<4x6xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<4x6xbf16>, tensor<4x6xbf16>) -> tensor<4x6xbf16>
    return %r : tensor<4x6xbf16>
  }
}

// -----

// An operand passed twice is one argument of the kernel function and one parameter of its kernel (the plan passes
// one pointer for it): both reads of x + x load the first parameter, the store goes to the second.
// CHECK-LABEL: gpu.func @k11_add_twice
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: memref<24xf32>, %[[OUT:[a-zA-Z0-9_]+]]: memref<24xf32>)
// CHECK: %[[A:.+]] = memref.load %[[X]]
// CHECK: %[[B:.+]] = memref.load %[[X]]
// CHECK: %[[S:.+]] = arith.addf %[[A]], %[[B]] : f32
// CHECK: memref.store %[[S]], %[[OUT]]
module {
  func.func private @k11_add_twice(%x: tensor<4x6xf32>, %out: tensor<4x6xf32>) -> tensor<4x6xf32> attributes {kiln.kernel} {
    %y = kiln.add %x, %x : tensor<4x6xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    return %r : tensor<4x6xf32>
  }
}

// -----

// The append into paged caches updated in place (kiln-update-caches-in-place marked the kernel; the plan passes
// the caches as the destinations): a thread per element (b, h, s, d) of the new rows finds its position
// positions[b] + s, its page block_table[b, position / 16] (the column clamped into the table) and writes its
// element of k and of v there, unless the position is past the table or the page id outside the caches
// (unsigned compares: negative ones too). Nothing else of the caches is touched.
// CHECK-LABEL: gpu.func @k12_append_kv
// CHECK-SAME: (%[[KC:[a-zA-Z0-9_]+]]: memref<65536xbf16>, %[[VC:[a-zA-Z0-9_]+]]: memref<65536xbf16>, %[[K:[a-zA-Z0-9_]+]]: memref<384xbf16>, %[[V:[a-zA-Z0-9_]+]]: memref<384xbf16>, %[[TABLE:[a-zA-Z0-9_]+]]: memref<24xi32>, %[[POS:[a-zA-Z0-9_]+]]: memref<3xi32>, %[[KD:[a-zA-Z0-9_]+]]: memref<65536xbf16>, %[[VD:[a-zA-Z0-9_]+]]: memref<65536xbf16>)
// CHECK: %[[E:.+]] = arith.addi
// CHECK: arith.cmpi ult, %[[E]], %c384 : index
// CHECK: %[[START:.+]] = memref.load %[[POS]]
// CHECK: %[[START_I:.+]] = arith.index_cast %[[START]] : i32 to index
// CHECK: %[[P:.+]] = arith.addi %[[START_I]], %{{.+}} : index
// CHECK: %[[IN_TABLE:.+]] = arith.cmpi ult, %[[P]], %c128 : index
// CHECK: %[[COL:.+]] = arith.divui %[[P]], %c16 : index
// CHECK: arith.minui %[[COL]], %c7 : index
// CHECK: %[[PAGE:.+]] = memref.load %[[TABLE]]
// CHECK: %[[PAGE_I:.+]] = arith.index_cast %[[PAGE]] : i32 to index
// CHECK: %[[IS_PAGE:.+]] = arith.cmpi ult, %[[PAGE_I]], %c32 : index
// CHECK: %[[OK:.+]] = arith.andi %[[IN_TABLE]], %[[IS_PAGE]] : i1
// CHECK: scf.if %[[OK]] {
// CHECK: %[[KV:.+]] = memref.load %[[K]][%[[E]]]
// CHECK: memref.store %[[KV]], %[[KD]][%[[AT:.+]]]
// CHECK: %[[VV:.+]] = memref.load %[[V]][%[[E]]]
// CHECK: memref.store %[[VV]], %[[VD]][%[[AT]]]
module {
  func.func private @k12_append_kv(%kc: tensor<32x16x2x64xbf16>, %vc: tensor<32x16x2x64xbf16>,
      %k: tensor<3x2x1x64xbf16>, %v: tensor<3x2x1x64xbf16>, %table: tensor<3x8xi32>, %pos: tensor<3xi32>,
      %kd: tensor<32x16x2x64xbf16>, %vd: tensor<32x16x2x64xbf16>) -> (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>)
      attributes {kiln.kernel, kiln.updates_in_place} {
    %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>,
        tensor<3x2x1x64xbf16>, tensor<3x2x1x64xbf16>, tensor<3x8xi32>, tensor<3xi32>
        -> tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>
    %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>) -> tensor<32x16x2x64xbf16>
    %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>) -> tensor<32x16x2x64xbf16>
    return %1, %2 : tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>
  }
}

// -----

// Without the plan's in-place tie the destinations are new buffers, which an append of a few rows would leave
// mostly unwritten.
module {
  func.func private @k13_append_kv(%kc: tensor<32x16x2x64xbf16>, %vc: tensor<32x16x2x64xbf16>,
      %k: tensor<3x2x1x64xbf16>, %v: tensor<3x2x1x64xbf16>, %table: tensor<3x8xi32>, %pos: tensor<3xi32>,
      %kd: tensor<32x16x2x64xbf16>, %vd: tensor<32x16x2x64xbf16>) -> (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>)
      attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.append_kv' op on the GPU writes only the new rows into caches updated in place: its plan needs kiln-update-caches-in-place first}}
    %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>,
        tensor<3x2x1x64xbf16>, tensor<3x2x1x64xbf16>, tensor<3x8xi32>, tensor<3xi32>
        -> tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>
    %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>) -> tensor<32x16x2x64xbf16>
    %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>) -> tensor<32x16x2x64xbf16>
    return %1, %2 : tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>
  }
}

// -----

// A split matmul's sum that kiln-fuse-split-sums moved into RoPE's kernel (through a reshape): the thread adds up
// the two chunks of its 8 elements (one 8-wide f32 load a chunk, in chunk order from zero), runs the sum's
// epilogue on each element's bias, and rounds to bf16 and back, as the sum's own kernel stored it; then rotates.
// CHECK-LABEL: gpu.func @k20_rope
// CHECK-SAME: (%[[COS:[^:]*]]: memref<64xbf16>, %[[SIN:[^:]*]]: memref<64xbf16>, %[[PARTS:[^:]*]]: memref<512xf32>, %[[BIAS:[^:]*]]: memref<256xbf16>, %[[OUT:[^:]*]]: memref<256xbf16>)
// CHECK: %[[FIRST:[0-9]+]] = arith.addi %{{[0-9]+}}, %{{[0-9]+}} : index
// CHECK-NEXT: %[[SECOND:[0-9]+]] = arith.addi %[[FIRST]], %c64
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[SUMS:[0-9]+]]:8 = scf.for %[[CHUNK:[a-z0-9]+]] = %c0 to %c2 step %c1 iter_args(%[[ACC:[a-z0-9]+]] = %[[ZERO]],
// CHECK-NEXT: %[[AT0:[0-9]+]] = arith.muli %[[CHUNK]], %c256
// CHECK-NEXT: %[[AT:[0-9]+]] = arith.addi %[[AT0]], %[[FIRST]]
// CHECK-NEXT: %[[LOADED:[0-9]+]] = vector.load %[[PARTS]][%[[AT]]] {alignment = 16 : i64} : memref<512xf32>, vector<8xf32>
// CHECK-NEXT: %[[PART:[0-9]+]] = vector.extract %[[LOADED]][0]
// CHECK: arith.addf %[[ACC]], %[[PART]]
// CHECK: scf.yield
// CHECK: %[[B16:[0-9]+]] = memref.load %[[BIAS]]
// CHECK-NEXT: %[[B:[0-9]+]] = arith.extf %[[B16]]
// CHECK-NEXT: %[[WITHBIAS:[0-9]+]] = arith.addf %[[SUMS]]#0, %[[B]]
// CHECK-NEXT: %[[ROUNDED:[0-9]+]] = arith.truncf %[[WITHBIAS]] : f32 to bf16
// CHECK-NEXT: %[[AT1:[0-9]+]] = arith.addi %[[FIRST]], %c1
// CHECK-NEXT: %[[COLUMN1:[0-9]+]] = arith.remui %[[AT1]], %c256
// CHECK: %[[B1:[0-9]+]] = memref.load %[[BIAS]][%[[COLUMN1]]]
// CHECK-NEXT: %[[B1F:[0-9]+]] = arith.extf %[[B1]]
// CHECK-NEXT: arith.addf %[[SUMS]]#1, %[[B1F]]
// CHECK: arith.extf %[[ROUNDED]] : bf16 to f32
// CHECK: scf.for %[[CHUNK2:[a-z0-9]+]] = %c0 to %c2
// CHECK-NEXT: %[[AT20:[0-9]+]] = arith.muli %[[CHUNK2]], %c256
// CHECK-NEXT: %[[AT2:[0-9]+]] = arith.addi %[[AT20]], %[[SECOND]]
// CHECK-NEXT: vector.load %[[PARTS]][%[[AT2]]]
// CHECK: vector.store {{.*}}, %[[OUT]][%[[FIRST]]]
// CHECK: vector.store {{.*}}, %[[OUT]][%[[SECOND]]]
module {
  func.func private @k20_rope(%c: tensor<1x64xbf16>, %s: tensor<1x64xbf16>, %p: tensor<2x1x256xf32>, %b: tensor<1x256xbf16>, %out: tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16> attributes {kiln.kernel} {
    %sum = kiln.sum_splits %p epilogue(%b : tensor<1x256xbf16>) {
    ^bb0(%acc: f32, %bias: f32):
      %t = arith.addf %acc, %bias : f32
      kiln.yield %t : f32
    } : tensor<2x1x256xf32> -> tensor<1x256xbf16>
    %x = kiln.reshape %sum : tensor<1x256xbf16> -> tensor<1x2x128xbf16>
    %r = kiln.rope %x, %c, %s {seq_dim = 0 : i64} : tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
    %o = bufferization.materialize_in_destination %r in %out : (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
    return %o : tensor<1x2x128xbf16>
  }
}

// -----

// The append's v rows as a fused sum (no epilogue): each thread adds up its element's three chunks, one f32 load
// a chunk, rounds to bf16 and stores it in its page; k is read as before.
// CHECK-LABEL: gpu.func @k21_append_kv
// CHECK-SAME: (%[[KC:[^:]*]]: memref<{{.*}}xbf16>, %[[VC:[^:]*]]: memref<{{.*}}xbf16>, %[[K:[^:]*]]: memref<256xbf16>, %[[T:[^:]*]]: memref<{{.*}}xi32>, %[[POS:[^:]*]]: memref<2xi32>, %[[VP:[^:]*]]: memref<768xf32>
// CHECK: scf.if
// CHECK: %[[KV:.*]] = memref.load %[[K]]
// CHECK: memref.store %[[KV]]
// CHECK: %[[V:.*]] = scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32)
// CHECK: %[[PART:.*]] = memref.load %[[VP]]
// CHECK: arith.addf %[[ACC]], %[[PART]]
// CHECK: %[[V16:.*]] = arith.truncf %[[V]] : f32 to bf16
// CHECK: %[[V32:.*]] = arith.extf %[[V16]] : bf16 to f32
// CHECK: %[[VROW:.*]] = arith.truncf %[[V32]] : f32 to bf16
// CHECK: memref.store %[[VROW]]
module {
  func.func private @k21_append_kv(%kc: tensor<32x16x2x64xbf16>, %vc: tensor<32x16x2x64xbf16>,
      %k: tensor<2x2x1x64xbf16>, %table: tensor<2x16xi32>, %pos: tensor<2xi32>, %vp: tensor<3x2x128xf32>,
      %kd: tensor<32x16x2x64xbf16>, %vd: tensor<32x16x2x64xbf16>) -> (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>)
      attributes {kiln.kernel, kiln.updates_in_place} {
    %vs = kiln.sum_splits %vp : tensor<3x2x128xf32> -> tensor<2x128xbf16>
    %v = kiln.reshape %vs : tensor<2x128xbf16> -> tensor<2x2x1x64xbf16>
    %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>,
        tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x16xi32>, tensor<2xi32>
        -> tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>
    %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>) -> tensor<32x16x2x64xbf16>
    %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>) -> tensor<32x16x2x64xbf16>
    return %1, %2 : tensor<32x16x2x64xbf16>, tensor<32x16x2x64xbf16>
  }
}

// -----

// A row kernel reading a residual sum that kiln-fuse-split-sums moved in (RMSNorm of two rows of 256): each
// thread adds up the four chunks of its 8 columns (one guarded 8-wide f32 load a chunk), adds the residual,
// rounds to bf16 as the sum's kernel stored it, and normalises that.
// CHECK-LABEL: gpu.func @k22_rms_norm
// CHECK-SAME: (%[[W:[^:]*]]: memref<256xbf16>, %[[P:[^:]*]]: memref<2048xf32>, %[[X:[^:]*]]: memref<512xbf16>, %[[OUT:[^:]*]]: memref<512xbf16>)
// CHECK: %[[VALID:[0-9]+]] = arith.andi
// CHECK: %[[AT:[0-9]+]] = arith.addi
// CHECK: %[[SUMS:[0-9]+]]:8 = scf.for %[[C:[a-z0-9]+]] = %c0 to %c4 step %c1
// CHECK-NEXT: %[[FROM0:[0-9]+]] = arith.muli %[[C]], %c512
// CHECK-NEXT: %[[FROM:[0-9]+]] = arith.addi %[[FROM0]], %[[AT]]
// CHECK-NEXT: %[[SAFE:[0-9]+]] = arith.select %[[VALID]], %[[FROM]], %c0
// CHECK: vector.load %[[P]][%[[SAFE]]] {alignment = 32 : i64} : memref<2048xf32>, vector<8xf32>
// CHECK: scf.yield
// CHECK: %[[XSAFE:[0-9]+]] = arith.select %[[VALID]], %{{.*}}, %c0
// CHECK-NEXT: %{{.*}} = arith.constant 0.000000e+00 : bf16
// CHECK-NEXT: %[[X16:[0-9]+]] = memref.load %[[X]][%[[XSAFE]]]
// CHECK: %[[XF:[0-9]+]] = arith.extf
// CHECK-NEXT: %[[R:[0-9]+]] = arith.addf %[[SUMS]]#0, %[[XF]]
// CHECK-NEXT: %[[R16:[0-9]+]] = arith.truncf %[[R]] : f32 to bf16
// CHECK: arith.select %[[VALID]], %[[R16]], %{{.*}} : bf16
module {
  func.func private @k22_rms_norm(%arg0: tensor<256xbf16>, %arg1: tensor<4x2x256xf32>, %arg2: tensor<2x256xbf16>, %arg3: tensor<2x256xbf16>) -> tensor<2x256xbf16> attributes {kiln.kernel} {
    %0 = kiln.sum_splits %arg1 epilogue(%arg2 : tensor<2x256xbf16>) {
    ^bb0(%arg4: f32, %arg5: f32):
      %4 = arith.addf %arg4, %arg5 : f32
      kiln.yield %4 : f32
    } : tensor<4x2x256xf32> -> tensor<2x256xbf16>
    %1 = tensor.empty() : tensor<2x256xbf16>
    %2 = scf.forall (%arg4) = (0) to (2) step (2) shared_outs(%arg5 = %1) -> (tensor<2x256xbf16>) {
      %4 = kiln.cast %0 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x256xbf16> to tensor<2x256xf32>
      %5 = kiln.mul %4, %4 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x256xf32>, tensor<2x256xf32> -> tensor<2x256xf32>
      %6 = kiln.reduce mean %5 axes [1] keep_dims {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x256xf32> -> tensor<2x1xf32>
      %7 = kiln.constant dense<9.99999974E-6> : tensor<f32>
      %8 = kiln.add %6, %7 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
      %9 = kiln.rsqrt %8 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x1xf32>
      %10 = kiln.mul %4, %9 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x256xf32>, tensor<2x1xf32> -> tensor<2x256xf32>
      %11 = kiln.cast %arg0 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<256xbf16> to tensor<256xf32>
      %12 = kiln.mul %10, %11 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x256xf32>, tensor<256xf32> -> tensor<2x256xf32>
      %13 = kiln.cast %12 {kiln.layout = #kiln.row_layout<threads_per_row = 16, vector = 8>} : tensor<2x256xf32> to tensor<2x256xbf16>
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %13 into %arg5[0, 0] [2, 256] [1, 1] : tensor<2x256xbf16> into tensor<2x256xbf16>
      }
    } {kiln.config = #kiln.config<tile = [2], warps = 1, stages = 1, lowering = "rows">, kiln.tiled_op = "kiln.rms_norm", mapping = [#gpu.block<linear_dim_0>]}
    %3 = bufferization.materialize_in_destination %2 in %arg3 : (tensor<2x256xbf16>, tensor<2x256xbf16>) -> tensor<2x256xbf16>
    return %3 : tensor<2x256xbf16>
  }
}
