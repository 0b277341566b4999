// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-online-softmax -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-online-softmax -canonicalize -split-input-file | FileCheck %s --check-prefix=CLEAN

// kiln-online-softmax on the two-loop form kiln-tile gives attention (the attention ops carry explicit configs),
// and on hand-written loops. The fused loop carries the running row max m, the running row sum l and the
// accumulator; scores are in base 2 (exp2, log2(e) folded into the score scale where possible).

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// 100 keys in 32-wide tiles, scale 0.125: the fused loop keeps the tiles' scaled scores and position masking,
// with the scale constant now 0.125 * log2(e) = 0.180336880. The mask is still taken by the tiles from maskFrom
// on (`keyStart >= maskFrom`, here the constant 100 - 31 = 69 once canonicalized).
// CHECK-DAG: #[[$TILE:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW_OF_TILE:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @attention
// CHECK-NOT: kiln.softmax
// CHECK-DAG: %[[MASK_FROM:[a-zA-Z0-9_]+]] = arith.constant 69 : index
// CHECK: scf.forall
// CHECK: %[[ACC_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64x64xf32>)
// CHECK: %[[NEG_INF:[a-zA-Z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK: %[[M_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{.*}} : tensor<64xf32>) -> tensor<64xf32>
// CHECK: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[L_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<64xf32>) -> tensor<64xf32>
// CHECK: %[[LOOP:[a-zA-Z0-9_]+]]:3 = scf.for %[[KEY:[a-zA-Z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[M:[a-zA-Z0-9_]+]] = %[[M_INIT]], %[[L:[a-zA-Z0-9_]+]] = %[[L_INIT]], %[[ACC:[a-zA-Z0-9_]+]] = %[[ACC_INIT]]) -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK: %[[QK:[a-zA-Z0-9_]+]] = kiln.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<64x64xf32>, tensor<32x64xf32> -> tensor<64x32xf32>
// CHECK: %[[SCALE_LOG2E:[a-zA-Z0-9_]+]] = kiln.constant dense<0.180336878> : tensor<f32>
// CHECK: %[[SCALED:[a-zA-Z0-9_]+]] = kiln.mul %[[QK]], %[[SCALE_LOG2E]] : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
// CHECK: %[[NEEDS_MASK:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK-NEXT: %[[SCORES:[a-zA-Z0-9_]+]] = scf.if %[[NEEDS_MASK]] -> (tensor<64x32xf32>) {
// CHECK: linalg.generic {{.*}} ins(%[[SCALED]] : tensor<64x32xf32>) {{.*}} attrs = {kiln.position_mask}
// CHECK: } else {
// CHECK: scf.yield %[[SCALED]]
// CHECK-NOT: kiln.mul
// CHECK: %[[TILE_MAX:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$TILE]], #[[$ROW_OF_TILE]]], iterator_types = ["parallel", "reduction"]} ins(%[[SCORES]] : tensor<64x32xf32>)
// CHECK: arith.maximumf
// CHECK: %[[M_NEW:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ROW]], #[[$ROW]], #[[$ROW]]], iterator_types = ["parallel"]} ins(%[[M]], %[[TILE_MAX]] : tensor<64xf32>, tensor<64xf32>)
// CHECK: arith.maximumf
// CHECK: %[[P:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$TILE]], #[[$ROW_OF_TILE]], #[[$TILE]]], iterator_types = ["parallel", "parallel"]} ins(%[[SCORES]], %[[M_NEW]] : tensor<64x32xf32>, tensor<64xf32>)
// CHECK: ^bb0(%[[S:[a-zA-Z0-9_]+]]: f32, %[[ROW_MAX:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[IS_NEG_INF:[a-zA-Z0-9_]+]] = arith.cmpf oeq, %[[ROW_MAX]], %{{.*}} : f32
// CHECK: %[[SAFE_MAX:[a-zA-Z0-9_]+]] = arith.select %[[IS_NEG_INF]], %{{.*}}, %[[ROW_MAX]] : f32
// CHECK: %[[SHIFTED:[a-zA-Z0-9_]+]] = arith.subf %[[S]], %[[SAFE_MAX]] : f32
// CHECK: %[[E:[a-zA-Z0-9_]+]] = math.exp2 %[[SHIFTED]] : f32
// CHECK: linalg.yield %[[E]]
// CHECK: %[[ALPHA:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[M]], %[[M_NEW]] : tensor<64xf32>, tensor<64xf32>)
// CHECK: math.exp2
// CHECK: %[[TILE_SUM:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[P]] : tensor<64x32xf32>)
// CHECK: arith.addf
// CHECK: %[[L_NEW:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[L]], %[[ALPHA]], %[[TILE_SUM]] : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[ACC_SCALED:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$TILE]], #[[$ROW_OF_TILE]], #[[$TILE]]], iterator_types = ["parallel", "parallel"]} ins(%[[ACC]], %[[ALPHA]] : tensor<64x64xf32>, tensor<64xf32>)
// CHECK: arith.mulf
// CHECK: %[[PV:[a-zA-Z0-9_]+]] = kiln.matmul %[[P]], %{{.*}} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
// CHECK: %[[ACC_NEW:[a-zA-Z0-9_]+]] = kiln.add %[[ACC_SCALED]], %[[PV]]
// CHECK: scf.yield %[[M_NEW]], %[[L_NEW]], %[[ACC_NEW]] : tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>
// CHECK-NEXT: }
// CHECK-NOT: scf.for %
// The softmax was attention's (zero_empty_rows): a row that saw no key (l = 0, acc = 0) divides by 1, giving 0.
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[LOOP]]#2, %[[LOOP]]#1 : tensor<64x64xf32>, tensor<64xf32>)
// CHECK: ^bb0(%[[SUMS:[a-zA-Z0-9_]+]]: f32, %[[TOTAL:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[EMPTY:[a-zA-Z0-9_]+]] = arith.cmpf oeq, %[[TOTAL]], %{{.*}} : f32
// CHECK: %[[DIVISOR:[a-zA-Z0-9_]+]] = arith.select %[[EMPTY]], %{{.*}}, %[[TOTAL]] : f32
// CHECK: arith.divf %[[SUMS]], %[[DIVISOR]] : f32
// CHECK: tensor.extract_slice %[[OUT]][0, 0]
// CHECK-NOT: kiln.softmax
// CHECK-NOT: scf.for %
// CHECK: return

