// RUN: kiln-opt %s -kiln-fuse-epilogue -split-input-file | FileCheck %s

// kiln-fuse-epilogue folds the single-use chain of same-shape elementwise ops after a kiln.matmul into the
// matmul's epilogue region: block argument 0 is the f32 accumulator, the others one f32 element of each
// epilogue operand (the chain's other tensors, in the order the chain first reads them); the region applies
// each op's f32 formula, rounds every intermediate that the unfused graph would hold in an f16/bf16 tensor
// (arith.truncf + arith.extf), and yields the value to store in the result's element type.

//===----------------------------------------------------------------------===//
// Single ops
//===----------------------------------------------------------------------===//

// Bias add.
// CHECK-LABEL: func.func @bias_add
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]] : tensor<16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: } : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NOT: kiln.add
// CHECK-NEXT: return %[[Y]] : tensor<4x16xf32>
func.func @bias_add(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// Scale by a scalar constant: the splat becomes an f32 constant inside the epilogue, and the tensor constant
// goes away.
// CHECK-LABEL: func.func @scale_by_constant
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>)
// CHECK-NOT: kiln.constant
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue() {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[SCALE:[a-zA-Z0-9_]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: %[[PROD:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %[[SCALE]] : f32
// CHECK-NEXT: kiln.yield %[[PROD]] : f32
// CHECK-NEXT: } : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @scale_by_constant(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %c = kiln.constant dense<0.5> : tensor<f32>
  %z = kiln.mul %y, %c : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// The matmul may be the second operand: `b - y` keeps its operand order.
// CHECK-LABEL: func.func @matmul_as_rhs
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]] : tensor<16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[DIFF:[a-zA-Z0-9_]+]] = arith.subf %[[BIAS]], %[[ACC]] : f32
// CHECK-NEXT: kiln.yield %[[DIFF]] : f32
// CHECK-NOT: kiln.sub
// CHECK: return %[[Y]]
func.func @matmul_as_rhs(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.sub %b, %y : tensor<16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// relu is max(acc, 0).
// CHECK-LABEL: func.func @relu
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue() {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[MAX:[a-zA-Z0-9_]+]] = arith.maximumf %[[ACC]], %[[ZERO]] : f32
// CHECK-NEXT: kiln.yield %[[MAX]] : f32
// CHECK-NEXT: } : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NOT: kiln.relu
// CHECK-NEXT: return %[[Y]]
func.func @relu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.relu %y : tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// Exact gelu: x / 2 * (1 + erf(x / sqrt(2))).
// CHECK-LABEL: func.func @gelu
// CHECK: kiln.matmul %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} epilogue() {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32):
// CHECK-DAG: %[[HALF:[a-zA-Z0-9_]+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[ONE:[a-zA-Z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[RSQRT2:[a-zA-Z0-9_]+]] = arith.constant 0.707106769 : f32
// CHECK: %[[ARG:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %[[RSQRT2]] : f32
// CHECK-NEXT: %[[ERF:[a-zA-Z0-9_]+]] = math.erf %[[ARG]] : f32
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[ONE]], %[[ERF]] : f32
// CHECK-NEXT: %[[GATE:[a-zA-Z0-9_]+]] = arith.mulf %[[HALF]], %[[SUM]] : f32
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %[[GATE]] : f32
// CHECK-NEXT: kiln.yield %[[OUT]] : f32
// CHECK-NOT: math.tanh
// CHECK-NOT: kiln.gelu
// CHECK: return
func.func @gelu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.gelu %y : tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// tanh gelu: x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: kiln.matmul %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} epilogue() {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32):
// CHECK-NOT: math.erf
// CHECK: %[[SQ:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %[[ACC]] : f32
// CHECK-NEXT: %[[CUBE:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %[[SQ]] : f32
// CHECK-NEXT: %[[C0044:[a-zA-Z0-9_]+]] = arith.constant 4.471500e-02 : f32
// CHECK-NEXT: %[[TERM:[a-zA-Z0-9_]+]] = arith.mulf %[[C0044]], %[[CUBE]] : f32
// CHECK-NEXT: %[[INNER:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[TERM]] : f32
// CHECK-NEXT: %[[SQRT2PI:[a-zA-Z0-9_]+]] = arith.constant 0.797884583 : f32
// CHECK-NEXT: %[[ARG:[a-zA-Z0-9_]+]] = arith.mulf %[[SQRT2PI]], %[[INNER]] : f32
// CHECK-NEXT: %[[TANH:[a-zA-Z0-9_]+]] = math.tanh %[[ARG]] : f32
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %{{[a-zA-Z0-9_]+}}, %[[TANH]] : f32
// CHECK-NEXT: %[[GATE:[a-zA-Z0-9_]+]] = arith.mulf %{{[a-zA-Z0-9_]+}}, %[[SUM]] : f32
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %[[GATE]] : f32
// CHECK-NEXT: kiln.yield %[[OUT]] : f32
// CHECK-NOT: kiln.gelu
// CHECK: return
func.func @gelu_tanh(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.gelu %y approximate(tanh) : tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// sigmoid: 1 / (1 + exp(-x)).
// CHECK-LABEL: func.func @sigmoid
// CHECK: kiln.matmul %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} epilogue() {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[ONE:[a-zA-Z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[NEG:[a-zA-Z0-9_]+]] = arith.negf %[[ACC]] : f32
// CHECK-NEXT: %[[EXP:[a-zA-Z0-9_]+]] = math.exp %[[NEG]] : f32
// CHECK-NEXT: %[[DEN:[a-zA-Z0-9_]+]] = arith.addf %[[ONE]], %[[EXP]] : f32
// CHECK-NEXT: %[[SIG:[a-zA-Z0-9_]+]] = arith.divf %[[ONE]], %[[DEN]] : f32
// CHECK-NEXT: kiln.yield %[[SIG]] : f32
// CHECK-NOT: kiln.sigmoid
// CHECK: return
func.func @sigmoid(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.sigmoid %y : tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// silu: x * sigmoid(x).
// CHECK-LABEL: func.func @silu
// CHECK: kiln.matmul %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} epilogue() {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[ONE:[a-zA-Z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[NEG:[a-zA-Z0-9_]+]] = arith.negf %[[ACC]] : f32
// CHECK-NEXT: %[[EXP:[a-zA-Z0-9_]+]] = math.exp %[[NEG]] : f32
// CHECK-NEXT: %[[DEN:[a-zA-Z0-9_]+]] = arith.addf %[[ONE]], %[[EXP]] : f32
// CHECK-NEXT: %[[SIG:[a-zA-Z0-9_]+]] = arith.divf %[[ONE]], %[[DEN]] : f32
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %[[SIG]] : f32
// CHECK-NEXT: kiln.yield %[[OUT]] : f32
// CHECK-NOT: kiln.silu
// CHECK: return
func.func @silu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.silu %y : tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// Residual add with a rank-3 activation and a rank-2 weight; transpose_rhs is kept.
// CHECK-LABEL: func.func @residual_add
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<2x4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<16x8xf32>, %[[R:[a-zA-Z0-9_]+]]: tensor<2x4x16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] transpose_rhs epilogue(%[[R]] : tensor<2x4x16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[RES:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[RES]], %[[ACC]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: } : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
// CHECK-NOT: kiln.add
// CHECK-NEXT: return %[[Y]]
func.func @residual_add(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %r: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %z = kiln.add %r, %y : tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  return %z : tensor<2x4x16xf32>
}

//===----------------------------------------------------------------------===//
// Gating, casts, chains
//===----------------------------------------------------------------------===//

// -----

// SwiGLU: silu(x W1) * (x W3). The gate matmul absorbs silu and the multiply; the up projection stays a plain
// matmul and is read as an epilogue operand.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W1:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[W3:[a-zA-Z0-9_]+]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[UP:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W3]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W1]] epilogue(%[[UP]] : tensor<4x16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[UPV:[a-zA-Z0-9_]+]]: f32):
// CHECK: math.exp
// CHECK: %[[SILU:[a-zA-Z0-9_]+]] = arith.mulf %[[ACC]], %{{[a-zA-Z0-9_]+}} : f32
// CHECK-NEXT: %[[GATED:[a-zA-Z0-9_]+]] = arith.mulf %[[SILU]], %[[UPV]] : f32
// CHECK-NEXT: kiln.yield %[[GATED]] : f32
// CHECK-NEXT: } : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NOT: kiln.silu
// CHECK-NOT: kiln.mul
// CHECK-NEXT: return %[[OUT]]
func.func @swiglu(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w3: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %gate = kiln.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %up = kiln.matmul %x, %w3 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %act = kiln.silu %gate : tensor<4x16xf32>
  %h = kiln.mul %act, %up : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}

// -----

// A final cast to bf16 is the store itself: the result type becomes bf16 and the region rounds nothing.
// CHECK-LABEL: func.func @final_cast_bf16
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]] : tensor<16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NOT: arith.truncf
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: } : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xbf16>
// CHECK-NOT: kiln.cast
// CHECK-NEXT: return %[[Y]] : tensor<4x16xbf16>
func.func @final_cast_bf16(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xbf16> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %h = kiln.cast %z : tensor<4x16xf32> to tensor<4x16xbf16>
  return %h : tensor<4x16xbf16>
}

