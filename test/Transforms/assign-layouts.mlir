// RUN: kiln-opt %s -kiln-assign-layouts -split-input-file -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -kiln-tile -kiln-online-softmax -kiln-split-masked-tiles -kiln-assign-layouts -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=ATTN

// kiln-assign-layouts gives every kiln op of a GPU row kernel's loop (lowering "rows") its #kiln.row_layout:
// warps * 32 / rows threads per row, and the widest vector of at most 16 bytes that divides the row of every
// tensor the loop reads or writes. Values computed in the loop (f32 here) do not narrow it.

// bf16 rows of 4096 under 8 warps and one row per block: 256 threads per row, 8-element (16-byte) runs.
// CHECK-LABEL: func.func @bf16_wide_rows
// CHECK: kiln.cast %{{.*}} {kiln.layout = #kiln.row_layout<threads_per_row = 256, vector = 8>} : tensor<1x4096xbf16> to tensor<1x4096xf32>
// CHECK: kiln.reduce max %{{.*}} {kiln.layout = #kiln.row_layout<threads_per_row = 256, vector = 8>}
// CHECK: kiln.sub %{{.*}} {kiln.layout = #kiln.row_layout<threads_per_row = 256, vector = 8>}
// CHECK: kiln.cast %{{.*}} {kiln.layout = #kiln.row_layout<threads_per_row = 256, vector = 8>} : tensor<1x4096xf32> to tensor<1x4096xbf16>
func.func @bf16_wide_rows(%x: tensor<3x4096xbf16>) -> tensor<3x4096xbf16> {
  %init = tensor.empty() : tensor<3x4096xbf16>
  %r = scf.forall (%i) in (3) shared_outs(%o = %init) -> (tensor<3x4096xbf16>) {
    %t = tensor.extract_slice %x[%i, 0] [1, 4096] [1, 1] : tensor<3x4096xbf16> to tensor<1x4096xbf16>
    %f = kiln.cast %t : tensor<1x4096xbf16> to tensor<1x4096xf32>
    %m = kiln.reduce max %f axes [1] keep_dims : tensor<1x4096xf32> -> tensor<1x1xf32>
    %d = kiln.sub %f, %m : tensor<1x4096xf32>, tensor<1x1xf32> -> tensor<1x4096xf32>
    %c = kiln.cast %d : tensor<1x4096xf32> to tensor<1x4096xbf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %c into %o[%i, 0] [1, 4096] [1, 1] : tensor<1x4096xbf16> into tensor<3x4096xbf16>
    }
  } {kiln.config = #kiln.config<tile = [1], warps = 8, stages = 1, lowering = "rows">}
  return %r : tensor<3x4096xbf16>
}

// -----

// f32 rows of 100 columns (four rows of one warp each): 16 bytes hold 4 f32, and 4 divides 100.
// CHECK-LABEL: func.func @f32_narrow_rows
// CHECK: kiln.exp %{{.*}} {kiln.layout = #kiln.row_layout<threads_per_row = 32, vector = 4>}
func.func @f32_narrow_rows(%x: tensor<8x100xf32>) -> tensor<8x100xf32> {
  %init = tensor.empty() : tensor<8x100xf32>
  %r = scf.forall (%i) = (0) to (8) step (4) shared_outs(%o = %init) -> (tensor<8x100xf32>) {
    %t = tensor.extract_slice %x[%i, 0] [4, 100] [1, 1] : tensor<8x100xf32> to tensor<4x100xf32>
    %e = kiln.exp %t : tensor<4x100xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %e into %o[%i, 0] [4, 100] [1, 1] : tensor<4x100xf32> into tensor<8x100xf32>
    }
  } {kiln.config = #kiln.config<tile = [4], warps = 4, stages = 1, lowering = "rows">}
  return %r : tensor<8x100xf32>
}

// -----

