// RUN: kiln-opt %s -kiln-split-masked-tiles -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-online-softmax -kiln-split-masked-tiles -split-input-file | FileCheck %s --check-prefix=ATTN

// kiln-split-masked-tiles on hand-written loops, and (ATTN) on the fused loop kiln-tile and kiln-online-softmax
// give a causal attention. A loop whose body branches on `scf.if (iv >= bound)`, with `bound` defined before
// the loop, becomes two loops split at the first iteration at or past the bound, lb + ceil((bound - lb) / step)
// * step clamped to [lb, ub]: the first runs the if's `else` region, the second its `then` region, chained on
// the first's results.

//===----------------------------------------------------------------------===//
// Loops that are split
//===----------------------------------------------------------------------===//

// From 0 in steps of 16: the split point is ceil(from / 16) * 16, at least 0 and at most the upper bound. The
// first loop adds (the else region) up to it, the second multiplies (the then region) from it to the end, and
// starts from the first's result. The ops after the branch are in both loops; neither holds the branch or the
// comparison.
// CHECK-DAG: #[[$FIRST_TILE:.+]] = affine_map<()[s0] -> ((s0 ceildiv 16) * 16)>
// CHECK-LABEL: func.func @split
// CHECK-SAME: (%[[INIT:[a-zA-Z0-9_]+]]: f32, %[[END:[a-zA-Z0-9_]+]]: index, %[[FROM:[a-zA-Z0-9_]+]]: index)
// CHECK-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C16:[a-zA-Z0-9_]+]] = arith.constant 16 : index
// CHECK-DAG: %[[ONE:[a-zA-Z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TWO:[a-zA-Z0-9_]+]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[FIRST:[a-zA-Z0-9_]+]] = affine.apply #[[$FIRST_TILE]]()[%[[FROM]]]
// CHECK-NEXT: %[[AT_LEAST_LB:[a-zA-Z0-9_]+]] = arith.maxsi %[[FIRST]], %[[C0]] : index
// CHECK-NEXT: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %[[AT_LEAST_LB]], %[[END]] : index
// CHECK-NEXT: %[[BEFORE:[a-zA-Z0-9_]+]] = scf.for %{{.*}} = %[[C0]] to %[[SPLIT]] step %[[C16]] iter_args(%[[ACC:[a-zA-Z0-9_]+]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT: %[[PLAIN:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[ONE]] : f32
// CHECK-NEXT: %[[NEXT:[a-zA-Z0-9_]+]] = arith.subf %[[PLAIN]], %[[ONE]] : f32
// CHECK-NEXT: scf.yield %[[NEXT]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: %[[AFTER:[a-zA-Z0-9_]+]] = scf.for %{{.*}} = %[[SPLIT]] to %[[END]] step %[[C16]] iter_args(%[[ACC2:[a-zA-Z0-9_]+]] = %[[BEFORE]]) -> (f32) {
// CHECK-NEXT: %[[MASKED:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC2]], %[[TWO]] : f32
// CHECK-NEXT: %[[NEXT2:[a-zA-Z0-9_]+]] = arith.subf %[[MASKED]], %[[ONE]] : f32
// CHECK-NEXT: scf.yield %[[NEXT2]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[AFTER]] : f32
// CHECK-NOT: scf.if
// CHECK-NOT: arith.cmpi
func.func @split(%init: f32, %end: index, %from: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %end step %c16 iter_args(%acc = %init) -> (f32) {
    %needs = arith.cmpi sge, %j, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      %a = arith.addf %acc, %one : f32
      scf.yield %a : f32
    }
    %s = arith.subf %t, %one : f32
    scf.yield %s : f32
  }
  return %r : f32
}

// -----

// A branch without results and without an `else` region: the first loop has nothing of it, the second runs its
// `then` region (the store).
// CHECK-LABEL: func.func @split_without_else
// CHECK: scf.for
// CHECK-NOT: memref.store
// CHECK: }
// CHECK: scf.for
// CHECK: memref.store
// CHECK-NOT: scf.if
func.func @split_without_else(%buffer: memref<64xf32>, %end: index, %from: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  scf.for %j = %c0 to %end step %c16 {
    %needs = arith.cmpi sge, %j, %from : index
    scf.if %needs {
      memref.store %one, %buffer[%j] : memref<64xf32>
    }
  }
  return
}