// -----

// A cast to bf16 in the middle of the chain rounds like the unfused graph (truncf then extf); the bias add
// after it is in bf16, and the result is bf16.
// CHECK-LABEL: func.func @cast_in_middle
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xbf16>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]] : tensor<16xbf16>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[ROUNDED:[a-zA-Z0-9_]+]] = arith.truncf %[[ACC]] : f32 to bf16
// CHECK-NEXT: %[[WIDE:[a-zA-Z0-9_]+]] = arith.extf %[[ROUNDED]] : bf16 to f32
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[WIDE]], %[[BIAS]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: } : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xbf16>
// CHECK-NOT: kiln.cast
// CHECK-NOT: kiln.add
// CHECK-NEXT: return %[[Y]] : tensor<4x16xbf16>
func.func @cast_in_middle(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %h = kiln.cast %y : tensor<4x16xf32> to tensor<4x16xbf16>
  %z = kiln.add %h, %b : tensor<4x16xbf16>, tensor<16xbf16> -> tensor<4x16xbf16>
  return %z : tensor<4x16xbf16>
}

// -----

// A chain of several ops, applied in order: bias, gelu, residual, scale, then the final cast to bf16. The
// epilogue operands are the chain's other tensors in the order the chain reads them.
// CHECK-LABEL: func.func @chain_in_order
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<2x4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>, %[[R:[a-zA-Z0-9_]+]]: tensor<2x4x16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]], %[[R]] : tensor<16xf32>, tensor<2x4x16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32, %[[RES:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[SCALE:[a-zA-Z0-9_]+]] = arith.constant 2.500000e-01 : f32
// CHECK-NEXT: %[[BIASED:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK: math.erf
// CHECK: %[[GELU:[a-zA-Z0-9_]+]] = arith.mulf %[[BIASED]], %{{[a-zA-Z0-9_]+}} : f32
// CHECK-NEXT: %[[RESID:[a-zA-Z0-9_]+]] = arith.addf %[[GELU]], %[[RES]] : f32
// CHECK-NEXT: %[[SCALED:[a-zA-Z0-9_]+]] = arith.mulf %[[RESID]], %[[SCALE]] : f32
// CHECK-NEXT: kiln.yield %[[SCALED]] : f32
// CHECK-NEXT: } : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xbf16>
// CHECK-NOT: kiln.{{add|gelu|mul|cast}}
// CHECK-NEXT: return %[[Y]] : tensor<2x4x16xbf16>
func.func @chain_in_order(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %r: tensor<2x4x16xf32>)
    -> tensor<2x4x16xbf16> {
  %y = kiln.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %z = kiln.add %y, %b : tensor<2x4x16xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
  %g = kiln.gelu %z : tensor<2x4x16xf32>
  %s = kiln.add %g, %r : tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %m = kiln.mul %s, %c : tensor<2x4x16xf32>, tensor<f32> -> tensor<2x4x16xf32>
  %h = kiln.cast %m : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
  return %h : tensor<2x4x16xbf16>
}

// -----

// A tensor read twice by the chain is one epilogue operand.
// CHECK-LABEL: func.func @operand_read_twice
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]] : tensor<16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BV:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[BV]] : f32
// CHECK-NEXT: %[[PROD:[a-zA-Z0-9_]+]] = arith.mulf %[[SUM]], %[[BV]] : f32
// CHECK-NEXT: kiln.yield %[[PROD]] : f32
// CHECK: return %[[Y]]
func.func @operand_read_twice(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %m = kiln.mul %z, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}

