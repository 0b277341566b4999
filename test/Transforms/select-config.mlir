// RUN: kiln-opt %s -kiln-select-config -split-input-file | FileCheck %s --check-prefixes=CHECK,HOST
// RUN: kiln-opt %s -kiln-select-config=target=host -split-input-file | FileCheck %s --check-prefixes=CHECK,HOST
// RUN: kiln-opt %s -kiln-select-config=target=sm_80 -split-input-file | FileCheck %s --check-prefixes=CHECK,SM80
// RUN: kiln-opt %s -kiln-select-config=target=sm_90a -split-input-file | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: not kiln-opt %s -kiln-select-config=target=sm_70 2>&1 | FileCheck %s --check-prefix=BADTARGET

// kiln-select-config attaches a #kiln.config to every matmul, attention, softmax, rms_norm and layer_norm. The
// CHECK prefix holds what every target agrees on; HOST, SM80 and SM90 the per-target strategies.

// BADTARGET: for the --target option: Cannot find option named 'sm_70'!

//===----------------------------------------------------------------------===//
// kiln.matmul
//===----------------------------------------------------------------------===//

// A large GEMM gets each target's full-size tile, and its tiles' blocks run in groups of 16 tile rows (more
// tiles than multiprocessors: one wave would read every column panel of B otherwise). (Smaller ones below get
// narrower column tiles on the GPU targets, until two thirds of the multiprocessors have a tile or the width
// reaches 32.)
// CHECK-LABEL: func.func @matmul_large
// CHECK-SAME: (%[[A:.*]]: tensor<2048x1024xf32>, %[[B:.*]]: tensor<1024x2048xf32>)
// HOST: kiln.matmul %[[A]], %[[B]] {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.matmul %[[A]], %[[B]] {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 3, lowering = "mma_sync", group = 16>}
// SM90: kiln.matmul %[[A]], %[[B]] {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 4, lowering = "mma_sync", group = 16>}
func.func @matmul_large(%a: tensor<2048x1024xf32>, %b: tensor<1024x2048xf32>) -> tensor<2048x2048xf32> {
  %0 = kiln.matmul %a, %b : tensor<2048x1024xf32>, tensor<1024x2048xf32> -> tensor<2048x2048xf32>
  return %0 : tensor<2048x2048xf32>
}

// -----

// Decode-shaped projections (M = 32). On sm_80, mma_sync: N = 14336 keeps 128-column tiles (112 of them fill
// two thirds of the chip) and, with BK = 128, as many stages as shared memory holds (3); N = 6144 narrows to 64
// columns (96 tiles). On sm_90a, 17 to 64 rows take one warpgroup's 64 x 128 wgmma tiles, six stages.
// CHECK-LABEL: func.func @matmul_decode_wide
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [32, 128, 128], warps = 4, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma">}
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [32, 64, 128], warps = 4, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma">}
func.func @matmul_decode_wide(%a: tensor<32x4096xbf16>, %b: tensor<4096x14336xbf16>, %c: tensor<4096x6144xbf16>)
    -> (tensor<32x14336xbf16>, tensor<32x6144xbf16>) {
  %0 = kiln.matmul %a, %b : tensor<32x4096xbf16>, tensor<4096x14336xbf16> -> tensor<32x14336xbf16>
  %1 = kiln.matmul %a, %c : tensor<32x4096xbf16>, tensor<4096x6144xbf16> -> tensor<32x6144xbf16>
  return %0, %1 : tensor<32x14336xbf16>, tensor<32x6144xbf16>
}

// -----

// 33 to 64 rows on sm_90a whose 64 x 128 tiles leave half the chip idle: the contraction split in two over a
// cluster (k_splits = 2), eight stages, 64-column tiles while twice their count fits one wave (N = 4096: 64
// tiles), else 128 (N = 6144: 48); N = 14336 (112 tiles of 128) keeps the unsplit tiles, and so does a
// contraction too short for kiln-split-k (K = 1000).
// CHECK-LABEL: func.func @matmul_decode_cluster_split
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 4, stages = 8, lowering = "wgmma", k_splits = 2>}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 8, lowering = "wgmma", k_splits = 2>}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma">}
func.func @matmul_decode_cluster_split(%a: tensor<64x4096xbf16>, %b: tensor<4096x4096xbf16>,
                                       %c: tensor<4096x6144xbf16>, %d: tensor<4096x14336xbf16>,
                                       %e: tensor<40x1000xbf16>, %f: tensor<1000x1024xbf16>)
    -> (tensor<64x4096xbf16>, tensor<64x6144xbf16>, tensor<64x14336xbf16>, tensor<40x1024xbf16>) {
  %0 = kiln.matmul %a, %b : tensor<64x4096xbf16>, tensor<4096x4096xbf16> -> tensor<64x4096xbf16>
  %1 = kiln.matmul %a, %c : tensor<64x4096xbf16>, tensor<4096x6144xbf16> -> tensor<64x6144xbf16>
  %2 = kiln.matmul %a, %d : tensor<64x4096xbf16>, tensor<4096x14336xbf16> -> tensor<64x14336xbf16>
  %3 = kiln.matmul %e, %f : tensor<40x1000xbf16>, tensor<1000x1024xbf16> -> tensor<40x1024xbf16>
  return %0, %1, %2, %3 : tensor<64x4096xbf16>, tensor<64x6144xbf16>, tensor<64x14336xbf16>, tensor<40x1024xbf16>
}

