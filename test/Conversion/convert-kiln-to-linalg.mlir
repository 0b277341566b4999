// RUN: kiln-opt %s -convert-kiln-to-linalg -split-input-file | FileCheck %s --implicit-check-not='= kiln.'

// The reference lowering: every kiln op becomes linalg/tensor/arith on tensors, computing in f32 (narrow
// inputs widened with arith.extf, results rounded once with arith.truncf). No kiln op survives anywhere.

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// A broadcast operand is read through a map that drops its missing leading dimension.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$COLS:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<8xf32>)
// CHECK: %[[INIT:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$COLS]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[B]] : tensor<4x8xf32>, tensor<8xf32>) outs(%[[INIT]] : tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[LHS:[a-zA-Z0-9_]+]]: f32, %[[RHS:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[R:[a-zA-Z0-9_]+]] = arith.addf %[[LHS]], %[[RHS]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
// CHECK: return %[[SUM]]
func.func @add_broadcast(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// bf16 is computed in f32: both inputs widened, the product rounded once. A size-1 dimension that stretches is
// read at index 0.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$STRETCH:.+]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func.func @mul_bf16
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$STRETCH]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<4x1xbf16>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK-NEXT: ^bb0(%[[LHS:[a-zA-Z0-9_]+]]: bf16, %[[RHS:[a-zA-Z0-9_]+]]: bf16, %{{.*}}: bf16):
// CHECK-NEXT: %[[LHS_F32:[a-zA-Z0-9_]+]] = arith.extf %[[LHS]] : bf16 to f32
// CHECK-NEXT: %[[RHS_F32:[a-zA-Z0-9_]+]] = arith.extf %[[RHS]] : bf16 to f32
// CHECK-NEXT: %[[PRODUCT:[a-zA-Z0-9_]+]] = arith.mulf %[[LHS_F32]], %[[RHS_F32]] : f32
// CHECK-NEXT: %[[ROUNDED:[a-zA-Z0-9_]+]] = arith.truncf %[[PRODUCT]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[ROUNDED]] : bf16
func.func @mul_bf16(%x: tensor<4x8xbf16>, %y: tensor<4x1xbf16>) -> tensor<4x8xbf16> {
  %0 = kiln.mul %x, %y : tensor<4x8xbf16>, tensor<4x1xbf16> -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Activations are scalar formulas in the generic body.
// CHECK-LABEL: func.func @activations
// CHECK: linalg.generic
// CHECK: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: arith.maximumf %{{.*}}, %[[ZERO]] : f32
// CHECK: linalg.generic
// CHECK: arith.negf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: arith.mulf
// CHECK: linalg.generic
// CHECK: math.tanh
func.func @activations(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %0 = kiln.relu %x : tensor<16xf32>
  %1 = kiln.silu %x : tensor<16xf32>
  %2 = kiln.gelu %x approximate(tanh) : tensor<16xf32>
  return %0, %1, %2 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// sin, cos, floor and ceil (a rotary table computed at run time) are math ops on the f32 value of each element:
// a bf16 input widened first, the result rounded back.
// CHECK-LABEL: func.func @trigonometry
// CHECK: linalg.generic
// CHECK: %[[WIDE:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[SIN:.*]] = math.sin %[[WIDE]] : f32
// CHECK: arith.truncf %[[SIN]] : f32 to bf16
// CHECK: linalg.generic
// CHECK: math.cos
// CHECK: linalg.generic
// CHECK: math.floor
// CHECK: linalg.generic
// CHECK: math.ceil
func.func @trigonometry(%h: tensor<16xbf16>, %x: tensor<16xf32>) -> (tensor<16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %0 = kiln.sin %h : tensor<16xbf16>
  %1 = kiln.cos %x : tensor<16xf32>
  %2 = kiln.floor %x : tensor<16xf32>
  %3 = kiln.ceil %x : tensor<16xf32>
  return %0, %1, %2, %3 : tensor<16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// select broadcasts all three operands; a rank-0 operand is read through an empty map.
// CHECK-DAG: #[[$COND:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$SCALAR:.+]] = affine_map<(d0, d1, d2) -> ()>
// CHECK-LABEL: func.func @select
// CHECK: linalg.generic {indexing_maps = [#[[$COND]], #[[$ID]], #[[$SCALAR]], #[[$ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>)
// CHECK-NEXT: ^bb0(%[[C:[a-zA-Z0-9_]+]]: i1, %[[T:[a-zA-Z0-9_]+]]: f32, %[[F:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[R:[a-zA-Z0-9_]+]] = arith.select %[[C]], %[[T]], %[[F]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
func.func @select(%c: tensor<4x4xi1>, %a: tensor<2x4x4xf32>, %b: tensor<f32>) -> tensor<2x4x4xf32> {
  %0 = kiln.select %c, %a, %b : tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  return %0 : tensor<2x4x4xf32>
}

// -----

// compare: floats widen and compare ordered (ne unordered), integers signed, bools unsigned; the result is i1.
// A select chooses between integers as between floats.
// CHECK-LABEL: func.func @compare
// CHECK: linalg.generic
// CHECK: %[[WIDE:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: arith.cmpf olt, %[[WIDE]], %{{.*}} : f32
// CHECK: linalg.yield %{{.*}} : i1
// CHECK: linalg.generic
// CHECK: arith.cmpf une
// CHECK: linalg.generic
// CHECK: arith.cmpi sge, %{{.*}}, %{{.*}} : i64
// CHECK: linalg.generic
// CHECK: arith.cmpi ugt, %{{.*}}, %{{.*}} : i1
// CHECK: linalg.generic
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : i64
func.func @compare(%h: tensor<8xf16>, %g: tensor<f16>, %i: tensor<2x8xi64>, %j: tensor<8xi64>, %p: tensor<8xi1>)
    -> (tensor<8xi1>, tensor<8xi1>, tensor<2x8xi1>, tensor<8xi1>, tensor<2x8xi64>) {
  %0 = kiln.compare lt %h, %g : tensor<8xf16>, tensor<f16> -> tensor<8xi1>
  %1 = kiln.compare ne %h, %g : tensor<8xf16>, tensor<f16> -> tensor<8xi1>
  %2 = kiln.compare ge %i, %j : tensor<2x8xi64>, tensor<8xi64> -> tensor<2x8xi1>
  %3 = kiln.compare gt %p, %0 : tensor<8xi1>, tensor<8xi1> -> tensor<8xi1>
  %4 = kiln.select %2, %i, %j : tensor<2x8xi1>, tensor<2x8xi64>, tensor<8xi64> -> tensor<2x8xi64>
  return %0, %1, %2, %3, %4 : tensor<8xi1>, tensor<8xi1>, tensor<2x8xi1>, tensor<8xi1>, tensor<2x8xi64>
}

// -----

// fmod is the truncated remainder (arith.remf); remainder moves a nonzero one into the divisor's sign and
// gives a zero the divisor's sign (numpy, ONNX Mod).
// CHECK-LABEL: func.func @remainders
// CHECK: linalg.generic
// CHECK: arith.remf
// CHECK: linalg.generic
// CHECK: ^bb0(%[[X:[a-zA-Z0-9_]+]]: f32, %[[Y:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[R:.*]] = arith.remf %[[X]], %[[Y]] : f32
// CHECK-DAG: %[[RNEG:.*]] = arith.cmpf olt, %[[R]], %{{.*}} : f32
// CHECK-DAG: %[[YNEG:.*]] = arith.cmpf olt, %[[Y]], %{{.*}} : f32
// CHECK-DAG: %[[NONZERO:.*]] = arith.cmpf one, %[[R]], %{{.*}} : f32
// CHECK: %[[SIGNS:.*]] = arith.xori %[[RNEG]], %[[YNEG]] : i1
// CHECK: %[[MOVE:.*]] = arith.andi %[[NONZERO]], %[[SIGNS]] : i1
// CHECK: %[[SUM:.*]] = arith.addf %[[R]], %[[Y]] : f32
// CHECK: %[[MOVED:.*]] = arith.select %[[MOVE]], %[[SUM]], %[[R]] : f32
// CHECK: %[[ZERO:.*]] = arith.cmpf oeq, %[[R]], %{{.*}} : f32
// CHECK: %[[SIGNED:.*]] = math.copysign %{{.*}}, %[[Y]] : f32
// CHECK: arith.select %[[ZERO]], %[[SIGNED]], %[[MOVED]] : f32
func.func @remainders(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %0 = kiln.fmod %x, %y : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %1 = kiln.remainder %x, %y : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %0, %1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// A fused chain: one linalg.generic over the broadcast inputs, widened to the body's compute types on load, the
// body inlined, the result rounded once on store.
// CHECK-LABEL: func.func @fused_chain
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8xi32>)
// CHECK: ^bb0(%[[X:[a-zA-Z0-9_]+]]: bf16, %[[I:[a-zA-Z0-9_]+]]: i32, %{{.*}}: bf16):
// CHECK: %[[XW:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK: %[[IF:.*]] = arith.sitofp %[[I]] : i32 to f32
// CHECK: %[[P:.*]] = arith.mulf %[[XW]], %[[IF]] : f32
// CHECK: %[[R:.*]] = arith.truncf %[[P]] : f32 to bf16
// CHECK: linalg.yield %[[R]] : bf16
// CHECK-NOT: linalg.generic
func.func @fused_chain(%x: tensor<4x8xbf16>, %i: tensor<8xi32>) -> tensor<4x8xbf16> {
  %y = kiln.elementwise %x, %i : (tensor<4x8xbf16>, tensor<8xi32>) -> tensor<4x8xbf16> {
  ^bb0(%xs: f32, %is: i32):
    %f = arith.sitofp %is : i32 to f32
    %p = arith.mulf %xs, %f : f32
    kiln.yield %p : f32
  }
  return %y : tensor<4x8xbf16>
}

// -----

// Integer arithmetic computes in its own type. The division guards its divisor: 0 and -1 become 1 for
// arith.divsi (a zero divisor and INT_MIN / -1 trap on the host), and the quotient is 0 for 0, -x for -1.
// CHECK-LABEL: func.func @integer_arithmetic
// CHECK: arith.addi %{{.*}}, %{{.*}} : i32
// CHECK: ^bb0(%[[X:[a-zA-Z0-9_]+]]: i32, %[[Y:[a-zA-Z0-9_]+]]: i32, %{{.*}}: i32):
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[MINUS:.*]] = arith.constant -1 : i32
// CHECK-DAG: %[[YZERO:.*]] = arith.cmpi eq, %[[Y]], %[[ZERO]] : i32
// CHECK-DAG: %[[YMINUS:.*]] = arith.cmpi eq, %[[Y]], %[[MINUS]] : i32
// CHECK: %[[TRIVIAL:.*]] = arith.ori %[[YZERO]], %[[YMINUS]] : i1
// CHECK: %[[SAFE:.*]] = arith.select %[[TRIVIAL]], %[[ONE]], %[[Y]] : i32
// CHECK: %[[Q:.*]] = arith.divsi %[[X]], %[[SAFE]] : i32
// CHECK: %[[NEG:.*]] = arith.subi %[[ZERO]], %[[X]] : i32
// CHECK: %[[QM:.*]] = arith.select %[[YMINUS]], %[[NEG]], %[[Q]] : i32
// CHECK: arith.select %[[YZERO]], %[[ZERO]], %[[QM]] : i32
// The floored remainder: the truncated one (guarded the same way), moved into the divisor's sign.
// CHECK: arith.remsi %{{.*}}, %{{.*}} : i64
// CHECK: arith.xori
// CHECK: arith.addi %{{.*}}, %{{.*}} : i64
// CHECK: arith.maxsi %{{.*}}, %{{.*}} : i64
// The power squares once per bit but the sign bit (31 products of the base).
// CHECK-COUNT-31: arith.shrui
// CHECK: arith.cmpi slt
func.func @integer_arithmetic(%a: tensor<4x8xi32>, %b: tensor<8xi32>, %c: tensor<8xi64>, %d: tensor<8xi64>)
    -> (tensor<4x8xi32>, tensor<4x8xi32>, tensor<8xi64>, tensor<8xi64>, tensor<4x8xi32>) {
  %0 = kiln.add %a, %b : tensor<4x8xi32>, tensor<8xi32> -> tensor<4x8xi32>
  %1 = kiln.div %a, %b : tensor<4x8xi32>, tensor<8xi32> -> tensor<4x8xi32>
  %2 = kiln.remainder %c, %d : tensor<8xi64>, tensor<8xi64> -> tensor<8xi64>
  %3 = kiln.max %c, %d : tensor<8xi64>, tensor<8xi64> -> tensor<8xi64>
  %4 = kiln.pow %a, %b : tensor<4x8xi32>, tensor<8xi32> -> tensor<4x8xi32>
  return %0, %1, %2, %3, %4 : tensor<4x8xi32>, tensor<4x8xi32>, tensor<8xi64>, tensor<8xi64>, tensor<4x8xi32>
}

// -----

// cast converts straight from the source type: float narrowing rounds, int -> float is signed, float -> i1
// compares with zero.
// CHECK-LABEL: func.func @cast
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf32>) outs(%{{.*}} : tensor<4xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:[a-zA-Z0-9_]+]]: f32, %{{.*}}: bf16):
// CHECK-NEXT: %[[NARROW:[a-zA-Z0-9_]+]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[NARROW]] : bf16
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xi32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.sitofp %{{.*}} : i32 to f32
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf32>) outs(%{{.*}} : tensor<4xi1>)
// CHECK: arith.cmpf une, %{{.*}}, %{{.*}} : f32
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// Float to int saturates (NaN to 0, beyond 2^31 to the ends) with fptosi only on values in range.
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf32>) outs(%{{.*}} : tensor<4xi32>)
// CHECK-NEXT: ^bb0(%[[F:[a-zA-Z0-9_]+]]: f32, %{{.*}}: i32):
// CHECK-DAG: %[[HIGH:.*]] = arith.cmpf oge, %[[F]], %{{.*}} : f32
// CHECK-DAG: %[[LOW:.*]] = arith.cmpf olt, %[[F]], %{{.*}} : f32
// CHECK-DAG: %[[NAN:.*]] = arith.cmpf uno, %[[F]], %[[F]] : f32
// CHECK: %[[SAFE:.*]] = arith.select %{{.*}}, %{{.*}}, %[[F]] : f32
// CHECK: %[[I:.*]] = arith.fptosi %[[SAFE]] : f32 to i32
// CHECK-DAG: arith.constant 2147483647 : i32
// CHECK-DAG: arith.constant -2147483648 : i32
// CHECK: %[[BELOW:.*]] = arith.select %[[LOW]], %{{.*}}, %[[I]] : i32
// CHECK: %[[ABOVE:.*]] = arith.select %[[HIGH]], %{{.*}}, %[[BELOW]] : i32
// CHECK: arith.select %[[NAN]], %{{.*}}, %[[ABOVE]] : i32
func.func @cast(%x: tensor<4xf32>, %y: tensor<4xi32>, %z: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) {
  %0 = kiln.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = kiln.cast %y : tensor<4xi32> to tensor<4xf32>
  %2 = kiln.cast %x : tensor<4xf32> to tensor<4xi1>
  %3 = kiln.cast %z : tensor<4xbf16> to tensor<4xf32>
  %4 = kiln.cast %x : tensor<4xf32> to tensor<4xi32>
  return %0, %1, %2, %3, %4 : tensor<4xbf16>, tensor<4xf32>, tensor<4xi1>, tensor<4xf32>, tensor<4xi32>
}

