// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(gpu.module(kiln-fold-conversion-offsets,cse))' | FileCheck %s

// ALiBi's kv - q per register, as the attention lowering writes it: the thread's column and row plus each
// register's constants, in a kernel whose sizes are at most 2^22 (kiln.size_bound) and whose thread ids are
// bounded by its block size (known_block_size). Both conversions become the
// conversion of the shared (kv0 + col) - (q0 + row), which cse keeps once, plus the register's constant (+1 and
// -7); the index_cast to i32 moves onto the shared value.
// CHECK-LABEL: gpu.func @alibi
// CHECK-SAME: (%[[KV0:.*]]: index, %[[Q0:.*]]: index, %{{.*}}: memref<2xf32>)
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[COL:.*]] = arith.remui %[[TID]], %c4
// CHECK: %[[ROW:.*]] = arith.divui %[[TID]], %c4
// CHECK: %[[SUM:.*]] = arith.addi %[[KV0]], %[[COL]]
// CHECK: %[[LESS:.*]] = arith.subi %[[SUM]], %[[Q0]]
// CHECK: %[[BASE:.*]] = arith.subi %[[LESS]], %[[ROW]]
// CHECK: %[[NARROW:.*]] = arith.index_cast %[[BASE]] : index to i32
// CHECK: %[[F:.*]] = arith.sitofp %[[NARROW]] : i32 to f32
// CHECK: %[[A:.*]] = arith.addf %[[F]], %cst{{.*}} : f32
// CHECK-NOT: arith.sitofp
// CHECK: %[[B:.*]] = arith.addf %[[F]], %cst{{.*}} : f32
// CHECK: memref.store %[[A]]
// CHECK: memref.store %[[B]]
gpu.module @alibi {
  gpu.func @alibi(%kv0: index, %q0: index, %out: memref<2xf32>) kernel attributes {kiln.size_bound = 4194304 : i64, known_block_size = array<i32: 128, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %tid = gpu.thread_id x
    %col = arith.remui %tid, %c4 : index
    %row = arith.divui %tid, %c4 : index
    // Register 0: column col + 1, row row.
    %col1 = arith.addi %col, %c1 : index
    %kv = arith.addi %kv0, %col1 : index
    %q = arith.addi %q0, %row : index
    %d = arith.subi %kv, %q : index
    %i = arith.index_cast %d : index to i32
    %f = arith.sitofp %i : i32 to f32
    // Register 1: column col, row row + 8.
    %row8 = arith.addi %row, %c8 : index
    %kvb = arith.addi %kv0, %col : index
    %qb = arith.addi %q0, %row8 : index
    %db = arith.subi %kvb, %qb : index
    %ib = arith.index_cast %db : index to i32
    %fb = arith.sitofp %ib : i32 to f32
    memref.store %f, %out[%c0] : memref<2xf32>
    memref.store %fb, %out[%c1] : memref<2xf32>
    gpu.return
  }
}

// -----

// Without kiln.size_bound the sizes are unknown: kv0 + 1 might not convert exactly, and the conversion stays.
// CHECK-LABEL: gpu.func @unbounded
// CHECK: %[[SUM:.*]] = arith.addi %{{.*}}, %c1
// CHECK: %[[I:.*]] = arith.index_cast %[[SUM]] : index to i32
// CHECK: arith.sitofp %[[I]] : i32 to f32
// CHECK-NOT: arith.addf
gpu.module @unbounded {
  gpu.func @unbounded(%kv0: index, %out: memref<1xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %kv = arith.addi %kv0, %c1 : index
    %i = arith.index_cast %kv : index to i32
    %f = arith.sitofp %i : i32 to f32
    memref.store %f, %out[%c0] : memref<1xf32>
    gpu.return
  }
}

// -----

// A loop's index is bounded by its bounds alone, without a kiln.size_bound: iv + 3 converts as iv's conversion
// plus 3.
// CHECK-LABEL: gpu.func @loop
// CHECK: scf.for %[[IV:.*]] =
// CHECK: %[[I:.*]] = arith.index_cast %[[IV]] : index to i32
// CHECK: %[[F:.*]] = arith.sitofp %[[I]] : i32 to f32
// CHECK: arith.addf %[[F]], %cst : f32
gpu.module @loop {
  gpu.func @loop(%out: memref<4096xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c3 = arith.constant 3 : index
    %c64 = arith.constant 64 : index
    %c4096 = arith.constant 4096 : index
    scf.for %iv = %c0 to %c4096 step %c64 {
      %k = arith.addi %iv, %c3 : index
      %i = arith.index_cast %k : index to i32
      %f = arith.sitofp %i : i32 to f32
      memref.store %f, %out[%iv] : memref<4096xf32>
    }
    gpu.return
  }
}

// -----

