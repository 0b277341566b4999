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

module {
  func.func private @k5_gather(%t: tensor<64x8xi64>, %i: tensor<4xi64>, %out: tensor<4x8xi64>) -> tensor<4x8xi64> attributes {kiln.kernel} {
    // An integer table: the glue kernels move float tensors (and take integer indices) only.
    // expected-error @+1 {{'kiln.gather' op the GPU glue kernels take float (and i1 condition, i32/i64 index) tensors only}}
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

// An mma_sync attention reaches this pass as its tiled loop (kiln-tile, kiln-online-softmax,
// kiln-split-masked-tiles, kiln-assign-layouts: convert-kiln-to-gpu-attention.mlir); only the wgmma attention is
// built whole from the op, so an untiled mma_sync attention is an error on the op.
module {
  func.func private @k6_attention(%q: tensor<2x8x144x64xbf16>, %k: tensor<2x2x144x64xbf16>, %v: tensor<2x2x144x64xbf16>, %out: tensor<2x8x144x64xbf16>) -> tensor<2x8x144x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.attention' op needs a #kiln.config with lowering = "wgmma" and tile = [BQ, BK] to be built whole ("mma_sync" attention is lowered from its tiled loop)}}
    %o = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<2x8x144x64xbf16>, tensor<2x2x144x64xbf16>, tensor<2x2x144x64xbf16> -> tensor<2x8x144x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<2x8x144x64xbf16>, tensor<2x8x144x64xbf16>) -> tensor<2x8x144x64xbf16>
    return %r : tensor<2x8x144x64xbf16>
  }
}

// -----

// The wgmma attention built whole applies no score_mod or mask_mod: an attention with mods that reaches this pass
// untiled is an error rather than a kernel that drops them (kiln-tile tiles it, for either lowering).
module {
  func.func private @k7_attention(%q: tensor<1x2x128x64xbf16>, %out: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.attention' op has a score_mod or mask_mod, which only the lowering of its tiled loop applies (kiln-select-config, kiln-tile and kiln-online-softmax first)}}
    %o = kiln.attention %q, %q, %q mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sle, %j, %i : index
      kiln.yield %c : i1
    } {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "wgmma">} : tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16> -> tensor<1x2x128x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16>
    return %r : tensor<1x2x128x64xbf16>
  }
}

// -----

// Glue kernels: one thread per output element, reading each operand at its permuted or broadcast index.
// CHECK-LABEL: func.func private @k8_transpose
// CHECK-SAME: kiln.launch = {block = array<i64: 256, 1, 1>, dynamic_shared_bytes = 0 : i64, grid = array<i64: 154, 1, 1>}
// CHECK: func.func private @k9_gelu
// CHECK: gpu.func @k8_transpose(%{{.*}}: memref<39424xbf16>, %{{.*}}: memref<39424xbf16>) kernel
// CHECK-NOT: memref.global
// CHECK: scf.if
// CHECK: memref.load
// CHECK: memref.store
// CHECK: gpu.func @k9_gelu
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: math.tanh
// CHECK: arith.truncf {{.*}} : f32 to bf16
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

module {
  func.func private @w4_softmax(%x: tensor<64x64xbf16>, %out: tensor<64x64xbf16>) -> tensor<64x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{the wgmma lowering is for matmuls and attention only}}
    %y = kiln.softmax %x axis 1 {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "wgmma">} : tensor<64x64xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
    return %r : tensor<64x64xbf16>
  }
}

// -----

// Attention on wgmma (sm_90a), pipelined within the warpgroup: K and V tiles first in 1024-byte aligned,
// swizzled shared memory (two slots of 128 keys x 64 each), then the padded Q tile. Tile 0's S = Q K^T (four
// register-A m64n128k16 MMAs, K K-major) is waited for and its softmax computed before the loops; each iteration
// then issues the next tile's S and this tile's O += P V (eight m64n64k16, V N-major: imm-trans-b 1) as two
// groups, waits for S alone (wait_group 1, the accumulators passing through the wait) and computes its softmax
// while P V runs, then waits for O (wait_group 0). An unmasked and a masked loop; the last tile's P V after them.
// The copies are fenced into the async proxy before each barrier.
// CHECK-LABEL: func.func private @w5_attention
// CHECK-SAME: kiln.launch = {block = array<i64: 256, 1, 1>, dynamic_shared_bytes = 83968 : i64, grid = array<i64: 2, 4, 1>, sizes = array<i64: 200, 200>}
// CHECK: memref.global "public" @w5_attention_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 1024 : i64}
// CHECK: arith.xori
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: gpu.barrier
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: llvm.inline_asm has_side_effects asm_dialect = att "{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: math.exp2
// CHECK: scf.for
// CHECK: nvvm.fence.proxy
// CHECK: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 1;", "=f,
// CHECK: math.exp2
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;", "=f,{{.*}},r,r"
// CHECK: scf.yield
// CHECK: scf.for
// CHECK: arith.select
// CHECK: scf.yield
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: gpu.return
module {
  func.func private @w5_attention(%q: tensor<1x4x200x64xbf16>, %out: tensor<1x4x200x64xbf16>) -> tensor<1x4x200x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %q, %q causal {kiln.config = #kiln.config<tile = [128, 128], warps = 8, stages = 2, lowering = "wgmma">} : tensor<1x4x200x64xbf16>, tensor<1x4x200x64xbf16>, tensor<1x4x200x64xbf16> -> tensor<1x4x200x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x4x200x64xbf16>, tensor<1x4x200x64xbf16>) -> tensor<1x4x200x64xbf16>
    return %r : tensor<1x4x200x64xbf16>
  }
}