// -----

// A matmul already split into chunks (k_chunk) takes no cluster split: its chunks are blocks of their own.
// CHECK-LABEL: func.func @matmul_decode_split_no_cluster
// SM90: kiln.matmul {{.*}} {k_chunk = 2048 : i64, kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma">}
func.func @matmul_decode_split_no_cluster(%a: tensor<64x4096xbf16>, %b: tensor<4096x4096xbf16>) -> tensor<2x64x4096xf32> {
  %0 = kiln.matmul %a, %b {k_chunk = 2048 : i64} : tensor<64x4096xbf16>, tensor<4096x4096xbf16> -> tensor<2x64x4096xf32>
  return %0 : tensor<2x64x4096xf32>
}

// -----

// Decode steps of 1 to 16 rows (bf16) against a weight of 4096 x 4096 or more: on sm_90a the wgmma kernel's
// 64 x 128 tiles on eight stages where twice their count fits one wave (N = 4096), else 64 x 256 on five (N =
// 14336) (kiln-split-k then splits K to fill the chip); a smaller weight (1000 x 3000) keeps mma_sync's 16-row
// tiles, as does sm_80.
// CHECK-LABEL: func.func @matmul_decode_few_rows
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, 128, 128], warps = 4, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 256, 64], warps = 4, stages = 5, lowering = "wgmma">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 8, lowering = "wgmma">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, {{[0-9]+}}, 128], warps = 4, stages = {{[0-9]}}, lowering = "mma_sync">}
func.func @matmul_decode_few_rows(%a: tensor<1x4096xbf16>, %b: tensor<4096x14336xbf16>, %c: tensor<16x4096xbf16>,
                                  %d: tensor<4096x4096xbf16>, %e: tensor<7x3000xbf16>, %f: tensor<3000x1000xbf16>)
    -> (tensor<1x14336xbf16>, tensor<16x4096xbf16>, tensor<7x1000xbf16>) {
  %0 = kiln.matmul %a, %b : tensor<1x4096xbf16>, tensor<4096x14336xbf16> -> tensor<1x14336xbf16>
  %1 = kiln.matmul %c, %d : tensor<16x4096xbf16>, tensor<4096x4096xbf16> -> tensor<16x4096xbf16>
  %2 = kiln.matmul %e, %f : tensor<7x3000xbf16>, tensor<3000x1000xbf16> -> tensor<7x1000xbf16>
  return %0, %1, %2 : tensor<1x14336xbf16>, tensor<16x4096xbf16>, tensor<7x1000xbf16>
}

// -----

// M = 64 against a wide weight in f16 rows that TMA cannot copy (N = 12290) and so on mma_sync: [64, 128, 128]
// tiles would need 313 KB for six stages; four fit sm_90a. Eight warps: 33 to 64 rows take 64-row tiles, whose
// tile matmuls four warps do not keep up with.
// CHECK-LABEL: func.func @matmul_decode_stage_cap
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 128, 128], warps = 8, stages = 4, lowering = "mma_sync">}
func.func @matmul_decode_stage_cap(%a: tensor<64x4096xf16>, %b: tensor<4096x12290xf16>) -> tensor<64x12290xf16> {
  %0 = kiln.matmul %a, %b : tensor<64x4096xf16>, tensor<4096x12290xf16> -> tensor<64x12290xf16>
  return %0 : tensor<64x12290xf16>
}

// -----

// A single-row GEMV: the host tile has exactly one row; GPU tiles never go below the 16-row fragment, narrow
// their columns to fill the multiprocessors and take deep K steps (BK = 128) to keep the weight streaming.
// CHECK-LABEL: func.func @matmul_one_row
// HOST: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [1, 64, 64], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, 32, 128], warps = 4, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, 32, 128], warps = 4, stages = 6, lowering = "mma_sync">}
func.func @matmul_one_row(%a: tensor<1x4096xf32>, %b: tensor<4096x4096xf32>) -> tensor<1x4096xf32> {
  %0 = kiln.matmul %a, %b : tensor<1x4096xf32>, tensor<4096x4096xf32> -> tensor<1x4096xf32>
  return %0 : tensor<1x4096xf32>
}

// -----

// Every dimension smaller than the default tile: the host clamps to the dimension itself, the GPU to the next
// power of two at or above it (M = 3 -> 16, N = 40 -> 64, K = 20 -> 32).
// CHECK-LABEL: func.func @matmul_small
// HOST: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [3, 40, 20], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, 32, 32], warps = 4, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, 32, 32], warps = 4, stages = 4, lowering = "mma_sync">}
func.func @matmul_small(%a: tensor<3x20xf32>, %b: tensor<20x40xf32>) -> tensor<3x40xf32> {
  %0 = kiln.matmul %a, %b : tensor<3x20xf32>, tensor<20x40xf32> -> tensor<3x40xf32>
  return %0 : tensor<3x40xf32>
}

// -----

