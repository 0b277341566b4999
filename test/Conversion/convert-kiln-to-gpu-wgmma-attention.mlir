// RUN: kiln-opt %s -split-input-file -kiln-tile -canonicalize -kiln-online-softmax -kiln-split-masked-tiles -kiln-assign-layouts -convert-kiln-to-gpu=chip=sm_90a -verify-diagnostics | FileCheck %s

// An attention with a "wgmma" config (sm_90a; here first with a score_mod) is lowered from its tiled loop as the
// mma_sync one is (convert-kiln-to-gpu-attention.mlir): one warp per 16 query rows, the softmax on accumulator
// fragments, Q read once into shared memory and kept as A fragments; but K and V stream through cp.async rings
// of three slots as 128-byte swizzled panels (shared memory aligned to the swizzle's 1024-byte period: Q
// 128 x 72, then 3 x 64 x 64 of K and of V, 67584 bytes), each wait for the copies is followed by a proxy fence
// (the warpgroup MMAs read through the async proxy), and both tile matmuls are wgmma.mma_async m64nNk16 with A
// from registers: Q K^T (N = 64 keys, K-major B: "0" for B's transpose flag) and P V (N = 64 value columns,
// N-major B: "1"), four k16 steps each. The scores are a tile ahead: the first tile's before the loop, then each
// iteration waits for the copies of the next tile (two tiles ahead: one group left in flight), starts that
// tile's Q K^T, runs this tile's softmax on the scores it carries in (the softcap's tanh as tanh.approx.f32 on
// each register: the outputs are bf16, as FlashAttention's softcap computes it), multiplies P V and waits for
// both, and carries the next tile's scores out. The constant scalings around the tanh fold (ConstantScales.cpp):
// the scale 1/8 and the softcap's 1/30 into one multiply before it (0.0041667), its 30 and the exponent's
// log2(e) into one after it (43.28). The softcapped scores lie in [-30, 30], so kiln-online-softmax takes 30
// log2(e) as a fixed maximum: no row maximum, no shuffles and no rescale in the loop, each probability the
// exp2 of the scaled tanh less that constant.
// CHECK-LABEL: func.func private @wa0_attention
// CHECK-SAME: kiln.launch = {block = array<i64: 256, 1, 1>, dynamic_shared_bytes = 67584 : i64, grid = array<i64: 6, 1, 1>, sizes = array<i64: 300, 300>}
// CHECK: memref.global "public" @wa0_attention_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 1024 : i64}
// CHECK: gpu.func @wa0_attention
// CHECK-DAG: %[[SCORE_SCALE:.*]] = arith.constant 0.00416666688 : f32
// CHECK-DAG: %[[EXP_SCALE:.*]] = arith.constant 43.2808495 : f32
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: nvgpu.ldmatrix
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: scf.for {{.*}} -> (f32, {{.*}}, !llvm.struct<({{(f32, )+}}f32)>) {
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT: wait_group
// CHECK: %[[X:.*]] = arith.mulf %{{.*}}, %[[SCORE_SCALE]] fastmath<contract> : f32
// CHECK-NEXT: %[[T:.*]] = llvm.inline_asm asm_dialect = att "tanh.approx.f32 $0, $1;", "=f,f" %[[X]] : (f32) -> f32
// CHECK-COUNT-31: llvm.inline_asm asm_dialect = att "tanh.approx.f32 $0, $1;", "=f,f" %{{.*}} : (f32) -> f32
// CHECK: %[[S:.*]] = arith.mulf %[[T]], %[[EXP_SCALE]] fastmath<contract> : f32
// CHECK-NOT: arith.maximumf
// CHECK-NOT: gpu.shuffle
// CHECK: %[[FIXED_MAX:.*]] = arith.constant 43.2808571 : f32
// CHECK-NEXT: %[[SHIFTED:.*]] = arith.subf %[[S]], %[[FIXED_MAX]] fastmath<contract> : f32
// CHECK-NEXT: math.exp2 %[[SHIFTED]] : f32
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1; }"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: scf.yield
// CHECK-NOT: ldmatrix
// CHECK: gpu.return
module {
  func.func private @wa0_attention(%q: tensor<1x2x300x64xbf16>, %k: tensor<1x2x300x64xbf16>, %v: tensor<1x2x300x64xbf16>, %out: tensor<1x2x300x64xbf16>) -> tensor<1x2x300x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %k, %v causal score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      kiln.yield %r : f32
    } {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "wgmma">} : tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16> -> tensor<1x2x300x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>) -> tensor<1x2x300x64xbf16>
    return %r : tensor<1x2x300x64xbf16>
  }
}

// -----