// -----

// bf16 operands, a bf16 bias and relu: the epilogue operand keeps its bf16 type and the region computes in f32,
// but every intermediate the unfused graph holds in a bf16 tensor is rounded to bf16 (truncf + extf): the matmul
// result and the biased value. The relu is the last op; the store rounds it.
// CHECK-LABEL: func.func @bf16_bias_relu
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xbf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xbf16>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xbf16>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]] : tensor<16xbf16>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[ACC_BF16:[a-zA-Z0-9_]+]] = arith.truncf %[[ACC]] : f32 to bf16
// CHECK-NEXT: %[[ACC_ROUNDED:[a-zA-Z0-9_]+]] = arith.extf %[[ACC_BF16]] : bf16 to f32
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[ACC_ROUNDED]], %[[BIAS]] : f32
// CHECK-NEXT: %[[SUM_BF16:[a-zA-Z0-9_]+]] = arith.truncf %[[SUM]] : f32 to bf16
// CHECK-NEXT: %[[SUM_ROUNDED:[a-zA-Z0-9_]+]] = arith.extf %[[SUM_BF16]] : bf16 to f32
// CHECK-NEXT: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[MAX:[a-zA-Z0-9_]+]] = arith.maximumf %[[SUM_ROUNDED]], %[[ZERO]] : f32
// CHECK-NEXT: kiln.yield %[[MAX]] : f32
// CHECK-NEXT: } : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @bf16_bias_relu(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %y = kiln.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %z = kiln.add %y, %b : tensor<4x16xbf16>, tensor<16xbf16> -> tensor<4x16xbf16>
  %a = kiln.relu %z : tensor<4x16xbf16>
  return %a : tensor<4x16xbf16>
}