// With transpose_lhs the contraction size is the lhs's second-to-last dimension (K = 20), not its last (M = 128).
// CHECK-LABEL: func.func @matmul_transpose_lhs
// HOST: kiln.matmul {{.*}} transpose_lhs {kiln.config = #kiln.config<tile = [64, 64, 20], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.matmul {{.*}} transpose_lhs {kiln.config = #kiln.config<tile = [128, 32, 32], warps = 4, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} transpose_lhs {kiln.config = #kiln.config<tile = [128, 32, 32], warps = 4, stages = 4, lowering = "mma_sync">}
func.func @matmul_transpose_lhs(%a: tensor<20x128xf32>, %b: tensor<20x512xf32>) -> tensor<128x512xf32> {
  %0 = kiln.matmul %a, %b transpose_lhs : tensor<20x128xf32>, tensor<20x512xf32> -> tensor<128x512xf32>
  return %0 : tensor<128x512xf32>
}

// -----

// Batched bf16: only the matrix dimensions (M = 77, N = 1024, K = 512) decide. On sm_90a, past 64 rows, the
// wgmma kernel takes it, with 64-column tiles since 128 would leave more than half of the H200 idle.
// CHECK-LABEL: func.func @matmul_batched_bf16
// HOST: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 32, 32], warps = 4, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 64, 64], warps = 8, stages = 4, lowering = "wgmma">}
func.func @matmul_batched_bf16(%a: tensor<2x77x512xbf16>, %b: tensor<512x1024xbf16>) -> tensor<2x77x1024xbf16> {
  %0 = kiln.matmul %a, %b : tensor<2x77x512xbf16>, tensor<512x1024xbf16> -> tensor<2x77x1024xbf16>
  return %0 : tensor<2x77x1024xbf16>
}

// -----

// sm_90a GEMMs past 64 rows (bf16/f16, rows in 16-byte chunks) take the wgmma kernel: 128 x 256 tiles while
// those still give nine in ten of the 132 multiprocessors one (4096^2: 512 tiles; 2048^2: 128), 128 x 128 while
// half of them get one (2048 x 1024: 128 tiles), else 128 x 64; always 64-deep k-tiles and 4 stages. Measured on the H200
// (bench/results/config_sweeps/gemm_wgmma.md): 128 x 256 runs 497 TFLOP/s at 4096^3 against 406 for 128 x 128, and
// 128 x 128 443 at 2048 x 1024 x 4096 against 318 for 128 x 256. More tiles than multiprocessors run in groups
// of 16 tile rows. A transposed rhs takes the same tiles; an f32 GEMM, a transposed lhs or M = 65 with K = 12 (not whole 16-byte chunks) stay on mma_sync.
// CHECK-LABEL: func.func @matmul_wgmma
// SM80-COUNT-6: lowering = "mma_sync"
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 256, 64], warps = 8, stages = 4, lowering = "wgmma", group = 16>}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 128, 64], warps = 8, stages = 4, lowering = "wgmma">}
// SM90: kiln.matmul {{.*}} transpose_rhs {kiln.config = #kiln.config<tile = [128, 256, 64], warps = 8, stages = 4, lowering = "wgmma", group = 16>}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 64, 64], warps = 8, stages = 4, lowering = "wgmma">}
// SM90: kiln.matmul {{.*}} lowering = "mma_sync"
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 256, 64], warps = 8, stages = 4, lowering = "wgmma">}
func.func @matmul_wgmma(%a: tensor<4096x4096xbf16>, %b: tensor<4096x4096xbf16>, %c: tensor<2048x4096xf16>,
                        %d: tensor<4096x1024xf16>, %e: tensor<65x4096xbf16>, %f: tensor<4096x64xbf16>,
                        %g: tensor<65x12xbf16>, %h: tensor<12x64xbf16>, %i: tensor<2048x2048xf16>)
    -> (tensor<4096x4096xbf16>, tensor<2048x1024xf16>, tensor<4096x4096xbf16>, tensor<65x64xbf16>, tensor<65x64xbf16>,
        tensor<2048x2048xf16>) {
  %0 = kiln.matmul %a, %b : tensor<4096x4096xbf16>, tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %1 = kiln.matmul %c, %d : tensor<2048x4096xf16>, tensor<4096x1024xf16> -> tensor<2048x1024xf16>
  %2 = kiln.matmul %a, %b transpose_rhs : tensor<4096x4096xbf16>, tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %3 = kiln.matmul %e, %f : tensor<65x4096xbf16>, tensor<4096x64xbf16> -> tensor<65x64xbf16>
  %4 = kiln.matmul %g, %h : tensor<65x12xbf16>, tensor<12x64xbf16> -> tensor<65x64xbf16>
  %5 = kiln.matmul %i, %i : tensor<2048x2048xf16>, tensor<2048x2048xf16> -> tensor<2048x2048xf16>
  return %0, %1, %2, %3, %4, %5 : tensor<4096x4096xbf16>, tensor<2048x1024xf16>, tensor<4096x4096xbf16>, tensor<65x64xbf16>, tensor<65x64xbf16>, tensor<2048x2048xf16>
}

//===----------------------------------------------------------------------===//
// kiln.attention
//===----------------------------------------------------------------------===//

// -----

