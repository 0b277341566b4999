// RUN: kiln-opt %s -kiln-split-masked-tiles -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-online-softmax -kiln-split-masked-tiles -split-input-file | FileCheck %s --check-prefix=ATTN

// kiln-split-masked-tiles on hand-written loops, and (ATTN) on the fused loop kiln-tile and kiln-online-softmax
// give a causal attention. A loop whose body branches on `scf.if (iv >= bound)`, with `bound` defined before
// the loop, becomes two loops split at the first iteration at or past the bound, lb + ceil((bound - lb) / step)
// * step clamped to [lb, ub]: the first runs the if's `else` region, the second its `then` region, chained on
// the first's results. A branch marked `kiln.one_masked_tile` (at most one iteration reaches the bound: an
// attention whose only masked key tile is the last, partial one) keeps the first loop, and runs that iteration
// once after it under `scf.if (split < ub)`: the loop body at iv = split with the branch's `then` region
// inlined, or, when the loop ends before the split, the first loop's results.

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

// `iv < below || iv >= from` (a mask_mod's sliding window masks the first tiles too): three loops, the `then`
// region up to the first iteration at or past `below`, the `else` region up to the first at or past `from` (at
// least the first split), the `then` region to the end, each starting from the one before; no comparison or
// branch is left.
// CHECK-LABEL: func.func @split_three_ways
// CHECK-SAME: (%[[INIT:[a-zA-Z0-9_]+]]: f32, %[[END:[a-zA-Z0-9_]+]]: index, %[[BELOW:[a-zA-Z0-9_]+]]: index, %[[FROM:[a-zA-Z0-9_]+]]: index)
// CHECK-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[ONE:[a-zA-Z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TWO:[a-zA-Z0-9_]+]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[B0:.*]] = affine.apply #{{.*}}()[%[[BELOW]]]
// CHECK-NEXT: %[[B1:.*]] = arith.maxsi %[[B0]], %[[C0]] : index
// CHECK-NEXT: %[[START:.*]] = arith.minsi %[[B1]], %[[END]] : index
// CHECK-NEXT: %[[F0:.*]] = affine.apply #{{.*}}()[%[[FROM]]]
// CHECK-NEXT: %[[F1:.*]] = arith.maxsi %[[F0]], %[[START]] : index
// CHECK-NEXT: %[[SPLIT:.*]] = arith.minsi %[[F1]], %[[END]] : index
// CHECK-NEXT: %[[HEAD:.*]] = scf.for %{{.*}} = %[[C0]] to %[[START]] step %{{.*}} iter_args(%[[A0:.*]] = %[[INIT]])
// CHECK-NEXT: arith.mulf %[[A0]], %[[TWO]]
// CHECK: %[[MIDDLE:.*]] = scf.for %{{.*}} = %[[START]] to %[[SPLIT]] step %{{.*}} iter_args(%[[A1:.*]] = %[[HEAD]])
// CHECK-NEXT: arith.addf %[[A1]], %[[ONE]]
// CHECK: %[[TAIL:.*]] = scf.for %{{.*}} = %[[SPLIT]] to %[[END]] step %{{.*}} iter_args(%[[A2:.*]] = %[[MIDDLE]])
// CHECK-NEXT: arith.mulf %[[A2]], %[[TWO]]
// CHECK: return %[[TAIL]] : f32
// CHECK-NOT: scf.if
// CHECK-NOT: arith.cmpi
// CHECK-NOT: arith.ori
func.func @split_three_ways(%init: f32, %end: index, %below: index, %from: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %end step %c16 iter_args(%acc = %init) -> (f32) {
    %early = arith.cmpi slt, %j, %below : index
    %late = arith.cmpi sge, %j, %from : index
    %needs = arith.ori %early, %late : i1
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

// -----

// The branch is marked `kiln.one_masked_tile`: the same first loop (the `else` region, up to the split point),
// then, if the split point is below the upper bound, the body once at iv = split: the `then` region inlined
// (no branch, no comparison left), the ops after the branch, and the iv's use (the index_cast) reading the
// split point, from the first loop's results. Otherwise the if yields the first loop's results.
// CHECK-DAG: #[[$FIRST_TILE_ONE:.+]] = affine_map<()[s0] -> ((s0 ceildiv 16) * 16)>
// CHECK-LABEL: func.func @one_masked_tile
// CHECK-SAME: (%[[INIT:[a-zA-Z0-9_]+]]: f32, %[[END:[a-zA-Z0-9_]+]]: index, %[[FROM:[a-zA-Z0-9_]+]]: index)
// CHECK-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C16:[a-zA-Z0-9_]+]] = arith.constant 16 : index
// CHECK-DAG: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0 : i64
// CHECK-DAG: %[[ONE:[a-zA-Z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TWO:[a-zA-Z0-9_]+]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[FIRST:[a-zA-Z0-9_]+]] = affine.apply #[[$FIRST_TILE_ONE]]()[%[[FROM]]]
// CHECK-NEXT: %[[AT_LEAST_LB:[a-zA-Z0-9_]+]] = arith.maxsi %[[FIRST]], %[[C0]] : index
// CHECK-NEXT: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %[[AT_LEAST_LB]], %[[END]] : index
// CHECK-NEXT: %[[BEFORE:[a-zA-Z0-9_]+]]:2 = scf.for %[[J:[a-zA-Z0-9_]+]] = %[[C0]] to %[[SPLIT]] step %[[C16]] iter_args(%[[ACC:[a-zA-Z0-9_]+]] = %[[INIT]], %[[SUM:[a-zA-Z0-9_]+]] = %[[ZERO]]) -> (f32, i64) {
// CHECK-NEXT: %[[PLAIN:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[ONE]] : f32
// CHECK-NEXT: %[[NEXT:[a-zA-Z0-9_]+]] = arith.subf %[[PLAIN]], %[[ONE]] : f32
// CHECK-NEXT: %[[J_I64:[a-zA-Z0-9_]+]] = arith.index_cast %[[J]] : index to i64
// CHECK-NEXT: %[[NEXT_SUM:[a-zA-Z0-9_]+]] = arith.addi %[[SUM]], %[[J_I64]] : i64
// CHECK-NEXT: scf.yield %[[NEXT]], %[[NEXT_SUM]] : f32, i64
// CHECK-NEXT: }
// CHECK-NEXT: %[[REACHED:[a-zA-Z0-9_]+]] = arith.cmpi slt, %[[SPLIT]], %[[END]] : index
// CHECK-NEXT: %[[LAST:[a-zA-Z0-9_]+]]:2 = scf.if %[[REACHED]] -> (f32, i64) {
// CHECK-NEXT: %[[MASKED:[a-zA-Z0-9_]+]] = arith.mulf %[[BEFORE]]#0, %[[TWO]] : f32
// CHECK-NEXT: %[[NEXT2:[a-zA-Z0-9_]+]] = arith.subf %[[MASKED]], %[[ONE]] : f32
// CHECK-NEXT: %[[SPLIT_I64:[a-zA-Z0-9_]+]] = arith.index_cast %[[SPLIT]] : index to i64
// CHECK-NEXT: %[[SUM2:[a-zA-Z0-9_]+]] = arith.addi %[[BEFORE]]#1, %[[SPLIT_I64]] : i64
// CHECK-NEXT: scf.yield %[[NEXT2]], %[[SUM2]] : f32, i64
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[BEFORE]]#0, %[[BEFORE]]#1 : f32, i64
// CHECK-NEXT: }
// CHECK-NEXT: return %[[LAST]]#0, %[[LAST]]#1 : f32, i64
// CHECK-NOT: scf.for
// CHECK-NOT: kiln.one_masked_tile
func.func @one_masked_tile(%init: f32, %end: index, %from: index) -> (f32, i64) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %r:2 = scf.for %j = %c0 to %end step %c16 iter_args(%acc = %init, %sum = %zero) -> (f32, i64) {
    %needs = arith.cmpi sge, %j, %from : index
    %t = scf.if %needs -> (f32) {
      %m = arith.mulf %acc, %two : f32
      scf.yield %m : f32
    } else {
      %a = arith.addf %acc, %one : f32
      scf.yield %a : f32
    } {kiln.one_masked_tile}
    %s = arith.subf %t, %one : f32
    %ji = arith.index_cast %j : index to i64
    %n = arith.addi %sum, %ji : i64
    scf.yield %s, %n : f32, i64
  }
  return %r#0, %r#1 : f32, i64
}