// Once dead code is gone, nothing of the [64, 128] row of scores is left.
// CLEAN-LABEL: func.func @attention
// CLEAN-NOT: tensor<64x128xf32>
// CLEAN: scf.for
// CLEAN-NOT: tensor<64x128xf32>
// CLEAN: return
func.func @attention(%q: tensor<1x2x100x64xf32>, %k: tensor<1x2x100x64xf32>, %v: tensor<1x2x100x64xf32>) -> tensor<1x2x100x64xf32> {
  %0 = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [64, 32], warps = 1, stages = 1, lowering = "host">, scale = 0.125 : f32} : tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32> -> tensor<1x2x100x64xf32>
  return %0 : tensor<1x2x100x64xf32>
}

// -----

// With lse the kiln.logsumexp of the row disappears too: m is in base 2, so lse = m ln(2) + ln(l). The default
// scale 1/sqrt(32) = 0.176776692 becomes 0.255034864.
// CHECK-LABEL: func.func @attention_lse
// CHECK-NOT: kiln.logsumexp
// CHECK-NOT: kiln.softmax
// CHECK: %[[LOOP:[a-zA-Z0-9_]+]]:3 = scf.for {{.*}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>)
// CHECK: kiln.constant dense<0.255034864> : tensor<f32>
// CHECK: math.exp2
// CHECK: scf.yield
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[LOOP]]#2, %[[LOOP]]#1 : tensor<32x32xf32>, tensor<32xf32>)
// CHECK: arith.divf
// CHECK: %[[LSE:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[LOOP]]#0, %[[LOOP]]#1 : tensor<32xf32>, tensor<32xf32>)
// CHECK: ^bb0(%[[M:[a-zA-Z0-9_]+]]: f32, %[[L:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[LN2:[a-zA-Z0-9_]+]] = arith.constant 0.693147182 : f32
// CHECK: %[[M_NATURAL:[a-zA-Z0-9_]+]] = arith.mulf %[[M]], %[[LN2]] : f32
// CHECK: %[[LOG_L:[a-zA-Z0-9_]+]] = math.log %[[L]] : f32
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[M_NATURAL]], %[[LOG_L]] : f32
// CHECK: linalg.yield %[[SUM]] : f32
// The tiles divide the sequence, so the whole tiles are stored.
// CHECK: tensor.parallel_insert_slice %[[OUT]] into {{.*}} : tensor<32x32xf32> into tensor<2x2x64x32xf32>
// CHECK: tensor.parallel_insert_slice %[[LSE]] into {{.*}} : tensor<32xf32> into tensor<2x2x64xf32>
// CHECK-NOT: kiln.logsumexp
// CHECK: return
func.func @attention_lse(%q: tensor<2x2x64x32xf32>, %k: tensor<2x2x64x32xf32>, %v: tensor<2x2x64x32xf32>) -> (tensor<2x2x64x32xf32>, tensor<2x2x64xf32>) {
  %0, %1 = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<2x2x64x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64x32xf32> -> tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
  return %0, %1 : tensor<2x2x64x32xf32>, tensor<2x2x64xf32>
}