// Head dim 64: the GPU targets take 64-wide key tiles (measured best on the H200), head dim 128 takes 128.
// CHECK-LABEL: func.func @attention_head_dim_64
// HOST: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 64], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">}
func.func @attention_head_dim_64(%q: tensor<1x8x256x64xf32>, %k: tensor<1x8x256x64xf32>, %v: tensor<1x8x256x64xf32>) -> tensor<1x8x256x64xf32> {
  %0 = kiln.attention %q, %k, %v : tensor<1x8x256x64xf32>, tensor<1x8x256x64xf32>, tensor<1x8x256x64xf32> -> tensor<1x8x256x64xf32>
  return %0 : tensor<1x8x256x64xf32>
}

// -----

// f32 at head dim 128: its tiles take twice the bytes of bf16 ones, so 128 x 128 (338944 bytes with the rows
// padded by 16 bytes) narrows to 128 x 64 (203776) on sm_90a and to 128 x 32 (135680) on sm_80.
// CHECK-LABEL: func.func @attention_f32_head_dim_128
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 32], warps = 8, stages = 2, lowering = "mma_sync">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">}
func.func @attention_f32_head_dim_128(%q: tensor<1x8x2048x128xf32>) -> tensor<1x8x2048x128xf32> {
  %0 = kiln.attention %q, %q, %q : tensor<1x8x2048x128xf32>, tensor<1x8x2048x128xf32>, tensor<1x8x2048x128xf32> -> tensor<1x8x2048x128xf32>
  return %0 : tensor<1x8x2048x128xf32>
}

// -----

// Head dim 128 in bf16: 128x128 tiles where they fit (sm_80's 163 KB holds 128x64: 128x128 would need 174080
// bytes); on sm_90a the wgmma lowering, with two warpgroups of 64 query rows and two stages past 1024 keys,
// one-warpgroup 64x64 tiles and one stage up to there, 64x32 up to 512 keys. The f32 head-dim-64 case above and
// the decode case below stay on mma_sync.
// CHECK-LABEL: func.func @attention_head_dim_128
// HOST: kiln.attention {{.*}} causal {kiln.config = #kiln.config<tile = [64, 64], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.attention {{.*}} causal {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">}
// SM90: kiln.attention {{.*}} causal {kiln.config = #kiln.config<tile = [64, 32], warps = 4, stages = 1, lowering = "wgmma">}
// HOST: kiln.attention {{.*}} causal {kiln.config = #kiln.config<tile = [64, 64], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.attention {{.*}} causal {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">}
// SM90: kiln.attention {{.*}} causal {kiln.config = #kiln.config<tile = [128, 128], warps = 8, stages = 2, lowering = "wgmma">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">}
func.func @attention_head_dim_128(%q: tensor<1x32x256x128xbf16>, %k: tensor<1x8x256x128xbf16>, %v: tensor<1x8x256x128xbf16>,
                                  %q2: tensor<1x32x2048x128xbf16>, %k2: tensor<1x8x2048x128xbf16>, %v2: tensor<1x8x2048x128xbf16>,
                                  %q3: tensor<1x8x1000x128xbf16>)
    -> (tensor<1x32x256x128xbf16>, tensor<1x32x2048x128xbf16>, tensor<1x8x1000x128xbf16>) {
  %0 = kiln.attention %q, %k, %v causal : tensor<1x32x256x128xbf16>, tensor<1x8x256x128xbf16>, tensor<1x8x256x128xbf16> -> tensor<1x32x256x128xbf16>
  %1 = kiln.attention %q2, %k2, %v2 causal : tensor<1x32x2048x128xbf16>, tensor<1x8x2048x128xbf16>, tensor<1x8x2048x128xbf16> -> tensor<1x32x2048x128xbf16>
  %2 = kiln.attention %q3, %q3, %q3 : tensor<1x8x1000x128xbf16>, tensor<1x8x1000x128xbf16>, tensor<1x8x1000x128xbf16> -> tensor<1x8x1000x128xbf16>
  return %0, %1, %2 : tensor<1x32x256x128xbf16>, tensor<1x32x2048x128xbf16>, tensor<1x8x1000x128xbf16>
}

// -----

// A decode step (one query row: a 16-row tile, one warp) stays on mma_sync; at head dim 128 it takes 64-key tiles
// (128 would spill), at head dim 64 the usual 64.
// CHECK-LABEL: func.func @attention_decode_step
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}
func.func @attention_decode_step(%q: tensor<4x32x1x128xbf16>, %k: tensor<4x8x1000x128xbf16>,
                                 %q64: tensor<4x32x1x64xbf16>, %k64: tensor<4x8x1000x64xbf16>)
    -> (tensor<4x32x1x128xbf16>, tensor<4x32x1x64xbf16>) {
  %0 = kiln.attention %q, %k, %k : tensor<4x32x1x128xbf16>, tensor<4x8x1000x128xbf16>, tensor<4x8x1000x128xbf16> -> tensor<4x32x1x128xbf16>
  %1 = kiln.attention %q64, %k64, %k64 : tensor<4x32x1x64xbf16>, tensor<4x8x1000x64xbf16>, tensor<4x8x1000x64xbf16> -> tensor<4x32x1x64xbf16>
  return %0, %1 : tensor<4x32x1x128xbf16>, tensor<4x32x1x64xbf16>
}

// -----