// -----

// A bf16 matmul widened to f32 for a residual add: the bf16 product is rounded to bf16 before the widening cast
// (which is exact and adds nothing), the f32 sum is stored as f32.
// CHECK-LABEL: func.func @bf16_matmul_cast_f32_residual
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xbf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xbf16>, %[[R:[a-zA-Z0-9_]+]]: tensor<4x16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[R]] : tensor<4x16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[RES:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[ACC_BF16:[a-zA-Z0-9_]+]] = arith.truncf %[[ACC]] : f32 to bf16
// CHECK-NEXT: %[[ACC_ROUNDED:[a-zA-Z0-9_]+]] = arith.extf %[[ACC_BF16]] : bf16 to f32
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[ACC_ROUNDED]], %[[RES]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: } : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
// CHECK-NOT: kiln.cast
// CHECK-NEXT: return %[[Y]] : tensor<4x16xf32>
func.func @bf16_matmul_cast_f32_residual(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %r: tensor<4x16xf32>)
    -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %f = kiln.cast %y : tensor<4x16xbf16> to tensor<4x16xf32>
  %s = kiln.add %f, %r : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// The chain stops at an intermediate with a second user: the bias add is fused, the relu reads the fused
// matmul, and the biased value is still returned.
// CHECK-LABEL: func.func @intermediate_second_user
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>)
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] epilogue(%[[B]] : tensor<16xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: } : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[A:[a-zA-Z0-9_]+]] = kiln.relu %[[Y]] : tensor<4x16xf32>
// CHECK-NEXT: return %[[A]], %[[Y]]
func.func @intermediate_second_user(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %a = kiln.relu %z : tensor<4x16xf32>
  return %a, %z : tensor<4x16xf32>, tensor<4x16xf32>
}