// -----

// CHECK-LABEL: func.func @constant
// CHECK-NEXT: %[[C:[a-zA-Z0-9_]+]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @constant() -> tensor<2xf32> {
  %0 = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %0 : tensor<2xf32>
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

// -----

// Iteration space (batch, m, k, n) with k the only reduction; a [K, N] weight broadcasts over the batch.
// CHECK-DAG: #[[$LHS:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[$RHS:.+]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-DAG: #[[$OUT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func.func @matmul_batched
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<2x4x8xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<8x16xf32>)
// CHECK: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[EMPTY:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<2x4x16xf32>
// CHECK: %[[ACC:[a-zA-Z0-9_]+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<2x4x16xf32>)
// CHECK: %[[RESULT:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$LHS]], #[[$RHS]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[A]], %[[W]] : tensor<2x4x8xf32>, tensor<8x16xf32>) outs(%[[ACC]] : tensor<2x4x16xf32>)
// CHECK-NEXT: ^bb0(%[[L:[a-zA-Z0-9_]+]]: f32, %[[R:[a-zA-Z0-9_]+]]: f32, %[[O:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = arith.mulf %[[L]], %[[R]] : f32
// CHECK-NEXT: %[[S:[a-zA-Z0-9_]+]] = arith.addf %[[O]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: return %[[RESULT]]
func.func @matmul_batched(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) -> tensor<2x4x16xf32> {
  %0 = kiln.matmul %a, %b : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// bf16 with transpose_rhs: the rhs is read as (n, k); the product accumulates in an f32 tensor that a second
// generic rounds to bf16.
// CHECK-DAG: #[[$LHS:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$RHS_T:.+]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[$OUT:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @matmul_bf16_transpose_rhs
// CHECK: %[[ACC:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$LHS]], #[[$RHS_T]], #[[$OUT]]], iterator_types = ["parallel", "reduction", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<16x8xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NEXT: ^bb0(%[[L:[a-zA-Z0-9_]+]]: bf16, %[[R:[a-zA-Z0-9_]+]]: bf16, %{{.*}}: f32):
// CHECK-DAG: arith.extf %[[L]] : bf16 to f32
// CHECK-DAG: arith.extf %[[R]] : bf16 to f32
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[NARROW:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[ACC]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[NARROW]]
func.func @matmul_bf16_transpose_rhs(%a: tensor<4x8xbf16>, %b: tensor<16x8xbf16>) -> tensor<4x16xbf16> {
  %0 = kiln.matmul %a, %b transpose_rhs : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
  return %0 : tensor<4x16xbf16>
}

// -----

// Textbook attention, causal GQA (4 q heads over 2 k/v heads): scores over (b, h, i, j, d) reading k head
// h floordiv 2, the scale and bottom-right causal mask, a max and a sum reduction over j around math.exp, P V
// over (b, h, i, j, e) reading v head h floordiv 2, and the division by the row sum.
// CHECK-DAG: #[[$Q:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG: #[[$KV:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-DAG: #[[$S:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$ID4:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$ROW4:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @attention_causal_gqa
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x4x8x16xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x8x16xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x8x16xf32>)
// CHECK: %[[SCORES:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$Q]], #[[$KV]], #[[$S]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[Q]], %[[K]] : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>) outs(%{{.*}} : tensor<1x4x8x8xf32>)
// CHECK: %[[LOGITS:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$ID4]]], {{.*}} ins(%[[SCORES]] : tensor<1x4x8x8xf32>)
// CHECK: %[[SCALE:[a-zA-Z0-9_]+]] = arith.constant 2.500000e-01 : f32
// CHECK: %[[SCALED:[a-zA-Z0-9_]+]] = arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: %[[I:[a-zA-Z0-9_]+]] = linalg.index 2 : index
// CHECK: %[[J:[a-zA-Z0-9_]+]] = linalg.index 3 : index
// CHECK: %[[LIMIT:[a-zA-Z0-9_]+]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: %[[FUTURE:[a-zA-Z0-9_]+]] = arith.cmpi sgt, %[[J]], %[[LIMIT]] : index
// CHECK: %[[NEG_INF:[a-zA-Z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK: arith.select %[[FUTURE]], %[[NEG_INF]], %[[SCALED]] : f32
// CHECK: %[[ROW_MAX:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$ROW4]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[LOGITS]] : tensor<1x4x8x8xf32>)
// CHECK: arith.maximumf
// CHECK: %[[EXPS:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$ROW4]], #[[$ID4]]], {{.*}} ins(%[[LOGITS]], %[[ROW_MAX]] : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>)
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: %[[ROW_SUM:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$ROW4]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[EXPS]] : tensor<1x4x8x8xf32>)
// CHECK: arith.addf
// CHECK: %[[PV:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$S]], #[[$KV]], #[[$Q]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%[[EXPS]], %[[V]] : tensor<1x4x8x8xf32>, tensor<1x2x8x16xf32>)
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$ROW4]], #[[$ID4]]], {{.*}} ins(%[[PV]], %[[ROW_SUM]] : tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
// A row that sees no key (sum 0) divides by 1: zeros.
// CHECK: ^bb0(%[[SUMS:[a-zA-Z0-9_]+]]: f32, %[[TOTAL:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[EMPTY:[a-zA-Z0-9_]+]] = arith.cmpf oeq, %[[TOTAL]], %{{.*}} : f32
// CHECK: %[[DIVISOR:[a-zA-Z0-9_]+]] = arith.select %[[EMPTY]], %{{.*}}, %[[TOTAL]] : f32
// CHECK: arith.divf %[[SUMS]], %[[DIVISOR]] : f32
// CHECK: return %[[OUT]]
func.func @attention_causal_gqa(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %0 = kiln.attention %q, %k, %v causal : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// bf16 attention with a broadcast key mask and the lse: q and k are widened in the score contraction, the mask
// is added after the explicit scale, the output is rounded to bf16, and lse = row max + log(row sum).
// CHECK-DAG: #[[$MASK:.+]] = affine_map<(d0, d1, d2, d3) -> (d3)>
// CHECK-LABEL: func.func @attention_mask_lse
// CHECK-SAME: %[[MASK:[a-zA-Z0-9_]+]]: tensor<6xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>) outs(%{{.*}} : tensor<1x2x4x6xf32>)
// CHECK-COUNT-2: arith.extf
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[$MASK]], #{{.*}}], {{.*}} ins(%{{.*}}, %[[MASK]] : tensor<1x2x4x6xf32>, tensor<6xf32>)
// CHECK: %[[SCALED:[a-zA-Z0-9_]+]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.addf %[[SCALED]], %{{.*}} : f32
// CHECK: %[[ROW_MAX:[a-zA-Z0-9_]+]] = linalg.generic
// CHECK: math.exp
// CHECK: %[[ROW_SUM:[a-zA-Z0-9_]+]] = linalg.generic
// CHECK: %[[OUT:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x4x8xbf16>)
// CHECK: arith.cmpf oeq
// CHECK: arith.select
// CHECK: arith.divf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[LSE:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[ROW_MAX]], %[[ROW_SUM]] : tensor<1x2x4xf32>, tensor<1x2x4xf32>)
// CHECK-NEXT: ^bb0(%[[M:[a-zA-Z0-9_]+]]: f32, %[[L:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[LOG:[a-zA-Z0-9_]+]] = math.log %[[L]] : f32
// CHECK-NEXT: %[[R:[a-zA-Z0-9_]+]] = arith.addf %[[M]], %[[LOG]] : f32
// CHECK: return %[[OUT]], %[[LSE]]
func.func @attention_mask_lse(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x6x8xbf16>, %v: tensor<1x2x6x8xbf16>, %m: tensor<6xf32>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>) {
  %0, %1 = kiln.attention %q, %k, %v mask(%m : tensor<6xf32>) {scale = 0.5 : f32} : tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16> -> tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>
  return %0, %1 : tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>
}

