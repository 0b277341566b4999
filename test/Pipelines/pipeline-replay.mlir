// The named pipelines are exactly their passes run one by one: each stage replays as individual kiln-opt
// passes with identical output.
// RUN: kiln-opt %s --kiln-kernel-pipeline > %t.named
// RUN: kiln-opt %s -canonicalize -cse -kiln-fuse-norms -kiln-fuse-rope -cse -kiln-fuse-activations -kiln-fuse-attention \
// RUN:   -kiln-fuse-epilogue -kiln-fold-matmul-batch -canonicalize -kiln-outline-kernels \
// RUN:   -kiln-select-config=target=host -kiln-tile -canonicalize -kiln-online-softmax -kiln-decompose-rows > %t.passes
// RUN: diff %t.named %t.passes
// RUN: kiln-opt %s --kiln-host-pipeline | FileCheck %s
// RUN: kiln-opt %s --kiln-kernel-pipeline | kiln-opt --kiln-host-pipeline=tile=false | FileCheck %s

// CHECK-NOT: kiln.
// CHECK: llvm.func @block_k0_attention
// CHECK: llvm.func @block_k1_matmul
// CHECK: llvm.func @block(
// CHECK: llvm.call @block_k0_attention
// CHECK: llvm.call @block_k1_matmul
func.func @block(%q: tensor<1x4x33x16xf32>, %k: tensor<1x4x33x16xf32>, %v: tensor<1x4x33x16xf32>,
                 %w: tensor<16x24xf32>, %b: tensor<24xf32>) -> tensor<1x4x33x24xf32> {
  %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x4x33x16xf32> -> tensor<1x4x16x33xf32>
  %s = kiln.matmul %q, %kt : tensor<1x4x33x16xf32>, tensor<1x4x16x33xf32> -> tensor<1x4x33x33xf32>
  %c = kiln.constant dense<0.25> : tensor<f32>
  %x = kiln.mul %s, %c : tensor<1x4x33x33xf32>, tensor<f32> -> tensor<1x4x33x33xf32>
  %p = kiln.softmax %x axis 3 : tensor<1x4x33x33xf32>
  %o = kiln.matmul %p, %v : tensor<1x4x33x33xf32>, tensor<1x4x33x16xf32> -> tensor<1x4x33x16xf32>
  %y = kiln.matmul %o, %w : tensor<1x4x33x16xf32>, tensor<16x24xf32> -> tensor<1x4x33x24xf32>
  %z = kiln.add %y, %b : tensor<1x4x33x24xf32>, tensor<24xf32> -> tensor<1x4x33x24xf32>
  %r = kiln.gelu %z approximate(tanh) : tensor<1x4x33x24xf32>
  return %r : tensor<1x4x33x24xf32>
}