//===----------------------------------------------------------------------===//
// Negative: nothing is fused
//===----------------------------------------------------------------------===//

// -----

// The matmul result has two users: fusing into either would compute or store it twice.
// CHECK-LABEL: func.func @matmul_two_users
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>)
// CHECK-NOT: epilogue
// CHECK: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[Z:[a-zA-Z0-9_]+]] = kiln.add %[[Y]], %[[B]]
// CHECK-NEXT: %[[A:[a-zA-Z0-9_]+]] = kiln.relu %[[Y]]
// CHECK-NEXT: return %[[Z]], %[[A]]
func.func @matmul_two_users(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %a = kiln.relu %y : tensor<4x16xf32>
  return %z, %a : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// The consumer broadcasts the matmul result to a larger shape ([4, 16] + [2, 4, 16]): not an epilogue.
// CHECK-LABEL: func.func @consumer_broadcasts
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>, %[[R:[a-zA-Z0-9_]+]]: tensor<2x4x16xf32>)
// CHECK-NOT: epilogue
// CHECK: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul %[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[Z:[a-zA-Z0-9_]+]] = kiln.add %[[Y]], %[[R]] : tensor<4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT: return %[[Z]]
func.func @consumer_broadcasts(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %r: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %r : tensor<4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  return %z : tensor<2x4x16xf32>
}

// -----

// `y + y` reads the matmul twice.
// CHECK-LABEL: func.func @add_self
// CHECK-NOT: epilogue
// CHECK: %[[Y:[a-zA-Z0-9_]+]] = kiln.matmul
// CHECK-NEXT: %[[Z:[a-zA-Z0-9_]+]] = kiln.add %[[Y]], %[[Y]]
// CHECK-NEXT: return %[[Z]]
func.func @add_self(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %y : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// Elementwise ops after something that is not a matmul (a transpose) stay as they are.
// CHECK-LABEL: func.func @after_non_matmul
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<16x4xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<16xf32>)
// CHECK-NEXT: %[[T:[a-zA-Z0-9_]+]] = kiln.transpose %[[X]] [1, 0]
// CHECK-NEXT: %[[Z:[a-zA-Z0-9_]+]] = kiln.add %[[T]], %[[B]]
// CHECK-NEXT: %[[A:[a-zA-Z0-9_]+]] = kiln.relu %[[Z]]
// CHECK-NEXT: return %[[A]]
func.func @after_non_matmul(%x: tensor<16x4xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %t = kiln.transpose %x [1, 0] : tensor<16x4xf32> -> tensor<4x16xf32>
  %z = kiln.add %t, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %a = kiln.relu %z : tensor<4x16xf32>
  return %a : tensor<4x16xf32>
}

// -----