// -----

// Pipelined, without the causal mask, on at most four key tiles ending in a partial one (150 keys in 64-key
// tiles): one loop masking every tile, not an unmasked loop and a masked one.
// CHECK-LABEL: func.func private @w7_attention
// CHECK: gpu.func @w7_attention(
// CHECK: scf.for
// CHECK: wgmma.wait_group.sync.aligned 1;
// CHECK: arith.select
// CHECK: scf.yield
// CHECK-NOT: scf.for
// CHECK: gpu.return
module {
  func.func private @w7_attention(%q: tensor<1x4x150x64xbf16>, %out: tensor<1x4x150x64xbf16>) -> tensor<1x4x150x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %q, %q {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "wgmma">} : tensor<1x4x150x64xbf16>, tensor<1x4x150x64xbf16>, tensor<1x4x150x64xbf16> -> tensor<1x4x150x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x4x150x64xbf16>, tensor<1x4x150x64xbf16>) -> tensor<1x4x150x64xbf16>
    return %r : tensor<1x4x150x64xbf16>
  }
}

// -----

// With one stage, the sequential wgmma loop: nothing before the loop but the copies; one loop over every key tile,
// all masked, whose iteration prefetches the next tile, waits for S = Q K^T (wait_group 0, S passing through
// the wait), computes the softmax, rescales O, then issues O += P V and waits for it (wait_group 0, P's
// registers read by the wait). After the loop, every copy group is waited for.
// CHECK-LABEL: func.func private @w6_attention
// CHECK: gpu.func @w6_attention(
// CHECK-NOT: wgmma.mma_async
// CHECK: scf.for
// CHECK: nvvm.fence.proxy
// CHECK: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;", "=f,
// CHECK: arith.select
// CHECK: math.exp2
// CHECK: arith.mulf
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;", "=f,{{.*}},r,r"
// CHECK: scf.yield
// CHECK-NOT: wgmma.mma_async
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK: gpu.return
module {
  func.func private @w6_attention(%q: tensor<1x4x150x64xbf16>, %out: tensor<1x4x150x64xbf16>) -> tensor<1x4x150x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %q, %q {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">} : tensor<1x4x150x64xbf16>, tensor<1x4x150x64xbf16>, tensor<1x4x150x64xbf16> -> tensor<1x4x150x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x4x150x64xbf16>, tensor<1x4x150x64xbf16>) -> tensor<1x4x150x64xbf16>
    return %r : tensor<1x4x150x64xbf16>
  }
}

// -----

module {
  func.func private @w6_attention(%q: tensor<1x2x64x96xbf16>, %out: tensor<1x2x64x96xbf16>) -> tensor<1x2x64x96xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{does not fit the wgmma attention kernel: BQ must be a multiple of 64 (a warpgroup per 64 rows) up to 256, BK a multiple of 16 up to 256, and the head dims equal, 64 or 128}}
    %o = kiln.attention %q, %q, %q {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "wgmma">} : tensor<1x2x64x96xbf16>, tensor<1x2x64x96xbf16>, tensor<1x2x64x96xbf16> -> tensor<1x2x64x96xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x64x96xbf16>, tensor<1x2x64x96xbf16>) -> tensor<1x2x64x96xbf16>
    return %r : tensor<1x2x64x96xbf16>
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
// CHECK: %[[ANGLE0:.*]] = arith.muli %[[POSITION]], %c4
// CHECK: %[[ANGLE:.*]] = arith.addi %[[ANGLE0]], %[[PAIR]]
// CHECK: %[[A16:.*]] = memref.load %[[X]][%[[FIRST]]]
// CHECK: %[[A:.*]] = arith.extf %[[A16]]
// CHECK: %[[B16:.*]] = memref.load %[[X]][%[[SECOND]]]
// CHECK: %[[B:.*]] = arith.extf %[[B16]]
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
// CHECK: %[[ANGLE0:.*]] = arith.muli %[[POSITION]], %c5
// CHECK: %[[ANGLE:.*]] = arith.addi %[[ANGLE0]], %[[PAIR]]
// CHECK: memref.load %[[X]][%[[FIRST]]]
// CHECK: memref.load %[[X]][%[[SECOND]]]
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