// Variants on sm_90a at 4096 keys. A mask that gives each query a span of keys starting near it (a 1024-key
// sliding window, kv > q - 1024; document ids over a table promised nondecreasing) takes one warpgroup's 64 rows
// and 64-key tiles, one stage at head dim 128 and two at 64. A score_mod alone (softcap) and a mask bounding keys
// only from above (kv <= q: the causal frontier) keep 128 rows, two stages at head dim 128.
// CHECK-LABEL: func.func @attention_variants
// SM90: } {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">}
// SM90: } {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "wgmma">, nondecreasing_tables = array<i64: 0>}
// SM90: } {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "wgmma">}
// SM90: } {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "wgmma">}
func.func @attention_variants(%q: tensor<1x8x4096x128xbf16>, %q64: tensor<1x8x4096x64xbf16>, %docs: tensor<4096xi32>)
    -> (tensor<1x8x4096x128xbf16>, tensor<1x8x4096x64xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>) {
  %0 = kiln.attention %q, %q, %q causal mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c1024 = arith.constant 1024 : index
    %lo = arith.subi %i, %c1024 : index
    %in = arith.cmpi sgt, %j, %lo : index
    kiln.yield %in : i1
  } : tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16> -> tensor<1x8x4096x128xbf16>
  %1 = kiln.attention %q64, %q64, %q64 causal mod_operands(%docs : tensor<4096xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<4096xi32>):
    %di = tensor.extract %d[%i] : tensor<4096xi32>
    %dj = tensor.extract %d[%j] : tensor<4096xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    kiln.yield %same : i1
  } {nondecreasing_tables = array<i64: 0>} : tensor<1x8x4096x64xbf16>, tensor<1x8x4096x64xbf16>, tensor<1x8x4096x64xbf16> -> tensor<1x8x4096x64xbf16>
  %2 = kiln.attention %q, %q, %q causal score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %y = arith.mulf %t, %cap : f32
    kiln.yield %y : f32
  } : tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16> -> tensor<1x8x4096x128xbf16>
  %3 = kiln.attention %q, %q, %q mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %in = arith.cmpi sle, %j, %i : index
    kiln.yield %in : i1
  } : tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16> -> tensor<1x8x4096x128xbf16>
  return %0, %1, %2, %3 : tensor<1x8x4096x128xbf16>, tensor<1x8x4096x64xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>
}

// -----

// Head dim 64 in bf16 on sm_90a: 64x64 wgmma tiles up to 1024 keys, 128x64 beyond, one stage.
// CHECK-LABEL: func.func @attention_head_dim_64_bf16
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 1, lowering = "wgmma">}
func.func @attention_head_dim_64_bf16(%q: tensor<2x8x512x64xbf16>, %q2: tensor<1x8x4096x64xbf16>)
    -> (tensor<2x8x512x64xbf16>, tensor<1x8x4096x64xbf16>) {
  %0 = kiln.attention %q, %q, %q : tensor<2x8x512x64xbf16>, tensor<2x8x512x64xbf16>, tensor<2x8x512x64xbf16> -> tensor<2x8x512x64xbf16>
  %1 = kiln.attention %q2, %q2, %q2 : tensor<1x8x4096x64xbf16>, tensor<1x8x4096x64xbf16>, tensor<1x8x4096x64xbf16> -> tensor<1x8x4096x64xbf16>
  return %0, %1 : tensor<2x8x512x64xbf16>, tensor<1x8x4096x64xbf16>
}

// -----

// On a few key tiles sm_90a attention takes the sequential wgmma loop (stages = 1), as it does everywhere but at
// head dim 128 past 1024 keys: head dim 64 with 32-key tiles up to 160 keys (128 keys: four tiles; 168, 192 and
// 256 keys: 64-key tiles), head dim 128 with 32-key tiles up to 512 keys.
// CHECK-LABEL: func.func @attention_few_key_tiles
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 32], warps = 4, stages = 1, lowering = "wgmma">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 32], warps = 4, stages = 1, lowering = "wgmma">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [64, 32], warps = 4, stages = 1, lowering = "wgmma">}
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">}
func.func @attention_few_key_tiles(%q: tensor<1x8x128x64xbf16>, %q168: tensor<1x8x168x64xbf16>,
                                   %q192: tensor<1x8x192x64xbf16>, %q256: tensor<1x8x256x64xbf16>,
                                   %q2: tensor<1x8x128x128xbf16>, %q3: tensor<1x8x160x128xbf16>)
    -> (tensor<1x8x128x64xbf16>, tensor<1x8x168x64xbf16>, tensor<1x8x192x64xbf16>, tensor<1x8x256x64xbf16>,
        tensor<1x8x128x128xbf16>, tensor<1x8x160x128xbf16>) {
  %0 = kiln.attention %q, %q, %q : tensor<1x8x128x64xbf16>, tensor<1x8x128x64xbf16>, tensor<1x8x128x64xbf16> -> tensor<1x8x128x64xbf16>
  %1 = kiln.attention %q168, %q168, %q168 : tensor<1x8x168x64xbf16>, tensor<1x8x168x64xbf16>, tensor<1x8x168x64xbf16> -> tensor<1x8x168x64xbf16>
  %2 = kiln.attention %q192, %q192, %q192 : tensor<1x8x192x64xbf16>, tensor<1x8x192x64xbf16>, tensor<1x8x192x64xbf16> -> tensor<1x8x192x64xbf16>
  %3 = kiln.attention %q256, %q256, %q256 : tensor<1x8x256x64xbf16>, tensor<1x8x256x64xbf16>, tensor<1x8x256x64xbf16> -> tensor<1x8x256x64xbf16>
  %4 = kiln.attention %q2, %q2, %q2 : tensor<1x8x128x128xbf16>, tensor<1x8x128x128xbf16>, tensor<1x8x128x128xbf16> -> tensor<1x8x128x128xbf16>
  %5 = kiln.attention %q3, %q3, %q3 : tensor<1x8x160x128xbf16>, tensor<1x8x160x128xbf16>, tensor<1x8x160x128xbf16> -> tensor<1x8x160x128xbf16>
  return %0, %1, %2, %3, %4, %5 : tensor<1x8x128x64xbf16>, tensor<1x8x168x64xbf16>, tensor<1x8x192x64xbf16>, tensor<1x8x256x64xbf16>, tensor<1x8x128x128xbf16>, tensor<1x8x160x128xbf16>
}