// A row op (softmax) is not elementwise, and a float-to-int cast is not an epilogue store.
// CHECK-LABEL: func.func @not_elementwise
// CHECK-NOT: epilogue
// CHECK: %[[Y0:[a-zA-Z0-9_]+]] = kiln.matmul
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[Y0]] axis 1
// CHECK-NEXT: %[[Y1:[a-zA-Z0-9_]+]] = kiln.matmul
// CHECK-NEXT: %[[I:[a-zA-Z0-9_]+]] = kiln.cast %[[Y1]] : tensor<4x16xf32> to tensor<4x16xi32>
// CHECK-NEXT: return %[[P]], %[[I]]
func.func @not_elementwise(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xi32>) {
  %y0 = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %p = kiln.softmax %y0 axis 1 : tensor<4x16xf32>
  %y1 = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %i = kiln.cast %y1 : tensor<4x16xf32> to tensor<4x16xi32>
  return %p, %i : tensor<4x16xf32>, tensor<4x16xi32>
}

// -----

// An attention's output chain (gate, activation, cast) folds into the attention's epilogue; its lse is kept.
// CHECK-LABEL: func.func @attention_output_chain
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x77x32xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x90x32xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x90x32xf32>, %[[G:[a-zA-Z0-9_]+]]: tensor<32xf32>)
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal epilogue(%[[G]] : tensor<32xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:.*]]: f32, %[[GATE:.*]]: f32):
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[ACC]], %[[GATE]] : f32
// CHECK: math.exp
// CHECK: kiln.yield
// CHECK: -> tensor<1x4x77x32xbf16>, tensor<1x4x77xf32>
// CHECK-NOT: kiln.mul
// CHECK-NOT: kiln.silu
// CHECK-NOT: kiln.cast
// CHECK: return %[[OUT]], %[[LSE]]
func.func @attention_output_chain(%q: tensor<1x4x77x32xf32>, %k: tensor<1x2x90x32xf32>, %v: tensor<1x2x90x32xf32>, %g: tensor<32xf32>) -> (tensor<1x4x77x32xbf16>, tensor<1x4x77xf32>) {
  %o, %lse = kiln.attention %q, %k, %v causal : tensor<1x4x77x32xf32>, tensor<1x2x90x32xf32>, tensor<1x2x90x32xf32> -> tensor<1x4x77x32xf32>, tensor<1x4x77xf32>
  %m = kiln.mul %o, %g : tensor<1x4x77x32xf32>, tensor<32xf32> -> tensor<1x4x77x32xf32>
  %s = kiln.silu %m : tensor<1x4x77x32xf32>
  %c = kiln.cast %s : tensor<1x4x77x32xf32> to tensor<1x4x77x32xbf16>
  return %c, %lse : tensor<1x4x77x32xbf16>, tensor<1x4x77xf32>
}

// -----

// A config pinned on the matmul or the attention pins the fused op.
// CHECK-LABEL: func.func @pinned_config_kept
// CHECK: kiln.matmul {{.*}} epilogue
// CHECK: } {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 3, lowering = "wgmma">} : tensor<77x512xbf16>
// CHECK: kiln.attention {{.*}} epilogue
// CHECK: } {kiln.config = #kiln.config<tile = [64, 32], warps = 4, stages = 1, lowering = "wgmma">} : tensor<1x2x77x64xbf16>
// CHECK-NOT: kiln.add
// CHECK-NOT: kiln.silu
func.func @pinned_config_kept(%x: tensor<77x512xbf16>, %w: tensor<512x128xbf16>, %b: tensor<128xbf16>, %q: tensor<1x2x77x64xbf16>) -> (tensor<77x128xbf16>, tensor<1x2x77x64xbf16>) {
  %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [64, 128, 64], warps = 4, stages = 3, lowering = "wgmma">} : tensor<77x512xbf16>, tensor<512x128xbf16> -> tensor<77x128xbf16>
  %a = kiln.add %y, %b : tensor<77x128xbf16>, tensor<128xbf16> -> tensor<77x128xbf16>
  %o = kiln.attention %q, %q, %q {kiln.config = #kiln.config<tile = [64, 32], warps = 4, stages = 1, lowering = "wgmma">} : tensor<1x2x77x64xbf16>, tensor<1x2x77x64xbf16>, tensor<1x2x77x64xbf16> -> tensor<1x2x77x64xbf16>
  %s = kiln.silu %o : tensor<1x2x77x64xbf16>
  return %a, %s : tensor<77x128xbf16>, tensor<1x2x77x64xbf16>
}

