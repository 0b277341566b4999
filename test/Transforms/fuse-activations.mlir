// RUN: kiln-opt %s -kiln-fuse-activations -split-input-file | FileCheck %s

// kiln-fuse-activations turns SiLU and GELU written as formulas into kiln.silu / kiln.gelu, whatever the order
// and grouping of the product, and leaves formulas with other constants alone.

// CHECK-LABEL: func.func @silu
// CHECK-NEXT: %[[Y:.*]] = kiln.silu %arg0 : tensor<8x256xf32>
// CHECK-NEXT: return %[[Y]]
func.func @silu(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %s = kiln.sigmoid %x : tensor<8x256xf32>
  %y = kiln.mul %s, %x : tensor<8x256xf32>, tensor<8x256xf32> -> tensor<8x256xf32>
  return %y : tensor<8x256xf32>
}

// -----

// SwiGLU: the SiLU fuses, the gating multiply stays.
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT: %[[S:.*]] = kiln.silu %arg0
// CHECK-NEXT: %[[Y:.*]] = kiln.mul %[[S]], %arg1
// CHECK-NEXT: return %[[Y]]
func.func @swiglu(%a: tensor<4x64xbf16>, %b: tensor<4x64xbf16>) -> tensor<4x64xbf16> {
  %s = kiln.sigmoid %a : tensor<4x64xbf16>
  %g = kiln.mul %a, %s : tensor<4x64xbf16>, tensor<4x64xbf16> -> tensor<4x64xbf16>
  %y = kiln.mul %g, %b : tensor<4x64xbf16>, tensor<4x64xbf16> -> tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

// Exact GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2))).
// CHECK-LABEL: func.func @gelu_erf
// CHECK-NEXT: %[[Y:.*]] = kiln.gelu %arg0 : tensor<2x16x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_erf(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %half = kiln.constant dense<0.5> : tensor<f32>
  %d = kiln.div %x, %sqrt2 : tensor<2x16x64xf32>, tensor<f32> -> tensor<2x16x64xf32>
  %e = kiln.erf %d : tensor<2x16x64xf32>
  %a = kiln.add %e, %one : tensor<2x16x64xf32>, tensor<f32> -> tensor<2x16x64xf32>
  %m = kiln.mul %x, %a : tensor<2x16x64xf32>, tensor<2x16x64xf32> -> tensor<2x16x64xf32>
  %y = kiln.mul %m, %half : tensor<2x16x64xf32>, tensor<f32> -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// GPT-2's tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3)))).
// CHECK-LABEL: func.func @gelu_tanh_pow
// CHECK-NEXT: %[[Y:.*]] = kiln.gelu %arg0 approximate(tanh) : tensor<4x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh_pow(%x: tensor<4x128xf32>) -> tensor<4x128xf32> {
  %half = kiln.constant dense<0.5> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %c = kiln.constant dense<0.797884583> : tensor<f32>
  %k = kiln.constant dense<0.044715> : tensor<f32>
  %three = kiln.constant dense<3.0> : tensor<f32>
  %hx = kiln.mul %half, %x : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %x3 = kiln.pow %x, %three : tensor<4x128xf32>, tensor<f32> -> tensor<4x128xf32>
  %kx3 = kiln.mul %k, %x3 : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %in = kiln.add %x, %kx3 : tensor<4x128xf32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %u = kiln.mul %c, %in : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %t = kiln.tanh %u : tensor<4x128xf32>
  %a = kiln.add %one, %t : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %y = kiln.mul %hx, %a : tensor<4x128xf32>, tensor<4x128xf32> -> tensor<4x128xf32>
  return %y : tensor<4x128xf32>
}

// -----

// The same with x^3 as x * x * x and the factors grouped differently.
// CHECK-LABEL: func.func @gelu_tanh_products
// CHECK-NEXT: kiln.gelu %arg0 approximate(tanh)
// CHECK-NEXT: return
func.func @gelu_tanh_products(%x: tensor<4x128xf16>) -> tensor<4x128xf16> {
  %half = kiln.constant dense<0.5> : tensor<f16>
  %one = kiln.constant dense<1.0> : tensor<f16>
  %c = kiln.constant dense<0.797884583> : tensor<f16>
  %k = kiln.constant dense<0.044715> : tensor<f16>
  %xx = kiln.mul %x, %x : tensor<4x128xf16>, tensor<4x128xf16> -> tensor<4x128xf16>
  %x3 = kiln.mul %xx, %x : tensor<4x128xf16>, tensor<4x128xf16> -> tensor<4x128xf16>
  %kx3 = kiln.mul %x3, %k : tensor<4x128xf16>, tensor<f16> -> tensor<4x128xf16>
  %in = kiln.add %kx3, %x : tensor<4x128xf16>, tensor<4x128xf16> -> tensor<4x128xf16>
  %u = kiln.mul %in, %c : tensor<4x128xf16>, tensor<f16> -> tensor<4x128xf16>
  %t = kiln.tanh %u : tensor<4x128xf16>
  %a = kiln.add %t, %one : tensor<4x128xf16>, tensor<f16> -> tensor<4x128xf16>
  %ha = kiln.mul %a, %half : tensor<4x128xf16>, tensor<f16> -> tensor<4x128xf16>
  %y = kiln.mul %x, %ha : tensor<4x128xf16>, tensor<4x128xf16> -> tensor<4x128xf16>
  return %y : tensor<4x128xf16>
}