// The warpgroup MMAs take whole warpgroups of query rows.
module {
  func.func private @wa1_attention(%q: tensor<1x2x100x64xbf16>, %out: tensor<1x2x100x64xbf16>) -> tensor<1x2x100x64xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{does not fit the wgmma attention: BQ must be a multiple of 64 (whole warpgroups) and BK a multiple of 16, with one warp per 16 query rows}}
    %o = kiln.attention %q, %q, %q mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sle, %j, %i : index
      kiln.yield %c : i1
    } {kiln.config = #kiln.config<tile = [32, 64], warps = 2, stages = 2, lowering = "wgmma">} : tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16> -> tensor<1x2x100x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16>) -> tensor<1x2x100x64xbf16>
    return %r : tensor<1x2x100x64xbf16>
  }
}

// -----

// K and V are read as panels of 64 columns.
module {
  func.func private @wa2_attention(%q: tensor<1x2x100x96xbf16>, %out: tensor<1x2x100x96xbf16>) -> tensor<1x2x100x96xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.attention' op the wgmma attention needs query tiles of whole warpgroups (BQ a multiple of 64), BK up to 256 and head dims that are multiples of 64, got #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "wgmma"> at head dims 96 and 96}}
    %o = kiln.attention %q, %q, %q mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sle, %j, %i : index
      kiln.yield %c : i1
    } {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "wgmma">} : tensor<1x2x100x96xbf16>, tensor<1x2x100x96xbf16>, tensor<1x2x100x96xbf16> -> tensor<1x2x100x96xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x100x96xbf16>, tensor<1x2x100x96xbf16>) -> tensor<1x2x100x96xbf16>
    return %r : tensor<1x2x100x96xbf16>
  }
}

// -----

// The warpgroup MMAs of this lowering take 16-bit operands only (TF32 wgmma would need V transposed): an f32
// attention pinned to it is an error naming the lowering f32 takes.
module {
  func.func private @wa3_attention_f32(%q: tensor<1x2x128x64xf32>, %out: tensor<1x2x128x64xf32>) -> tensor<1x2x128x64xf32> attributes {kiln.kernel} {
    // expected-error @+1 {{'kiln.attention' op the wgmma attention takes bf16 or f16 q/k/v (f32 runs on mma_sync), got 'f32'}}
    %o = kiln.attention %q, %q, %q {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">} : tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x2x128x64xf32>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32>) -> tensor<1x2x128x64xf32>
    return %r : tensor<1x2x128x64xf32>
  }
}

// -----

// A plain causal attention (no mods) takes the same lowering: 128 x 128 tiles at head dim 64, two stages (Q 128 x
// 72, then 3 x 128 x 64 of K and of V: 116736 bytes). The unmasked key loop, then the loop over the tiles that
// cross the diagonal (key-end sge and causal sgt comparisons): each starts the next tile's Q K^T (N = 128 keys),
// takes its row maxima across the quad (two shuffles per row, four per thread: 16 rows per warp, two per thread)
// and no shuffle for the row sums, whose shares the quad adds after the loops (QuadPartialSums.h), and
// multiplies P V (N = 64 value columns, eight k16 steps over the 128 keys).
// Eight warps at head dim 64 ask for two blocks per multiprocessor (nvvm.minctasm: ptxas keeps to 128 registers).
// The sizes it is launched with (200, 200) are at most 2^22, which the kernel states (kiln.size_bound).
// CHECK-LABEL: func.func private @wa3_attention
// CHECK-SAME: kiln.launch = {block = array<i64: 256, 1, 1>, dynamic_shared_bytes = 116736 : i64, grid = array<i64: 8, 1, 1>, sizes = array<i64: 200, 200>}
// CHECK: gpu.func @wa3_attention
// CHECK-SAME: attributes {kiln.size_bound = 4194304 : i64, known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 2 : i32}
// CHECK: scf.for
// CHECK-NOT: arith.cmpi sgt
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0; }"
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1; }"
// CHECK: scf.yield
// CHECK: scf.for
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: arith.cmpi sge
// CHECK-NEXT: arith.addi
// CHECK-NEXT: arith.cmpi sgt
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK: scf.yield
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK: %[[EMPTY:.+]] = arith.cmpf oeq, %[[L:[a-zA-Z0-9_#]+]], %{{.*}} : f32
// CHECK: %[[DIVISOR:.+]] = arith.select %[[EMPTY]], %{{.*}}, %[[L]] : f32
// CHECK: nvvm.rcp.approx.ftz.f %[[DIVISOR]]
// CHECK: gpu.return
module {
  func.func private @wa3_attention(%q: tensor<1x4x200x64xbf16>, %k: tensor<1x4x200x64xbf16>, %out: tensor<1x4x200x64xbf16>) -> tensor<1x4x200x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %k, %k causal {kiln.config = #kiln.config<tile = [128, 128], warps = 8, stages = 2, lowering = "wgmma">} : tensor<1x4x200x64xbf16>, tensor<1x4x200x64xbf16>, tensor<1x4x200x64xbf16> -> tensor<1x4x200x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x4x200x64xbf16>, tensor<1x4x200x64xbf16>) -> tensor<1x4x200x64xbf16>
    return %r : tensor<1x4x200x64xbf16>
  }
}
