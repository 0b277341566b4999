// RUN: kiln-opt %s -kiln-split-k=target=sm_90a -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-split-k=target=sm_80 -split-input-file | FileCheck %s --check-prefix=SM80
// RUN: kiln-opt %s -kiln-split-k -split-input-file | FileCheck %s --check-prefix=HOST
// RUN: not kiln-opt %s -kiln-split-k=target=sm_70 2>&1 | FileCheck %s --check-prefix=BADTARGET

// kiln-split-k splits the contraction of a matmul (mma_sync, or the wgmma kernel of a decode step's 64-row
// tiles) whose 128-column output tiles fill at most a third
// of the multiprocessors (at most half with tiles of 32 rows or more) into as many chunks of whole k-tiles as
// make one tile per multiprocessor (each chunk at least 512 long), and adds the chunks up in a
// kiln.sum_splits that takes over the matmul's epilogue. The host target (the default) keeps every matmul whole.
// BADTARGET: for the --target option: Cannot find option named 'sm_70'!

// A decode step's projection: 32 rows by a 4096 x 4096 weight, 32 tiles of 32 x 128; 132 multiprocessors take 4
// chunks of 1024 (8 k-tiles of 128 each). The bias and SiLU move to the sum.
// CHECK-LABEL: func.func @decode_projection
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<32x4096xbf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<4096x4096xbf16>, %[[B:[a-zA-Z0-9_]+]]: tensor<4096xbf16>)
// CHECK: %[[P:.+]] = kiln.matmul %[[X]], %[[W]] {k_chunk = 1024 : i64} : tensor<32x4096xbf16>, tensor<4096x4096xbf16> -> tensor<4x32x4096xf32>
// CHECK: %[[Y:.+]] = kiln.sum_splits %[[P]] epilogue(%[[B]] : tensor<4096xbf16>) {
// CHECK: ^bb0(%[[ACC:.+]]: f32, %[[BIAS:.+]]: f32):
// CHECK: arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK: math.exp
// CHECK: kiln.yield
// CHECK: } : tensor<4x32x4096xf32> -> tensor<32x4096xbf16>
// CHECK: return %[[Y]]
// On sm_80 (108 multiprocessors) 3 chunks of 11 k-tiles (1408; the last one 1280).
// SM80-LABEL: func.func @decode_projection
// SM80: kiln.matmul {{.*}}{k_chunk = 1408 : i64} : {{.*}} -> tensor<3x32x4096xf32>
// HOST-LABEL: func.func @decode_projection
// HOST-NOT: k_chunk
// HOST-NOT: kiln.sum_splits
// HOST: return
func.func @decode_projection(%x: tensor<32x4096xbf16>, %w: tensor<4096x4096xbf16>, %b: tensor<4096xbf16>) -> tensor<32x4096xbf16> {
  %y = kiln.matmul %x, %w epilogue(%b : tensor<4096xbf16>) {
  ^bb0(%acc: f32, %bias: f32):
    %s = arith.addf %acc, %bias : f32
    %n = arith.negf %s : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %e : f32
    %silu = arith.divf %s, %d : f32
    kiln.yield %silu : f32
  } : tensor<32x4096xbf16>, tensor<4096x4096xbf16> -> tensor<32x4096xbf16>
  return %y : tensor<32x4096xbf16>
}

// -----