// f16 holds integers exactly only up to 2^11: a size up to 2^22 plus 1 may not be exact, and the conversion
// stays; so does one with no constant to move (nothing to share).
// CHECK-LABEL: gpu.func @narrow_float
// CHECK: %[[SUM:.*]] = arith.addi %{{.*}}, %c1
// CHECK: arith.sitofp %{{.*}} : i32 to f16
// CHECK: arith.sitofp %{{.*}} : i32 to f32
// CHECK-NOT: arith.addf
gpu.module @narrow_float {
  gpu.func @narrow_float(%kv0: index, %out: memref<1xf16>, %out32: memref<1xf32>) kernel attributes {kiln.size_bound = 4194304 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %kv = arith.addi %kv0, %c1 : index
    %i = arith.index_cast %kv : index to i32
    %f = arith.sitofp %i : i32 to f16
    memref.store %f, %out[%c0] : memref<1xf16>
    %j = arith.index_cast %kv0 : index to i32
    %g = arith.sitofp %j : i32 to f32
    memref.store %g, %out32[%c0] : memref<1xf32>
    gpu.return
  }
}

// -----

// Only 64-bit trees (index, i64) read through casts that hold the float's exact integers: an i8 sum may wrap
// (x = 100 gives -56 + 0, not 100 + 100), a truncation to i16 may wrap what an f32 holds; both stay.
// CHECK-LABEL: gpu.func @narrow_integers
// CHECK-COUNT-2: arith.sitofp
// CHECK-NOT: arith.addf
gpu.module @narrow_integers {
  gpu.func @narrow_integers(%p: memref<1xi8>, %kv0: index, %out: memref<2xf32>) kernel attributes {kiln.size_bound = 4194304 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c100 = arith.constant 100 : i8
    %x = memref.load %p[%c0] : memref<1xi8>
    %s = arith.addi %x, %c100 : i8
    %f = arith.sitofp %s : i8 to f32
    memref.store %f, %out[%c0] : memref<2xf32>
    %kv = arith.addi %kv0, %c1 : index
    %narrow = arith.index_cast %kv : index to i16
    %g = arith.sitofp %narrow : i16 to f32
    memref.store %g, %out[%c1] : memref<2xf32>
    gpu.return
  }
}

// -----

// A tree of shared adds (each level adds the one before to itself) would unfold into 2^40 terms: the walk stops
// after 64 operations and leaves the conversion.
// CHECK-LABEL: gpu.func @shared_adds
// CHECK: arith.sitofp
// CHECK-NOT: arith.addf
gpu.module @shared_adds {
  gpu.func @shared_adds(%kv0: index, %out: memref<1xf32>) kernel attributes {kiln.size_bound = 4194304 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %a0 = arith.addi %kv0, %c1 : index
    %a1 = arith.addi %a0, %a0 : index
    %a2 = arith.addi %a1, %a1 : index
    %a3 = arith.addi %a2, %a2 : index
    %a4 = arith.addi %a3, %a3 : index
    %a5 = arith.addi %a4, %a4 : index
    %a6 = arith.addi %a5, %a5 : index
    %a7 = arith.addi %a6, %a6 : index
    %a8 = arith.addi %a7, %a7 : index
    %a9 = arith.addi %a8, %a8 : index
    %a10 = arith.addi %a9, %a9 : index
    %a11 = arith.addi %a10, %a10 : index
    %a12 = arith.addi %a11, %a11 : index
    %a13 = arith.addi %a12, %a12 : index
    %a14 = arith.addi %a13, %a13 : index
    %a15 = arith.addi %a14, %a14 : index
    %a16 = arith.addi %a15, %a15 : index
    %a17 = arith.addi %a16, %a16 : index
    %a18 = arith.addi %a17, %a17 : index
    %a19 = arith.addi %a18, %a18 : index
    %a20 = arith.addi %a19, %a19 : index
    %a21 = arith.addi %a20, %a20 : index
    %a22 = arith.addi %a21, %a21 : index
    %a23 = arith.addi %a22, %a22 : index
    %a24 = arith.addi %a23, %a23 : index
    %a25 = arith.addi %a24, %a24 : index
    %a26 = arith.addi %a25, %a25 : index
    %a27 = arith.addi %a26, %a26 : index
    %a28 = arith.addi %a27, %a27 : index
    %a29 = arith.addi %a28, %a28 : index
    %a30 = arith.addi %a29, %a29 : index
    %a31 = arith.addi %a30, %a30 : index
    %a32 = arith.addi %a31, %a31 : index
    %a33 = arith.addi %a32, %a32 : index
    %a34 = arith.addi %a33, %a33 : index
    %a35 = arith.addi %a34, %a34 : index
    %a36 = arith.addi %a35, %a35 : index
    %a37 = arith.addi %a36, %a36 : index
    %a38 = arith.addi %a37, %a37 : index
    %a39 = arith.addi %a38, %a38 : index
    %a40 = arith.addi %a39, %a39 : index
    %i = arith.index_cast %a40 : index to i32
    %f = arith.sitofp %i : i32 to f32
    memref.store %f, %out[%c0] : memref<1xf32>
    gpu.return
  }
}