// -----

// A lower bound that is not a constant and a step of 32: the split point is lb + ceil((from - lb) / 32) * 32,
// at least lb. Every result of the first loop (the one the branch does not produce too) feeds the second.
// CHECK-DAG: #[[$FIRST_FROM_LB:.+]] = affine_map<()[s0, s1] -> (s0 + ((-s0 + s1) ceildiv 32) * 32)>
// CHECK-LABEL: func.func @split_from_lower_bound
// CHECK-SAME: (%[[INIT:[a-zA-Z0-9_]+]]: f32, %[[LB:[a-zA-Z0-9_]+]]: index, %[[END:[a-zA-Z0-9_]+]]: index, %[[FROM:[a-zA-Z0-9_]+]]: index)
// CHECK: %[[FIRST:[a-zA-Z0-9_]+]] = affine.apply #[[$FIRST_FROM_LB]]()[%[[LB]], %[[FROM]]]
// CHECK-NEXT: %[[AT_LEAST_LB:[a-zA-Z0-9_]+]] = arith.maxsi %[[FIRST]], %[[LB]] : index
// CHECK-NEXT: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %[[AT_LEAST_LB]], %[[END]] : index
// CHECK-NEXT: %[[BEFORE:[a-zA-Z0-9_]+]]:2 = scf.for %{{.*}} = %[[LB]] to %[[SPLIT]] step %{{.*}} iter_args(%[[ACC:[a-zA-Z0-9_]+]] = %[[INIT]], %{{.*}} = %[[INIT]]) -> (f32, f32) {
// CHECK-NEXT: scf.yield %[[ACC]], %[[ACC]] : f32, f32
// CHECK-NEXT: }
// CHECK-NEXT: %[[AFTER:[a-zA-Z0-9_]+]]:2 = scf.for %{{.*}} = %[[SPLIT]] to %[[END]] step %{{.*}} iter_args(%[[ACC2:[a-zA-Z0-9_]+]] = %[[BEFORE]]#0, %{{.*}} = %[[BEFORE]]#1) -> (f32, f32) {
// CHECK-NEXT: %[[MASKED:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC2]], %{{.*}} : f32
// CHECK-NEXT: scf.yield %[[MASKED]], %[[ACC2]] : f32, f32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[AFTER]]#0, %[[AFTER]]#1 : f32, f32
func.func @split_from_lower_bound(%init: f32, %lb: index, %end: index, %from: index) -> (f32, f32) {
  %c32 = arith.constant 32 : index
  %two = arith.constant 2.0 : f32
  %r:2 = scf.for %j = %lb to %end step %c32 iter_args(%acc = %init, %acc2 = %init) -> (f32, f32) {
    %needs = arith.cmpi sge, %j, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      scf.yield %acc : f32
    }
    scf.yield %t, %acc : f32, f32
  }
  return %r#0, %r#1 : f32, f32
}

// -----

// The comparison has another user: the branch goes, the comparison stays in both loops for that user.
// CHECK-LABEL: func.func @condition_used_elsewhere
// CHECK-SAME: (%{{.*}}: f32, %{{.*}}: index, %[[FROM:[a-zA-Z0-9_]+]]: index)
// CHECK: %[[BEFORE:[a-zA-Z0-9_]+]]:2 = scf.for %[[J:[a-zA-Z0-9_]+]] =
// CHECK-NEXT: %[[NEEDS:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[J]], %[[FROM]] : index
// CHECK-NEXT: arith.ori %{{.*}}, %[[NEEDS]] : i1
// CHECK: scf.for %[[J2:[a-zA-Z0-9_]+]] = {{.*}} iter_args(%{{.*}} = %[[BEFORE]]#0, %{{.*}} = %[[BEFORE]]#1)
// CHECK-NEXT: %[[NEEDS2:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[J2]], %[[FROM]] : index
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.ori %{{.*}}, %[[NEEDS2]] : i1
// CHECK-NOT: scf.if
func.func @condition_used_elsewhere(%init: f32, %end: index, %from: index) -> (f32, i1) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %false = arith.constant false
  %two = arith.constant 2.0 : f32
  %r:2 = scf.for %j = %c0 to %end step %c16 iter_args(%acc = %init, %seen = %false) -> (f32, i1) {
    %needs = arith.cmpi sge, %j, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      scf.yield %acc : f32
    }
    %s = arith.ori %seen, %needs : i1
    scf.yield %t, %s : f32, i1
  }
  return %r#0, %r#1 : f32, i1
}