// -----

// A marked branch without results and without an `else` region, in a loop without results: the first loop has
// nothing of it, and the store runs once, at the split point, under the `scf.if`.
// CHECK-LABEL: func.func @one_masked_tile_without_else
// CHECK-SAME: (%[[BUFFER:[a-zA-Z0-9_]+]]: memref<64xf32>, %[[END:[a-zA-Z0-9_]+]]: index, %{{.*}}: index)
// CHECK: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %{{.*}}, %[[END]] : index
// CHECK-NEXT: scf.for
// CHECK-NEXT: }
// CHECK-NEXT: %[[REACHED:[a-zA-Z0-9_]+]] = arith.cmpi slt, %[[SPLIT]], %[[END]] : index
// CHECK-NEXT: scf.if %[[REACHED]] {
// CHECK-NEXT: memref.store %{{.*}}, %[[BUFFER]][%[[SPLIT]]] : memref<64xf32>
// CHECK-NOT: scf.for
// CHECK-NOT: memref.store
// CHECK: return
func.func @one_masked_tile_without_else(%buffer: memref<64xf32>, %end: index, %from: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  scf.for %j = %c0 to %end step %c16 {
    %needs = arith.cmpi sge, %j, %from : index
    scf.if %needs {
      memref.store %one, %buffer[%j] : memref<64xf32>
    } {kiln.one_masked_tile}
  }
  return
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

// -----

// Without causal, 64 queries against 100 keys in 32x32 tiles: only the last key tile, [96, 100), is partial, so
// kiln-tile marks the branch `kiln.one_masked_tile`. maskFrom = Sk - (BK - 1) = 69 is a constant, and so is the
// split point ceil(69 / 32) * 32 = 96 (clamped to [0, 100]). The loop runs the unmasked tiles up to it; then,
// if it is below the key end (100), that one tile runs once, at key 96, under an scf.if carrying the running
// max, sum and accumulator on from the loop: its K and V tiles start at the split point and the position mask
// (keys >= 100, no causal comparison) is inlined. Otherwise the if yields the loop's results.
// CHECK-LABEL: func.func @attention_partial_last_tile
// CHECK-NOT: scf.for
// CHECK: kiln.attention
// ATTN-DAG: #[[$SPLIT_96:.+]] = affine_map<() -> (96)>
// ATTN-LABEL: func.func @attention_partial_last_tile
// ATTN-SAME: %{{.*}}: tensor<1x1x64x32xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x1x100x32xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x1x100x32xf32>
// ATTN-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// ATTN-DAG: %[[C32:[a-zA-Z0-9_]+]] = arith.constant 32 : index
// ATTN-DAG: %[[C100:[a-zA-Z0-9_]+]] = arith.constant 100 : index
// ATTN: scf.forall (%{{.*}}) = (0) to (64) step (32)
// ATTN-NOT: affine.min
// ATTN: %[[FIRST:[a-zA-Z0-9_]+]] = affine.apply #[[$SPLIT_96]]()
// ATTN-NEXT: %[[AT_LEAST_0:[a-zA-Z0-9_]+]] = arith.maxsi %[[FIRST]], %[[C0]] : index
// ATTN-NEXT: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %[[AT_LEAST_0]], %[[C100]] : index
// ATTN-NEXT: %[[UNMASKED:[a-zA-Z0-9_]+]]:3 = scf.for %{{.*}} = %[[C0]] to %[[SPLIT]] step %[[C32]] iter_args({{.*}}) -> (tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>) {
// ATTN-NOT: scf.if
// ATTN-NOT: kiln.position_mask
// ATTN-NOT: arith.cmpi
// ATTN: kiln.matmul {{.*}} transpose_rhs
// ATTN: math.exp2
// ATTN: kiln.matmul
// ATTN: scf.yield
// ATTN-NEXT: }
// ATTN-NEXT: %[[REACHED:[a-zA-Z0-9_]+]] = arith.cmpi slt, %[[SPLIT]], %[[C100]] : index
// ATTN-NEXT: %[[LAST:[a-zA-Z0-9_]+]]:3 = scf.if %[[REACHED]] -> (tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>) {
// ATTN-NEXT: %[[KEY_COLS:[a-zA-Z0-9_]+]] = affine.min #{{.*}}(%[[SPLIT]])
// ATTN-NEXT: tensor.extract_slice %[[K]][0, 0, %[[SPLIT]], 0] [1, 1, %[[KEY_COLS]], 32] [1, 1, 1, 1]
// ATTN-NOT: scf.if
// ATTN: %[[SCORES:[a-zA-Z0-9_]+]] = kiln.mul
// ATTN-NEXT: tensor.empty
// ATTN-NEXT: linalg.generic {{.*}} ins(%[[SCORES]] : tensor<32x32xf32>) {{.*}} attrs = {kiln.position_mask}
// ATTN: %[[KEY:[a-zA-Z0-9_]+]] = arith.addi %[[SPLIT]], %{{.*}} : index
// ATTN-NEXT: %[[OUTSIDE:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[KEY]], %[[C100]] : index
// ATTN-NEXT: arith.select %[[OUTSIDE]], %{{.*}}, %{{.*}} : f32
// ATTN: math.exp2
// ATTN: tensor.extract_slice %[[V]][0, 0, %[[SPLIT]], 0]
// ATTN: kiln.matmul
// ATTN: scf.yield
// ATTN-NEXT: } else {
// ATTN-NEXT: scf.yield %[[UNMASKED]]#0, %[[UNMASKED]]#1, %[[UNMASKED]]#2 : tensor<32xf32>, tensor<32xf32>, tensor<32x32xf32>
// ATTN-NEXT: }
// ATTN-NEXT: %[[TEMP:[a-zA-Z0-9_]+]] = tensor.empty
// ATTN-NEXT: linalg.generic {{.*}} ins(%[[LAST]]#2, %[[LAST]]#1 : tensor<32x32xf32>, tensor<32xf32>)
// ATTN: arith.divf
// ATTN-NOT: scf.for %
// ATTN-NOT: scf.if
// ATTN-NOT: kiln.one_masked_tile
// ATTN: return
func.func @attention_partial_last_tile(%q: tensor<1x1x64x32xf32>, %k: tensor<1x1x100x32xf32>, %v: tensor<1x1x100x32xf32>) -> tensor<1x1x64x32xf32> {
  %0 = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [32, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x64x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x64x32xf32>
  return %0 : tensor<1x1x64x32xf32>
}

// -----

// Causal with one query row (a decode step, 100 keys, 16x32 tiles): the row sees every key, so again only the
// last key tile is masked (kiln-tile marks the branch) and the split point is the constant 96; the one query
// tile leaves no forall. One loop of unmasked tiles, then the tile at 96 once under an scf.if, with the whole
// position mask (keys >= 100, and the causal comparison).
// CHECK-LABEL: func.func @attention_decode
// CHECK-NOT: scf.for
// CHECK: kiln.attention
// ATTN-DAG: #[[$DECODE_SPLIT:.+]] = affine_map<() -> (96)>
// ATTN-LABEL: func.func @attention_decode
// ATTN-DAG: %[[C0:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// ATTN-DAG: %[[C32:[a-zA-Z0-9_]+]] = arith.constant 32 : index
// ATTN-DAG: %[[C100:[a-zA-Z0-9_]+]] = arith.constant 100 : index
// ATTN-NOT: scf.forall
// ATTN: %[[FIRST:[a-zA-Z0-9_]+]] = affine.apply #[[$DECODE_SPLIT]]()
// ATTN-NEXT: %[[AT_LEAST_0:[a-zA-Z0-9_]+]] = arith.maxsi %[[FIRST]], %[[C0]] : index
// ATTN-NEXT: %[[SPLIT:[a-zA-Z0-9_]+]] = arith.minsi %[[AT_LEAST_0]], %[[C100]] : index
// ATTN-NEXT: %[[UNMASKED:[a-zA-Z0-9_]+]]:3 = scf.for %{{.*}} = %[[C0]] to %[[SPLIT]] step %[[C32]] iter_args({{.*}}) -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>) {
// ATTN-NOT: scf.if
// ATTN-NOT: kiln.position_mask
// ATTN-NOT: arith.cmpi
// ATTN: scf.yield
// ATTN-NEXT: }
// ATTN-NEXT: %[[REACHED:[a-zA-Z0-9_]+]] = arith.cmpi slt, %[[SPLIT]], %[[C100]] : index
// ATTN-NEXT: %[[LAST:[a-zA-Z0-9_]+]]:3 = scf.if %[[REACHED]] -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>) {
// ATTN-NOT: scf.if
// ATTN: linalg.generic {{.*}} attrs = {kiln.position_mask}
// ATTN: %[[KEY:[a-zA-Z0-9_]+]] = arith.addi %[[SPLIT]], %{{.*}} : index
// ATTN-NEXT: arith.cmpi sge, %[[KEY]], %[[C100]] : index
// ATTN: arith.cmpi sgt, %[[KEY]], %{{.*}} : index
// ATTN: math.exp2
// ATTN: kiln.matmul
// ATTN: scf.yield
// ATTN-NEXT: } else {
// ATTN-NEXT: scf.yield %[[UNMASKED]]#0, %[[UNMASKED]]#1, %[[UNMASKED]]#2 : tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>
// ATTN-NEXT: }
// ATTN-NEXT: %[[TEMP:[a-zA-Z0-9_]+]] = tensor.empty
// ATTN-NEXT: linalg.generic {{.*}} ins(%[[LAST]]#2, %[[LAST]]#1 : tensor<16x32xf32>, tensor<16xf32>)
// ATTN-NOT: scf.for %
// ATTN-NOT: scf.if
// ATTN-NOT: kiln.one_masked_tile
// ATTN: return
func.func @attention_decode(%q: tensor<1x1x1x32xf32>, %k: tensor<1x1x100x32xf32>, %v: tensor<1x1x100x32xf32>) -> tensor<1x1x1x32xf32> {
  %0 = kiln.attention %q, %k, %v causal {kiln.config = #kiln.config<tile = [16, 32], warps = 1, stages = 1, lowering = "host">} : tensor<1x1x1x32xf32>, tensor<1x1x100x32xf32>, tensor<1x1x100x32xf32> -> tensor<1x1x1x32xf32>
  return %0 : tensor<1x1x1x32xf32>
}