// -----

// A split attention (kv_chunk = 64 over 100 keys: 2 chunks): the masked scores padded to 128 keys with -inf and
// v with zeros, both viewed with the key split in (chunk, key in chunk); per chunk a row max, weights (0 where the
// max is -inf: a row that sees no key of the chunk), their sum, P V and the lse. The merge weighs each chunk by
// exp(lse - max lse) (0 for lse = -inf, its part selected away) and divides by the weights' sum.
// CHECK-LABEL: func.func @split_attention
// CHECK: %[[SCORES:.+]] = tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 0, 28]
// CHECK: tensor.yield %cst
// CHECK: %[[SPLIT:.+]] = tensor.expand_shape %[[SCORES]] {{\[\[}}0], [1], [2], [3, 4]] output_shape [1, 2, 4, 2, 64] : tensor<1x2x4x128xf32> into tensor<1x2x4x2x64xf32>
// CHECK: tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 28, 0]
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2, 3], [4]] output_shape [1, 2, 2, 64, 8] : tensor<1x2x128x8xf32> into tensor<1x2x2x64x8xf32>
// CHECK: %[[MAX:.+]] = linalg.generic {{.*}} ins(%[[SPLIT]] : tensor<1x2x4x2x64xf32>) outs(%{{.*}} : tensor<2x1x2x4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[SPLIT]], %[[MAX]] : tensor<1x2x4x2x64xf32>, tensor<2x1x2x4xf32>)
// CHECK: arith.cmpf oeq
// CHECK: arith.select
// CHECK: } -> tensor<2x1x2x4x8xf32>
// CHECK: math.log
// CHECK: %[[LSE_MAX:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x4xf32>)
// CHECK: arith.maximumf
// CHECK: arith.cmpf one
// CHECK: arith.select
// A row no chunk gives a key (total weight 0) merges to zeros.
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x4x8xbf16>)
// CHECK: arith.cmpf oeq
// CHECK: arith.select
// CHECK: arith.divf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @split_attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x100x8xf32>) -> tensor<1x2x4x8xbf16> {
  %p, %l = kiln.attention %q, %k, %k {kv_chunk = 64 : i64} : tensor<1x2x4x8xf32>, tensor<1x2x100x8xf32>, tensor<1x2x100x8xf32> -> tensor<2x1x2x4x8xf32>, tensor<2x1x2x4xf32>
  %o = kiln.merge_splits %p, %l : tensor<2x1x2x4x8xf32>, tensor<2x1x2x4xf32> -> tensor<1x2x4x8xbf16>
  return %o : tensor<1x2x4x8xbf16>
}