// -----

// Causal: the fused loop keeps the shared causal upper bound min(128, i + 64), and the tiles from maskFrom =
// min(97, i + 2) on (those straddling the diagonal or the end of the keys) stay masked, on `keyStart >=
// maskFrom` alone; the diagonal Sk - Sq folds to 32 (the mask commutes with the positive scale, so log2(e) is
// still folded into the constant).
// CHECK-DAG: #[[$KEY_END_MAP:.+]] = affine_map<(d0) -> (128, d0 + 64)>
// CHECK-DAG: #[[$MASK_FROM_MAP:.+]] = affine_map<(d0) -> (97, d0 + 2)>
// CHECK-LABEL: func.func @attention_causal
// CHECK-NOT: kiln.softmax
// CHECK-DAG: %[[C32:[a-zA-Z0-9_]+]] = arith.constant 32 : index
// CHECK-DAG: %[[C128:[a-zA-Z0-9_]+]] = arith.constant 128 : index
// CHECK: scf.forall (%[[I:[a-zA-Z0-9_]+]])
// CHECK: %[[KEY_END:[a-zA-Z0-9_]+]] = affine.min #[[$KEY_END_MAP]](%[[I]])
// CHECK-NEXT: %[[MASK_FROM:[a-zA-Z0-9_]+]] = affine.min #[[$MASK_FROM_MAP]](%[[I]])
// CHECK: scf.for %[[KEY:[a-zA-Z0-9_]+]] = %{{.*}} to %[[KEY_END]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>)
// CHECK: kiln.constant dense<0.255034864> : tensor<f32>
// CHECK-NOT: arith.ori
// CHECK: %[[NEEDS_MASK:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[MASK_FROM]] : index
// CHECK-NEXT: scf.if %[[NEEDS_MASK]]
// CHECK: linalg.generic {{.*}} attrs = {kiln.position_mask}
// CHECK: %[[COL:[a-zA-Z0-9_]+]] = arith.addi %[[KEY]], %{{.*}} : index
// CHECK: %[[OUTSIDE:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[COL]], %[[C128]] : index
// CHECK: %[[LIMIT:[a-zA-Z0-9_]+]] = arith.addi %{{.*}}, %[[C32]] : index
// CHECK: %[[FUTURE:[a-zA-Z0-9_]+]] = arith.cmpi sgt, %[[COL]], %[[LIMIT]] : index
// CHECK: arith.ori %[[OUTSIDE]], %[[FUTURE]] : i1
// CHECK: math.exp2
// CHECK: scf.yield
// CHECK-NOT: scf.for %
// CHECK-NOT: kiln.softmax
// CHECK: return
func.func @attention_causal(%q: tensor<1x1x96x32xf32>, %k: tensor<1x1x128x32xf32>, %v: tensor<1x1x128x32xf32>) -> tensor<1x1x96x32xf32> {
  %0 = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x96x32xf32>, tensor<1x1x128x32xf32>, tensor<1x1x128x32xf32> -> tensor<1x1x96x32xf32>
  return %0 : tensor<1x1x96x32xf32>
}