// -----

// The fused matmul keeps the matmul's fp32_precision.
// CHECK-LABEL: func.func @keeps_precision
// CHECK: kiln.matmul %arg0, %arg1 epilogue
// CHECK: } {fp32_precision = "ieee"} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
func.func @keeps_precision(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %r: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %a, %b {fp32_precision = "ieee"} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = kiln.add %y, %r : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// A GEMM over flattened rows viewed back as [B, S, N] before its chain (torch's aten graphs write nn.Linear so):
// the view moves below the chain, whose operands of the viewed shape are viewed flat (the residual), vectors
// along N kept (the bias); the chain then folds into the epilogue and the view of the fused result remains.
// CHECK-LABEL: func.func @view_between_gemm_and_chain
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<154x256xbf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<512x256xbf16>, %[[B:[a-zA-Z0-9_]+]]: tensor<512xbf16>, %[[R:[a-zA-Z0-9_]+]]: tensor<2x77x512xbf16>)
// CHECK: %[[RF:.+]] = kiln.reshape %[[R]] : tensor<2x77x512xbf16> -> tensor<154x512xbf16>
// CHECK: %[[Y:.+]] = kiln.matmul %[[X]], %[[W]] transpose_rhs epilogue(%[[B]], %[[RF]] : tensor<512xbf16>, tensor<154x512xbf16>) {
// CHECK: arith.addf
// CHECK: arith.addf
// CHECK: } : tensor<154x256xbf16>, tensor<512x256xbf16> -> tensor<154x512xbf16>
// CHECK: %[[V:.+]] = kiln.reshape %[[Y]] : tensor<154x512xbf16> -> tensor<2x77x512xbf16>
// CHECK: return %[[V]]
func.func @view_between_gemm_and_chain(%x: tensor<154x256xbf16>, %w: tensor<512x256xbf16>, %b: tensor<512xbf16>, %r: tensor<2x77x512xbf16>) -> tensor<2x77x512xbf16> {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<154x256xbf16>, tensor<512x256xbf16> -> tensor<154x512xbf16>
  %v = kiln.reshape %y : tensor<154x512xbf16> -> tensor<2x77x512xbf16>
  %biased = kiln.add %v, %b : tensor<2x77x512xbf16>, tensor<512xbf16> -> tensor<2x77x512xbf16>
  %out = kiln.add %biased, %r : tensor<2x77x512xbf16>, tensor<2x77x512xbf16> -> tensor<2x77x512xbf16>
  return %out : tensor<2x77x512xbf16>
}

// -----