//===----------------------------------------------------------------------===//
// Normalisations and reductions
//===----------------------------------------------------------------------===//

// -----

// max (from -inf), exp(x - max), sum (from 0), divide.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>)
// CHECK: %[[NEG_INF:[a-zA-Z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MAX_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[ROW_MAX:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf32>) outs(%[[MAX_INIT]] : tensor<4xf32>)
// CHECK: arith.maximumf
// CHECK: %[[EXPS:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[ROW_MAX]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK: ^bb0(%[[XI:[a-zA-Z0-9_]+]]: f32, %[[MAXI:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[FINITE_MAX:[a-zA-Z0-9_]+]] = arith.maximumf %[[MAXI]], %{{.*}} : f32
// CHECK: %[[SHIFTED:[a-zA-Z0-9_]+]] = arith.subf %[[XI]], %[[FINITE_MAX]] : f32
// CHECK: math.exp %[[SHIFTED]] : f32
// CHECK: %[[SUM_INIT:[a-zA-Z0-9_]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[ROW_SUM:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[EXPS]] : tensor<4x8xf32>) outs(%[[SUM_INIT]] : tensor<4xf32>)
// CHECK: arith.addf
// CHECK: %[[PROBS:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[EXPS]], %[[ROW_SUM]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK: arith.divf
// CHECK: return %[[PROBS]]
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.softmax %x axis 1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// zero_empty_rows (an attention's probabilities): a row whose sum is 0 (all -inf) divides by 1 and gives zeros.
// CHECK-LABEL: func.func @softmax_zero_empty_rows
// CHECK: math.exp
// CHECK: linalg.generic
// CHECK: ^bb0(%[[E:[a-zA-Z0-9_]+]]: f32, %[[SUM:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[EMPTY:[a-zA-Z0-9_]+]] = arith.cmpf oeq, %[[SUM]], %{{.*}} : f32
// CHECK: %[[DIVISOR:[a-zA-Z0-9_]+]] = arith.select %[[EMPTY]], %{{.*}}, %[[SUM]] : f32
// CHECK: arith.divf %[[E]], %[[DIVISOR]] : f32
func.func @softmax_zero_empty_rows(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.softmax %x axis 1 zero_empty_rows : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A softmax along a leading axis reduces that axis instead.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$COL:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @softmax_axis0
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$COL]]], iterator_types = ["reduction", "parallel"]} ins(%{{.*}} : tensor<4x8xf32>) outs(%{{.*}} : tensor<8xf32>)
func.func @softmax_axis0(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.softmax %x axis 0 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// The max shifts by at least the most negative float: a row of -inf gives -inf (not NaN).
// CHECK-LABEL: func.func @logsumexp
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>)
// CHECK: %[[ROW_MAX:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf32>)
// CHECK: arith.maximumf
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[ROW_MAX]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK: %[[SHIFT:[a-zA-Z0-9_]+]] = arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.subf %{{.*}}, %[[SHIFT]]
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: %[[LSE:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[ROW_MAX]], %[[SUM]] : tensor<4xf32>, tensor<4xf32>)
// CHECK-DAG: math.log
// CHECK-DAG: arith.maximumf
// CHECK: arith.addf
// CHECK: return %[[LSE]] : tensor<4xf32>
func.func @logsumexp(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = kiln.logsumexp %x axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// mean = sum / 8; keep_dims expands the [2, 3] result back to rank 3 (a view once bufferized).
// CHECK-LABEL: func.func @reduce_mean_keep_dims
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}} : tensor<2x3x8xf32>) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK: arith.addf
// CHECK: %[[MEAN:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<2x3xf32>)
// CHECK: %[[COUNT:[a-zA-Z0-9_]+]] = arith.constant 8.000000e+00 : f32
// CHECK: arith.divf %{{.*}}, %[[COUNT]] : f32
// CHECK: %[[RESULT:[a-zA-Z0-9_]+]] = tensor.expand_shape %[[MEAN]] {{\[}}[0], [1, 2]] output_shape [2, 3, 1] : tensor<2x3xf32> into tensor<2x3x1xf32>
// CHECK: return %[[RESULT]]
func.func @reduce_mean_keep_dims(%x: tensor<2x3x8xf32>) -> tensor<2x3x1xf32> {
  %0 = kiln.reduce mean %x axes [2] keep_dims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  return %0 : tensor<2x3x1xf32>
}