// -----

// With a mask, a kiln.add sits between the scale and the softmax, so the scale constant is left as it is and the
// masked scores are brought to base 2 by one explicit multiply by log2(e).
// CHECK-LABEL: func.func @attention_mask
// CHECK-DAG: %[[SCALE:[a-zA-Z0-9_]+]] = kiln.constant dense<0.176776692> : tensor<f32>
// CHECK-NOT: dense<0.255034864>
// CHECK: scf.for
// CHECK: %[[SCALED:[a-zA-Z0-9_]+]] = kiln.mul %{{.*}}, %[[SCALE]] : tensor<32x32xf32>, tensor<f32> -> tensor<32x32xf32>
// CHECK: %[[BIASED:[a-zA-Z0-9_]+]] = kiln.add %[[SCALED]], %{{.*}} : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
// CHECK: %[[MASKED:[a-zA-Z0-9_]+]] = scf.if
// CHECK: attrs = {kiln.position_mask}
// CHECK: scf.yield %[[BIASED]]
// CHECK: %[[LOG2E:[a-zA-Z0-9_]+]] = kiln.constant dense<1.44269502> : tensor<f32>
// CHECK: %[[BASE2:[a-zA-Z0-9_]+]] = kiln.mul %[[MASKED]], %[[LOG2E]] : tensor<32x32xf32>, tensor<f32> -> tensor<32x32xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[BASE2]] : tensor<32x32xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[BASE2]], %{{.*}} : tensor<32x32xf32>, tensor<32xf32>)
// CHECK: math.exp2
// CHECK-NOT: kiln.softmax
// CHECK: return
func.func @attention_mask(%q: tensor<2x2x64x32xf32>, %k: tensor<2x2x64x32xf32>, %v: tensor<2x2x64x32xf32>, %m: tensor<1x1x64x64xbf16>) -> tensor<2x2x64x32xf32> {
  %0 = kiln.attention %q, %k, %v mask(%m : tensor<1x1x64x64xbf16>) {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<2x2x64x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64x32xf32> -> tensor<2x2x64x32xf32>
  return %0 : tensor<2x2x64x32xf32>
}

// -----

// bf16: P is computed in f32 (exp2 of the f32 scores) and rounded to bf16 (kiln.cast) on its way to the P V
// matmul, the type of v, as the tensor cores take it; the fused loop accepts the cast between P and the matmul.
// The row sum l is accumulated from the f32 P, the accumulator stays f32, and the output is cast to bf16 once.
// CHECK-LABEL: func.func @attention_bf16
// CHECK-NOT: kiln.softmax
// CHECK: %[[LOOP:[a-zA-Z0-9_]+]]:3 = scf.for {{.*}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>)
// CHECK: kiln.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<32x32xbf16>, tensor<32x32xbf16> -> tensor<32x32xf32>
// CHECK: %[[P:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<32x32xf32>, tensor<32xf32>) outs(%{{.*}} : tensor<32x32xf32>)
// CHECK: math.exp2
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[P]] : tensor<32x32xf32>)
// CHECK: arith.addf
// CHECK: %[[P_BF16:[a-zA-Z0-9_]+]] = kiln.cast %[[P]] : tensor<32x32xf32> to tensor<32x32xbf16>
// CHECK-NEXT: %[[PV:[a-zA-Z0-9_]+]] = kiln.matmul %[[P_BF16]], %{{.*}} : tensor<32x32xbf16>, tensor<32x32xbf16> -> tensor<32x32xf32>
// CHECK-NEXT: %[[ACC_NEW:[a-zA-Z0-9_]+]] = kiln.add %{{.*}}, %[[PV]] : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
// CHECK-NEXT: scf.yield %{{.*}}, %{{.*}}, %[[ACC_NEW]]
// CHECK-NOT: scf.for %
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[LOOP]]#2, %[[LOOP]]#1 : tensor<32x32xf32>, tensor<32xf32>)
// CHECK: arith.divf
// CHECK: kiln.cast %[[OUT]] : tensor<32x32xf32> to tensor<32x32xbf16>
// CHECK-NOT: kiln.softmax
// CHECK: return
func.func @attention_bf16(%q: tensor<1x2x64x32xbf16>, %k: tensor<1x2x64x32xbf16>, %v: tensor<1x2x64x32xbf16>) -> tensor<1x2x64x32xbf16> {
  %0 = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x2x64x32xbf16>, tensor<1x2x64x32xbf16>, tensor<1x2x64x32xbf16> -> tensor<1x2x64x32xbf16>
  return %0 : tensor<1x2x64x32xbf16>
}