// -----

// Decoding (one query row, 300 keys): the query tile shrinks, the key tile does not.
// CHECK-LABEL: func.func @attention_decode
// HOST: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [1, 64], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}
func.func @attention_decode(%q: tensor<1x8x1x64xf32>, %k: tensor<1x8x300x64xf32>, %v: tensor<1x8x300x64xf32>) -> tensor<1x8x1x64xf32> {
  %0 = kiln.attention %q, %k, %v : tensor<1x8x1x64xf32>, tensor<1x8x300x64xf32>, tensor<1x8x300x64xf32> -> tensor<1x8x1x64xf32>
  return %0 : tensor<1x8x1x64xf32>
}

//===----------------------------------------------------------------------===//
// Row kernels: kiln.softmax, kiln.rms_norm, kiln.layer_norm
//===----------------------------------------------------------------------===//

// -----

// A block of rows per program: 16 on the host; on the GPU ("rows", the register layout of row tiles) enough
// threads per row that each holds about 16 of its elements (short rows share a warp), here one warp per row and
// four rows per block.
// CHECK-LABEL: func.func @row_kernels
// HOST: kiln.softmax {{.*}} axis 2 {kiln.config = #kiln.config<tile = [16], warps = 1, stages = 1, lowering = "host">}
// HOST: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [16], warps = 1, stages = 1, lowering = "host">}
// HOST: kiln.layer_norm {{.*}} {kiln.config = #kiln.config<tile = [16], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.softmax {{.*}} axis 2 {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">}
// SM80: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">}
// SM80: kiln.layer_norm {{.*}} {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">}
// SM90: kiln.softmax {{.*}} axis 2 {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">}
// SM90: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">}
// SM90: kiln.layer_norm {{.*}} {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">}
func.func @row_kernels(%x: tensor<2x77x512xf32>, %w: tensor<512xf32>) -> (tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>) {
  %0 = kiln.softmax %x axis 2 : tensor<2x77x512xf32>
  %1 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<2x77x512xf32>, tensor<512xf32>
  %2 = kiln.layer_norm %x, %w, %w epsilon 1.0e-05 : tensor<2x77x512xf32>, tensor<512xf32>, tensor<512xf32>
  return %0, %1, %2 : tensor<2x77x512xf32>, tensor<2x77x512xf32>, tensor<2x77x512xf32>
}

// -----

// Wide rows on the GPU: 256 threads per row for 4096 columns, one row per block; 1024 threads for a 50257-wide
// vocabulary row; no more rows per block than there are (two rows of 64: 16 lanes each, one warp). Reductions
// and logsumexp along the last axis are row kernels too.
// CHECK-LABEL: func.func @wide_rows
// HOST: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [2], warps = 1, stages = 1, lowering = "host">}
// HOST: kiln.logsumexp {{.*}} {kiln.config = #kiln.config<tile = [3], warps = 1, stages = 1, lowering = "host">}
// HOST: kiln.reduce max {{.*}} {kiln.config = #kiln.config<tile = [2], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [1], warps = 8, stages = 1, lowering = "rows">}
// SM90: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [1], warps = 8, stages = 1, lowering = "rows">}
// SM90: kiln.logsumexp {{.*}} {kiln.config = #kiln.config<tile = [1], warps = 32, stages = 1, lowering = "rows">}
// SM90: kiln.reduce max {{.*}} {kiln.config = #kiln.config<tile = [2], warps = 1, stages = 1, lowering = "rows">}
func.func @wide_rows(%x: tensor<2x4096xbf16>, %w: tensor<4096xbf16>, %logits: tensor<3x50257xf32>, %s: tensor<2x64xf32>) -> (tensor<2x4096xbf16>, tensor<3xf32>, tensor<2x1xf32>) {
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<2x4096xbf16>, tensor<4096xbf16>
  %1 = kiln.logsumexp %logits axis 1 : tensor<3x50257xf32> -> tensor<3xf32>
  %2 = kiln.reduce max %s axes [1] keep_dims : tensor<2x64xf32> -> tensor<2x1xf32>
  return %0, %1, %2 : tensor<2x4096xbf16>, tensor<3xf32>, tensor<2x1xf32>
}