// A row of 50 f16 columns and a [50] weight: 16 bytes would be 8 elements, but only 2 divides 50.
// CHECK-LABEL: func.func @odd_width
// CHECK: kiln.mul %{{.*}} {kiln.layout = #kiln.row_layout<threads_per_row = 64, vector = 2>}
func.func @odd_width(%x: tensor<2x50xf16>, %w: tensor<50xf16>) -> tensor<2x50xf16> {
  %init = tensor.empty() : tensor<2x50xf16>
  %r = scf.forall (%i) in (2) shared_outs(%o = %init) -> (tensor<2x50xf16>) {
    %t = tensor.extract_slice %x[%i, 0] [1, 50] [1, 1] : tensor<2x50xf16> to tensor<1x50xf16>
    %y = kiln.mul %t, %w : tensor<1x50xf16>, tensor<50xf16> -> tensor<1x50xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %y into %o[%i, 0] [1, 50] [1, 1] : tensor<1x50xf16> into tensor<2x50xf16>
    }
  } {kiln.config = #kiln.config<tile = [1], warps = 2, stages = 1, lowering = "rows">}
  return %r : tensor<2x50xf16>
}

// -----

// Loops of other lowerings are left alone.
// CHECK-LABEL: func.func @host_loop
// CHECK-NOT: kiln.layout
func.func @host_loop(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %init = tensor.empty() : tensor<8x16xf32>
  %r = scf.forall (%i) = (0) to (8) step (4) shared_outs(%o = %init) -> (tensor<8x16xf32>) {
    %t = tensor.extract_slice %x[%i, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
    %e = kiln.exp %t : tensor<4x16xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %e into %o[%i, 0] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<8x16xf32>
    }
  } {kiln.config = #kiln.config<tile = [4], warps = 1, stages = 1, lowering = "host">}
  return %r : tensor<8x16xf32>
}

// -----

func.func @no_tile(%x: tensor<4xf32>) -> tensor<4xf32> {
  %init = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{kiln-assign-layouts: the row kernel's loop holds no [rows, columns] tile}}
  %r = scf.forall (%i) in (1) shared_outs(%o = %init) -> (tensor<4xf32>) {
    %e = kiln.exp %x : tensor<4xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %e into %o[0] [4] [1] : tensor<4xf32> into tensor<4xf32>
    }
  } {kiln.config = #kiln.config<tile = [1], warps = 1, stages = 1, lowering = "rows">}
  return %r : tensor<4xf32>
}

// -----

// A GPU matmul's loop (lowering "mma_sync"): its warps as the squarest grid of warp tiles of whole 16 x 8
// fragments (8 warps over 128 x 128: 4 x 2, warp tiles of 32 x 64, rows first on ties), on the loop, the tile matmul and the
// accumulation and cast of its result.
// CHECK-LABEL: func.func @matmul
// CHECK: kiln.matmul {{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 2>}
// CHECK: kiln.add {{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 2>}
// CHECK: kiln.cast {{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 2>}
// CHECK: kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 2>, kiln.tiled_op = "kiln.matmul"
func.func @matmul(%a: tensor<256x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<256x256xbf16> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<256x256xbf16>
  %r = scf.forall (%i, %j) = (0, 0) to (256, 256) step (128, 128) shared_outs(%o = %init) -> (tensor<256x256xbf16>) {
    %e = tensor.empty() : tensor<128x128xf32>
    %acc0 = linalg.fill ins(%zero : f32) outs(%e : tensor<128x128xf32>) -> tensor<128x128xf32>
    %acc = scf.for %k = %c0 to %c64 step %c32 iter_args(%acc1 = %acc0) -> (tensor<128x128xf32>) {
      %ta = tensor.extract_slice %a[%i, %k] [128, 32] [1, 1] : tensor<256x64xbf16> to tensor<128x32xbf16>
      %tb = tensor.extract_slice %b[%k, %j] [32, 128] [1, 1] : tensor<64x256xbf16> to tensor<32x128xbf16>
      %p = kiln.matmul %ta, %tb : tensor<128x32xbf16>, tensor<32x128xbf16> -> tensor<128x128xf32>
      %s = kiln.add %acc1, %p : tensor<128x128xf32>, tensor<128x128xf32> -> tensor<128x128xf32>
      scf.yield %s : tensor<128x128xf32>
    }
    %c = kiln.cast %acc : tensor<128x128xf32> to tensor<128x128xbf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %c into %o[%i, %j] [128, 128] [1, 1] : tensor<128x128xbf16> into tensor<256x256xbf16>
    }
  } {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 8, stages = 3, lowering = "mma_sync">, kiln.tiled_op = "kiln.matmul", mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
  return %r : tensor<256x256xbf16>
}

// -----

// f32 operands run m16n8k8 TF32 fragments: the same warp grid (2 x 2 over 64 x 64), and BK a multiple of 8.
// CHECK-LABEL: func.func @matmul_f32
// CHECK: kiln.matmul {{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 2, warps_n = 2>}
// CHECK: kiln.layout = #kiln.mma_layout<warps_m = 2, warps_n = 2>, kiln.tiled_op = "kiln.matmul"
func.func @matmul_f32(%a: tensor<64x8xf32>, %b: tensor<8x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<64x64xf32>
  %r = scf.forall (%i, %j) = (0, 0) to (64, 64) step (64, 64) shared_outs(%o = %init) -> (tensor<64x64xf32>) {
    %e = tensor.empty() : tensor<64x64xf32>
    %acc0 = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
    %p = kiln.matmul %a, %b : tensor<64x8xf32>, tensor<8x64xf32> -> tensor<64x64xf32>
    %s = kiln.add %acc0, %p : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%i, %j] [64, 64] [1, 1] : tensor<64x64xf32> into tensor<64x64xf32>
    }
  } {kiln.config = #kiln.config<tile = [64, 64, 8], warps = 4, stages = 3, lowering = "mma_sync">, kiln.tiled_op = "kiln.matmul", mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
  return %r : tensor<64x64xf32>
}

// -----

// 16-bit operands need BK a multiple of 16 (m16n8k16 fragments).
func.func @matmul_bf16_shallow(%a: tensor<64x8xbf16>, %b: tensor<8x64xbf16>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<64x64xf32>
  %r = scf.forall (%i, %j) = (0, 0) to (64, 64) step (64, 64) shared_outs(%o = %init) -> (tensor<64x64xf32>) {
    %e = tensor.empty() : tensor<64x64xf32>
    %acc0 = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
    // expected-error @+1 {{does not fit the mma_sync kernel: need BM a multiple of 16 x warp rows, BN of 8 x warp columns, BK of 16 and stages >= 2}}
    %p = kiln.matmul %a, %b : tensor<64x8xbf16>, tensor<8x64xbf16> -> tensor<64x64xf32>
    %s = kiln.add %acc0, %p : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%i, %j] [64, 64] [1, 1] : tensor<64x64xf32> into tensor<64x64xf32>
    }
  } {kiln.config = #kiln.config<tile = [64, 64, 8], warps = 4, stages = 3, lowering = "mma_sync">, kiln.tiled_op = "kiln.matmul", mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
  return %r : tensor<64x64xf32>
}