//===----------------------------------------------------------------------===//
// Loops that are left alone
//===----------------------------------------------------------------------===//

// -----

// The condition does not compare the induction variable.
// CHECK-LABEL: func.func @condition_not_on_iv
// CHECK-NOT: arith.minsi
// CHECK: scf.for
// CHECK: %[[NEEDS:[a-zA-Z0-9_]+]] = arith.cmpi sge, %{{.*}}, %{{.*}} : index
// CHECK-NEXT: scf.if %[[NEEDS]] -> (f32) {
// CHECK-NOT: scf.for
func.func @condition_not_on_iv(%init: f32, %x: index, %end: index, %from: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %two = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %end step %c16 iter_args(%acc = %init) -> (f32) {
    %needs = arith.cmpi sge, %x, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      scf.yield %acc : f32
    }
    scf.yield %t : f32
  }
  return %r : f32
}

// -----

// The bound is computed inside the loop (even though it does not change): the split point could not be computed
// before it.
// CHECK-LABEL: func.func @bound_inside_loop
// CHECK-NOT: arith.minsi
// CHECK: scf.for %[[J:[a-zA-Z0-9_]+]] =
// CHECK-NEXT: %[[BOUND:[a-zA-Z0-9_]+]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT: %[[NEEDS:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[J]], %[[BOUND]] : index
// CHECK-NEXT: scf.if %[[NEEDS]] -> (f32) {
// CHECK-NOT: scf.for
func.func @bound_inside_loop(%init: f32, %end: index, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %two = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %end step %c16 iter_args(%acc = %init) -> (f32) {
    %from = arith.addi %n, %c1 : index
    %needs = arith.cmpi sge, %j, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      scf.yield %acc : f32
    }
    scf.yield %t : f32
  }
  return %r : f32
}

// -----

// `iv > bound` (sgt) is not the threshold form.
// CHECK-LABEL: func.func @not_sge
// CHECK-NOT: arith.minsi
// CHECK: scf.for %[[J:[a-zA-Z0-9_]+]] =
// CHECK-NEXT: %[[NEEDS:[a-zA-Z0-9_]+]] = arith.cmpi sgt, %[[J]], %{{.*}} : index
// CHECK-NEXT: scf.if %[[NEEDS]] -> (f32) {
// CHECK-NOT: scf.for
func.func @not_sge(%init: f32, %end: index, %from: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %two = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %end step %c16 iter_args(%acc = %init) -> (f32) {
    %needs = arith.cmpi sgt, %j, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      scf.yield %acc : f32
    }
    scf.yield %t : f32
  }
  return %r : f32
}

// -----

// A step that is not a constant.
// CHECK-LABEL: func.func @dynamic_step
// CHECK-NOT: arith.minsi
// CHECK: scf.for
// CHECK: scf.if
// CHECK-NOT: scf.for
func.func @dynamic_step(%init: f32, %end: index, %step: index, %from: index) -> f32 {
  %c0 = arith.constant 0 : index
  %two = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %end step %step iter_args(%acc = %init) -> (f32) {
    %needs = arith.cmpi sge, %j, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      scf.yield %acc : f32
    }
    scf.yield %t : f32
  }
  return %r : f32
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// -----