// -----

// RMSNorm: sum of squares in f32 from the bf16 input, then x * rsqrt(sumsq / 8 + eps) * weight, rounded once.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$CHANNEL:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xbf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<8xbf16>)
// CHECK: %[[SUM_SQ:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[a-zA-Z0-9_]+]]: bf16, %[[ACC:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[WIDE:[a-zA-Z0-9_]+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: %[[SQ:[a-zA-Z0-9_]+]] = arith.mulf %[[WIDE]], %[[WIDE]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], %[[SQ]] : f32
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$CHANNEL]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[SUM_SQ]], %[[W]] : tensor<4x8xbf16>, tensor<4xf32>, tensor<8xbf16>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK: arith.constant 8.000000e+00 : f32
// CHECK: arith.divf
// CHECK: arith.constant 9.99999997E-7 : f32
// CHECK: arith.addf
// CHECK: math.rsqrt
// CHECK: arith.mulf
// CHECK: arith.mulf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @rms_norm(%x: tensor<4x8xbf16>, %w: tensor<8xbf16>) -> tensor<4x8xbf16> {
  %0 = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<4x8xbf16>, tensor<8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// LayerNorm: mean, then the centred sum of squares reading the mean back per row, then
// (x - mean) * rsqrt(var + eps) * weight + bias.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$CHANNEL:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x8xf32>, %[[G:[a-zA-Z0-9_]+]]: tensor<8xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<8xf32>)
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf32>)
// CHECK: %[[MEAN:[a-zA-Z0-9_]+]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<4xf32>)
// CHECK: arith.divf
// CHECK: %[[SUM_SQ:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[MEAN]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK: %[[CENTRED:[a-zA-Z0-9_]+]] = arith.subf
// CHECK: arith.mulf %[[CENTRED]], %[[CENTRED]] : f32
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ROW]], #[[$CHANNEL]], #[[$CHANNEL]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[MEAN]], %[[SUM_SQ]], %[[G]], %[[B]] : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[a-zA-Z0-9_]+]]: f32, %[[M:[a-zA-Z0-9_]+]]: f32, %[[SS:[a-zA-Z0-9_]+]]: f32, %[[GAMMA:[a-zA-Z0-9_]+]]: f32, %[[BETA:[a-zA-Z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: %[[VAR:[a-zA-Z0-9_]+]] = arith.divf %[[SS]], %{{.*}} : f32
// CHECK: %[[EPS:[a-zA-Z0-9_]+]] = arith.constant 9.99999974E-6 : f32
// CHECK: %[[VAR_EPS:[a-zA-Z0-9_]+]] = arith.addf %[[VAR]], %[[EPS]] : f32
// CHECK: %[[INV:[a-zA-Z0-9_]+]] = math.rsqrt %[[VAR_EPS]] : f32
// CHECK: %[[XC:[a-zA-Z0-9_]+]] = arith.subf %[[IN]], %[[M]] : f32
// CHECK: %[[NORMED:[a-zA-Z0-9_]+]] = arith.mulf %[[XC]], %[[INV]] : f32
// CHECK: %[[SCALED:[a-zA-Z0-9_]+]] = arith.mulf %[[NORMED]], %[[GAMMA]] : f32
// CHECK: %[[Y:[a-zA-Z0-9_]+]] = arith.addf %[[SCALED]], %[[BETA]] : f32
// CHECK: linalg.yield %[[Y]] : f32
func.func @layer_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.layer_norm %x, %g, %b epsilon 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Rotate-half RoPE: element c of the last dimension pairs with c +/- 4 and reads the angle of pair c mod 4 at
// its position (dimension -2); the first half gets a cos - b sin, the second b cos + a sin.
// CHECK-LABEL: func.func @rope
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<2x4x8xf32>, %[[COS:[a-zA-Z0-9_]+]]: tensor<4x4xf32>, %[[SIN:[a-zA-Z0-9_]+]]: tensor<4x4xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} outs(%{{.*}} : tensor<2x4x8xf32>)
// CHECK: %[[D0:[a-zA-Z0-9_]+]] = linalg.index 0 : index
// CHECK: %[[POS:[a-zA-Z0-9_]+]] = linalg.index 1 : index
// CHECK: %[[C:[a-zA-Z0-9_]+]] = linalg.index 2 : index
// CHECK: %[[SECOND:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[C]], %{{.*}} : index
// CHECK: %[[LOWER:[a-zA-Z0-9_]+]] = arith.subi %[[C]], %{{.*}} : index
// CHECK: %[[PAIR:[a-zA-Z0-9_]+]] = arith.select %[[SECOND]], %[[LOWER]], %[[C]] : index
// CHECK: %[[UPPER:[a-zA-Z0-9_]+]] = arith.addi %[[C]], %{{.*}} : index
// CHECK: %[[PARTNER:[a-zA-Z0-9_]+]] = arith.select %[[SECOND]], %[[PAIR]], %[[UPPER]] : index
// CHECK: %[[SELF:[a-zA-Z0-9_]+]] = tensor.extract %[[X]][%[[D0]], %[[POS]], %[[C]]] : tensor<2x4x8xf32>
// CHECK: %[[OTHER:[a-zA-Z0-9_]+]] = tensor.extract %[[X]][%[[D0]], %[[POS]], %[[PARTNER]]] : tensor<2x4x8xf32>
// CHECK: %[[COSV:[a-zA-Z0-9_]+]] = tensor.extract %[[COS]][%[[POS]], %[[PAIR]]] : tensor<4x4xf32>
// CHECK: %[[SINV:[a-zA-Z0-9_]+]] = tensor.extract %[[SIN]][%[[POS]], %[[PAIR]]] : tensor<4x4xf32>
// CHECK: %[[SELF_COS:[a-zA-Z0-9_]+]] = arith.mulf %[[SELF]], %[[COSV]] : f32
// CHECK: %[[OTHER_SIN:[a-zA-Z0-9_]+]] = arith.mulf %[[OTHER]], %[[SINV]] : f32
// CHECK: %[[FIRST:[a-zA-Z0-9_]+]] = arith.subf %[[SELF_COS]], %[[OTHER_SIN]] : f32
// CHECK: %[[SECOND_VAL:[a-zA-Z0-9_]+]] = arith.addf %[[SELF_COS]], %[[OTHER_SIN]] : f32
// CHECK: %[[R:[a-zA-Z0-9_]+]] = arith.select %[[SECOND]], %[[SECOND_VAL]], %[[FIRST]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @rope(%x: tensor<2x4x8xf32>, %c: tensor<4x4xf32>, %s: tensor<4x4xf32>) -> tensor<2x4x8xf32> {
  %0 = kiln.rope %x, %c, %s : tensor<2x4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