// -----

// A bf16 model's constants are rounded to bf16 (sqrt(2/pi) = 0.796875, 0.044715 = 0.0446777): still GELU.
// CHECK-LABEL: func.func @gelu_tanh_bf16_constants
// CHECK-NEXT: kiln.gelu %arg0 approximate(tanh) : tensor<4x128xbf16>
// CHECK-NEXT: return
func.func @gelu_tanh_bf16_constants(%x: tensor<4x128xbf16>) -> tensor<4x128xbf16> {
  %half = kiln.constant dense<0.5> : tensor<bf16>
  %one = kiln.constant dense<1.0> : tensor<bf16>
  %c = kiln.constant dense<0.796875> : tensor<bf16>
  %k = kiln.constant dense<0.0446777344> : tensor<bf16>
  %three = kiln.constant dense<3.0> : tensor<bf16>
  %hx = kiln.mul %half, %x : tensor<bf16>, tensor<4x128xbf16> -> tensor<4x128xbf16>
  %x3 = kiln.pow %x, %three : tensor<4x128xbf16>, tensor<bf16> -> tensor<4x128xbf16>
  %kx3 = kiln.mul %k, %x3 : tensor<bf16>, tensor<4x128xbf16> -> tensor<4x128xbf16>
  %in = kiln.add %x, %kx3 : tensor<4x128xbf16>, tensor<4x128xbf16> -> tensor<4x128xbf16>
  %u = kiln.mul %c, %in : tensor<bf16>, tensor<4x128xbf16> -> tensor<4x128xbf16>
  %t = kiln.tanh %u : tensor<4x128xbf16>
  %a = kiln.add %one, %t : tensor<bf16>, tensor<4x128xbf16> -> tensor<4x128xbf16>
  %y = kiln.mul %hx, %a : tensor<4x128xbf16>, tensor<4x128xbf16> -> tensor<4x128xbf16>
  return %y : tensor<4x128xbf16>
}

// -----

// Not GELU: the cubic coefficient is wrong.
// CHECK-LABEL: func.func @wrong_coefficient
// CHECK-NOT: kiln.gelu
// CHECK: kiln.tanh
func.func @wrong_coefficient(%x: tensor<4x128xf32>) -> tensor<4x128xf32> {
  %half = kiln.constant dense<0.5> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %c = kiln.constant dense<0.797884583> : tensor<f32>
  %k = kiln.constant dense<0.05> : tensor<f32>
  %three = kiln.constant dense<3.0> : tensor<f32>
  %x3 = kiln.pow %x, %three : tensor<4x128xf32>, tensor<f32> -> tensor<4x128xf32>
  %kx3 = kiln.mul %k, %x3 : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %in = kiln.add %x, %kx3 : tensor<4x128xf32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %u = kiln.mul %c, %in : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %t = kiln.tanh %u : tensor<4x128xf32>
  %a = kiln.add %one, %t : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %hx = kiln.mul %half, %x : tensor<f32>, tensor<4x128xf32> -> tensor<4x128xf32>
  %y = kiln.mul %hx, %a : tensor<4x128xf32>, tensor<4x128xf32> -> tensor<4x128xf32>
  return %y : tensor<4x128xf32>
}

// -----

// Not SiLU: sigmoid of one tensor times another.
// CHECK-LABEL: func.func @not_silu
// CHECK-NOT: kiln.silu
// CHECK: kiln.sigmoid
func.func @not_silu(%x: tensor<8xf32>, %z: tensor<8xf32>) -> tensor<8xf32> {
  %s = kiln.sigmoid %z : tensor<8xf32>
  %y = kiln.mul %x, %s : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Not GELU: the factor in front is 1, not 0.5.
// CHECK-LABEL: func.func @not_half
// CHECK-NOT: kiln.gelu
func.func @not_half(%x: tensor<8xf32>) -> tensor<8xf32> {
  %sqrt2 = kiln.constant dense<1.41421354> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %d = kiln.div %x, %sqrt2 : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %e = kiln.erf %d : tensor<8xf32>
  %a = kiln.add %e, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %y = kiln.mul %x, %a : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}