// The MLP's down projection at one row (K = 14336) against a transposed [N, K] weight, on the wgmma kernel's
// 64 x 128 tiles (twice their 32 fit one wave): 4 chunks of 56 k-tiles of 64.
// CHECK-LABEL: func.func @down_projection
// CHECK: kiln.matmul %{{.*}}, %{{.*}} transpose_rhs {k_chunk = 3584 : i64} : tensor<1x14336xbf16>, tensor<4096x14336xbf16> -> tensor<4x1x4096xf32>
// CHECK: kiln.sum_splits %{{.*}} : tensor<4x1x4096xf32> -> tensor<1x4096xbf16>
// On sm_80 the mma_sync kernel's 32 tiles of 128 columns: 3 chunks.
// SM80-LABEL: func.func @down_projection
// SM80: kiln.matmul {{.*}}{k_chunk = 4864 : i64} : {{.*}} -> tensor<3x1x4096xf32>
func.func @down_projection(%x: tensor<1x14336xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<1x4096xbf16> {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<1x14336xbf16>, tensor<4096x14336xbf16> -> tensor<1x4096xbf16>
  return %y : tensor<1x4096xbf16>
}

// -----

// The q/k/v projection at N = 6144: 48 tiles of 32 rows, two chunks of 2048.
// CHECK-LABEL: func.func @qkv_projection
// CHECK: kiln.matmul %{{.*}}, %{{.*}} {k_chunk = 2048 : i64} : tensor<32x4096xbf16>, tensor<4096x6144xbf16> -> tensor<2x32x6144xf32>
func.func @qkv_projection(%x: tensor<32x4096xbf16>, %w: tensor<4096x6144xbf16>) -> tensor<32x6144xbf16> {
  %y = kiln.matmul %x, %w : tensor<32x4096xbf16>, tensor<4096x6144xbf16> -> tensor<32x6144xbf16>
  return %y : tensor<32x6144xbf16>
}

// -----

// 1 to 16 rows against the 14336- and 6144-column weights: 56 tiles of 64 x 256 take 2 chunks; the 6144 columns,
// as 48 tiles of 64 x 128, take 2 too.
// CHECK-LABEL: func.func @few_rows
// CHECK: kiln.matmul {{.*}} {k_chunk = 2048 : i64} : tensor<1x4096xbf16>, tensor<4096x14336xbf16> -> tensor<2x1x14336xf32>
// CHECK: kiln.matmul {{.*}} {k_chunk = 2048 : i64} : tensor<16x4096xbf16>, tensor<4096x6144xbf16> -> tensor<2x16x6144xf32>
func.func @few_rows(%x: tensor<1x4096xbf16>, %w: tensor<4096x14336xbf16>, %x1: tensor<16x4096xbf16>,
                    %w1: tensor<4096x6144xbf16>) -> (tensor<1x14336xbf16>, tensor<16x6144xbf16>) {
  %a = kiln.matmul %x, %w : tensor<1x4096xbf16>, tensor<4096x14336xbf16> -> tensor<1x14336xbf16>
  %b = kiln.matmul %x1, %w1 : tensor<16x4096xbf16>, tensor<4096x6144xbf16> -> tensor<16x6144xbf16>
  return %a, %b : tensor<1x14336xbf16>, tensor<16x6144xbf16>
}

// -----

// Left whole: 112 tiles of 32 rows at N = 14336, a K of two k-tiles, a pinned config, the wgmma GEMM (M > 64),
// and a matmul already split.
// CHECK-LABEL: func.func @whole
// CHECK-NOT: kiln.sum_splits
// CHECK: return
func.func @whole(%x: tensor<32x4096xbf16>, %w2: tensor<4096x14336xbf16>,
                 %x3: tensor<32x256xbf16>, %w3: tensor<256x4096xbf16>, %x4: tensor<256x4096xbf16>,
                 %w4: tensor<4096x4096xbf16>, %w5: tensor<4096x4096xbf16>)
    -> (tensor<32x14336xbf16>, tensor<32x4096xbf16>, tensor<256x4096xbf16>, tensor<32x4096xbf16>, tensor<2x32x4096xf32>) {
  %b = kiln.matmul %x, %w2 : tensor<32x4096xbf16>, tensor<4096x14336xbf16> -> tensor<32x14336xbf16>
  %c = kiln.matmul %x3, %w3 : tensor<32x256xbf16>, tensor<256x4096xbf16> -> tensor<32x4096xbf16>
  %d = kiln.matmul %x4, %w4 : tensor<256x4096xbf16>, tensor<4096x4096xbf16> -> tensor<256x4096xbf16>
  %e = kiln.matmul %x, %w5 {kiln.config = #kiln.config<tile = [32, 32, 128], warps = 4, stages = 6, lowering = "mma_sync">} : tensor<32x4096xbf16>, tensor<4096x4096xbf16> -> tensor<32x4096xbf16>
  %f = kiln.matmul %x, %w5 {k_chunk = 2048 : i64} : tensor<32x4096xbf16>, tensor<4096x4096xbf16> -> tensor<2x32x4096xf32>
  return %b, %c, %d, %e, %f : tensor<32x14336xbf16>, tensor<32x4096xbf16>, tensor<256x4096xbf16>, tensor<32x4096xbf16>, tensor<2x32x4096xf32>
}

// -----

// 33 to 64 rows whose config splits the contraction over a cluster (kiln-select-config's k_splits = 2 on
// sm_90a) are left whole: one kernel sums the two halves.
// CHECK-LABEL: func.func @cluster_split
// CHECK-NOT: kiln.sum_splits
// CHECK: return
// SM80-LABEL: func.func @cluster_split
// SM80: kiln.sum_splits
func.func @cluster_split(%x: tensor<64x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<64x4096xbf16> {
  %y = kiln.matmul %x, %w : tensor<64x4096xbf16>, tensor<4096x4096xbf16> -> tensor<64x4096xbf16>
  return %y : tensor<64x4096xbf16>
}