// Interleaved RoPE pairs (2i, 2i + 1): the pair is c / 2, the partner c xor 1, and bf16 is widened and rounded.
// CHECK-LABEL: func.func @rope_interleaved
// CHECK: %[[C:[a-zA-Z0-9_]+]] = linalg.index 1 : index
// CHECK: %[[PAIR:[a-zA-Z0-9_]+]] = arith.divui %[[C]], %{{.*}} : index
// CHECK: %[[ODD:[a-zA-Z0-9_]+]] = arith.remui %[[C]], %{{.*}} : index
// CHECK: %[[SECOND:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[ODD]], %{{.*}} : index
// CHECK: %[[PARTNER:[a-zA-Z0-9_]+]] = arith.xori %[[C]], %{{.*}} : index
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[PARTNER]]] : tensor<4x8xbf16>
// CHECK: arith.extf
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[PAIR]]] : tensor<4x4xbf16>
// CHECK: arith.select %[[SECOND]], %{{.*}}, %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @rope_interleaved(%x: tensor<4x8xbf16>, %c: tensor<4x4xbf16>, %s: tensor<4x4xbf16>) -> tensor<4x8xbf16> {
  %0 = kiln.rope %x, %c, %s interleaved : tensor<4x8xbf16>, tensor<4x4xbf16>, tensor<4x4xbf16>
  return %0 : tensor<4x8xbf16>
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<2x3x4xf32>)
// CHECK: %[[INIT:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<4x2x3xf32>
// CHECK: %[[T:[a-zA-Z0-9_]+]] = linalg.transpose ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<4x2x3xf32>) permutation = [2, 0, 1]
// CHECK: return %[[T]]
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = kiln.transpose %x [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// A reshape whose dimensions group into one another is an expand_shape or collapse_shape (a view once
// bufferized); any other goes through tensor.reshape with a constant shape.
// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<2x12xf32>, %[[Y:[a-zA-Z0-9_]+]]: tensor<2x3x4xf32>, %[[Z:[a-zA-Z0-9_]+]]: tensor<6x4xf32>)
// CHECK: %[[R:[a-zA-Z0-9_]+]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [2, 3, 4] : tensor<2x12xf32> into tensor<2x3x4xf32>
// CHECK: %[[C:[a-zA-Z0-9_]+]] = tensor.collapse_shape %[[Y]] {{\[}}[0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK: %[[SHAPE:[a-zA-Z0-9_]+]] = arith.constant dense<[4, 6]> : tensor<2xindex>
// CHECK: %[[T:[a-zA-Z0-9_]+]] = tensor.reshape %[[Z]](%[[SHAPE]]) : (tensor<6x4xf32>, tensor<2xindex>) -> tensor<4x6xf32>
// CHECK: return %[[R]], %[[C]], %[[T]]
func.func @reshape(%x: tensor<2x12xf32>, %y: tensor<2x3x4xf32>, %z: tensor<6x4xf32>) -> (tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>) {
  %0 = kiln.reshape %x : tensor<2x12xf32> -> tensor<2x3x4xf32>
  %1 = kiln.reshape %y : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %2 = kiln.reshape %z : tensor<6x4xf32> -> tensor<4x6xf32>
  return %0, %1, %2 : tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>
}

// -----

// On the host a kiln.dim (a tiled kernel's sequence length) is its static extent.
// CHECK-LABEL: func.func @dim
// CHECK: %[[LENGTH:[a-zA-Z0-9_]+]] = arith.constant 300 : index
// CHECK: return %[[LENGTH]] : index
func.func @dim(%k: tensor<1x2x300x64xbf16>) -> index {
  %0 = kiln.dim %k[2] : tensor<1x2x300x64xbf16>
  return %0 : index
}

// -----

// broadcast is a copy through a broadcasting map; integers are copied as they are.
// CHECK-DAG: #[[$IN:.+]] = affine_map<(d0, d1, d2) -> (d1, 0)>
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @broadcast
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.*}} : tensor<3x1xi64>) outs(%{{.*}} : tensor<2x3x4xi64>)
// CHECK-NEXT: ^bb0(%[[IN:[a-zA-Z0-9_]+]]: i64, %{{.*}}: i64):
// CHECK-NEXT: linalg.yield %[[IN]] : i64
func.func @broadcast(%x: tensor<3x1xi64>) -> tensor<2x3x4xi64> {
  %0 = kiln.broadcast %x : tensor<3x1xi64> -> tensor<2x3x4xi64>
  return %0 : tensor<2x3x4xi64>
}

