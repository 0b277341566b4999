// RUN: kiln-opt %s -kiln-tile -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-tile -scf-for-loop-canonicalization -canonicalize -split-input-file | FileCheck %s --check-prefix=FOLD

// kiln-tile on ops that carry an explicit #kiln.config, so that these tests do not depend on the defaults of
// kiln-select-config. The FOLD run checks that once the loop bounds are known (scf-for-loop-canonicalization),
// the tile sizes fold to constants wherever the tile divides the dimension, and a tensor.pad is left only on
// the dimensions that do not divide.

//===----------------------------------------------------------------------===//
// kiln.matmul
//===----------------------------------------------------------------------===//

// 128x256 * 256x128 with 64x64x32 tiles: a 2x2 forall, an 8-step loop over K accumulating tile-sized matmuls
// in f32, and each tile stored at its (i, j). Whether the tiles end up static is checked by the FOLD run.
// CHECK-LABEL: func.func @matmul_tiles_divide
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<128x256xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<256x128xf32>)
// CHECK: %[[INIT:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<128x128xf32>
// CHECK: %[[RESULT:[a-zA-Z0-9_]+]] = scf.forall (%[[I:[a-zA-Z0-9_]+]], %[[J:[a-zA-Z0-9_]+]]) = (0, 0) to (128, 128) step (64, 64) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %[[INIT]]) -> (tensor<128x128xf32>) {
// CHECK-DAG: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ACC_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C256:[a-zA-Z0-9_]+]] = arith.constant 256 : index
// CHECK-DAG: %[[C32:[a-zA-Z0-9_]+]] = arith.constant 32 : index
// CHECK: %[[ACC:[a-zA-Z0-9_]+]] = scf.for %[[K:[a-zA-Z0-9_]+]] = %[[C0]] to %[[C256]] step %[[C32]] iter_args(%[[PARTIAL:[a-zA-Z0-9_]+]] = %[[ACC_INIT]]) -> (tensor<64x64xf32>) {
// CHECK: tensor.extract_slice %[[A]][%[[I]], %[[K]]]
// CHECK: tensor.extract_slice %[[B]][%[[K]], %[[J]]]
// CHECK: %[[PRODUCT:[a-zA-Z0-9_]+]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = kiln.add %[[PARTIAL]], %[[PRODUCT]] : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK: scf.yield %[[SUM]] : tensor<64x64xf32>
// CHECK: }
// CHECK: tensor.extract_slice %[[ACC]][0, 0]
// CHECK: scf.forall.in_parallel {
// CHECK: tensor.parallel_insert_slice %{{.*}} into %[[OUT]][%[[I]], %[[J]]] {{.*}} into tensor<128x128xf32>
// CHECK: return %[[RESULT]] : tensor<128x128xf32>
// CHECK-NOT: kiln.matmul {{.*}}tensor<128x256xf32>

// Every tile is full: no padding and no clamping survive.
// FOLD-LABEL: func.func @matmul_tiles_divide
// FOLD-NOT: affine.min
// FOLD-NOT: tensor.pad
// FOLD: tensor.extract_slice %{{.*}}[%{{.*}}, %{{.*}}] [64, 32] [1, 1] : tensor<128x256xf32> to tensor<64x32xf32>
// FOLD: tensor.extract_slice %{{.*}}[%{{.*}}, %{{.*}}] [32, 64] [1, 1] : tensor<256x128xf32> to tensor<32x64xf32>
// FOLD: kiln.matmul %{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
// FOLD-NOT: tensor.pad
// FOLD: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%{{.*}}, %{{.*}}] [64, 64] [1, 1] : tensor<64x64xf32> into tensor<128x128xf32>
// FOLD: return
func.func @matmul_tiles_divide(%a: tensor<128x256xf32>, %b: tensor<256x128xf32>) -> tensor<128x128xf32> {
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 1, stages = 1, lowering = "host">} : tensor<128x256xf32>, tensor<256x128xf32> -> tensor<128x128xf32>
  return %0 : tensor<128x128xf32>
}

// -----

// 77x512 * 512x100 with 64x64x32 tiles: M and N run past the edge (rows and columns clamped with affine.min),
// K divides. Edge tiles are loaded padded with zeros to the static tile shape and only their valid part is
// stored.
// CHECK-DAG: #[[$ROWS_OF_77:.+]] = affine_map<(d0) -> (64, -d0 + 77)>
// CHECK-DAG: #[[$COLS_OF_100:.+]] = affine_map<(d0) -> (64, -d0 + 100)>
// CHECK-LABEL: func.func @matmul_tiles_ragged
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<77x512xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<512x100xf32>)
// CHECK: %[[RESULT:[a-zA-Z0-9_]+]] = scf.forall (%[[I:[a-zA-Z0-9_]+]], %[[J:[a-zA-Z0-9_]+]]) = (0, 0) to (77, 100) step (64, 64) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<77x100xf32>) {
// CHECK-DAG: %[[ROWS:[a-zA-Z0-9_]+]] = affine.min #[[$ROWS_OF_77]](%[[I]])
// CHECK-DAG: %[[COLS:[a-zA-Z0-9_]+]] = affine.min #[[$COLS_OF_100]](%[[J]])
// CHECK: %[[ACC:[a-zA-Z0-9_]+]] = scf.for %[[K:[a-zA-Z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[PARTIAL:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<64x64xf32>) {
// CHECK: %[[A_SLICE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[A]][%[[I]], %[[K]]] [%[[ROWS]], {{.*}}] [1, 1]
// CHECK: %[[A_TILE:[a-zA-Z0-9_]+]] = tensor.pad %[[A_SLICE]] low[0, 0] high[{{.*}}]
// CHECK: tensor.yield %{{.*}} : f32
// CHECK: } : tensor<?x{{.*}}xf32> to tensor<64x32xf32>
// CHECK: %[[B_SLICE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[B]][%[[K]], %[[J]]] [{{.*}}, %[[COLS]]] [1, 1]
// CHECK: %[[B_TILE:[a-zA-Z0-9_]+]] = tensor.pad %[[B_SLICE]] low[0, 0] high[{{.*}}]
// CHECK: } : tensor<{{.*}}x?xf32> to tensor<32x64xf32>
// CHECK: %[[PRODUCT:[a-zA-Z0-9_]+]] = kiln.matmul %[[A_TILE]], %[[B_TILE]] : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = kiln.add %[[PARTIAL]], %[[PRODUCT]]
// CHECK: scf.yield %[[SUM]]
// CHECK: %[[VALID:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[ACC]][0, 0] [%[[ROWS]], %[[COLS]]] [1, 1] : tensor<64x64xf32> to tensor<?x?xf32>
// CHECK: tensor.parallel_insert_slice %[[VALID]] into %[[OUT]][%[[I]], %[[J]]] [%[[ROWS]], %[[COLS]]] [1, 1] : tensor<?x?xf32> into tensor<77x100xf32>
// CHECK: return %[[RESULT]]

// Only the ragged dimensions keep a clamp and a pad: rows of the lhs tile, columns of the rhs tile.
// FOLD-LABEL: func.func @matmul_tiles_ragged
// FOLD-DAG: %[[ROWS:[a-zA-Z0-9_]+]] = affine.min
// FOLD-DAG: %[[COLS:[a-zA-Z0-9_]+]] = affine.min
// FOLD: scf.for
// FOLD-NOT: affine.min
// FOLD: tensor.extract_slice %{{.*}} [%[[ROWS]], 32] [1, 1] : tensor<77x512xf32> to tensor<?x32xf32>
// FOLD: tensor.pad
// FOLD: } : tensor<?x32xf32> to tensor<64x32xf32>
// FOLD: tensor.extract_slice %{{.*}} [32, %[[COLS]]] [1, 1] : tensor<512x100xf32> to tensor<32x?xf32>
// FOLD: tensor.pad
// FOLD: } : tensor<32x?xf32> to tensor<32x64xf32>
// FOLD: kiln.matmul
func.func @matmul_tiles_ragged(%a: tensor<77x512xf32>, %b: tensor<512x100xf32>) -> tensor<77x100xf32> {
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 1, stages = 1, lowering = "host">} : tensor<77x512xf32>, tensor<512x100xf32> -> tensor<77x100xf32>
  return %0 : tensor<77x100xf32>
}

// -----

// Batch dimensions get a step-1 forall dimension each. An operand that broadcasts along a batch dimension (size
// 1 against 2 or 3) always reads batch 0 there; an operand without batch dimensions reads no batch index.
// CHECK-LABEL: func.func @matmul_batched_broadcast
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<2x1x16x8xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<1x3x8x16xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>)
// CHECK: scf.forall (%[[B0:[a-zA-Z0-9_]+]], %[[B1:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]], %[[J:[a-zA-Z0-9_]+]]) = (0, 0, 0, 0) to (2, 3, 16, 16) step (1, 1, 16, 16) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<2x3x16x16xf32>) {
// CHECK: scf.for %[[K:[a-z0-9]+]] =
// CHECK: tensor.extract_slice %[[A]][%[[B0]], 0, %[[I]], %[[K]]] [1, 1, {{.*}}] [1, 1, 1, 1] : tensor<2x1x16x8xf32> to tensor<{{.*}}>
// CHECK: tensor.extract_slice %[[B]][0, %[[B1]], %[[K]], %[[J]]] [1, 1, {{.*}}] [1, 1, 1, 1] : tensor<1x3x8x16xf32> to tensor<{{.*}}>
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK: tensor.parallel_insert_slice %{{.*}} into %[[OUT]][%[[B0]], %[[B1]], %[[I]], %[[J]]] [1, 1, {{.*}}] [1, 1, 1, 1] : tensor<{{.*}}> into tensor<2x3x16x16xf32>
// CHECK: scf.forall (%[[WB0:[a-zA-Z0-9_]+]], %[[WB1:[a-zA-Z0-9_]+]], %[[WI:[a-zA-Z0-9_]+]], %[[WJ:[a-zA-Z0-9_]+]]) = (0, 0, 0, 0) to (2, 1, 16, 16) step (1, 1, 16, 16)
// CHECK: scf.for %[[WK:[a-z0-9]+]] =
// CHECK: tensor.extract_slice %[[A]][%[[WB0]], %[[WB1]], %[[WI]], %[[WK]]] [1, 1, {{.*}}] [1, 1, 1, 1] : tensor<2x1x16x8xf32> to tensor<{{.*}}>
// CHECK: tensor.extract_slice %[[W]][%[[WK]], %[[WJ]]] [{{.*}}] [1, 1] : tensor<8x16xf32> to tensor<{{.*}}>
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK: return
func.func @matmul_batched_broadcast(%a: tensor<2x1x16x8xf32>, %b: tensor<1x3x8x16xf32>, %w: tensor<8x16xf32>) -> (tensor<2x3x16x16xf32>, tensor<2x1x16x16xf32>) {
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [16, 16, 8], warps = 1, stages = 1, lowering = "host">} : tensor<2x1x16x8xf32>, tensor<1x3x8x16xf32> -> tensor<2x3x16x16xf32>
  %1 = kiln.matmul %a, %w {kiln.config = #kiln.config<tile = [16, 16, 8], warps = 1, stages = 1, lowering = "host">} : tensor<2x1x16x8xf32>, tensor<8x16xf32> -> tensor<2x1x16x16xf32>
  return %0, %1 : tensor<2x3x16x16xf32>, tensor<2x1x16x16xf32>
}

