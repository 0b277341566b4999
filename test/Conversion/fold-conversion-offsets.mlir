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