// -----

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<2x3xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<2x5xf32>)
// CHECK: %[[INIT:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<2x8xf32>
// CHECK: %[[WITH_A:[a-zA-Z0-9_]+]] = tensor.insert_slice %[[A]] into %[[INIT]][0, 0] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<2x8xf32>
// CHECK: %[[WITH_B:[a-zA-Z0-9_]+]] = tensor.insert_slice %[[B]] into %[[WITH_A]][0, 3] [2, 5] [1, 1] : tensor<2x5xf32> into tensor<2x8xf32>
// CHECK: return %[[WITH_B]]
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %0 = kiln.concat %a, %b axis 1 : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<8x16xf32>)
// CHECK: %[[S:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[X]][1, 2] [3, 4] [2, 3] : tensor<8x16xf32> to tensor<3x4xf32>
// CHECK: return %[[S]]
func.func @slice(%x: tensor<8x16xf32>) -> tensor<3x4xf32> {
  %0 = kiln.slice %x offsets [1, 2] strides [2, 3] : tensor<8x16xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Gather along axis 1: the index tensor is read over the result dimensions it produces (d1, d2); a negative index
// counts from the end, and any index is clamped into [0, 99] so that it never reads outside the table.
// CHECK-DAG: #[[$INDICES:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, d2)>
// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[TABLE:[a-zA-Z0-9_]+]]: tensor<4x100x16xf32>, %[[IDS:[a-zA-Z0-9_]+]]: tensor<2x5xi32>)
// CHECK: linalg.generic {indexing_maps = [#[[$INDICES]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[IDS]] : tensor<2x5xi32>) outs(%{{.*}} : tensor<4x2x5x16xf32>)
// CHECK-NEXT: ^bb0(%[[ID:[a-zA-Z0-9_]+]]: i32, %{{.*}}: f32):
// CHECK: %[[INDEX:[a-zA-Z0-9_]+]] = arith.index_cast %[[ID]] : i32 to index
// CHECK-DAG: %[[SIZE:[a-zA-Z0-9_]+]] = arith.constant 100 : index
// CHECK-DAG: %[[ZERO:[a-zA-Z0-9_]+]] = arith.constant 0 : index
// CHECK: %[[NEGATIVE:[a-zA-Z0-9_]+]] = arith.cmpi slt, %[[INDEX]], %[[ZERO]] : index
// CHECK: %[[WRAPPED:[a-zA-Z0-9_]+]] = arith.addi %[[INDEX]], %[[SIZE]] : index
// CHECK: %[[FROM_END:[a-zA-Z0-9_]+]] = arith.select %[[NEGATIVE]], %[[WRAPPED]], %[[INDEX]] : index
// CHECK: %[[AT_LEAST_0:[a-zA-Z0-9_]+]] = arith.maxsi %[[FROM_END]], %[[ZERO]] : index
// CHECK: %[[LAST:[a-zA-Z0-9_]+]] = arith.constant 99 : index
// CHECK: %[[CLAMPED:[a-zA-Z0-9_]+]] = arith.minsi %[[AT_LEAST_0]], %[[LAST]] : index
// CHECK: %[[D0:[a-zA-Z0-9_]+]] = linalg.index 0 : index
// CHECK: %[[D3:[a-zA-Z0-9_]+]] = linalg.index 3 : index
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = tensor.extract %[[TABLE]][%[[D0]], %[[CLAMPED]], %[[D3]]] : tensor<4x100x16xf32>
// CHECK: linalg.yield %[[ROW]] : f32
func.func @gather(%t: tensor<4x100x16xf32>, %i: tensor<2x5xi32>) -> tensor<4x2x5x16xf32> {
  %0 = kiln.gather %t[%i] axis 1 : tensor<4x100x16xf32>, tensor<2x5xi32> -> tensor<4x2x5x16xf32>
  return %0 : tensor<4x2x5x16xf32>
}

// -----

// f16 <-> bf16 goes through f32: the widening is exact and the narrowing rounds once.
// CHECK-LABEL: func.func @cast_f16_to_bf16
// CHECK: linalg.generic
// CHECK: %[[WIDE:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: arith.truncf %[[WIDE]] : f32 to bf16
func.func @cast_f16_to_bf16(%x: tensor<4xf16>) -> tensor<4xbf16> {
  %0 = kiln.cast %x : tensor<4xf16> to tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// Paged KV cache
//===----------------------------------------------------------------------===//

// A paged cache's view gathers each sequence's keys through its block table (page j / 16 of the row of sequence
// b), page ids clamped into the cache and zero from seq_lens[b] on, in the cache's element type.
// CHECK-DAG: #[[$LEN:.+]] = affine_map<(d0, d1, d2, d3) -> (d0)>
// CHECK-DAG: #[[$PAGE:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2 floordiv 16)>
// CHECK-LABEL: func.func @gather_pages
// CHECK-SAME: (%[[KC:[a-zA-Z0-9_]+]]: tensor<5x16x2x8xbf16>, %[[TABLE:[a-zA-Z0-9_]+]]: tensor<2x3xi32>, %[[LENS:[a-zA-Z0-9_]+]]: tensor<2xi32>)
// CHECK: %[[KEYS:[a-zA-Z0-9_]+]] = linalg.generic {indexing_maps = [#[[$LEN]], #[[$PAGE]], #{{.+}}], {{.*}}} ins(%[[LENS]], %[[TABLE]] : tensor<2xi32>, tensor<2x3xi32>) outs(%{{.*}} : tensor<2x2x48x8xbf16>)
// CHECK-NEXT: ^bb0(%[[LEN:[a-zA-Z0-9_]+]]: i32, %[[PAGE_ID:[a-zA-Z0-9_]+]]: i32, %{{.*}}: bf16):
// CHECK: %[[J:[a-zA-Z0-9_]+]] = linalg.index 2 : index
// CHECK: %[[ID:[a-zA-Z0-9_]+]] = arith.index_cast %[[PAGE_ID]] : i32 to index
// CHECK: %[[LOW:[a-zA-Z0-9_]+]] = arith.maxsi %[[ID]], %{{.*}} : index
// CHECK: %[[PAGE:[a-zA-Z0-9_]+]] = arith.minsi %[[LOW]], %{{.*}} : index
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = arith.remui %[[J]], %{{.*}} : index
// CHECK: %[[K:[a-zA-Z0-9_]+]] = tensor.extract %[[KC]][%[[PAGE]], %[[ROW]], %{{.*}}, %{{.*}}] : tensor<5x16x2x8xbf16>
// CHECK: %[[N:[a-zA-Z0-9_]+]] = arith.index_cast %[[LEN]] : i32 to index
// CHECK: %[[IN_SEQ:[a-zA-Z0-9_]+]] = arith.cmpi slt, %[[J]], %[[N]] : index
// CHECK: arith.select %[[IN_SEQ]], %[[K]], %{{.*}} : bf16
// CHECK: return %[[KEYS]]
func.func @gather_pages(%kc: tensor<5x16x2x8xbf16>, %table: tensor<2x3xi32>, %lens: tensor<2xi32>)
    -> tensor<2x2x48x8xbf16> {
  %0 = kiln.gather_pages %kc, %table, %lens : tensor<5x16x2x8xbf16>, tensor<2x3xi32>, tensor<2xi32>
      -> tensor<2x2x48x8xbf16>
  return %0 : tensor<2x2x48x8xbf16>
}

// -----

// The append copies the caches (its operands keep their values), then writes each new token's row [Hkv, D] at
// page block_table[b, p / 16], row p % 16 of p = positions[b] + s, skipping a slot outside the table or the
// caches.
// CHECK-LABEL: func.func @append_kv
// CHECK-SAME: (%[[KC:[a-zA-Z0-9_]+]]: tensor<5x16x2x8xbf16>, %[[VC:[a-zA-Z0-9_]+]]: tensor<5x16x2x8xbf16>, %[[K:[a-zA-Z0-9_]+]]: tensor<2x2x3x8xbf16>, %[[V:[a-zA-Z0-9_]+]]: tensor<2x2x3x8xbf16>, %[[TABLE:[a-zA-Z0-9_]+]]: tensor<2x3xi32>, %[[POS:[a-zA-Z0-9_]+]]: tensor<2xi32>)
// CHECK: %[[K_COPY:[a-zA-Z0-9_]+]] = linalg.copy ins(%[[KC]] : tensor<5x16x2x8xbf16>)
// CHECK: %[[V_COPY:[a-zA-Z0-9_]+]] = linalg.copy ins(%[[VC]] : tensor<5x16x2x8xbf16>)
// CHECK: %[[OUT:[a-zA-Z0-9_]+]]:2 = scf.for %[[B:[a-zA-Z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[K_COPY]], %{{.*}} = %[[V_COPY]])
// CHECK: %[[START_I32:[a-zA-Z0-9_]+]] = tensor.extract %[[POS]][%[[B]]] : tensor<2xi32>
// CHECK: scf.for %[[S:[a-zA-Z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[K_ACC:[a-zA-Z0-9_]+]] = %{{.*}}, %[[V_ACC:[a-zA-Z0-9_]+]] = %{{.*}})
// CHECK: %[[P:[a-zA-Z0-9_]+]] = arith.addi %{{.*}}, %[[S]] : index
// CHECK: %[[COLUMN:[a-zA-Z0-9_]+]] = arith.divui
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = arith.remui
// CHECK: %[[PAGE_I32:[a-zA-Z0-9_]+]] = tensor.extract %[[TABLE]][%[[B]], %[[COLUMN]]] : tensor<2x3xi32>
// CHECK: %[[PAGE:[a-zA-Z0-9_]+]] = arith.index_cast %[[PAGE_I32]] : i32 to index
// CHECK: %[[WRITTEN:[a-zA-Z0-9_]+]]:2 = scf.if %{{.*}} -> (tensor<5x16x2x8xbf16>, tensor<5x16x2x8xbf16>) {
// CHECK: %[[K_ROW:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[K]][%[[B]], 0, %[[S]], 0] [1, 2, 1, 8] [1, 1, 1, 1] : tensor<2x2x3x8xbf16> to tensor<2x8xbf16>
// CHECK: tensor.insert_slice %[[K_ROW]] into %[[K_ACC]][%[[PAGE]], %[[ROW]], 0, 0] [1, 1, 2, 8] [1, 1, 1, 1] : tensor<2x8xbf16> into tensor<5x16x2x8xbf16>
// CHECK: %[[V_ROW:[a-zA-Z0-9_]+]] = tensor.extract_slice %[[V]]
// CHECK: tensor.insert_slice %[[V_ROW]] into %[[V_ACC]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[K_ACC]], %[[V_ACC]]
// CHECK: return %[[OUT]]#0, %[[OUT]]#1
func.func @append_kv(%kc: tensor<5x16x2x8xbf16>, %vc: tensor<5x16x2x8xbf16>, %k: tensor<2x2x3x8xbf16>,
                     %v: tensor<2x2x3x8xbf16>, %table: tensor<2x3xi32>, %pos: tensor<2xi32>)
    -> (tensor<5x16x2x8xbf16>, tensor<5x16x2x8xbf16>) {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos
      : tensor<5x16x2x8xbf16>, tensor<5x16x2x8xbf16>, tensor<2x2x3x8xbf16>, tensor<2x2x3x8xbf16>, tensor<2x3xi32>,
        tensor<2xi32> -> tensor<5x16x2x8xbf16>, tensor<5x16x2x8xbf16>
  return %0#0, %0#1 : tensor<5x16x2x8xbf16>, tensor<5x16x2x8xbf16>
}

// -----

// A split matmul (k_chunk = 4 over K = 10): both operands' contraction dimension zero-padded to 3 whole chunks
// and viewed as (chunk, k), one generic over (chunk, batch, m, k, n) reducing k alone.
// CHECK-DAG: #[[LHS:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d0, d3)>
// CHECK-DAG: #[[RHS:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d4)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-LABEL: func.func @split_matmul
// CHECK: %[[PX:.+]] = tensor.pad %{{.*}} low[0, 0, 0] high[0, 0, 2]
// CHECK: %[[X:.+]] = tensor.expand_shape %[[PX]] {{\[}}[0], [1], [2, 3]] output_shape [2, 3, 3, 4]
// CHECK: %[[PW:.+]] = tensor.pad %{{.*}} low[0, 0] high[2, 0]
// CHECK: %[[W:.+]] = tensor.expand_shape %[[PW]] {{\[}}[0, 1], [2]] output_shape [3, 4, 5]
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%[[X]], %[[W]] : tensor<2x3x3x4xf32>, tensor<3x4x5xf32>) outs(%{{.*}} : tensor<3x2x3x5xf32>)
func.func @split_matmul(%x: tensor<2x3x10xf32>, %w: tensor<10x5xf32>) -> tensor<3x2x3x5xf32> {
  %p = kiln.matmul %x, %w {k_chunk = 4 : i64} : tensor<2x3x10xf32>, tensor<10x5xf32> -> tensor<3x2x3x5xf32>
  return %p : tensor<3x2x3x5xf32>
}

// -----

// The sum of the chunks: a reduction over the leading dimension, then the rounding to the result's type.
// CHECK-LABEL: func.func @sum_splits
// CHECK: %[[SUM:.+]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel"]} ins(%{{.*}} : tensor<3x4x6xf32>) outs(%{{.*}} : tensor<4x6xf32>)
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<4x6xf32>) outs(%{{.*}} : tensor<4x6xbf16>)
// CHECK: arith.truncf
func.func @sum_splits(%p: tensor<3x4x6xf32>) -> tensor<4x6xbf16> {
  %y = kiln.sum_splits %p : tensor<3x4x6xf32> -> tensor<4x6xbf16>
  return %y : tensor<4x6xbf16>
}