// A view within the chain moves below it too: nn.Linear with a bias traces as the GEMM and its bias over
// flattened rows, then the view to [B, S, N], then the activation (GPT-2's tanh GELU) or the residual add.
// CHECK-LABEL: func.func @view_within_chain
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<154x256xbf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<512x256xbf16>, %[[B:[a-zA-Z0-9_]+]]: tensor<512xbf16>, %[[R:[a-zA-Z0-9_]+]]: tensor<2x77x512xbf16>)
// CHECK: %[[RF:.+]] = kiln.reshape %[[R]] : tensor<2x77x512xbf16> -> tensor<154x512xbf16>
// CHECK: %[[Y:.+]] = kiln.matmul %[[X]], %[[W]] transpose_rhs epilogue(%[[B]], %[[RF]] : tensor<512xbf16>, tensor<154x512xbf16>) {
// CHECK: arith.addf
// CHECK: math.tanh
// CHECK: arith.addf
// CHECK: } : tensor<154x256xbf16>, tensor<512x256xbf16> -> tensor<154x512xbf16>
// CHECK-NOT: kiln.gelu
// CHECK-NOT: kiln.add
// CHECK: %[[V:.+]] = kiln.reshape %[[Y]] : tensor<154x512xbf16> -> tensor<2x77x512xbf16>
// CHECK: return %[[V]]
func.func @view_within_chain(%x: tensor<154x256xbf16>, %w: tensor<512x256xbf16>, %b: tensor<512xbf16>, %r: tensor<2x77x512xbf16>) -> tensor<2x77x512xbf16> {
  %y = kiln.matmul %x, %w transpose_rhs : tensor<154x256xbf16>, tensor<512x256xbf16> -> tensor<154x512xbf16>
  %biased = kiln.add %y, %b : tensor<154x512xbf16>, tensor<512xbf16> -> tensor<154x512xbf16>
  %v = kiln.reshape %biased : tensor<154x512xbf16> -> tensor<2x77x512xbf16>
  %g = kiln.gelu %v approximate(tanh) : tensor<2x77x512xbf16>
  %out = kiln.add %r, %g : tensor<2x77x512xbf16>, tensor<2x77x512xbf16> -> tensor<2x77x512xbf16>
  return %out : tensor<2x77x512xbf16>
}

// -----

// Left alone: an operand that broadcasts over the viewed shape other than along its last dimension.
// CHECK-LABEL: func.func @view_with_row_broadcast
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<154x256xbf16>, tensor<256x512xbf16> -> tensor<154x512xbf16>
// CHECK: kiln.reshape
// CHECK: kiln.mul
func.func @view_with_row_broadcast(%x: tensor<154x256xbf16>, %w: tensor<256x512xbf16>, %g: tensor<2x1x512xbf16>) -> tensor<2x77x512xbf16> {
  %y = kiln.matmul %x, %w : tensor<154x256xbf16>, tensor<256x512xbf16> -> tensor<154x512xbf16>
  %v = kiln.reshape %y : tensor<154x512xbf16> -> tensor<2x77x512xbf16>
  %out = kiln.mul %v, %g : tensor<2x77x512xbf16>, tensor<2x1x512xbf16> -> tensor<2x77x512xbf16>
  return %out : tensor<2x77x512xbf16>
}

// -----

// Left alone: a view to a scalar (ONNX's MatMul of two vectors) has no last dimension to keep.
// CHECK-LABEL: func.func @view_to_scalar
// CHECK: kiln.matmul %{{.*}}, %{{.*}} : tensor<1x4xf32>, tensor<4x1xf32> -> tensor<1x1xf32>
// CHECK: kiln.reshape %{{.*}} : tensor<1x1xf32> -> tensor<f32>
// CHECK: kiln.neg
func.func @view_to_scalar(%a: tensor<1x4xf32>, %b: tensor<4x1xf32>) -> tensor<f32> {
  %y = kiln.matmul %a, %b : tensor<1x4xf32>, tensor<4x1xf32> -> tensor<1x1xf32>
  %s = kiln.reshape %y : tensor<1x1xf32> -> tensor<f32>
  %n = kiln.neg %s : tensor<f32>
  return %n : tensor<f32>
}

// -----

// A split matmul's chunks take no epilogue (kiln.sum_splits runs it): the scaling of its parts stays an op.
// CHECK-LABEL: func.func @split_matmul_keeps_its_consumer
// CHECK: %[[P:.+]] = kiln.matmul %{{.*}}, %{{.*}} {k_chunk = 4 : i64}
// CHECK: kiln.mul %[[P]], %{{.*}} : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
func.func @split_matmul_keeps_its_consumer(%x: tensor<3x8xf32>, %w: tensor<8x5xf32>, %s: tensor<f32>) -> tensor<2x3x5xf32> {
  %p = kiln.matmul %x, %w {k_chunk = 4 : i64} : tensor<3x8xf32>, tensor<8x5xf32> -> tensor<2x3x5xf32>
  %y = kiln.mul %p, %s : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}
