// RUN: kiln-opt %s -kiln-fuse-elementwise -split-input-file | FileCheck %s

// kiln-fuse-elementwise rewrites each chain of elementwise ops into one kiln.elementwise: the chain's other
// operands are its inputs (each once, broadcast as before), splat constants become arith.constant in the body,
// each op's formula follows (f32 for floats, the integer type itself for integers), and every intermediate the
// unfused graph would hold in an f16/bf16 tensor is rounded to it (arith.truncf + arith.extf).

// A broadcast multiply, a sigmoid and a residual add: one op reading x once.
// CHECK-LABEL: func.func @three_ops
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<77x96xbf16>, %[[Y:[a-zA-Z0-9_]+]]: tensor<96xbf16>)
// CHECK-NEXT: %[[R:.*]] = kiln.elementwise %[[X]], %[[Y]] : (tensor<77x96xbf16>, tensor<96xbf16>) -> tensor<77x96xbf16> {
// CHECK-NEXT: ^bb0(%[[XS:[a-zA-Z0-9_]+]]: f32, %[[YS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[XS]], %[[YS]] : f32
// CHECK-NEXT: %[[MB:.*]] = arith.truncf %[[M]] : f32 to bf16
// CHECK-NEXT: %[[MW:.*]] = arith.extf %[[MB]] : bf16 to f32
// CHECK: math.exp
// CHECK: %[[S:.*]] = arith.divf
// CHECK-NEXT: %[[SB:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK-NEXT: %[[SW:.*]] = arith.extf %[[SB]] : bf16 to f32
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[SW]], %[[XS]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]
func.func @three_ops(%x: tensor<77x96xbf16>, %y: tensor<96xbf16>) -> tensor<77x96xbf16> {
  %a = kiln.mul %x, %y : tensor<77x96xbf16>, tensor<96xbf16> -> tensor<77x96xbf16>
  %b = kiln.sigmoid %a : tensor<77x96xbf16>
  %c = kiln.add %b, %x : tensor<77x96xbf16>, tensor<77x96xbf16> -> tensor<77x96xbf16>
  return %c : tensor<77x96xbf16>
}

// -----