// -----

// Fewer rows than the host block: the block is clamped to the row count.
// CHECK-LABEL: func.func @row_kernel_few_rows
// HOST: kiln.softmax {{.*}} axis 1 {kiln.config = #kiln.config<tile = [3], warps = 1, stages = 1, lowering = "host">}
func.func @row_kernel_few_rows(%x: tensor<3x512xf32>) -> tensor<3x512xf32> {
  %0 = kiln.softmax %x axis 1 : tensor<3x512xf32>
  return %0 : tensor<3x512xf32>
}

//===----------------------------------------------------------------------===//
// Explicit configs and non-kernel ops
//===----------------------------------------------------------------------===//

// -----

// An explicit config wins on every target, even one written for another target; an op without one next to it
// still gets the default.
// CHECK-LABEL: func.func @explicit_config_wins
// CHECK: kiln.matmul %{{.*}}, %{{.*}} {kiln.config = #kiln.config<tile = [32, 16, 8], warps = 2, stages = 5, lowering = "mma_sync">}
// CHECK: kiln.softmax %{{.*}} axis 1 {kiln.config = #kiln.config<tile = [2], warps = 1, stages = 1, lowering = "host">}
// HOST: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [16], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [16], warps = 4, stages = 1, lowering = "rows">}
// SM90: kiln.rms_norm {{.*}} {kiln.config = #kiln.config<tile = [16], warps = 4, stages = 1, lowering = "rows">}
func.func @explicit_config_wins(%a: tensor<128x128xf32>, %b: tensor<128x128xf32>, %w: tensor<128xf32>) -> tensor<128x128xf32> {
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [32, 16, 8], warps = 2, stages = 5, lowering = "mma_sync">} : tensor<128x128xf32>, tensor<128x128xf32> -> tensor<128x128xf32>
  %1 = kiln.softmax %0 axis 1 {kiln.config = #kiln.config<tile = [2], warps = 1, stages = 1, lowering = "host">} : tensor<128x128xf32>
  %2 = kiln.rms_norm %1, %w epsilon 1.0e-06 : tensor<128x128xf32>, tensor<128xf32>
  return %2 : tensor<128x128xf32>
}

// -----

// Elementwise and data-movement ops, and reductions along other axes, are not kernels and get no config.
// CHECK-LABEL: func.func @not_kernels
// CHECK-NOT: kiln.config
// CHECK: kiln.add
// CHECK-NOT: kiln.config
// CHECK: kiln.transpose
// CHECK-NOT: kiln.config
// CHECK: kiln.reduce
// CHECK-NOT: kiln.config
// CHECK: return
func.func @not_kernels(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  %0 = kiln.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = kiln.transpose %0 [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %2 = kiln.reduce sum %1 axes [0] : tensor<8x4xf32> -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// Kernels nested in regions are found too.
// CHECK-LABEL: func.func @nested_kernel
// CHECK: scf.for
// HOST: kiln.softmax {{.*}} {kiln.config = #kiln.config<tile = [8], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.softmax {{.*}} {kiln.config = #kiln.config<tile = [8], warps = 1, stages = 1, lowering = "rows">}
// SM90: kiln.softmax {{.*}} {kiln.config = #kiln.config<tile = [8], warps = 1, stages = 1, lowering = "rows">}
func.func @nested_kernel(%x: tensor<8x32xf32>, %n: index) -> tensor<8x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %0 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<8x32xf32>) {
    %1 = kiln.softmax %acc axis 1 : tensor<8x32xf32>
    scf.yield %1 : tensor<8x32xf32>
  }
  return %0 : tensor<8x32xf32>
}

// -----

// Shapes whose output tile count does not fit int64 (2^32 x 2^32 outputs) still get a config: the count
// saturates instead of wrapping to 0 and being divided by.
// CHECK-LABEL: func.func @huge_matmul
// HOST: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [64, 64, 16], warps = 1, stages = 1, lowering = "host">}
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 128, 16], warps = 4, stages = 3, lowering = "mma_sync", group = 16>}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [128, 256, 64], warps = 8, stages = 4, lowering = "wgmma", group = 16>}
func.func @huge_matmul(%a: tensor<4294967296x16xbf16>, %b: tensor<16x4294967296xbf16>) -> tensor<4294967296x4294967296xbf16> {
  %0 = kiln.matmul %a, %b : tensor<4294967296x16xbf16>, tensor<16x4294967296xbf16> -> tensor<4294967296x4294967296xbf16>
  return %0 : tensor<4294967296x4294967296xbf16>
}

// -----

