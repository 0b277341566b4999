// RUN: kiln-opt %s -kiln-fuse-norms -split-input-file | FileCheck %s

// kiln-fuse-norms turns RMSNorm and LayerNorm written out op by op (as exporters emit them) into one
// kiln.rms_norm / kiln.layer_norm, and leaves anything that is not exactly a norm alone.

// CHECK-LABEL: func.func @rms_rsqrt_weight
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>, %[[W:.*]]: tensor<64xf32>)
// CHECK-NEXT: %[[Y:.*]] = kiln.rms_norm %[[X]], %[[W]] epsilon 9.99999997E-7 : tensor<4x64xf32>, tensor<64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @rms_rsqrt_weight(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %sq = kiln.mul %x, %x : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  %ms = kiln.reduce mean %sq axes [1] keep_dims : tensor<4x64xf32> -> tensor<4x1xf32>
  %a = kiln.add %ms, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %r = kiln.rsqrt %a : tensor<4x1xf32>
  %n = kiln.mul %x, %r : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  %y = kiln.mul %n, %w : tensor<4x64xf32>, tensor<64xf32> -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// The torch exporter's form: pow 2, reciprocal of sqrt, weight on the left.
// CHECK-LABEL: func.func @rms_pow_reciprocal
// CHECK-NEXT: kiln.rms_norm %arg0, %arg1 epsilon 9.99999974E-6 : tensor<2x3x32xf32>, tensor<32xf32>
// CHECK-NEXT: return
func.func @rms_pow_reciprocal(%x: tensor<2x3x32xf32>, %w: tensor<32xf32>) -> tensor<2x3x32xf32> {
  %two = kiln.constant dense<2.0> : tensor<f32>
  %eps = kiln.constant dense<1.0e-5> : tensor<f32>
  %sq = kiln.pow %x, %two : tensor<2x3x32xf32>, tensor<f32> -> tensor<2x3x32xf32>
  %ms = kiln.reduce mean %sq axes [2] keep_dims : tensor<2x3x32xf32> -> tensor<2x3x1xf32>
  %a = kiln.add %eps, %ms : tensor<f32>, tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %s = kiln.sqrt %a : tensor<2x3x1xf32>
  %r = kiln.reciprocal %s : tensor<2x3x1xf32>
  %n = kiln.mul %r, %x : tensor<2x3x1xf32>, tensor<2x3x32xf32> -> tensor<2x3x32xf32>
  %y = kiln.mul %w, %n : tensor<32xf32>, tensor<2x3x32xf32> -> tensor<2x3x32xf32>
  return %y : tensor<2x3x32xf32>
}

// -----

// No weight: a weight of ones.
// CHECK-LABEL: func.func @rms_div_sqrt_no_weight
// CHECK: %[[ONES:.*]] = kiln.constant dense<1.000000e+00> : tensor<16xf16>
// CHECK-NEXT: kiln.rms_norm %arg0, %[[ONES]] epsilon
// CHECK-NOT: kiln.div
func.func @rms_div_sqrt_no_weight(%x: tensor<8x16xf16>) -> tensor<8x16xf16> {
  %eps = kiln.constant dense<1.0e-6> : tensor<f16>
  %sq = kiln.mul %x, %x : tensor<8x16xf16>, tensor<8x16xf16> -> tensor<8x16xf16>
  %ms = kiln.reduce mean %sq axes [1] keep_dims : tensor<8x16xf16> -> tensor<8x1xf16>
  %a = kiln.add %ms, %eps : tensor<8x1xf16>, tensor<f16> -> tensor<8x1xf16>
  %s = kiln.sqrt %a : tensor<8x1xf16>
  %y = kiln.div %x, %s : tensor<8x16xf16>, tensor<8x1xf16> -> tensor<8x16xf16>
  return %y : tensor<8x16xf16>
}

// -----

// Llama-style: computed in f32 between casts, then the bf16 weight.
// CHECK-LABEL: func.func @rms_through_casts
// CHECK-NEXT: %[[Y:.*]] = kiln.rms_norm %arg0, %arg1 epsilon {{.*}} : tensor<4x64xbf16>, tensor<64xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @rms_through_casts(%x: tensor<4x64xbf16>, %w: tensor<64xbf16>) -> tensor<4x64xbf16> {
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %two = kiln.constant dense<2.0> : tensor<f32>
  %xf = kiln.cast %x : tensor<4x64xbf16> to tensor<4x64xf32>
  %sq = kiln.pow %xf, %two : tensor<4x64xf32>, tensor<f32> -> tensor<4x64xf32>
  %ms = kiln.reduce mean %sq axes [1] keep_dims : tensor<4x64xf32> -> tensor<4x1xf32>
  %a = kiln.add %ms, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %r = kiln.rsqrt %a : tensor<4x1xf32>
  %n = kiln.mul %xf, %r : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  %nb = kiln.cast %n : tensor<4x64xf32> to tensor<4x64xbf16>
  %y = kiln.mul %w, %nb : tensor<64xbf16>, tensor<4x64xbf16> -> tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