// Integer position arithmetic with splat constants (a page and a slot), a comparison and a select: the constants
// are the body's; f32 chains keep their values unrounded.
// CHECK-LABEL: func.func @positions
// CHECK-SAME: (%[[P:[a-zA-Z0-9_]+]]: tensor<8xi64>, %[[V:[a-zA-Z0-9_]+]]: tensor<8xf32>)
// CHECK-NOT: kiln.constant
// CHECK: %[[R:.*]] = kiln.elementwise %[[P]], %[[V]] : (tensor<8xi64>, tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: ^bb0(%[[PS:[a-zA-Z0-9_]+]]: i64, %[[VS:[a-zA-Z0-9_]+]]: f32):
// CHECK: arith.constant 16 : i64
// CHECK: arith.remsi %{{.*}} : i64
// CHECK: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-NEXT: %[[LT:.*]] = arith.cmpi slt, %{{.*}}, %[[FOUR]] : i64
// CHECK: %[[SEL:.*]] = arith.select %[[LT]], %[[VS]], %{{.*}} : f32
// CHECK-NOT: arith.truncf
// CHECK: kiln.yield %[[SEL]] : f32
// CHECK-NOT: kiln.remainder
// CHECK: return %[[R]]
func.func @positions(%p: tensor<8xi64>, %v: tensor<8xf32>) -> tensor<8xf32> {
  %sixteen = kiln.constant dense<16> : tensor<i64>
  %four = kiln.constant dense<4> : tensor<i64>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %slot = kiln.remainder %p, %sixteen : tensor<8xi64>, tensor<i64> -> tensor<8xi64>
  %early = kiln.compare lt %slot, %four : tensor<8xi64>, tensor<i64> -> tensor<8xi1>
  %r = kiln.select %early, %v, %zero : tensor<8xi1>, tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Casts: the value converted as kiln.cast converts it (to f16 rounded once, f16 to i32 by truncation,
// saturating), then carried in the compute type.
// CHECK-LABEL: func.func @casts
// CHECK: kiln.elementwise %{{.*}} : (tensor<16xf32>) -> tensor<16xi32> {
// CHECK-NEXT: ^bb0(%[[XS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[H:.*]] = arith.truncf %[[XS]] : f32 to f16
// CHECK-NEXT: %[[HW:.*]] = arith.extf %[[H]] : f16 to f32
// CHECK: arith.cmpf uno, %[[HW]], %[[HW]] : f32
// CHECK: arith.fptosi %{{.*}} : f32 to i32
// CHECK: %[[I:.*]] = arith.select %{{.*}}, %c0_i32, %{{.*}} : i32
// CHECK-NEXT: kiln.yield %[[I]] : i32
func.func @casts(%x: tensor<16xf32>) -> tensor<16xi32> {
  %h = kiln.cast %x : tensor<16xf32> to tensor<16xf16>
  %i = kiln.cast %h : tensor<16xf16> to tensor<16xi32>
  return %i : tensor<16xi32>
}

// -----

// An intermediate another op reads stays a tensor: the chain ends before it, and its other reader (a matmul)
// is no elementwise op.
// CHECK-LABEL: func.func @shared_intermediate
// CHECK: %[[A:.*]] = kiln.elementwise %{{.*}} : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK: kiln.matmul %[[A]]
// CHECK: kiln.elementwise %[[A]]
func.func @shared_intermediate(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %a0 = kiln.exp %x : tensor<8x8xf32>
  %a = kiln.tanh %a0 : tensor<8x8xf32>
  %m = kiln.matmul %a, %a : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %b = kiln.relu %a : tensor<8x8xf32>
  %c = kiln.neg %b : tensor<8x8xf32>
  return %m, %c : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A producer of a smaller shape that broadcasts into the chain is computed per element of the chain, its input
// broadcast straight to the chain's shape; one that another op also reads stays an input. A lone op is left
// alone.
// CHECK-LABEL: func.func @other_shape
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x96xf32>, %[[R:[a-zA-Z0-9_]+]]: tensor<96xf32>, %{{.*}}: tensor<5xf32>)
// CHECK: kiln.elementwise %[[R]], %[[X]] : (tensor<96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32> {
// CHECK: math.exp
// CHECK: kiln.sigmoid %{{.*}} : tensor<5xf32>
// CHECK: %[[KEPT:.*]] = kiln.tanh %[[R]] : tensor<96xf32>
// CHECK: kiln.elementwise %[[X]], %[[KEPT]]
// CHECK: return
func.func @other_shape(%x: tensor<4x96xf32>, %r: tensor<96xf32>, %z: tensor<5xf32>)
    -> (tensor<4x96xf32>, tensor<5xf32>, tensor<4x96xf32>, tensor<96xf32>) {
  %row = kiln.exp %r : tensor<96xf32>
  %a = kiln.add %x, %row : tensor<4x96xf32>, tensor<96xf32> -> tensor<4x96xf32>
  %b = kiln.relu %a : tensor<4x96xf32>
  %s = kiln.sigmoid %z : tensor<5xf32>
  %kept = kiln.tanh %r : tensor<96xf32>
  %c = kiln.mul %x, %kept : tensor<4x96xf32>, tensor<96xf32> -> tensor<4x96xf32>
  %d = kiln.neg %c : tensor<4x96xf32>
  return %b, %s, %d, %kept : tensor<4x96xf32>, tensor<5xf32>, tensor<4x96xf32>, tensor<96xf32>
}

// -----

// A producer two chains read (a page's slot, used by two results) is computed again in each: two ops, no
// kernel of its own, neither reading it from memory.
// CHECK-LABEL: func.func @shared_by_two_chains
// CHECK-SAME: (%[[P:[a-zA-Z0-9_]+]]: tensor<8xi64>)
// CHECK-NEXT: %[[A:.*]] = kiln.elementwise %[[P]] : (tensor<8xi64>) -> tensor<8xi64> {
// CHECK: arith.remsi
// CHECK: kiln.yield
// CHECK: %[[B:.*]] = kiln.elementwise %[[P]] : (tensor<8xi64>) -> tensor<8xi64> {
// CHECK: arith.remsi
// CHECK: kiln.yield
// CHECK-NOT: kiln.remainder
// CHECK: return %[[A]], %[[B]]
func.func @shared_by_two_chains(%p: tensor<8xi64>) -> (tensor<8xi64>, tensor<8xi64>) {
  %sixteen = kiln.constant dense<16> : tensor<i64>
  %slot = kiln.remainder %p, %sixteen : tensor<8xi64>, tensor<i64> -> tensor<8xi64>
  %a = kiln.add %slot, %p : tensor<8xi64>, tensor<8xi64> -> tensor<8xi64>
  %b = kiln.mul %slot, %sixteen : tensor<8xi64>, tensor<i64> -> tensor<8xi64>
  return %a, %b : tensor<8xi64>, tensor<8xi64>
}

// -----

// A chain of constants alone: an op without inputs, which prints and parses.
// CHECK-LABEL: func.func @constants_only
// CHECK: kiln.elementwise  : () -> tensor<4x8xf32> {
// CHECK: math.exp
func.func @constants_only() -> tensor<4x8xf32> {
  %c = kiln.constant dense<2.0> : tensor<4x8xf32>
  %a = kiln.exp %c : tensor<4x8xf32>
  %b = kiln.neg %a : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