//===----------------------------------------------------------------------===//
// Hand-written loops
//===----------------------------------------------------------------------===//

// -----

// The minimal form: loop 1 copies column tiles of %s into a -inf row, loop 2 accumulates P V. The tiles are not
// a scaled product, so they get the explicit log2(e) multiply.
// CHECK-LABEL: func.func @plain_tiles
// CHECK-SAME: (%[[S:[a-zA-Z0-9_]+]]: tensor<4x64xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<64x8xf32>)
// CHECK-NOT: kiln.softmax
// CHECK: %[[LOOP:[a-zA-Z0-9_]+]]:3 = scf.for %[[J:[a-zA-Z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>) {
// CHECK: %[[TILE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[S]][0, %[[J]]] [4, 16] [1, 1]
// CHECK: %[[LOG2E:[a-zA-Z0-9_]+]] = kiln.constant dense<1.44269502> : tensor<f32>
// CHECK: %[[BASE2:[a-zA-Z0-9_]+]] = kiln.mul %[[TILE]], %[[LOG2E]] : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
// CHECK: %[[P:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[BASE2]], %{{.*}} : tensor<4x16xf32>, tensor<4xf32>)
// CHECK: math.exp2
// CHECK: %[[V_TILE:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[V]][%[[J]], 0] [16, 8] [1, 1]
// CHECK: kiln.matmul %[[P]], %[[V_TILE]] : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK: scf.yield
// CHECK-NOT: scf.for %
// A plain softmax keeps its NaN for a row of -inf: the division is not guarded.
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[LOOP]]#2, %[[LOOP]]#1 : tensor<4x8xf32>, tensor<4xf32>)
// CHECK-NOT: arith.select
// CHECK: arith.divf
// CHECK: return %[[OUT]]
func.func @plain_tiles(%s: tensor<4x64xf32>, %v: tensor<64x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %row0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %row = scf.for %j = %c0 to %c64 step %c16 iter_args(%r = %row0) -> (tensor<4x64xf32>) {
    %t = tensor.extract_slice %s[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %ins = tensor.insert_slice %t into %r[0, %j] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
    scf.yield %ins : tensor<4x64xf32>
  }
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %vt = tensor.extract_slice %v[%j, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %pv = kiln.matmul %pt, %vt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// Softmaxes of any other form are left alone
//===----------------------------------------------------------------------===//

// -----

// A softmax of a function argument.
// CHECK-LABEL: func.func @softmax_of_argument
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x64xf32>)
// CHECK-NOT: math.exp2
// CHECK: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[X]] axis 1 : tensor<4x64xf32>
// CHECK-NEXT: return %[[P]]
func.func @softmax_of_argument(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %0 = kiln.softmax %x axis 1 : tensor<4x64xf32>
  return %0 : tensor<4x64xf32>
}

// -----

// A softmax whose row is not built by a loop, even though it is consumed tile by tile by an accumulating loop.
// CHECK-LABEL: func.func @row_not_from_loop
// CHECK-NOT: math.exp2
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = kiln.exp %{{.*}} : tensor<4x64xf32>
// CHECK: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[ROW]] axis 1 : tensor<4x64xf32>
// CHECK: scf.for {{.*}} -> (tensor<4x8xf32>)
// CHECK: tensor.extract_slice %[[P]]
// CHECK-NOT: math.exp2
// CHECK: return
func.func @row_not_from_loop(%s: tensor<4x64xf32>, %v: tensor<64x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %row = kiln.exp %s : tensor<4x64xf32>
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %vt = tensor.extract_slice %v[%j, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %pv = kiln.matmul %pt, %vt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out : tensor<4x8xf32>
}

// -----

// A row that starts from zeros instead of -inf: columns no tile writes would count as exp(0) in the softmax, so
// the row cannot be dropped.
// CHECK-LABEL: func.func @row_not_from_neg_inf
// CHECK-NOT: math.exp2
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = scf.for
// CHECK: kiln.softmax %[[ROW]] axis 1
// CHECK-NOT: math.exp2
// CHECK: return
func.func @row_not_from_neg_inf(%s: tensor<4x64xf32>, %v: tensor<64x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %row0 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %row = scf.for %j = %c0 to %c64 step %c16 iter_args(%r = %row0) -> (tensor<4x64xf32>) {
    %t = tensor.extract_slice %s[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %ins = tensor.insert_slice %t into %r[0, %j] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
    scf.yield %ins : tensor<4x64xf32>
  }
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %vt = tensor.extract_slice %v[%j, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %pv = kiln.matmul %pt, %vt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out : tensor<4x8xf32>
}

// -----

// The two loops walk different tiles (16 vs 32 columns): no fusion.
// CHECK-LABEL: func.func @loops_over_different_tiles
// CHECK-NOT: math.exp2
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = scf.for
// CHECK: kiln.softmax %[[ROW]] axis 1
// CHECK: scf.for
// CHECK-NOT: math.exp2
// CHECK: return
func.func @loops_over_different_tiles(%s: tensor<4x64xf32>, %v: tensor<64x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %row0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %row = scf.for %j = %c0 to %c64 step %c16 iter_args(%r = %row0) -> (tensor<4x64xf32>) {
    %t = tensor.extract_slice %s[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %ins = tensor.insert_slice %t into %r[0, %j] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
    scf.yield %ins : tensor<4x64xf32>
  }
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c32 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 32] [1, 1] : tensor<4x64xf32> to tensor<4x32xf32>
    %vt = tensor.extract_slice %v[%j, 0] [32, 8] [1, 1] : tensor<64x8xf32> to tensor<32x8xf32>
    %pv = kiln.matmul %pt, %vt : tensor<4x32xf32>, tensor<32x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out : tensor<4x8xf32>
}

// -----

// The probabilities are also returned whole, not only read tile by tile: the softmax must stay.
// CHECK-LABEL: func.func @probabilities_escape
// CHECK-NOT: math.exp2
// CHECK: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax
// CHECK: return %{{.*}}, %[[P]]
func.func @probabilities_escape(%s: tensor<4x64xf32>, %v: tensor<64x8xf32>) -> (tensor<4x8xf32>, tensor<4x64xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %row0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %row = scf.for %j = %c0 to %c64 step %c16 iter_args(%r = %row0) -> (tensor<4x64xf32>) {
    %t = tensor.extract_slice %s[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %ins = tensor.insert_slice %t into %r[0, %j] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
    scf.yield %ins : tensor<4x64xf32>
  }
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %vt = tensor.extract_slice %v[%j, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %pv = kiln.matmul %pt, %vt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out, %p : tensor<4x8xf32>, tensor<4x64xf32>
}

// -----

// The accumulated term is not linear in P (exp of the tile): rescaling would be wrong, so nothing changes.
// CHECK-LABEL: func.func @nonlinear_consumer
// CHECK-NOT: math.exp2
// CHECK: kiln.softmax
func.func @nonlinear_consumer(%s: tensor<4x64xf32>, %v: tensor<64x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %row0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %row = scf.for %j = %c0 to %c64 step %c16 iter_args(%r = %row0) -> (tensor<4x64xf32>) {
    %t = tensor.extract_slice %s[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %ins = tensor.insert_slice %t into %r[0, %j] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
    scf.yield %ins : tensor<4x64xf32>
  }
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %ex = kiln.exp %pt : tensor<4x16xf32>
    %vt = tensor.extract_slice %v[%j, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %pv = kiln.matmul %ex, %vt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out : tensor<4x8xf32>
}

// -----

// The log-sum-exp is read before the accumulation loop, where the fused loop's value does not exist yet.
// CHECK-LABEL: func.func @lse_used_early
// CHECK-NOT: math.exp2
// CHECK: kiln.softmax
func.func @lse_used_early(%s: tensor<4x64xf32>, %v: tensor<64x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %row0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %row = scf.for %j = %c0 to %c64 step %c16 iter_args(%r = %row0) -> (tensor<4x64xf32>) {
    %t = tensor.extract_slice %s[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %ins = tensor.insert_slice %t into %r[0, %j] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
    scf.yield %ins : tensor<4x64xf32>
  }
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %lse = kiln.logsumexp %row axis 1 : tensor<4x64xf32> -> tensor<4xf32>
  %n = kiln.neg %lse : tensor<4xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %vt = tensor.extract_slice %v[%j, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %pv = kiln.matmul %pt, %vt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out, %n : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// Every step inserts the same tile, defined outside the loop: the fused loop reads it from there.
// CHECK-LABEL: func.func @tile_from_outside
// CHECK-NOT: kiln.softmax
// CHECK: scf.for {{.*}} -> (tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>)
// CHECK: kiln.mul %{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
func.func @tile_from_outside(%t: tensor<4x16xf32>, %v: tensor<64x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c16 = arith.constant 16 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %row0 = linalg.fill ins(%ninf : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %row = scf.for %j = %c0 to %c64 step %c16 iter_args(%r = %row0) -> (tensor<4x64xf32>) {
    %ins = tensor.insert_slice %t into %r[0, %j] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<4x64xf32>
    scf.yield %ins : tensor<4x64xf32>
  }
  %p = kiln.softmax %row axis 1 : tensor<4x64xf32>
  %ea = tensor.empty() : tensor<4x8xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = scf.for %j = %c0 to %c64 step %c16 iter_args(%acc = %acc0) -> (tensor<4x8xf32>) {
    %pt = tensor.extract_slice %p[0, %j] [4, 16] [1, 1] : tensor<4x64xf32> to tensor<4x16xf32>
    %vt = tensor.extract_slice %v[%j, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %pv = kiln.matmul %pt, %vt : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %sum = kiln.add %acc, %pv : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    scf.yield %sum : tensor<4x8xf32>
  }
  return %out : tensor<4x8xf32>
}

// -----

// A softcapped score (cap * tanh(s / cap), cap 30) lies in [-30, 30], and P reaches the tensor cores as bf16,
// which keeps f32's exponent range: the loop takes 30 log2(e) (30 widened by one f32 ulp, for the multiply's
// rounding) as a fixed maximum and carries only the row sum
// and the accumulator, with no row maximum, no alpha and no rescale; each probability is the exp2 of the score
// in base 2 less that constant.
// CHECK-LABEL: func.func @attention_softcap_fixed_max
// CHECK: %[[L:.*]]:2 = scf.for {{.*}} iter_args(%[[SUM:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (tensor<32xf32>, tensor<32x16xf32>)
// CHECK-NOT: arith.maximumf
// CHECK: arith.constant 43.2808571 : f32
// CHECK-NEXT: arith.subf
// CHECK-NEXT: math.exp2
// CHECK-NOT: arith.maximumf
// CHECK: scf.yield
func.func @attention_softcap_fixed_max(%q: tensor<1x1x64x16xbf16>) -> tensor<1x1x64x16xbf16> {
  %0 = kiln.attention %q, %q, %q causal score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    kiln.yield %r : f32
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x64x16xbf16>, tensor<1x1x64x16xbf16>, tensor<1x1x64x16xbf16> -> tensor<1x1x64x16xbf16>
  return %0 : tensor<1x1x64x16xbf16>
}

// -----

// The same softcap at cap 50 spans 100 log2(e) = 144 binary orders, past the 100 a fixed maximum may leave
// below it, and with f16 P (whose exponent is short) any bound is too wide: both keep the running maximum.
// CHECK-LABEL: func.func @attention_softcap_wide
// CHECK: scf.for {{.*}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x16xf32>)
// CHECK: arith.maximumf
// CHECK-LABEL: func.func @attention_softcap_f16
// CHECK: scf.for {{.*}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x16xf32>)
// CHECK: arith.maximumf
func.func @attention_softcap_wide(%q: tensor<1x1x64x16xbf16>) -> tensor<1x1x64x16xbf16> {
  %0 = kiln.attention %q, %q, %q causal score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 50.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    kiln.yield %r : f32
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x64x16xbf16>, tensor<1x1x64x16xbf16>, tensor<1x1x64x16xbf16> -> tensor<1x1x64x16xbf16>
  return %0 : tensor<1x1x64x16xbf16>
}
func.func @attention_softcap_f16(%q: tensor<1x1x64x16xf16>) -> tensor<1x1x64x16xf16> {
  %0 = kiln.attention %q, %q, %q causal score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    kiln.yield %r : f32
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x64x16xf16>, tensor<1x1x64x16xf16>, tensor<1x1x64x16xf16> -> tensor<1x1x64x16xf16>
  return %0 : tensor<1x1x64x16xf16>
}

// -----

// Bounds in exact arithmetic would be [99, 101] here, but the kernel's f32 add of 2^40 rounds tanh(s) + 100 away
// (one ulp there is 2^17): each result's interval is widened by its rounding, so this one spans 2^18 and the loop
// keeps the running maximum.
// CHECK-LABEL: func.func @attention_bound_lost_to_rounding
// CHECK: scf.for {{.*}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x16xf32>)
// CHECK: arith.maximumf
func.func @attention_bound_lost_to_rounding(%q: tensor<1x1x64x16xbf16>) -> tensor<1x1x64x16xbf16> {
  %0 = kiln.attention %q, %q, %q causal score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c100 = arith.constant 100.0 : f32
    %big = arith.constant 1099511627776.0 : f32
    %t = math.tanh %s : f32
    %a = arith.addf %t, %c100 : f32
    %x = arith.addf %a, %big : f32
    %r = arith.subf %x, %big : f32
    kiln.yield %r : f32
  } {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x64x16xbf16>, tensor<1x1x64x16xbf16>, tensor<1x1x64x16xbf16> -> tensor<1x1x64x16xbf16>
  return %0 : tensor<1x1x64x16xbf16>
}