// LayerNorm written out, with weight and bias; the centred value is used twice.
// CHECK-LABEL: func.func @layer_norm_full
// CHECK-NEXT: %[[Y:.*]] = kiln.layer_norm %arg0, %arg1, %arg2 epsilon 9.99999974E-6 : tensor<3x5x48xf32>, tensor<48xf32>, tensor<48xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_full(%x: tensor<3x5x48xf32>, %w: tensor<48xf32>, %b: tensor<48xf32>) -> tensor<3x5x48xf32> {
  %eps = kiln.constant dense<1.0e-5> : tensor<f32>
  %two = kiln.constant dense<2.0> : tensor<f32>
  %m = kiln.reduce mean %x axes [2] keep_dims : tensor<3x5x48xf32> -> tensor<3x5x1xf32>
  %d = kiln.sub %x, %m : tensor<3x5x48xf32>, tensor<3x5x1xf32> -> tensor<3x5x48xf32>
  %sq = kiln.pow %d, %two : tensor<3x5x48xf32>, tensor<f32> -> tensor<3x5x48xf32>
  %v = kiln.reduce mean %sq axes [2] keep_dims : tensor<3x5x48xf32> -> tensor<3x5x1xf32>
  %a = kiln.add %v, %eps : tensor<3x5x1xf32>, tensor<f32> -> tensor<3x5x1xf32>
  %s = kiln.sqrt %a : tensor<3x5x1xf32>
  %n = kiln.div %d, %s : tensor<3x5x48xf32>, tensor<3x5x1xf32> -> tensor<3x5x48xf32>
  %g = kiln.mul %n, %w : tensor<3x5x48xf32>, tensor<48xf32> -> tensor<3x5x48xf32>
  %y = kiln.add %g, %b : tensor<3x5x48xf32>, tensor<48xf32> -> tensor<3x5x48xf32>
  return %y : tensor<3x5x48xf32>
}

// -----