// Head dims past 128 on the GPU: narrower key tiles keep the S fragment from spilling (64 keys up to head dim
// 192, 32 beyond; a decode step's one warp 16), and the tiles shrink until they fit the chip's shared memory
// (head dim 256: the Q tile and two K and two V tiles of 128 x 32 take 135168 bytes, within sm_80's 166912).
// CHECK-LABEL: func.func @large_head_dims
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">} {{.*}}x192xbf16>
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 32], warps = 8, stages = 2, lowering = "mma_sync">} {{.*}}x256xbf16>
// SM80: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 16], warps = 1, stages = 2, lowering = "mma_sync">} {{.*}}x256xbf16>
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">} {{.*}}x192xbf16>
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [128, 32], warps = 8, stages = 2, lowering = "mma_sync">} {{.*}}x256xbf16>
// SM90: kiln.attention {{.*}} {kiln.config = #kiln.config<tile = [16, 16], warps = 1, stages = 2, lowering = "mma_sync">} {{.*}}x256xbf16>
func.func @large_head_dims(%q: tensor<1x8x1000x192xbf16>, %k: tensor<1x8x1000x192xbf16>, %q2: tensor<1x8x1000x256xbf16>, %k2: tensor<1x8x1000x256xbf16>, %q1: tensor<1x8x1x256xbf16>) -> (tensor<1x8x1000x192xbf16>, tensor<1x8x1000x256xbf16>, tensor<1x8x1x256xbf16>) {
  %0 = kiln.attention %q, %k, %k : tensor<1x8x1000x192xbf16>, tensor<1x8x1000x192xbf16>, tensor<1x8x1000x192xbf16> -> tensor<1x8x1000x192xbf16>
  %1 = kiln.attention %q2, %k2, %k2 : tensor<1x8x1000x256xbf16>, tensor<1x8x1000x256xbf16>, tensor<1x8x1000x256xbf16> -> tensor<1x8x1000x256xbf16>
  %2 = kiln.attention %q1, %k2, %k2 : tensor<1x8x1x256xbf16>, tensor<1x8x1000x256xbf16>, tensor<1x8x1000x256xbf16> -> tensor<1x8x1x256xbf16>
  return %0, %1, %2 : tensor<1x8x1000x192xbf16>, tensor<1x8x1000x256xbf16>, tensor<1x8x1x256xbf16>
}

// -----

// A one-row matmul into 8 columns: 16 x 16 tiles, whose four warps could not each take whole 16 x 8 fragments
// (one warp row leaves 4 columns of warps for 16 columns); two warps do (found by the GPU property tests).
// CHECK-LABEL: func.func @matmul_one_row_eight_columns
// SM80: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, 16, 64], warps = 2, stages = 3, lowering = "mma_sync">}
// SM90: kiln.matmul {{.*}} {kiln.config = #kiln.config<tile = [16, 16, 64], warps = 2, stages = 4, lowering = "mma_sync">}
func.func @matmul_one_row_eight_columns(%a: tensor<1x40xbf16>, %b: tensor<40x8xbf16>) -> tensor<1x8xbf16> {
  %0 = kiln.matmul %a, %b : tensor<1x40xbf16>, tensor<40x8xbf16> -> tensor<1x8xbf16>
  return %0 : tensor<1x8xbf16>
}

// -----

// K and V read from a paged cache: a key tile spans whole pages (the 64-key decode tile four 16-row pages) or
// lies within one page; a page size that divides no tile (48 rows) takes the greatest common divisor (16).
// CHECK-LABEL: func.func @paged_page16
// HOST: kiln.config = #kiln.config<tile = [4, 64], warps = 1, stages = 1, lowering = "host">
// SM80: kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">
// SM90: kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">
func.func @paged_page16(%q: tensor<2x8x4x128xbf16>, %kc: tensor<64x16x8x128xbf16>, %vc: tensor<64x16x8x128xbf16>,
                        %t: tensor<2x32xi32>, %l: tensor<2xi32>) -> tensor<2x8x4x128xbf16> {
  %k = kiln.gather_pages %kc, %t, %l : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
  %v = kiln.gather_pages %vc, %t, %l : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
  %o = kiln.attention %q, %k, %v : tensor<2x8x4x128xbf16>, tensor<2x8x512x128xbf16>, tensor<2x8x512x128xbf16> -> tensor<2x8x4x128xbf16>
  return %o : tensor<2x8x4x128xbf16>
}

// -----

// CHECK-LABEL: func.func @paged_page48_prefill
// HOST: kiln.config = #kiln.config<tile = [64, 16], warps = 1, stages = 1, lowering = "host">
// SM80: kiln.config = #kiln.config<tile = [128, 16], warps = 8, stages = 2, lowering = "mma_sync">
// SM90: kiln.config = #kiln.config<tile = [128, 16], warps = 8, stages = 2, lowering = "wgmma">
func.func @paged_page48_prefill(%q: tensor<1x8x256x128xbf16>, %kc: tensor<64x48x8x128xbf16>, %vc: tensor<64x48x8x128xbf16>,
                                %t: tensor<1x32xi32>, %l: tensor<1xi32>) -> tensor<1x8x256x128xbf16> {
  %k = kiln.gather_pages %kc, %t, %l : tensor<64x48x8x128xbf16>, tensor<1x32xi32>, tensor<1xi32> -> tensor<1x8x1536x128xbf16>
  %v = kiln.gather_pages %vc, %t, %l : tensor<64x48x8x128xbf16>, tensor<1x32xi32>, tensor<1xi32> -> tensor<1x8x1536x128xbf16>
  %o = kiln.attention %q, %k, %v : tensor<1x8x256x128xbf16>, tensor<1x8x1536x128xbf16>, tensor<1x8x1536x128xbf16> -> tensor<1x8x256x128xbf16>
  return %o : tensor<1x8x256x128xbf16>
}