// -----

// Transposed operands (every dimension ragged) are tiled in their stored layout: lhs [K, M] tiles are [BK, BM], rhs [N, K] tiles are
// [BN, BK], and the tile-sized matmul keeps both transpose flags.
// CHECK-LABEL: func.func @matmul_transposed_operands
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<500x100xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<90x500xf32>)
// CHECK: scf.forall (%[[I:[a-zA-Z0-9_]+]], %[[J:[a-zA-Z0-9_]+]]) = (0, 0) to (100, 90) step (64, 32)
// CHECK-DAG: %[[ROWS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[I]])
// CHECK-DAG: %[[COLS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[J]])
// CHECK: scf.for %[[K:[a-zA-Z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<64x32xf32>)
// CHECK: %[[DEPTH:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[K]])
// CHECK: tensor.extract_slice %[[A]][%[[K]], %[[I]]] [%[[DEPTH]], %[[ROWS]]] [1, 1]
// CHECK: } : tensor<?x?xf32> to tensor<32x64xf32>
// CHECK: tensor.extract_slice %[[B]][%[[J]], %[[K]]] [%[[COLS]], %[[DEPTH]]] [1, 1]
// CHECK: } : tensor<?x?xf32> to tensor<32x32xf32>
// CHECK: kiln.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<32x64xf32>, tensor<32x32xf32> -> tensor<64x32xf32>
func.func @matmul_transposed_operands(%a: tensor<500x100xf32>, %b: tensor<90x500xf32>) -> tensor<100x90xf32> {
  %0 = kiln.matmul %a, %b transpose_lhs transpose_rhs {kiln.config = #kiln.config<tile = [64, 32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<500x100xf32>, tensor<90x500xf32> -> tensor<100x90xf32>
  return %0 : tensor<100x90xf32>
}

// -----

// bf16 operands are padded with a bf16 zero and multiplied into an f32 accumulator, which is cast back to bf16
// once, after the K loop.
// CHECK-LABEL: func.func @matmul_bf16
// CHECK: scf.forall (%[[I:[a-zA-Z0-9_]+]], %[[J:[a-zA-Z0-9_]+]]) = (0, 0) to (50, 70) step (32, 32) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<50x70xbf16>)
// CHECK: %[[ACC_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<32x32xf32>)
// CHECK: %[[ACC:[a-zA-Z0-9_]+]] = scf.for {{.*}} iter_args(%[[PARTIAL:[a-zA-Z0-9_]+]] = %[[ACC_INIT]]) -> (tensor<32x32xf32>)
// CHECK-NOT: kiln.cast
// CHECK: %[[PAD_VALUE:[a-zA-Z0-9_]+]] = arith.constant 0.000000e+00 : bf16
// CHECK: tensor.yield %[[PAD_VALUE]] : bf16
// CHECK: } : tensor<?x?xbf16> to tensor<32x32xbf16>
// CHECK: %[[PRODUCT:[a-zA-Z0-9_]+]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<32x32xbf16>, tensor<32x32xbf16> -> tensor<32x32xf32>
// CHECK: kiln.add %[[PARTIAL]], %[[PRODUCT]] : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
// CHECK: }
// CHECK-NOT: kiln.cast
// CHECK: %[[NARROW:[a-zA-Z0-9_]+]] = kiln.cast %[[ACC]] : tensor<32x32xf32> to tensor<32x32xbf16>
// CHECK: %[[VALID:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[NARROW]][0, 0]
// CHECK: tensor.parallel_insert_slice %[[VALID]] into %[[OUT]]{{.*}} : tensor<?x?xbf16> into tensor<50x70xbf16>
func.func @matmul_bf16(%a: tensor<50x40xbf16>, %b: tensor<40x70xbf16>) -> tensor<50x70xbf16> {
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [32, 32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<50x40xbf16>, tensor<40x70xbf16> -> tensor<50x70xbf16>
  return %0 : tensor<50x70xbf16>
}

//===----------------------------------------------------------------------===//
// kiln.attention
//===----------------------------------------------------------------------===//

// -----

// 100 queries and keys, 64x32 tiles. The sequence lengths are host constants (Sq first, then Sk). Loop 1 builds
// the [64, 128] row of scaled scores (128 = 100 rounded up to the key tile) from -inf; kiln.softmax normalises
// the row; loop 2 walks the same key tiles and accumulates P V. Only the tile that runs past key 100 is masked:
// maskFrom, the first key tile that needs the mask, is computed once before the key loops as an affine.min
// (here of Sk - (BK - 1) = 69 alone), and each tile branches on `keyStart >= maskFrom`; no tile-end arithmetic
// is left in the loop. The mask compares the key against Sk. Without the causal diagonal only the last key tile,
// the partial one, can be masked: the branch carries `kiln.one_masked_tile`, which tells kiln-split-masked-tiles
// to run that tile once after the loop rather than in a second loop.
// CHECK-DAG: #[[$MASK_FROM:.+]] = affine_map<() -> (69)>
// CHECK-DAG: #[[$IDENTITY:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x2x100x64xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x100x64xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x100x64xf32>)
// CHECK: %[[RESULT:[a-zA-Z0-9_]+]] = scf.forall (%[[B:[a-zA-Z0-9_]+]], %[[H:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]]) = (0, 0, 0) to (1, 2, 100) step (1, 1, 64) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<1x2x100x64xf32>) {
// CHECK: %[[SEQ_Q:[a-zA-Z0-9_]+]] = arith.constant 100 : index
// CHECK-NEXT: %[[SEQ_K:[a-zA-Z0-9_]+]] = arith.constant 100 : index
// CHECK: %[[QUERY_ROWS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[I]])
// CHECK: %[[Q_SLICE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[Q]][%[[B]], %[[H]], %[[I]], 0] [1, 1, %[[QUERY_ROWS]], 64] [1, 1, 1, 1] : tensor<1x2x100x64xf32> to tensor<?x64xf32>
// CHECK: %[[Q_TILE:[a-zA-Z0-9_]+]] = tensor.pad %[[Q_SLICE]]
// CHECK: } : tensor<?x64xf32> to tensor<64x64xf32>
// CHECK: %[[MASK_FROM:[a-zA-Z0-9_]+]] = affine.min #[[$MASK_FROM]]()
// CHECK-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C32:[a-zA-Z0-9_]+]] = arith.constant 32 : index
// CHECK-DAG: %[[NEG_INF:[a-zA-Z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK: %[[ROW_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{.*}} : tensor<64x128xf32>) -> tensor<64x128xf32>
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = scf.for %[[KEY:[a-zA-Z0-9_]+]] = %[[C0]] to %[[SEQ_K]] step %[[C32]] iter_args(%[[PARTIAL_ROW:[a-zA-Z0-9_]+]] = %[[ROW_INIT]]) -> (tensor<64x128xf32>) {
// CHECK: %[[KEY_COLS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[KEY]])
// CHECK: tensor.extract_slice %[[K]][%[[B]], %{{.*}}, %[[KEY]], 0] [1, 1, %[[KEY_COLS]], 64] [1, 1, 1, 1]
// CHECK: %[[K_TILE:[a-zA-Z0-9_]+]] = tensor.pad
// CHECK: } : tensor<?x64xf32> to tensor<32x64xf32>
// CHECK: %[[QK:[a-zA-Z0-9_]+]] = kiln.matmul %[[Q_TILE]], %[[K_TILE]] transpose_rhs : tensor<64x64xf32>, tensor<32x64xf32> -> tensor<64x32xf32>
// CHECK: %[[SCALE:[a-zA-Z0-9_]+]] = kiln.constant dense<1.250000e-01> : tensor<f32>
// CHECK: %[[SCORES:[a-zA-Z0-9_]+]] = kiln.mul %[[QK]], %[[SCALE]] : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
// CHECK-NOT: affine.apply
// CHECK: %[[NEEDS_MASK:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK-NEXT: %[[MASKED:[a-zA-Z0-9_]+]] = scf.if %[[NEEDS_MASK]] -> (tensor<64x32xf32>) {
// CHECK-NOT: arith.subi
// CHECK: %[[POSITION_MASKED:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$IDENTITY]], #[[$IDENTITY]]], iterator_types = ["parallel", "parallel"]} ins(%[[SCORES]] : tensor<64x32xf32>) outs(%{{.*}} : tensor<64x32xf32>) attrs = {kiln.position_mask} {
// CHECK: %[[COL_IN_TILE:[a-zA-Z0-9_]+]] = linalg.index 1 : index
// CHECK: %[[COL:[a-zA-Z0-9_]+]] = arith.addi %[[KEY]], %[[COL_IN_TILE]] : index
// CHECK: %[[OUTSIDE:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[COL]], %[[SEQ_K]] : index
// CHECK-NOT: arith.ori
// CHECK: arith.select %[[OUTSIDE]], %{{.*}}, %{{.*}} : f32
// CHECK: scf.yield %[[POSITION_MASKED]] : tensor<64x32xf32>
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[SCORES]] : tensor<64x32xf32>
// CHECK-NEXT: } {kiln.one_masked_tile}
// CHECK: %[[NEW_ROW:[a-zA-Z0-9_]+]] = tensor.insert_slice %[[MASKED]] into %[[PARTIAL_ROW]][0, %[[KEY]]] [64, 32] [1, 1] : tensor<64x32xf32> into tensor<64x128xf32>
// CHECK: scf.yield %[[NEW_ROW]] : tensor<64x128xf32>
// CHECK: }
// CHECK: %[[PROBS:[a-zA-Z0-9_]+]] = kiln.softmax %[[ROW]] axis 1 zero_empty_rows : tensor<64x128xf32>
// CHECK: %[[ACC_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK: %[[ACC:[a-zA-Z0-9_]+]] = scf.for %[[KEY2:[a-zA-Z0-9_]+]] = %[[C0]] to %[[SEQ_K]] step %[[C32]] iter_args(%[[PARTIAL:[a-zA-Z0-9_]+]] = %[[ACC_INIT]]) -> (tensor<64x64xf32>) {
// CHECK: %[[P_TILE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[PROBS]][0, %[[KEY2]]] [64, 32] [1, 1] : tensor<64x128xf32> to tensor<64x32xf32>
// CHECK: tensor.extract_slice %[[V]][%[[B]], %{{.*}}, %[[KEY2]], 0]
// CHECK: %[[V_TILE:[a-zA-Z0-9_]+]] = tensor.pad
// CHECK: } : tensor<?x64xf32> to tensor<32x64xf32>
// CHECK-NOT: kiln.cast
// CHECK: %[[PV:[a-zA-Z0-9_]+]] = kiln.matmul %[[P_TILE]], %[[V_TILE]] : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = kiln.add %[[PARTIAL]], %[[PV]]
// CHECK: scf.yield %[[SUM]]
// CHECK: }
// CHECK: %[[VALID:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[ACC]][0, 0] [%[[QUERY_ROWS]], 64] [1, 1] : tensor<64x64xf32> to tensor<?x64xf32>
// CHECK: tensor.parallel_insert_slice %[[VALID]] into %[[OUT]][%[[B]], %[[H]], %[[I]], 0] [1, 1, %[[QUERY_ROWS]], 64] [1, 1, 1, 1] : tensor<?x64xf32> into tensor<1x2x100x64xf32>
// CHECK: return %[[RESULT]]
func.func @attention(%q: tensor<1x2x100x64xf32>, %k: tensor<1x2x100x64xf32>, %v: tensor<1x2x100x64xf32>) -> tensor<1x2x100x64xf32> {
  %0 = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [64, 32], warps = 1, stages = 1, lowering = "host">, scale = 0.125 : f32} : tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32> -> tensor<1x2x100x64xf32>
  return %0 : tensor<1x2x100x64xf32>
}

// -----

// Causal with 96 queries against 128 keys (diagonal offset Sk - Sq = 32), 32x32 tiles. Both key loops stop at
// the last tile the query tile's last row can see, min(Sk, i + BQ + Sk - Sq) = min(128, i + 64). Before the
// loops, maskFrom is the first key tile that needs the mask: one running past the keys (j >= Sk - (BK - 1) = 97)
// or whose last key lies beyond the first row's diagonal (j + BK - 1 > i + Sk - Sq, i.e. j >= i + Sk - Sq -
// (BK - 2) = i + 2); each tile branches on `keyStart >= maskFrom` alone. In the masked branch the diagonal is
// `Sk - Sq` (arith.subi of the two lengths) and the mask hides keys >= Sk or > row + diagonal. The default scale
// is 1/sqrt(32). Several key tiles can cross the diagonal, so the branch has no `kiln.one_masked_tile`.
// CHECK-DAG: #[[$KEY_END:.+]] = affine_map<(d0) -> (128, d0 + 64)>
// CHECK-DAG: #[[$MASK_FROM:.+]] = affine_map<(d0) -> (97, d0 + 2)>
// CHECK-LABEL: func.func @attention_causal
// CHECK: scf.forall (%[[B:[a-zA-Z0-9_]+]], %[[H:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]]) = (0, 0, 0) to (1, 1, 96) step (1, 1, 32)
// CHECK: %[[SEQ_Q:[a-zA-Z0-9_]+]] = arith.constant 96 : index
// CHECK-NEXT: %[[SEQ_K:[a-zA-Z0-9_]+]] = arith.constant 128 : index
// CHECK: %[[KEY_END:[a-zA-Z0-9_]+]] = affine.min #[[$KEY_END]](%[[I]])
// CHECK-NEXT: %[[MASK_FROM:[a-zA-Z0-9_]+]] = affine.min #[[$MASK_FROM]](%[[I]])
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = scf.for %[[KEY:[a-zA-Z0-9_]+]] = %{{.*}} to %[[KEY_END]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<32x128xf32>) {
// CHECK: kiln.constant dense<0.176776692> : tensor<f32>
// CHECK-NOT: affine.apply
// CHECK-NOT: arith.ori
// CHECK: %[[NEEDS_MASK:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK-NEXT: scf.if %[[NEEDS_MASK]] -> (tensor<32x32xf32>) {
// CHECK-NEXT: %[[DIAGONAL:[a-zA-Z0-9_]+]] = arith.subi %[[SEQ_K]], %[[SEQ_Q]] : index
// CHECK: linalg.generic {{.*}} attrs = {kiln.position_mask} {
// CHECK: %[[ROW_IN_TILE:[a-zA-Z0-9_]+]] = linalg.index 0 : index
// CHECK: %[[QUERY:[a-zA-Z0-9_]+]] = arith.addi %[[I]], %[[ROW_IN_TILE]] : index
// CHECK: %[[COL_IN_TILE:[a-zA-Z0-9_]+]] = linalg.index 1 : index
// CHECK: %[[COL:[a-zA-Z0-9_]+]] = arith.addi %[[KEY]], %[[COL_IN_TILE]] : index
// CHECK: %[[OUTSIDE:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[COL]], %[[SEQ_K]] : index
// CHECK: %[[LIMIT:[a-zA-Z0-9_]+]] = arith.addi %[[QUERY]], %[[DIAGONAL]] : index
// CHECK: %[[FUTURE:[a-zA-Z0-9_]+]] = arith.cmpi sgt, %[[COL]], %[[LIMIT]] : index
// CHECK: %[[MASKED:[a-zA-Z0-9_]+]] = arith.ori %[[OUTSIDE]], %[[FUTURE]] : i1
// CHECK: arith.select %[[MASKED]], %{{.*}}, %{{.*}} : f32
// CHECK: } else {
// CHECK-NEXT: scf.yield %{{.*}} : tensor<32x32xf32>
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NOT: kiln.one_masked_tile
// CHECK: kiln.softmax %[[ROW]] axis 1 zero_empty_rows : tensor<32x128xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[KEY_END]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<32x32xf32>) {
// CHECK: kiln.matmul
func.func @attention_causal(%q: tensor<1x1x96x32xf32>, %k: tensor<1x1x128x32xf32>, %v: tensor<1x1x128x32xf32>) -> tensor<1x1x96x32xf32> {
  %0 = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x96x32xf32>, tensor<1x1x128x32xf32>, tensor<1x1x128x32xf32> -> tensor<1x1x96x32xf32>
  return %0 : tensor<1x1x96x32xf32>
}

// -----

// Causal with one query row (a decode step: 1 query against 100 keys, 16x32 tiles). The row is the last one, so
// it sees every key: maskFrom = min(Sk - (BK - 1), i + Sk - Sq - (BK - 2)) = min(69, i + 69) is 69 at i = 0, and
// only the last, partial key tile can be masked, as without causal: the branch carries `kiln.one_masked_tile`.
// The mask keeps its causal comparison (sgt), which hides nothing of the one real row.
// CHECK-DAG: #[[$ONE_ROW_MASK_FROM:.+]] = affine_map<(d0) -> (69, d0 + 69)>
// CHECK-LABEL: func.func @attention_causal_one_row
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %[[I:[a-zA-Z0-9_]+]]) = (0, 0, 0) to (1, 1, 1) step (1, 1, 16)
// CHECK: %[[MASK_FROM:[a-zA-Z0-9_]+]] = affine.min #[[$ONE_ROW_MASK_FROM]](%[[I]])
// CHECK: scf.for %[[KEY:[a-zA-Z0-9_]+]] = {{.*}} -> (tensor<16x128xf32>) {
// CHECK: %[[NEEDS_MASK:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK-NEXT: scf.if %[[NEEDS_MASK]] -> (tensor<16x32xf32>) {
// CHECK: linalg.generic {{.*}} attrs = {kiln.position_mask} {
// CHECK: arith.cmpi sge
// CHECK: arith.cmpi sgt
// CHECK: } else {
// CHECK-NEXT: scf.yield %{{.*}} : tensor<16x32xf32>
// CHECK-NEXT: } {kiln.one_masked_tile}
// CHECK: kiln.softmax %{{.*}} axis 1 zero_empty_rows : tensor<16x128xf32>
func.func @attention_causal_one_row(%q: tensor<1x1x1x32xf32>, %k: tensor<1x1x100x32xf32>, %v: tensor<1x1x100x32xf32>) -> tensor<1x1x1x32xf32> {
  %0 = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [16, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x1x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x1x32xf32>
  return %0 : tensor<1x1x1x32xf32>
}

// -----

// Grouped-query attention, 8 q heads over 2 k/v heads: q head h reads k/v head h floordiv 4, in both key loops.
// CHECK-DAG: #[[$GROUP:.+]] = affine_map<(d0) -> (d0 floordiv 4)>
// CHECK-LABEL: func.func @attention_gqa
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x8x64x32xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x64x32xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x64x32xf32>)
// CHECK: scf.forall (%[[B:[a-zA-Z0-9_]+]], %[[H:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]]) = (0, 0, 0) to (1, 8, 64) step (1, 1, 32)
// CHECK: %[[KV_HEAD:[a-zA-Z0-9_]+]] = affine.apply #[[$GROUP]](%[[H]])
// CHECK: tensor.extract_slice %[[Q]][%[[B]], %[[H]], %[[I]], 0]
// CHECK: scf.for %[[KEY:[a-z0-9]+]] =
// CHECK: tensor.extract_slice %[[K]][%[[B]], %[[KV_HEAD]], %[[KEY]], 0] [1, 1, {{.*}}, 32] [1, 1, 1, 1] : tensor<1x2x64x32xf32> to tensor<{{.*}}x32xf32>
// CHECK: kiln.softmax
// CHECK: scf.for %[[KEY2:[a-z0-9]+]] =
// CHECK: tensor.extract_slice %[[V]][%[[B]], %[[KV_HEAD]], %[[KEY2]], 0] [1, 1, {{.*}}, 32] [1, 1, 1, 1] : tensor<1x2x64x32xf32> to tensor<{{.*}}x32xf32>
func.func @attention_gqa(%q: tensor<1x8x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x32xf32>) -> tensor<1x8x64x32xf32> {
  %0 = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32> -> tensor<1x8x64x32xf32>
  return %0 : tensor<1x8x64x32xf32>
}

// -----

// A bf16 mask broadcast over batch and heads: its [query, key] tile is read at (0, 0, i, j), padded with zeros,
// widened to f32 and added to the scaled scores before the position masking, which the tiles from maskFrom =
// 50 - 31 = 19 on take (`keyStart >= maskFrom`). With lse, the forall has a second shared output, and the
// logsumexp of the same row (before the softmax's consumer) gives its [BQ] tile.
// CHECK-DAG: #[[$MASK_FROM:.+]] = affine_map<() -> (19)>
// CHECK-LABEL: func.func @attention_mask_lse
// CHECK-SAME: %[[MASK:[a-z0-9]+]]: tensor<1x1x50x50xbf16>
// CHECK: %[[RESULTS:[a-zA-Z0-9_]+]]:2 = scf.forall (%[[B:[a-zA-Z0-9_]+]], %[[H:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]]) = (0, 0, 0) to (2, 2, 50) step (1, 1, 32) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %{{.*}}, %[[LSE_OUT:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<2x2x50x32xf32>, tensor<2x2x50xf32>) {
// CHECK: %[[QUERY_ROWS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[I]])
// CHECK: %[[MASK_FROM:[a-zA-Z0-9_]+]] = affine.min #[[$MASK_FROM]]()
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = scf.for %[[KEY:[a-zA-Z0-9_]+]] = {{.*}} -> (tensor<32x64xf32>) {
// CHECK: %[[KEY_COLS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[KEY]])
// CHECK: %[[SCORES:[a-zA-Z0-9_]+]] = kiln.mul
// CHECK: tensor.extract_slice %[[MASK]][0, 0, %[[I]], %[[KEY]]] [1, 1, %[[QUERY_ROWS]], %[[KEY_COLS]]] [1, 1, 1, 1] : tensor<1x1x50x50xbf16> to tensor<?x?xbf16>
// CHECK: %[[MASK_TILE:[a-zA-Z0-9_]+]] = tensor.pad
// CHECK: } : tensor<?x?xbf16> to tensor<32x32xbf16>
// CHECK: %[[MASK_F32:[a-zA-Z0-9_]+]] = kiln.cast %[[MASK_TILE]] : tensor<32x32xbf16> to tensor<32x32xf32>
// CHECK: %[[BIASED:[a-zA-Z0-9_]+]] = kiln.add %[[SCORES]], %[[MASK_F32]] : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
// CHECK: %[[NEEDS_MASK:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK: scf.if %[[NEEDS_MASK]]
// CHECK: linalg.generic {{.*}} ins(%[[BIASED]] : tensor<32x32xf32>) {{.*}} attrs = {kiln.position_mask}
// CHECK: } else {
// CHECK: scf.yield %[[BIASED]]
// CHECK: kiln.softmax %[[ROW]] axis 1 zero_empty_rows : tensor<32x64xf32>
// CHECK: %[[LSE:[a-zA-Z0-9_]+]] = kiln.logsumexp %[[ROW]] axis 1 : tensor<32x64xf32> -> tensor<32xf32>
// CHECK: scf.for
// CHECK: %[[VALID:[a-zA-Z0-9_]+]] = tensor.extract_slice %{{.*}}[0, 0] [%[[QUERY_ROWS]], 32] [1, 1] : tensor<32x32xf32> to tensor<?x32xf32>
// CHECK: %[[VALID_LSE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[LSE]][0] [%[[QUERY_ROWS]]] [1] : tensor<32xf32> to tensor<?xf32>
// CHECK: scf.forall.in_parallel {
// CHECK: tensor.parallel_insert_slice %[[VALID]] into %[[OUT]][%[[B]], %[[H]], %[[I]], 0] [1, 1, %[[QUERY_ROWS]], 32]
// CHECK: tensor.parallel_insert_slice %[[VALID_LSE]] into %[[LSE_OUT]][%[[B]], %[[H]], %[[I]]] [1, 1, %[[QUERY_ROWS]]] [1, 1, 1] : tensor<?xf32> into tensor<2x2x50xf32>
// CHECK: return %[[RESULTS]]#0, %[[RESULTS]]#1
func.func @attention_mask_lse(%q: tensor<2x2x50x32xf32>, %k: tensor<2x2x50x32xf32>, %v: tensor<2x2x50x32xf32>, %m: tensor<1x1x50x50xbf16>) -> (tensor<2x2x50x32xf32>, tensor<2x2x50xf32>) {
  %0, %1 = kiln.attention %q, %k, %v mask(%m : tensor<1x1x50x50xbf16>) {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<2x2x50x32xf32>, tensor<2x2x50x32xf32>, tensor<2x2x50x32xf32> -> tensor<2x2x50x32xf32>, tensor<2x2x50xf32>
  return %0, %1 : tensor<2x2x50x32xf32>, tensor<2x2x50xf32>
}

// -----

// bf16 attention with a rank-1 (key-only) mask: scores come out of a bf16 x bf16 -> f32 matmul, and the mask row
// is read as a [BK] tile and reshaped to [1, BK] to broadcast over the query rows. For P V, the f32 P tile is
// rounded to bf16 (the type of v, as the tensor cores take it) and the v tile stays bf16: a bf16 x bf16 -> f32
// matmul. The output tile is cast back to bf16.
// CHECK-LABEL: func.func @attention_bf16_key_mask
// CHECK-SAME: %[[MASK:[a-z0-9]+]]: tensor<40xf32>
// CHECK: scf.for %[[KEY:[a-z0-9]+]] = {{.*}} -> (tensor<16x48xf32>)
// CHECK: %[[QK:[a-zA-Z0-9_]+]] = kiln.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<16x16xbf16>, tensor<16x16xbf16> -> tensor<16x16xf32>
// CHECK: %[[SCORES:[a-zA-Z0-9_]+]] = kiln.mul %[[QK]], %{{.*}} : tensor<16x16xf32>, tensor<f32> -> tensor<16x16xf32>
// CHECK: tensor.extract_slice %[[MASK]][%[[KEY]]] [%{{.*}}] [1] : tensor<40xf32> to tensor<?xf32>
// CHECK: %[[MASK_ROW:[a-zA-Z0-9_]+]] = tensor.pad
// CHECK: } : tensor<?xf32> to tensor<16xf32>
// CHECK: %[[MASK_TILE:[a-zA-Z0-9_]+]] = kiln.reshape %[[MASK_ROW]] : tensor<16xf32> -> tensor<1x16xf32>
// CHECK: kiln.add %[[SCORES]], %[[MASK_TILE]] : tensor<16x16xf32>, tensor<1x16xf32> -> tensor<16x16xf32>
// CHECK: %[[PROBS:[a-zA-Z0-9_]+]] = kiln.softmax %{{.*}} axis 1 zero_empty_rows : tensor<16x48xf32>
// CHECK: scf.for %[[KEY2:[a-z0-9]+]] =
// CHECK: %[[P_TILE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[PROBS]][0, %[[KEY2]]] [16, 16] [1, 1] : tensor<16x48xf32> to tensor<16x16xf32>
// CHECK: %[[V_TILE:[a-zA-Z0-9_]+]] = tensor.pad
// CHECK: } : tensor<?x16xbf16> to tensor<16x16xbf16>
// CHECK-NOT: kiln.cast %[[V_TILE]]
// CHECK: %[[P_BF16:[a-zA-Z0-9_]+]] = kiln.cast %[[P_TILE]] : tensor<16x16xf32> to tensor<16x16xbf16>
// CHECK-NEXT: kiln.matmul %[[P_BF16]], %[[V_TILE]] : tensor<16x16xbf16>, tensor<16x16xbf16> -> tensor<16x16xf32>
// CHECK: %[[OUT_TILE:[a-zA-Z0-9_]+]] = kiln.cast %{{.*}} : tensor<16x16xf32> to tensor<16x16xbf16>
// CHECK: tensor.extract_slice %[[OUT_TILE]][0, 0]
// CHECK: tensor.parallel_insert_slice {{.*}} : tensor<?x16xbf16> into tensor<1x1x20x16xbf16>
func.func @attention_bf16_key_mask(%q: tensor<1x1x20x16xbf16>, %k: tensor<1x1x40x16xbf16>, %v: tensor<1x1x40x16xbf16>, %m: tensor<40xf32>) -> tensor<1x1x20x16xbf16> {
  %0 = kiln.attention %q, %k, %v mask(%m : tensor<40xf32>) {kiln.config = #kiln.config<tile = [16, 16], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x20x16xbf16>, tensor<1x1x40x16xbf16>, tensor<1x1x40x16xbf16> -> tensor<1x1x20x16xbf16>
  return %0 : tensor<1x1x20x16xbf16>
}

// -----

// A GPU attention (lowering "mma_sync", causal bf16, 300 queries and keys, 128x64 tiles) is tiled the same way,
// and its loop keeps what the GPU lowering reads: the config, the op it computes and a thread block per
// iteration. The sequence lengths are read through kiln.dim (no constant 300 for them), so the causal key bound
// min(Sk, i + BQ + Sk - Sq) and maskFrom = min(Sk - (BK - 1), i + Sk - Sq - (BK - 2)) are affine.mins over the
// two lengths as symbols, and the masked branch's diagonal is their difference (a branch without
// `kiln.one_masked_tile`: 300 query rows). P is rounded to bf16 before the P V matmul, whose v tile stays bf16.
// CHECK-DAG: #[[$GPU_KEY_END:.+]] = affine_map<(d0)[s0, s1] -> (s0, d0 + s0 - s1 + 128)>
// CHECK-DAG: #[[$GPU_MASK_FROM:.+]] = affine_map<(d0)[s0, s1] -> (s0 - 63, d0 + s0 - s1 - 62)>
// CHECK-LABEL: func.func @attention_mma_sync
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x2x300x128xbf16>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x300x128xbf16>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x300x128xbf16>)
// CHECK: scf.forall (%[[B:[a-zA-Z0-9_]+]], %[[H:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]]) = (0, 0, 0) to (1, 2, 300) step (1, 1, 128)
// CHECK-NOT: arith.constant 300 : index
// CHECK: %[[SEQ_Q:[a-zA-Z0-9_]+]] = kiln.dim %[[Q]][2] : tensor<1x2x300x128xbf16>
// CHECK-NEXT: %[[SEQ_K:[a-zA-Z0-9_]+]] = kiln.dim %[[K]][2] : tensor<1x2x300x128xbf16>
// CHECK-NOT: arith.constant 300 : index
// CHECK: %[[KEY_END:[a-zA-Z0-9_]+]] = affine.min #[[$GPU_KEY_END]](%[[I]])[%[[SEQ_K]], %[[SEQ_Q]]]
// CHECK-NEXT: %[[MASK_FROM:[a-zA-Z0-9_]+]] = affine.min #[[$GPU_MASK_FROM]](%[[I]])[%[[SEQ_K]], %[[SEQ_Q]]]
// CHECK: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %{{.*}} to %[[KEY_END]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<128x320xf32>) {
// CHECK: kiln.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<128x128xbf16>, tensor<64x128xbf16> -> tensor<128x64xf32>
// CHECK: %[[NEEDS_MASK:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK-NEXT: scf.if %[[NEEDS_MASK]] -> (tensor<128x64xf32>) {
// CHECK-NEXT: %[[DIAGONAL:[a-zA-Z0-9_]+]] = arith.subi %[[SEQ_K]], %[[SEQ_Q]] : index
// CHECK: linalg.generic {{.*}} attrs = {kiln.position_mask} {
// CHECK: %[[COL:[a-zA-Z0-9_]+]] = arith.addi %[[KEY]], %{{.*}} : index
// CHECK: arith.cmpi sge, %[[COL]], %[[SEQ_K]] : index
// CHECK: arith.addi %{{.*}}, %[[DIAGONAL]] : index
// CHECK-NOT: kiln.one_masked_tile
// CHECK: %[[PROBS:[a-zA-Z0-9_]+]] = kiln.softmax %{{.*}} axis 1 zero_empty_rows : tensor<128x320xf32>
// CHECK: scf.for %[[KEY2:[a-zA-Z0-9_]+]] = %{{.*}} to %[[KEY_END]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<128x128xf32>) {
// CHECK: %[[P_TILE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[PROBS]][0, %[[KEY2]]] [128, 64] [1, 1] : tensor<128x320xf32> to tensor<128x64xf32>
// CHECK: tensor.extract_slice %[[V]][%[[B]], %{{.*}}, %[[KEY2]], 0]
// CHECK: %[[V_TILE:[a-zA-Z0-9_]+]] = tensor.pad
// CHECK: } : tensor<?x128xbf16> to tensor<64x128xbf16>
// CHECK-NOT: kiln.cast %[[V_TILE]]
// CHECK: %[[P_BF16:[a-zA-Z0-9_]+]] = kiln.cast %[[P_TILE]] : tensor<128x64xf32> to tensor<128x64xbf16>
// CHECK-NEXT: kiln.matmul %[[P_BF16]], %[[V_TILE]] : tensor<128x64xbf16>, tensor<64x128xbf16> -> tensor<128x128xf32>
// CHECK: kiln.cast %{{.*}} : tensor<128x128xf32> to tensor<128x128xbf16>
// CHECK: } {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">, kiln.tiled_op = "kiln.attention", mapping = [#gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
func.func @attention_mma_sync(%q: tensor<1x2x300x128xbf16>, %k: tensor<1x2x300x128xbf16>, %v: tensor<1x2x300x128xbf16>) -> tensor<1x2x300x128xbf16> {
  %0 = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 2, lowering = "mma_sync">} : tensor<1x2x300x128xbf16>, tensor<1x2x300x128xbf16>, tensor<1x2x300x128xbf16> -> tensor<1x2x300x128xbf16>
  return %0 : tensor<1x2x300x128xbf16>
}

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

// -----

// A 3-D softmax over its last axis: a forall over (batch, blocks of 16 rows); each block is a padded [16, 512]
// tile softmaxed along axis 1, carrying no config.
// CHECK-DAG: #[[$BLOCK_OF_77:.+]] = affine_map<(d0) -> (16, -d0 + 77)>
// CHECK-LABEL: func.func @softmax_rows
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<2x77x512xf32>)
// CHECK: %[[RESULT:[a-zA-Z0-9_]+]] = scf.forall (%[[B:[a-zA-Z0-9_]+]], %[[R:[a-zA-Z0-9_]+]]) = (0, 0) to (2, 77) step (1, 16) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<2x77x512xf32>) {
// CHECK: %[[ROWS:[a-zA-Z0-9_]+]] = affine.min #[[$BLOCK_OF_77]](%[[R]])
// CHECK: %[[SLICE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[X]][%[[B]], %[[R]], 0] [1, %[[ROWS]], 512] [1, 1, 1] : tensor<2x77x512xf32> to tensor<?x512xf32>
// CHECK: %[[TILE:[a-zA-Z0-9_]+]] = tensor.pad %[[SLICE]] low[0, 0] high[%{{.*}}, 0]
// CHECK: } : tensor<?x512xf32> to tensor<16x512xf32>
// CHECK: %[[PROBS:[a-zA-Z0-9_]+]] = kiln.softmax %[[TILE]] axis 1 : tensor<16x512xf32>
// CHECK: %[[VALID:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[PROBS]][0, 0] [%[[ROWS]], 512] [1, 1] : tensor<16x512xf32> to tensor<?x512xf32>
// CHECK: tensor.parallel_insert_slice %[[VALID]] into %[[OUT]][%[[B]], %[[R]], 0] [1, %[[ROWS]], 512] [1, 1, 1] : tensor<?x512xf32> into tensor<2x77x512xf32>
// CHECK: return %[[RESULT]]
// CHECK-NOT: kiln.config
func.func @softmax_rows(%x: tensor<2x77x512xf32>) -> tensor<2x77x512xf32> {
  %0 = kiln.softmax %x axis 2 {kiln.config = #kiln.config<tile = [16], warps = 1, stages = 1, lowering = "host">} : tensor<2x77x512xf32>
  return %0 : tensor<2x77x512xf32>
}

// -----

// RMSNorm keeps its per-channel weight and epsilon on the tile.
// CHECK-LABEL: func.func @rms_norm_rows
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<60x256xbf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<256xbf16>)
// CHECK: scf.forall (%[[R:[a-zA-Z0-9_]+]]) = (0) to (60) step (16) shared_outs(%[[OUT:[a-zA-Z0-9_]+]] = %{{.*}}) -> (tensor<60x256xbf16>) {
// CHECK: %[[ROWS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[R]])
// CHECK: tensor.extract_slice %[[X]][%[[R]], 0] [%[[ROWS]], 256] [1, 1]
// CHECK: %[[TILE:[a-zA-Z0-9_]+]] = tensor.pad
// CHECK: } : tensor<?x256xbf16> to tensor<16x256xbf16>
// CHECK: %[[NORMED:[a-zA-Z0-9_]+]] = kiln.rms_norm %[[TILE]], %[[W]] epsilon 9.99999997E-7 : tensor<16x256xbf16>, tensor<256xbf16>
// CHECK-NOT: kiln.config
// CHECK: %[[VALID:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[NORMED]][0, 0] [%[[ROWS]], 256] [1, 1]
// CHECK: tensor.parallel_insert_slice %[[VALID]] into %[[OUT]][%[[R]], 0] [%[[ROWS]], 256] [1, 1] : tensor<?x256xbf16> into tensor<60x256xbf16>
func.func @rms_norm_rows(%x: tensor<60x256xbf16>, %w: tensor<256xbf16>) -> tensor<60x256xbf16> {
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 {kiln.config = #kiln.config<tile = [16], warps = 1, stages = 1, lowering = "host">} : tensor<60x256xbf16>, tensor<256xbf16>
  return %0 : tensor<60x256xbf16>
}

// -----

// LayerNorm with a bias, 10 rows in blocks of 4.
// CHECK-LABEL: func.func @layer_norm_rows
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<10x768xf32>, %[[G:[a-zA-Z0-9_]+]]: tensor<768xf32>, %[[BIAS:[a-zA-Z0-9_]+]]: tensor<768xf32>)
// CHECK: scf.forall (%[[R:[a-zA-Z0-9_]+]]) = (0) to (10) step (4)
// CHECK: } : tensor<?x768xf32> to tensor<4x768xf32>
// CHECK: kiln.layer_norm %{{.*}}, %[[G]], %[[BIAS]] epsilon 9.99999974E-6 : tensor<4x768xf32>, tensor<768xf32>, tensor<768xf32>
// CHECK-NOT: kiln.config
// CHECK: tensor.parallel_insert_slice {{.*}} : tensor<?x768xf32> into tensor<10x768xf32>
func.func @layer_norm_rows(%x: tensor<10x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>) -> tensor<10x768xf32> {
  %0 = kiln.layer_norm %x, %g, %b epsilon 1.0e-05 {kiln.config = #kiln.config<tile = [4], warps = 1, stages = 1, lowering = "host">} : tensor<10x768xf32>, tensor<768xf32>, tensor<768xf32>
  return %0 : tensor<10x768xf32>
}

//===----------------------------------------------------------------------===//
// Ops that are left alone
//===----------------------------------------------------------------------===//

// -----

// Without a config nothing is tiled.
// CHECK-LABEL: func.func @no_config
// CHECK-NOT: scf.forall
// CHECK: %[[PRODUCT:[a-zA-Z0-9_]+]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK-NOT: scf.forall
// CHECK: %[[PROBS:[a-zA-Z0-9_]+]] = kiln.softmax %[[PRODUCT]] axis 1 : tensor<64x64xf32>
// CHECK-NOT: scf.forall
// CHECK: return %[[PROBS]]
func.func @no_config(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = kiln.matmul %a, %b : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %1 = kiln.softmax %0 axis 1 : tensor<64x64xf32>
  return %1 : tensor<64x64xf32>
}

// -----

// A softmax along a non-last axis is not a row kernel: it keeps its op and its config. A rank-1 softmax (one
// row) is tiled as a [1, D] view between reshapes.
// CHECK-LABEL: func.func @softmax_not_a_row_kernel(
// CHECK: kiln.softmax %{{.*}} axis 0 {kiln.config = #kiln.config<tile = [4], warps = 1, stages = 1, lowering = "host">} : tensor<8x16xf32>
// CHECK: %[[ROW:.+]] = kiln.reshape %{{.*}} : tensor<16xf32> -> tensor<1x16xf32>
// CHECK: %[[TILED:.+]] = scf.forall (%{{.*}}) in (1)
// CHECK: tensor.extract_slice %[[ROW]]
// CHECK: kiln.softmax %{{.*}} axis 1 : tensor<1x16xf32>
// CHECK: kiln.reshape %[[TILED]] : tensor<1x16xf32> -> tensor<16xf32>
// CHECK: return
func.func @softmax_not_a_row_kernel(%x: tensor<8x16xf32>, %y: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>) {
  %0 = kiln.softmax %x axis 0 {kiln.config = #kiln.config<tile = [4], warps = 1, stages = 1, lowering = "host">} : tensor<8x16xf32>
  %1 = kiln.softmax %y axis 0 {kiln.config = #kiln.config<tile = [1], warps = 1, stages = 1, lowering = "host">} : tensor<16xf32>
  return %0, %1 : tensor<8x16xf32>, tensor<16xf32>
}

// -----

// A GPU matmul (lowering "mma_sync") tiles the same way, and its loop keeps what the GPU lowering reads: the
// config, the op it computes, and the mapping of every iteration onto a thread block (the last dim fastest).
// CHECK-LABEL: func.func @matmul_mma_sync
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) = (0, 0, 0) to (2, 100, 136) step (1, 64, 64)
// CHECK: scf.for
// CHECK: kiln.matmul {{.*}} : tensor<64x32xbf16>, tensor<32x64xbf16> -> tensor<64x64xf32>
// CHECK: } {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync">, kiln.tiled_op = "kiln.matmul", mapping = [#gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
func.func @matmul_mma_sync(%a: tensor<2x100x72xbf16>, %b: tensor<2x72x136xbf16>) -> tensor<2x100x136xbf16> {
  %0 = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<2x100x72xbf16>, tensor<2x72x136xbf16> -> tensor<2x100x136xbf16>
  return %0 : tensor<2x100x136xbf16>
}

// -----

// The tile matmul keeps the op's fp32_precision.
// CHECK-LABEL: func.func @matmul_mma_sync_ieee
// CHECK: kiln.matmul {{.*}} {fp32_precision = "ieee"} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
func.func @matmul_mma_sync_ieee(%a: tensor<100x96xf32>, %b: tensor<96x80xf32>) -> tensor<100x80xf32> {
  %0 = kiln.matmul %a, %b {fp32_precision = "ieee", kiln.config = #kiln.config<tile = [64, 64, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<100x96xf32>, tensor<96x80xf32> -> tensor<100x80xf32>
  return %0 : tensor<100x80xf32>
}

// -----

// So do an attention's two tile matmuls, Q K^T and P V.
// CHECK-LABEL: func.func @attention_mma_sync_ieee
// CHECK: kiln.matmul {{.*}} transpose_rhs {fp32_precision = "ieee"} : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x64xf32>
// CHECK: kiln.matmul {{.*}} {fp32_precision = "ieee"} : tensor<64x64xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
func.func @attention_mma_sync_ieee(%q: tensor<1x2x100x32xf32>) -> tensor<1x2x100x32xf32> {
  %0 = kiln.attention %q, %q, %q {fp32_precision = "ieee", kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 2, lowering = "mma_sync">} : tensor<1x2x100x32xf32>, tensor<1x2x100x32xf32>, tensor<1x2x100x32xf32> -> tensor<1x2x100x32xf32>
  return %0 : tensor<1x2x100x32xf32>
}

// -----

// A score_mod and a sliding-window mask_mod ((i - j < 40) & (j <= i), a conjunction of linear bounds). The key
// loops start at the tile holding the first key a row of the query tile can see, floor(max(q0 - 39, 0) / 32) *
// 32, and end after the last, min(Sk, q0 + 32); a tile takes the mask when it starts before the first key every
// row sees (q0 + 31 - 39) or at or past the last tile every row sees in full (q0 + 1 - 31). The score_mod is a
// generic over each score tile after the scale, its table read guarded (an index outside reads 0); the mask_mod
// joins the position mask. What reads only the head and the tables (the slope) is computed once per query tile,
// before the loops.
// CHECK-LABEL: func.func @attention_score_and_mask_mods
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x2x100x32xf32>, %[[SLOPES:[a-zA-Z0-9_]+]]: tensor<2xf32>)
// CHECK: scf.forall (%{{.*}}, %[[H:[a-zA-Z0-9_]+]], %[[Q0:[a-zA-Z0-9_]+]]) =
// CHECK: tensor.dim %[[SLOPES]]
// CHECK: arith.cmpi ult, %[[H]]
// CHECK: tensor.extract %[[SLOPES]]
// CHECK: %[[SLOPE:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG: %[[C31:.*]] = arith.constant 31 : index
// CHECK: %[[LAST_ROW:.*]] = arith.addi %[[Q0]], %[[C31]] : index
// CHECK: %[[FIRST_SEEN:.*]] = arith.addi %{{.*}}, %c-39{{.*}} : index
// CHECK: %[[FIRST_FULL:.*]] = arith.addi %{{.*}}, %c-39{{.*}} : index
// CHECK: %[[FROM:.*]] = arith.maxsi %[[FIRST_SEEN]], %{{.*}} : index
// CHECK-NEXT: %[[FROM_TILE:.*]] = arith.divsi %[[FROM]], %[[C32]] : index
// CHECK-NEXT: %[[START:.*]] = arith.muli %[[FROM_TILE]], %[[C32]] : index
// CHECK-NEXT: %[[END:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: %[[MASK_FROM:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %[[START]] to %[[END]] step %[[C32]]
// CHECK: kiln.mul
// CHECK: linalg.generic
// CHECK-NOT: tensor.extract
// CHECK: arith.addf %{{.*}}, %[[SLOPE]] : f32
// CHECK: %[[LATE:.*]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK-NEXT: %[[EARLY:.*]] = arith.cmpi slt, %[[KEY]], %[[FIRST_FULL]] : index
// CHECK-NEXT: %[[MASKED:.*]] = arith.ori %[[EARLY]], %[[LATE]] : i1
// CHECK-NEXT: scf.if %[[MASKED]]
// CHECK: kiln.position_mask
// CHECK: arith.cmpi slt, %{{.*}}, %c40 : index
// CHECK: arith.cmpi sle
// CHECK: arith.andi
// CHECK: arith.xori
// CHECK: scf.for %{{.*}} = %[[START]] to %[[END]] step %[[C32]]
func.func @attention_score_and_mask_mods(%q: tensor<1x2x100x32xf32>, %slopes: tensor<2xf32>) -> tensor<1x2x100x32xf32> {
  %0 = kiln.attention %q, %q, %q mod_operands(%slopes : tensor<2xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2xf32>):
    %slope = tensor.extract %t[%h] : tensor<2xf32>
    %r = arith.addf %s, %slope : f32
    kiln.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %t: tensor<2xf32>):
    %w = arith.constant 40 : index
    %d = arith.subi %i, %j : index
    %near = arith.cmpi slt, %d, %w : index
    %past = arith.cmpi sle, %j, %i : index
    %in = arith.andi %near, %past : i1
    kiln.yield %in : i1
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x2x100x32xf32>, tensor<1x2x100x32xf32>, tensor<1x2x100x32xf32> -> tensor<1x2x100x32xf32>
  return %0 : tensor<1x2x100x32xf32>
}

// -----

// A mask_mod that is no conjunction of linear bounds (document ids read from a table): the loops keep their
// full range and every tile takes the mask (the mask threshold is the loop's start).
// CHECK-LABEL: func.func @attention_document_mask
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %[[C0]] to
// CHECK: arith.cmpi sge, %[[KEY]], %[[C0]] : index
// CHECK-NOT: arith.ori %{{.*}}, %{{.*}} : i1
// CHECK: scf.if
// CHECK: tensor.extract
func.func @attention_document_mask(%q: tensor<1x1x64x32xf32>, %docs: tensor<64xi32>) -> tensor<1x1x64x32xf32> {
  %0 = kiln.attention %q, %q, %q mod_operands(%docs : tensor<64xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %t: tensor<64xi32>):
    %di = tensor.extract %t[%i] : tensor<64xi32>
    %dj = tensor.extract %t[%j] : tensor<64xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    kiln.yield %same : i1
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32> -> tensor<1x1x64x32xf32>
  return %0 : tensor<1x1x64x32xf32>
}

// -----

// Packed sequences: each query sees keys [first[q], last[q]] of its own sequence, two tables the op promises are
// nondecreasing (nondecreasing_tables). A query tile's key loops then run from the tile of its first row's first
// key to its last row's last key (the last row clamped to the last query, 99), and only tiles before the first
// key of its last row or past the last key of its first row take the mask (last[q0] + 1 - 31, at most the last
// whole tile, 69).
// FOLD-LABEL: func.func @attention_packed_sequences
// FOLD-SAME: (%{{[a-zA-Z0-9_]+}}: tensor<1x1x100x32xf32>, %[[FIRST:[a-zA-Z0-9_]+]]: tensor<100xi32>, %[[LAST:[a-zA-Z0-9_]+]]: tensor<100xi32>)
// FOLD: scf.forall (%[[Q0:[a-zA-Z0-9_]+]]) = (0) to (100) step (32)
// FOLD: %[[ROW:.*]] = arith.addi %[[Q0]], %c31 : index
// FOLD: %[[LAST_ROW:.*]] = arith.minsi %[[ROW]], %c99 : index
// FOLD: tensor.extract %[[FIRST]][%[[Q0]]] : tensor<100xi32>
// FOLD: %[[EVERY_FROM_I32:.*]] = tensor.extract %[[FIRST]][%[[LAST_ROW]]] : tensor<100xi32>
// FOLD: %[[EVERY_FROM:.*]] = arith.index_cast %[[EVERY_FROM_I32]] : i32 to index
// FOLD: tensor.extract %[[LAST]][%[[LAST_ROW]]] : tensor<100xi32>
// FOLD: tensor.extract %[[LAST]][%[[Q0]]] : tensor<100xi32>
// FOLD: %[[START:.*]] = arith.muli %{{.*}}, %c32 : index
// FOLD: %[[END:.*]] = arith.minsi %{{.*}}, %c100 : index
// FOLD: %[[MASK_FROM:.*]] = arith.minsi %{{.*}}, %c69 : index
// FOLD: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %[[START]] to %[[END]] step %c32
// FOLD: %[[LATE:.*]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// FOLD-NEXT: %[[EARLY:.*]] = arith.cmpi slt, %[[KEY]], %[[EVERY_FROM]] : index
// FOLD-NEXT: arith.ori %[[EARLY]], %[[LATE]] : i1
func.func @attention_packed_sequences(%q: tensor<1x1x100x32xf32>, %first: tensor<100xi32>, %last: tensor<100xi32>) -> tensor<1x1x100x32xf32> {
  %0 = kiln.attention %q, %q, %q mod_operands(%first, %last : tensor<100xi32>, tensor<100xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %f: tensor<100xi32>, %l: tensor<100xi32>):
    %fi = tensor.extract %f[%i] : tensor<100xi32>
    %li = tensor.extract %l[%i] : tensor<100xi32>
    %from = arith.index_cast %fi : i32 to index
    %to = arith.index_cast %li : i32 to index
    %after = arith.cmpi sge, %j, %from : index
    %before = arith.cmpi sle, %j, %to : index
    %in = arith.andi %after, %before : i1
    kiln.yield %in : i1
  } {nondecreasing_tables = array<i64: 0, 1>, kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x100x32xf32>
  return %0 : tensor<1x1x100x32xf32>
}

// -----

// Document ids: each query sees the keys whose id equals its own (`docs[q] == docs[kv]`) in a table the op
// promises is nondecreasing, so a query's keys are its document's run of the table. The tile reads the ids of
// its first and last rows and searches the table (one scf.while for both searches, 4 reads of each a round) for
// the first key of the first row's document (at most the first row: its own id) and the end of the last row's
// (after the last row); the key loops run between them, and every row sees the keys in between only where both
// ids are one document. A search whose range has closed keeps it and clamps its probes into the table.
// FOLD-LABEL: func.func @attention_document_ids
// FOLD-SAME: (%{{[a-zA-Z0-9_]+}}: tensor<1x1x100x32xf32>, %[[DOCS:[a-zA-Z0-9_]+]]: tensor<100xi32>)
// FOLD: scf.forall (%[[Q0:[a-zA-Z0-9_]+]]) = (0) to (100) step (32)
// FOLD: %[[ROW:.*]] = arith.addi %[[Q0]], %c31 : index
// FOLD: %[[LAST_ROW:.*]] = arith.minsi %[[ROW]], %c99 : index
// FOLD: %[[FIRST_ID_I32:.*]] = tensor.extract %[[DOCS]][%[[Q0]]] : tensor<100xi32>
// FOLD: %[[FIRST_ID:.*]] = arith.index_cast %[[FIRST_ID_I32]] : i32 to index
// FOLD: %[[LAST_ID_I32:.*]] = tensor.extract %[[DOCS]][%[[LAST_ROW]]] : tensor<100xi32>
// FOLD: %[[LAST_ID:.*]] = arith.index_cast %[[LAST_ID_I32]] : i32 to index
// FOLD: %[[AFTER_LAST:.*]] = arith.addi %[[LAST_ROW]], %c1 : index
// FOLD: %[[ONE_DOC:.*]] = arith.cmpi eq, %[[FIRST_ID]], %[[LAST_ID]] : index
// FOLD: %[[FOUND:.*]]:4 = scf.while (%[[LO:.*]] = %c0, %[[HI:.*]] = %[[Q0]], %[[LO2:.*]] = %[[AFTER_LAST]], %[[HI2:.*]] = %c100)
// FOLD: %[[OPEN:.*]] = arith.cmpi slt, %[[LO]], %[[HI]] : index
// FOLD: %[[OPEN2:.*]] = arith.cmpi slt, %[[LO2]], %[[HI2]] : index
// FOLD: %[[EITHER:.*]] = arith.ori %[[OPEN]], %[[OPEN2]] : i1
// FOLD: scf.condition(%[[EITHER]])
// FOLD: arith.ceildivsi %{{.*}}, %c4 : index
// FOLD-COUNT-4: tensor.extract %[[DOCS]]
// FOLD: arith.ceildivsi %{{.*}}, %c4 : index
// FOLD-COUNT-4: arith.cmpi sle
// FOLD-NOT: tensor.extract %[[DOCS]]
// FOLD: scf.yield
// FOLD: %[[EVERY_FROM:.*]] = arith.select %[[ONE_DOC]], %[[FOUND]]#0, %[[FOUND]]#2 : index
// FOLD: arith.select %[[ONE_DOC]], %[[FOUND]]#2, %[[FOUND]]#0 : index
// FOLD: %[[START:.*]] = arith.muli %{{.*}}, %c32 : index
// FOLD: %[[END:.*]] = arith.minsi %[[FOUND]]#2, %c100 : index
// FOLD: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %[[START]] to %[[END]] step %c32
// FOLD: arith.cmpi sge, %[[KEY]], %{{.*}} : index
// FOLD-NEXT: %[[EARLY:.*]] = arith.cmpi slt, %[[KEY]], %[[EVERY_FROM]] : index
func.func @attention_document_ids(%q: tensor<1x1x100x32xf32>, %docs: tensor<100xi32>) -> tensor<1x1x100x32xf32> {
  %0 = kiln.attention %q, %q, %q mod_operands(%docs : tensor<100xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<100xi32>):
    %di = tensor.extract %d[%i] : tensor<100xi32>
    %dj = tensor.extract %d[%j] : tensor<100xi32>
    %qi = arith.index_cast %di : i32 to index
    %kj = arith.index_cast %dj : i32 to index
    %same = arith.cmpi eq, %qi, %kj : index
    kiln.yield %same : i1
  } {nondecreasing_tables = array<i64: 0>, kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x100x32xf32>
  return %0 : tensor<1x1x100x32xf32>
}

// -----

// The same ids under `causal`, whose diagonal is the row the table is read at (q against q + Sk - Sq, here 0):
// a row's keys end at its own position, inside its own document, so the end of the last row's document bounds
// nothing the diagonal does not. The tile searches for the first row's document's first key alone (4 reads a
// round); the key loops end at the diagonal, and every row sees [first key, last row + 1) where the rows share
// one document.
// FOLD-LABEL: func.func @attention_document_ids_causal
// FOLD-SAME: (%{{[a-zA-Z0-9_]+}}: tensor<1x1x100x32xf32>, %[[DOCS:[a-zA-Z0-9_]+]]: tensor<100xi32>)
// FOLD: scf.forall (%[[Q0:[a-zA-Z0-9_]+]]) = (0) to (100) step (32)
// FOLD: tensor.pad
// FOLD: %[[DIAGONAL_END:.*]] = affine.min
// FOLD: %[[LAST_ROW:.*]] = arith.minsi %{{.*}}, %c99 : index
// FOLD: %[[AFTER_LAST:.*]] = arith.addi %[[LAST_ROW]], %c1 : index
// FOLD: %[[ONE_DOC:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : index
// FOLD: %[[FOUND:.*]]:2 = scf.while (%[[LO:.*]] = %c0, %[[HI:.*]] = %[[Q0]]) : (index, index) -> (index, index)
// FOLD: arith.ceildivsi %{{.*}}, %c4 : index
// FOLD-COUNT-4: tensor.extract %[[DOCS]]
// FOLD-NOT: tensor.extract %[[DOCS]]
// FOLD: scf.yield
// FOLD: arith.select %[[ONE_DOC]], %[[FOUND]]#0, %[[AFTER_LAST]] : index
// FOLD: arith.select %[[ONE_DOC]], %[[AFTER_LAST]], %[[FOUND]]#0 : index
// FOLD: %[[END:.*]] = arith.minsi %[[DIAGONAL_END]], %[[AFTER_LAST]] : index
// FOLD: scf.for %{{.*}} = %{{.*}} to %[[END]] step %c32
func.func @attention_document_ids_causal(%q: tensor<1x1x100x32xf32>, %docs: tensor<100xi32>) -> tensor<1x1x100x32xf32> {
  %0 = kiln.attention %q, %q, %q causal mod_operands(%docs : tensor<100xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<100xi32>):
    %di = tensor.extract %d[%i] : tensor<100xi32>
    %dj = tensor.extract %d[%j] : tensor<100xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    kiln.yield %same : i1
  } {nondecreasing_tables = array<i64: 0>, kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x100x32xf32>
  return %0 : tensor<1x1x100x32xf32>
}

// -----

// The same equality written as a negated `!=` (and on i32 entries): an equal run too.
// FOLD-LABEL: func.func @attention_document_ids_negated
// FOLD: scf.while
// FOLD: scf.for
func.func @attention_document_ids_negated(%q: tensor<1x1x100x32xf32>, %docs: tensor<100xi32>) -> tensor<1x1x100x32xf32> {
  %0 = kiln.attention %q, %q, %q mod_operands(%docs : tensor<100xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<100xi32>):
    %di = tensor.extract %d[%i] : tensor<100xi32>
    %dj = tensor.extract %d[%j] : tensor<100xi32>
    %differ = arith.cmpi ne, %dj, %di : i32
    %true = arith.constant true
    %same = arith.xori %differ, %true : i1
    kiln.yield %same : i1
  } {nondecreasing_tables = array<i64: 0>, kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x100x32xf32>
  return %0 : tensor<1x1x100x32xf32>
}

// -----

// Equal ids bound nothing where the table misses keys: with 120 keys and 100 ids, keys 100 and on read id 0
// and are seen by every query of document 0, outside its run, so the loops keep their full range and every
// tile takes the mask.
// FOLD-LABEL: func.func @attention_document_ids_short_table
// FOLD-NOT: scf.while
// FOLD: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %c0 to %c120 step %c32
func.func @attention_document_ids_short_table(%q: tensor<1x1x100x32xf32>, %k: tensor<1x1x120x32xf32>, %docs: tensor<100xi32>) -> tensor<1x1x100x32xf32> {
  %0 = kiln.attention %q, %k, %k mod_operands(%docs : tensor<100xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<100xi32>):
    %di = tensor.extract %d[%i] : tensor<100xi32>
    %dj = tensor.extract %d[%j] : tensor<100xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    kiln.yield %same : i1
  } {nondecreasing_tables = array<i64: 0>, kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x100x32xf32>, tensor<1x1x120x32xf32>, tensor<1x1x120x32xf32> -> tensor<1x1x100x32xf32>
  return %0 : tensor<1x1x100x32xf32>
}

// -----

// The same mask without the promise: a table may rise and fall, so its reads bound nothing and the loops keep
// their full range, every tile taking the mask.
// FOLD-LABEL: func.func @attention_tables_without_promise
// FOLD: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %c0 to %c100 step %c32
// FOLD-NOT: arith.ori
// FOLD: scf.if
// FOLD: tensor.extract
func.func @attention_tables_without_promise(%q: tensor<1x1x100x32xf32>, %first: tensor<100xi32>, %last: tensor<100xi32>) -> tensor<1x1x100x32xf32> {
  %0 = kiln.attention %q, %q, %q mod_operands(%first, %last : tensor<100xi32>, tensor<100xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %f: tensor<100xi32>, %l: tensor<100xi32>):
    %fi = tensor.extract %f[%i] : tensor<100xi32>
    %li = tensor.extract %l[%i] : tensor<100xi32>
    %from = arith.index_cast %fi : i32 to index
    %to = arith.index_cast %li : i32 to index
    %after = arith.cmpi sge, %j, %from : index
    %before = arith.cmpi sle, %j, %to : index
    %in = arith.andi %after, %before : i1
    kiln.yield %in : i1
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x100x32xf32>
  return %0 : tensor<1x1x100x32xf32>
}

// -----

// A bound read through a truncating cast is no bound: kv_idx as i8 wraps at 128 (key 130 reads as 2, and
// `(i8) kv_idx < 5` holds for it), so the loops keep their full range and every tile takes the mask, as for
// any mask the analysis cannot read.
// CHECK-LABEL: func.func @attention_truncated_mask
// CHECK: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %[[C0:[a-zA-Z0-9_]+]] to %c200{{.*}} step %c32
// CHECK: arith.cmpi sge, %[[KEY]], %[[C0]] : index
// CHECK: scf.if
// CHECK: arith.index_cast %{{.*}} : index to i8
func.func @attention_truncated_mask(%q: tensor<1x1x200x32xf32>) -> tensor<1x1x200x32xf32> {
  %0 = kiln.attention %q, %q, %q mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %j8 = arith.index_cast %j : index to i8
    %c5 = arith.constant 5 : i8
    %small = arith.cmpi slt, %j8, %c5 : i8
    kiln.yield %small : i1
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x200x32xf32>, tensor<1x1x200x32xf32>, tensor<1x1x200x32xf32> -> tensor<1x1x200x32xf32>
  return %0 : tensor<1x1x200x32xf32>
}

// -----

// A split attention (kv_chunk = 256) iterates over its chunks first: chunk s's key loops run over keys
// [s * 256, min((s + 1) * 256, 1000)), and its f32 output and lse tiles go to the chunk's slice of the results.
// CHECK-LABEL: func.func @attention_kv_chunks
// CHECK: scf.forall (%[[S:[a-zA-Z0-9_]+]], %[[B:[a-zA-Z0-9_]+]], %[[H:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]]) = (0, 0, 0, 0) to (4, 1, 8, 4) step (1, 1, 1, 16)
// CHECK: %[[START:.+]] = arith.muli %[[S]], %[[C256:.+]] : index
// CHECK: %[[NEXT:.+]] = arith.addi %[[START]], %[[C256]] : index
// CHECK: %[[END:.+]] = arith.minsi %{{.*}}, %[[NEXT]] : index
// CHECK: scf.for %{{.*}} = %[[START]] to %[[END]] step %c64
// CHECK: scf.for %{{.*}} = %[[START]] to %[[END]] step %c64
// CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[S]], %[[B]], %[[H]], %[[I]], 0] [1, 1, 1, %{{.*}}, 64] [1, 1, 1, 1, 1] : tensor<?x64xf32> into tensor<4x1x8x4x64xf32>
// CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[S]], %[[B]], %[[H]], %[[I]]] [1, 1, 1, %{{.*}}] [1, 1, 1, 1] : tensor<?xf32> into tensor<4x1x8x4xf32>
func.func @attention_kv_chunks(%q: tensor<1x8x4x64xbf16>, %k: tensor<1x8x1000x64xbf16>, %v: tensor<1x8x1000x64xbf16>) -> (tensor<4x1x8x4x64xf32>, tensor<4x1x8x4xf32>) {
  %o, %lse = kiln.attention %q, %k, %v {kv_chunk = 256 : i64, kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<1x8x4x64xbf16>, tensor<1x8x1000x64xbf16>, tensor<1x8x1000x64xbf16> -> tensor<4x1x8x4x64xf32>, tensor<4x1x8x4xf32>
  return %o, %lse : tensor<4x1x8x4x64xf32>, tensor<4x1x8x4xf32>
}

// -----

// K and V read from a paged cache (kiln.gather_pages views, as kiln-expand-paged-attention writes paged attention):
// each 32-key tile lies within one 32-row page, read straight from it: the page id from the block table (its
// column clamped into the table, the id into the cache), rows from the sequence's length on zero. The key loops
// end at the sequence's length, read from seq_lens by the mask_mod's bound (a per-sequence symbol), not at the
// view's 512 keys; the tiles before the length's last one run without the mask. (The views, dead once tiled,
// go at the next canonicalization.)
// CHECK-LABEL: func.func @paged_decode
// CHECK-SAME: (%{{.+}}: tensor<2x8x4x128xbf16>, %[[KC:.+]]: tensor<64x32x8x128xbf16>, %[[VC:.+]]: tensor<64x32x8x128xbf16>, %[[T:.+]]: tensor<2x16xi32>, %[[L:.+]]: tensor<2xi32>)
// CHECK: scf.forall (%[[B:.+]], %[[H:.+]], %{{.+}}) = (0, 0, 0) to (2, 8, 4)
// CHECK: %[[N:.+]] = tensor.extract %[[L]][%[[B]]] : tensor<2xi32>
// CHECK: %[[LEN:.+]] = arith.index_cast %[[N]] : i32 to index
// CHECK: scf.for %[[J:[a-z0-9_]+]] =
// CHECK: %[[COLUMN:.+]] = arith.minsi %{{.+}}, %{{.+}} : index
// CHECK: %[[ID:.+]] = tensor.extract %[[T]][%[[B]], %[[COLUMN]]] : tensor<2x16xi32>
// CHECK: %[[PAGE0:.+]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: %[[PAGE1:.+]] = arith.maxsi %[[PAGE0]], %{{.+}} : index
// CHECK: %[[PAGE:.+]] = arith.minsi %[[PAGE1]], %{{.+}} : index
// CHECK: %[[ROW:.+]] = arith.remsi %[[J]], %{{.+}} : index
// CHECK: %[[LEFT:.+]] = arith.subi %[[LEN]], %[[J]] : index
// CHECK: %[[ROWS0:.+]] = arith.minsi %[[LEFT]], %{{.+}} : index
// CHECK: %[[ROWS:.+]] = arith.maxsi %[[ROWS0]], %{{.+}} : index
// CHECK: tensor.extract_slice %[[KC]][%[[PAGE]], %[[ROW]], %{{.+}}, 0] [1, %[[ROWS]], 1, 128] [1, 1, 1, 1] : tensor<64x32x8x128xbf16> to tensor<?x128xbf16>
// CHECK: scf.for
// CHECK: tensor.extract_slice %[[VC]][%{{.+}}, %{{.+}}, %{{.+}}, 0] [1, %{{.+}}, 1, 128] [1, 1, 1, 1] : tensor<64x32x8x128xbf16> to tensor<?x128xbf16>
// FOLD-LABEL: func.func @paged_decode
// FOLD-DAG: %[[C512:.+]] = arith.constant 512 : index
// FOLD-DAG: %[[C31:.+]] = arith.constant 31 : index
// FOLD: %[[GUARDED:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : i32
// FOLD: %[[SEEN:.+]] = arith.index_cast %[[GUARDED]] : i32 to index
// FOLD: %[[END:.+]] = arith.minsi %[[SEEN]], %[[C512]] : index
// FOLD: %[[LAST_TILE:.+]] = arith.subi %[[SEEN]], %[[C31]] : index
// FOLD: %[[MASK_FROM:.+]] = arith.minsi %[[LAST_TILE]], %{{.+}} : index
// FOLD: scf.for %[[J:[a-z0-9_]+]] = %{{.+}} to %[[END]] step %{{.+}}
// FOLD: arith.cmpi sge, %[[J]], %[[MASK_FROM]] : index
func.func @paged_decode(%q: tensor<2x8x4x128xbf16>, %kc: tensor<64x32x8x128xbf16>, %vc: tensor<64x32x8x128xbf16>,
                        %t: tensor<2x16xi32>, %l: tensor<2xi32>) -> tensor<2x8x4x128xbf16> {
  %k = kiln.gather_pages %kc, %t, %l : tensor<64x32x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
  %v = kiln.gather_pages %vc, %t, %l : tensor<64x32x8x128xbf16>, tensor<2x16xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
  %o = kiln.attention %q, %k, %v mod_operands(%l : tensor<2xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %lens: tensor<2xi32>):
    %n = tensor.extract %lens[%b] : tensor<2xi32>
    %len = arith.index_cast %n : i32 to index
    %seen = arith.cmpi slt, %j, %len : index
    kiln.yield %seen : i1
  } {scale = 0.125 : f32, kiln.config = #kiln.config<tile = [16, 32], warps = 1, stages = 2, lowering = "mma_sync">}
      : tensor<2x8x4x128xbf16>, tensor<2x8x512x128xbf16>, tensor<2x8x512x128xbf16> -> tensor<2x8x4x128xbf16>
  return %o : tensor<2x8x4x128xbf16>
}

// -----

// A 64-key tile over 16-row pages spans four pages: it is assembled from four 16-row pieces, each read from its
// own page (the table at column keyStart / 16 + 0, 1, 2, 3) with its own valid rows.
// CHECK-LABEL: func.func @paged_pieces
// CHECK: scf.for
// CHECK: %[[EMPTY:.+]] = tensor.empty() : tensor<64x128xbf16>
// CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<2x32xi32>
// CHECK: %[[P0:.+]] = tensor.insert_slice %{{.+}} into %[[EMPTY]][0, 0] [16, 128] [1, 1] : tensor<16x128xbf16> into tensor<64x128xbf16>
// CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<2x32xi32>
// CHECK: %[[P1:.+]] = tensor.insert_slice %{{.+}} into %[[P0]][16, 0] [16, 128]
// CHECK: %[[P2:.+]] = tensor.insert_slice %{{.+}} into %[[P1]][32, 0] [16, 128]
// CHECK: %[[P3:.+]] = tensor.insert_slice %{{.+}} into %[[P2]][48, 0] [16, 128]
// CHECK: kiln.matmul %{{.+}}, %[[P3]] transpose_rhs
func.func @paged_pieces(%q: tensor<2x8x4x128xbf16>, %kc: tensor<64x16x8x128xbf16>, %vc: tensor<64x16x8x128xbf16>,
                        %t: tensor<2x32xi32>, %l: tensor<2xi32>) -> tensor<2x8x4x128xbf16> {
  %k = kiln.gather_pages %kc, %t, %l : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
  %v = kiln.gather_pages %vc, %t, %l : tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x8x512x128xbf16>
  %o = kiln.attention %q, %k, %v mod_operands(%l : tensor<2xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %lens: tensor<2xi32>):
    %n = tensor.extract %lens[%b] : tensor<2xi32>
    %len = arith.index_cast %n : i32 to index
    %seen = arith.cmpi slt, %j, %len : index
    kiln.yield %seen : i1
  } {scale = 0.125 : f32, kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">}
      : tensor<2x8x4x128xbf16>, tensor<2x8x512x128xbf16>, tensor<2x8x512x128xbf16> -> tensor<2x8x4x128xbf16>
  return %o : tensor<2x8x4x128xbf16>
}

// -----

// A split matmul (k_chunk = 256) iterates over its chunks first: chunk s's K loop runs over k in
// [s * 256, min((s + 1) * 256, 1000)), whole 64-deep k-tiles clamped only at K, and its f32 tile goes to the
// chunk's slice of the partial products.
// CHECK-LABEL: func.func @matmul_k_chunks
// CHECK: scf.forall (%[[S:[a-zA-Z0-9_]+]], %[[I:[a-zA-Z0-9_]+]], %[[J:[a-zA-Z0-9_]+]]) = (0, 0, 0) to (4, 20, 72) step (1, 32, 64)
// CHECK: %[[START:.+]] = arith.muli %[[S]], %[[C256:.+]] : index
// CHECK: %[[NEXT:.+]] = arith.addi %[[START]], %[[C256]] : index
// CHECK: %[[END:.+]] = arith.minsi %[[NEXT]], %c1000 : index
// CHECK: scf.for %[[K:.+]] = %[[START]] to %[[END]] step %c64
// CHECK: tensor.extract_slice %{{.*}}[%[[I]], %[[K]]]
// CHECK: kiln.matmul {{.*}} : tensor<32x64xbf16>, tensor<64x64xbf16> -> tensor<32x64xf32>
// CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[S]], %[[I]], %[[J]]] [1, %{{.*}}, %{{.*}}] [1, 1, 1] : tensor<?x?xf32> into tensor<4x20x72xf32>
func.func @matmul_k_chunks(%x: tensor<20x1000xbf16>, %w: tensor<1000x72xbf16>) -> tensor<4x20x72xf32> {
  %p = kiln.matmul %x, %w {k_chunk = 256 : i64, kiln.config = #kiln.config<tile = [32, 64, 64], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<20x1000xbf16>, tensor<1000x72xbf16> -> tensor<4x20x72xf32>
  return %p : tensor<4x20x72xf32>
}

// -----

// A wgmma matmul whose config splits K over a cluster (k_splits = 3): inside each output tile's iteration a
// loop (kiln.cluster_split) over the 3 chunks of whole 64-deep k-tiles, chunk s running its own K loop over
// [s * 384, min((s + 1) * 384, 1000)) into a zeroed accumulator and adding it to the tile's sum; the sum is
// rounded to bf16 and stored like an unsplit tile's.
// CHECK-LABEL: func.func @matmul_cluster_splits
// CHECK: scf.forall (%[[I:[a-zA-Z0-9_]+]], %[[J:[a-zA-Z0-9_]+]]) = (0, 0) to (40, 72) step (64, 128)
// CHECK: %[[ZERO:.+]] = linalg.fill
// CHECK: %[[SUM:.+]] = scf.for %[[S:[a-zA-Z0-9_]+]] = %c0 to %c3 step %c1 iter_args(%[[ACC:.+]] = %[[ZERO]]) -> (tensor<64x128xf32>)
// CHECK: linalg.fill
// CHECK: %[[START:.+]] = arith.muli %[[S]], %[[C384:.+]] : index
// CHECK: %[[NEXT:.+]] = arith.addi %[[START]], %[[C384]] : index
// CHECK: %[[END:.+]] = arith.minsi %[[NEXT]], %c1000 : index
// CHECK: %[[PART:.+]] = scf.for %[[K:.+]] = %[[START]] to %[[END]] step %c64
// CHECK: tensor.extract_slice %{{.*}}[%[[I]], %[[K]]]
// CHECK: kiln.matmul {{.*}} : tensor<64x64xbf16>, tensor<128x64xbf16> -> tensor<64x128xf32>
// CHECK: %[[ADDED:.+]] = kiln.add %[[ACC]], %[[PART]] : tensor<64x128xf32>, tensor<64x128xf32> -> tensor<64x128xf32>
// CHECK: scf.yield %[[ADDED]]
// CHECK: } {kiln.cluster_split}
// CHECK: kiln.cast %[[SUM]] : tensor<64x128xf32> to tensor<64x128xbf16>
// CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[I]], %[[J]]]
// CHECK: {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma", k_splits = 3>
func.func @matmul_cluster_splits(%x: tensor<40x1000xbf16>, %w: tensor<72x1000xbf16>) -> tensor<40x72xbf16> {
  %y = kiln.matmul %x, %w {transpose_rhs, kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 6, lowering = "wgmma", k_splits = 3>} : tensor<40x1000xbf16>, tensor<72x1000xbf16> -> tensor<40x72xbf16>
  return %y : tensor<40x72xbf16>
}