// LayerNorm without a bias.
// CHECK-LABEL: func.func @layer_norm_no_bias
// CHECK-NEXT: kiln.layer_norm %arg0, %arg1 epsilon {{.*}} : tensor<4x32xf32>, tensor<32xf32>
// CHECK-NEXT: return
func.func @layer_norm_no_bias(%x: tensor<4x32xf32>, %w: tensor<32xf32>) -> tensor<4x32xf32> {
  %eps = kiln.constant dense<1.0e-5> : tensor<f32>
  %m = kiln.reduce mean %x axes [1] keep_dims : tensor<4x32xf32> -> tensor<4x1xf32>
  %d = kiln.sub %x, %m : tensor<4x32xf32>, tensor<4x1xf32> -> tensor<4x32xf32>
  %sq = kiln.mul %d, %d : tensor<4x32xf32>, tensor<4x32xf32> -> tensor<4x32xf32>
  %v = kiln.reduce mean %sq axes [1] keep_dims : tensor<4x32xf32> -> tensor<4x1xf32>
  %a = kiln.add %v, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %r = kiln.rsqrt %a : tensor<4x1xf32>
  %n = kiln.mul %d, %r : tensor<4x32xf32>, tensor<4x1xf32> -> tensor<4x32xf32>
  %y = kiln.mul %n, %w : tensor<4x32xf32>, tensor<32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// Not a norm: the mean is over the first axis.
// CHECK-LABEL: func.func @not_last_axis
// CHECK-NOT: kiln.rms_norm
// CHECK: kiln.reduce mean
func.func @not_last_axis(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %sq = kiln.mul %x, %x : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  %ms = kiln.reduce mean %sq axes [0] keep_dims : tensor<4x64xf32> -> tensor<1x64xf32>
  %a = kiln.add %ms, %eps : tensor<1x64xf32>, tensor<f32> -> tensor<1x64xf32>
  %r = kiln.rsqrt %a : tensor<1x64xf32>
  %n = kiln.mul %x, %r : tensor<4x64xf32>, tensor<1x64xf32> -> tensor<4x64xf32>
  return %n : tensor<4x64xf32>
}

// -----

// Not a norm: the squared value is not the normalised one.
// CHECK-LABEL: func.func @different_square
// CHECK-NOT: kiln.rms_norm
func.func @different_square(%x: tensor<4x64xf32>, %z: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %sq = kiln.mul %z, %z : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  %ms = kiln.reduce mean %sq axes [1] keep_dims : tensor<4x64xf32> -> tensor<4x1xf32>
  %a = kiln.add %ms, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %r = kiln.rsqrt %a : tensor<4x1xf32>
  %n = kiln.mul %x, %r : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  return %n : tensor<4x64xf32>
}

// -----

// Not a norm: a sum, not a mean, of squares.
// CHECK-LABEL: func.func @sum_not_mean
// CHECK-NOT: kiln.rms_norm
func.func @sum_not_mean(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %sq = kiln.mul %x, %x : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  %ms = kiln.reduce sum %sq axes [1] keep_dims : tensor<4x64xf32> -> tensor<4x1xf32>
  %a = kiln.add %ms, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %r = kiln.rsqrt %a : tensor<4x1xf32>
  %n = kiln.mul %x, %r : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  return %n : tensor<4x64xf32>
}

// -----

// The normalised value has another user too: the weighted norm fuses, the chain stays for the other user.
// CHECK-LABEL: func.func @normalized_used_twice
// CHECK: %[[N:.*]] = kiln.mul %arg0, %{{.*}} : tensor<4x64xf32>, tensor<4x1xf32>
// CHECK: %[[Y:.*]] = kiln.rms_norm %arg0, %arg1
// CHECK: return %[[Y]], %[[N]]
func.func @normalized_used_twice(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %eps = kiln.constant dense<1.0e-6> : tensor<f32>
  %sq = kiln.mul %x, %x : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  %ms = kiln.reduce mean %sq axes [1] keep_dims : tensor<4x64xf32> -> tensor<4x1xf32>
  %a = kiln.add %ms, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
  %r = kiln.rsqrt %a : tensor<4x1xf32>
  %n = kiln.mul %x, %r : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  %y = kiln.mul %n, %w : tensor<4x64xf32>, tensor<64xf32> -> tensor<4x64xf32>
  return %y, %n : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// nn.RMSNorm of a bf16 tensor as torch decomposes it: the input and the weight cast up to f32, the norm, the
// result cast back. The norm of the bf16 tensors computes in f32 all the same.
// CHECK-LABEL: func.func @rms_norm_between_casts
// CHECK: %[[Y:.*]] = kiln.rms_norm %arg0, %arg1 epsilon 9.99999997E-7 : tensor<4x64xbf16>, tensor<64xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm_between_casts(%x: tensor<4x64xbf16>, %w: tensor<64xbf16>) -> tensor<4x64xbf16> {
  %xf = kiln.cast %x : tensor<4x64xbf16> to tensor<4x64xf32>
  %wf = kiln.cast %w : tensor<64xbf16> to tensor<64xf32>
  %n = kiln.rms_norm %xf, %wf epsilon 1.0e-06 : tensor<4x64xf32>, tensor<64xf32>
  %y = kiln.cast %n : tensor<4x64xf32> to tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

// nn.LayerNorm likewise, with its bias.
// CHECK-LABEL: func.func @layer_norm_between_casts
// CHECK: %[[Y:.*]] = kiln.layer_norm %arg0, %arg1, %arg2 epsilon 9.99999974E-6 : tensor<4x64xf16>, tensor<64xf16>, tensor<64xf16>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_between_casts(%x: tensor<4x64xf16>, %w: tensor<64xf16>, %b: tensor<64xf16>) -> tensor<4x64xf16> {
  %xf = kiln.cast %x : tensor<4x64xf16> to tensor<4x64xf32>
  %wf = kiln.cast %w : tensor<64xf16> to tensor<64xf32>
  %bf = kiln.cast %b : tensor<64xf16> to tensor<64xf32>
  %n = kiln.layer_norm %xf, %wf, %bf epsilon 1.0e-05 : tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>
  %y = kiln.cast %n : tensor<4x64xf32> to tensor<4x64xf16>
  return %y : tensor<4x64xf16>
}

// -----

// Not narrowed: the weight is an f32 tensor of its own, whose values bf16 may not hold.
// CHECK-LABEL: func.func @norm_of_a_wide_weight
// CHECK: kiln.rms_norm %{{.*}}, %arg1 epsilon {{.*}} : tensor<4x64xf32>, tensor<64xf32>
// CHECK: kiln.cast
func.func @norm_of_a_wide_weight(%x: tensor<4x64xbf16>, %w: tensor<64xf32>) -> tensor<4x64xbf16> {
  %xf = kiln.cast %x : tensor<4x64xbf16> to tensor<4x64xf32>
  %n = kiln.rms_norm %xf, %w epsilon 1.0e-06 : tensor<4x64xf32>, tensor<64xf32>
  %y = kiln.cast %n : tensor<4x64xf32> to tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

// Not narrowed: the f32 norm has another user, which needs its unrounded values.
// CHECK-LABEL: func.func @wide_norm_used_twice
// CHECK: kiln.rms_norm %{{.*}}, %{{.*}} epsilon {{.*}} : tensor<4x64xf32>, tensor<64xf32>
func.func @wide_norm_used_twice(%x: tensor<4x64xbf16>, %w: tensor<64xbf16>) -> (tensor<4x64xbf16>, tensor<4x64xf32>) {
  %xf = kiln.cast %x : tensor<4x64xbf16> to tensor<4x64xf32>
  %wf = kiln.cast %w : tensor<64xbf16> to tensor<64xf32>
  %n = kiln.rms_norm %xf, %wf epsilon 1.0e-06 : tensor<4x64xf32>, tensor<64xf32>
  %y = kiln.cast %n : tensor<4x64xf32> to tensor<4x64xbf16>
  return %y, %n : tensor<4x64xbf16>, tensor<4x64xf32>
}