// Causal attention, 96 queries against 128 keys in 32x32 tiles, fused by kiln-online-softmax. The loop to the
// causal key bound min(128, i + 64) branches on `keyStart >= maskFrom`, maskFrom = min(97, i + 2); it becomes a
// loop of unmasked tiles up to ceil(maskFrom / 32) * 32 (clamped to [0, key bound]) and one of masked tiles from
// there, which carries on the running max, sum and accumulator. Only the second one holds the position mask.
// Without kiln-tile (the first RUN line) the op has no loop to split.
// CHECK-LABEL: func.func @attention_causal
// CHECK-NOT: scf.for
// CHECK: kiln.attention
// ATTN-DAG: #[[$KEY_END:.+]] = affine_map<(d0) -> (128, d0 + 64)>
// ATTN-DAG: #[[$MASK_FROM:.+]] = affine_map<(d0) -> (97, d0 + 2)>
// ATTN-DAG: #[[$FIRST_TILE:.+]] = affine_map<(d0) -> ((d0 ceildiv 32) * 32)>
// ATTN-LABEL: func.func @attention_causal
// ATTN-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// ATTN-DAG: %[[C32:[a-zA-Z0-9_]+]] = arith.constant 32 : index
// ATTN: scf.forall (%[[I:[a-zA-Z0-9_]+]]) = (0) to (96) step (32)
// ATTN: %[[KEY_END:[a-zA-Z0-9_]+]] = affine.min #[[$KEY_END]](%[[I]])
// ATTN-NEXT: %[[MASK_FROM:[a-zA-Z0-9_]+]] = affine.min #[[$MASK_FROM]](%[[I]])
// ATTN: %[[FIRST:[a-zA-Z0-9_]+]] = affine.apply #[[$FIRST_TILE]](%[[MASK_FROM]])
// ATTN-NEXT: %[[AT_LEAST_0:[a-zA-Z0-9_]+]] = arith.maxsi %[[FIRST]], %[[C0]] : index
// ATTN-NEXT: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %[[AT_LEAST_0]], %[[KEY_END]] : index
// ATTN-NEXT: %[[UNMASKED:[a-zA-Z0-9_]+]]:3 = scf.for %{{.*}} = %[[C0]] to %[[SPLIT]] step %[[C32]] iter_args({{.*}}) -> (tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>) {
// ATTN-NOT: scf.if
// ATTN-NOT: kiln.position_mask
// ATTN-NOT: arith.cmpi
// ATTN: kiln.matmul {{.*}} transpose_rhs
// ATTN-NOT: kiln.position_mask
// ATTN: math.exp2
// ATTN: kiln.matmul
// ATTN: scf.yield
// ATTN-NEXT: }
// ATTN-NEXT: %[[MASKED:[a-zA-Z0-9_]+]]:3 = scf.for %{{.*}} = %[[SPLIT]] to %[[KEY_END]] step %[[C32]] iter_args(%{{.*}} = %[[UNMASKED]]#0, %{{.*}} = %[[UNMASKED]]#1, %{{.*}} = %[[UNMASKED]]#2) -> (tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>) {
// ATTN-NOT: scf.if
// ATTN: %[[SCORES:[a-zA-Z0-9_]+]] = kiln.mul
// ATTN-NEXT: tensor.empty
// ATTN-NEXT: linalg.generic {{.*}} ins(%[[SCORES]] : tensor<32x32xf32>) {{.*}} attrs = {kiln.position_mask}
// ATTN: arith.cmpi sge
// ATTN: arith.cmpi sgt
// ATTN: math.exp2
// ATTN: kiln.matmul
// ATTN: scf.yield
// ATTN-NEXT: }
// ATTN-NEXT: %[[TEMP:[a-zA-Z0-9_]+]] = tensor.empty
// ATTN-NEXT: linalg.generic {{.*}} ins(%[[MASKED]]#2, %[[MASKED]]#1 : tensor<32x32xf32>, tensor<32xf32>)
// ATTN: arith.divf
// ATTN-NOT: scf.for %
// ATTN-NOT: scf.if
// ATTN: return
func.func @attention_causal(%q: tensor<1x1x96x32xf32>, %k: tensor<1x1x128x32xf32>, %v: tensor<1x1x128x32xf32>) -> tensor<1x1x96x32xf32> {
  %0 = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x96x32xf32>, tensor<1x1x128x32xf32>, tensor<1x1x128x32xf32> -> tensor<1x1x96x32xf32>
  return %0 : tensor<1x1x96x32xf32>
}