//===----------------------------------------------------------------------===//
// Attention (lowering "mma_sync")
//===----------------------------------------------------------------------===//

// -----

// A tiled "mma_sync" attention (the ATTN run tiles it with kiln-tile, fuses its loops with kiln-online-softmax
// and splits them with kiln-split-masked-tiles first; the plain run leaves the untiled op alone): one column of
// BQ / 16 warps, each owning 16 query rows (64 x 64 tiles, 4 warps: warps_m = 4, warps_n = 1), on the loop and
// on every kiln op of both key loops (the Q K^T and P V matmuls, the scale, the rounding of P to bf16, the
// accumulation) and after them (the cast of the output tile); not on kiln.dim or the kiln.constant operands.
// CHECK-LABEL: func.func @attention_mma_sync
// CHECK-NOT: kiln.layout
// CHECK: kiln.attention
// CHECK-NOT: kiln.layout
// CHECK: return
// ATTN-LABEL: func.func @attention_mma_sync
// ATTN: scf.forall
// ATTN: kiln.dim %{{.*}}[2] : tensor<1x2x100x64xbf16>
// ATTN-NEXT: kiln.dim %{{.*}}[2] : tensor<1x2x100x64xbf16>
// ATTN: scf.for
// ATTN: kiln.matmul %{{.*}}, %{{.*}} transpose_rhs {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>} : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
// ATTN: kiln.constant dense<{{.*}}> : tensor<f32>
// ATTN-NOT: kiln.layout
// ATTN: kiln.mul %{{.*}}, %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>} : tensor<64x64xf32>, tensor<f32> -> tensor<64x64xf32>
// ATTN: kiln.cast %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>} : tensor<64x64xf32> to tensor<64x64xbf16>
// ATTN-NEXT: kiln.matmul %{{.*}}, %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>} : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
// ATTN-NEXT: kiln.add %{{.*}}, %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>} : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
// ATTN: scf.for
// ATTN: kiln.matmul %{{.*}}, %{{.*}} transpose_rhs {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>}
// ATTN: kiln.mul %{{.*}}, %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>}
// ATTN: attrs = {kiln.position_mask}
// ATTN: kiln.cast %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>} : tensor<64x64xf32> to tensor<64x64xbf16>
// ATTN-NEXT: kiln.matmul %{{.*}}, %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>}
// ATTN-NEXT: kiln.add %{{.*}}, %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>}
// ATTN: kiln.cast %{{.*}} {kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>} : tensor<64x64xf32> to tensor<64x64xbf16>
// ATTN: } {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">, kiln.layout = #kiln.mma_layout<warps_m = 4, warps_n = 1>, kiln.tiled_op = "kiln.attention", mapping = [#gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
// ATTN: return
func.func @attention_mma_sync(%q: tensor<1x2x100x64xbf16>, %k: tensor<1x2x100x64xbf16>, %v: tensor<1x2x100x64xbf16>) -> tensor<1x2x100x64xbf16> {
  %0 = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16> -> tensor<1x2x100x64xbf16>
  return %0 : tensor<1x2x100x64xbf16>
}

// -----

// A tiled attention whose config does not give one warp per 16 query rows (2 warps for BQ = 64).
func.func @attention_warps_not_bq_over_16(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x128xf32> {
  %init = tensor.empty() : tensor<1x2x128x128xf32>
  // expected-error @+1 {{#kiln.config<tile = [64, 64], warps = 2, stages = 2, lowering = "mma_sync"> does not fit the mma_sync attention: BQ must be a multiple of 16 and BK a multiple of 16, with one warp per 16 query rows}}
  %r = scf.forall (%b, %h, %i) = (0, 0, 0) to (1, 2, 128) step (1, 1, 64) shared_outs(%o = %init) -> (tensor<1x2x128x128xf32>) {
    %tq = tensor.extract_slice %q[%b, %h, %i, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<1x2x128x64xbf16> to tensor<64x64xbf16>
    %tk = tensor.extract_slice %k[%b, %h, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : tensor<1x2x128x64xbf16> to tensor<128x64xbf16>
    %s = kiln.matmul %tq, %tk transpose_rhs : tensor<64x64xbf16>, tensor<128x64xbf16> -> tensor<64x128xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%b, %h, %i, 0] [1, 1, 64, 128] [1, 1, 1, 1] : tensor<64x128xf32> into tensor<1x2x128x128xf32>
    }
  } {kiln.config = #kiln.config<tile = [64, 64], warps = 2, stages = 2, lowering = "mma_sync">, kiln.tiled_op = "kiln.attention", mapping = [#gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
  return %r : tensor<1x2x128x128xf32>
}

// -----

// Nor one whose key tile is not a whole number of k16 steps (BK = 40).
func.func @attention_key_tile_not_16(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x128xf32> {
  %init = tensor.empty() : tensor<1x2x128x128xf32>
  // expected-error @+1 {{does not fit the mma_sync attention: BQ must be a multiple of 16 and BK a multiple of 16, with one warp per 16 query rows}}
  %r = scf.forall (%b, %h, %i) = (0, 0, 0) to (1, 2, 128) step (1, 1, 64) shared_outs(%o = %init) -> (tensor<1x2x128x128xf32>) {
    %tq = tensor.extract_slice %q[%b, %h, %i, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<1x2x128x64xbf16> to tensor<64x64xbf16>
    %tk = tensor.extract_slice %k[%b, %h, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : tensor<1x2x128x64xbf16> to tensor<128x64xbf16>
    %s = kiln.matmul %tq, %tk transpose_rhs : tensor<64x64xbf16>, tensor<128x64xbf16> -> tensor<64x128xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%b, %h, %i, 0] [1, 1, 64, 128] [1, 1, 1, 1] : tensor<64x128xf32> into tensor<1x2x128x128xf32>
    }
  } {kiln.config = #kiln.config<tile = [64, 40], warps = 4, stages = 2, lowering = "mma_sync">, kiln.tiled_op = "kiln.attention", mapping = [#gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
  return %r : tensor<1x2x128x128xf32>
}
