// RUN: kiln-opt %s --kiln-kernel-pipeline=target=sm_90a -kiln-fuse-split-sums -split-input-file | FileCheck %s

// kiln-fuse-split-sums after the kernel pipeline (its row kernels tiled): a residual sum that a norm's row
// tiles and the next residual add read is computed by both, each adding up its four chunks; the plan runs no
// kernel for it.

// CHECK-LABEL: func.func private @block_k2_rms_norm
// CHECK-SAME: (%[[W:[^:]*]]: tensor<256xbf16>, %[[P:[^:]*]]: tensor<4x2x256xf32>, %[[X:[^:]*]]: tensor<2x256xbf16>, %{{[^:]*}}: tensor<2x256xbf16>)
// CHECK-NEXT: %[[R:.*]] = kiln.sum_splits %[[P]] epilogue(%[[X]] : tensor<2x256xbf16>)
// CHECK: scf.forall
// CHECK: kiln.cast %[[R]]
// CHECK-LABEL: func.func private @block_k4_sum_splits
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x2x256xf32>, %[[P2:[^:]*]]: tensor<4x2x256xf32>, %[[X2:[^:]*]]: tensor<2x256xbf16>, %{{[^:]*}}: tensor<2x256xbf16>)
// CHECK-NEXT: %[[R2:.*]] = kiln.sum_splits %[[P2]] epilogue(%[[X2]] : tensor<2x256xbf16>)
// CHECK: kiln.sum_splits %[[Q]] epilogue(%[[R2]] : tensor<2x256xbf16>)
// CHECK-LABEL: func.func @block
// CHECK: %[[PARTS:.*]] = call @block_k0_matmul
// CHECK-NOT: sum_splits
// CHECK: call @block_k2_rms_norm(%{{.*}}, %[[PARTS]], %{{.*}}, %{{.*}})
// CHECK: call @block_k3_matmul
// CHECK: call @block_k4_sum_splits(%{{.*}}, %[[PARTS]], %{{.*}}, %{{.*}})
func.func @block(%o: tensor<2x512xbf16>, %wo: tensor<512x256xbf16>, %x: tensor<2x256xbf16>, %nw: tensor<256xbf16>,
                 %w2: tensor<256x256xbf16>) -> tensor<2x256xbf16> {
  %p = kiln.matmul %o, %wo {k_chunk = 128 : i64} : tensor<2x512xbf16>, tensor<512x256xbf16> -> tensor<4x2x256xf32>
  %r = kiln.sum_splits %p epilogue(%x : tensor<2x256xbf16>) {
  ^bb0(%acc: f32, %res: f32):
    %s = arith.addf %acc, %res : f32
    kiln.yield %s : f32
  } : tensor<4x2x256xf32> -> tensor<2x256xbf16>
  %h = kiln.rms_norm %r, %nw epsilon 1.0E-5 : tensor<2x256xbf16>, tensor<256xbf16>
  %q = kiln.matmul %h, %w2 {k_chunk = 128 : i64} : tensor<2x256xbf16>, tensor<256x256xbf16> -> tensor<2x2x256xf32>
  %y = kiln.sum_splits %q epilogue(%r : tensor<2x256xbf16>) {
  ^bb0(%acc: f32, %res: f32):
    %s = arith.addf %acc, %res : f32
    kiln.yield %s : f32
  } : tensor<2x2x256xf32> -> tensor<2x256xbf16>
  return %y : tensor<2x256xbf16>
}

// -----

// Eight chunks read by three kernels (two norms and the residual add) would be 24 chunk reads per element, more
// than the 16 the pass allows: the sum keeps its kernel.

// CHECK-LABEL: func.func @block
// CHECK: call @block_k1_sum_splits
// CHECK: call @block_k2_rms_norm
// CHECK: call @block_k3_rms_norm
func.func @block(%o: tensor<2x1024xbf16>, %wo: tensor<1024x256xbf16>, %x: tensor<2x256xbf16>, %nw: tensor<256xbf16>,
                 %w2: tensor<256x256xbf16>) -> (tensor<2x256xbf16>, tensor<2x256xbf16>) {
  %p = kiln.matmul %o, %wo {k_chunk = 128 : i64} : tensor<2x1024xbf16>, tensor<1024x256xbf16> -> tensor<8x2x256xf32>
  %r = kiln.sum_splits %p epilogue(%x : tensor<2x256xbf16>) {
  ^bb0(%acc: f32, %res: f32):
    %s = arith.addf %acc, %res : f32
    kiln.yield %s : f32
  } : tensor<8x2x256xf32> -> tensor<2x256xbf16>
  %h = kiln.rms_norm %r, %nw epsilon 1.0E-5 : tensor<2x256xbf16>, tensor<256xbf16>
  %g = kiln.rms_norm %r, %nw epsilon 1.0E-6 : tensor<2x256xbf16>, tensor<256xbf16>
  %q = kiln.matmul %h, %w2 {k_chunk = 128 : i64} : tensor<2x256xbf16>, tensor<256x256xbf16> -> tensor<2x2x256xf32>
  %y = kiln.sum_splits %q epilogue(%r : tensor<2x256xbf16>) {
  ^bb0(%acc: f32, %res: f32):
    %s = arith.addf %acc, %res : f32
    kiln.yield %s : f32
  } : tensor<2x2x256xf32> -> tensor<2x256xbf16>
  return %y, %g : tensor<2x256xbf16>, tensor<2x256xbf16>
}

// -----

// Eight chunks read by two kernels: 16 chunk reads an element, the most the pass allows; the sum moves into both.

// CHECK-LABEL: func.func private @block_k2_rms_norm
// CHECK-SAME: tensor<8x2x256xf32>
// CHECK-LABEL: func.func private @block_k4_sum_splits
// CHECK-SAME: tensor<8x2x256xf32>
// CHECK-LABEL: func.func @block
// CHECK-NOT: call @block_k1_sum_splits
func.func @block(%o: tensor<2x1024xbf16>, %wo: tensor<1024x256xbf16>, %x: tensor<2x256xbf16>, %nw: tensor<256xbf16>,
                 %w2: tensor<256x256xbf16>) -> tensor<2x256xbf16> {
  %p = kiln.matmul %o, %wo {k_chunk = 128 : i64} : tensor<2x1024xbf16>, tensor<1024x256xbf16> -> tensor<8x2x256xf32>
  %r = kiln.sum_splits %p epilogue(%x : tensor<2x256xbf16>) {
  ^bb0(%acc: f32, %res: f32):
    %s = arith.addf %acc, %res : f32
    kiln.yield %s : f32
  } : tensor<8x2x256xf32> -> tensor<2x256xbf16>
  %h = kiln.rms_norm %r, %nw epsilon 1.0E-5 : tensor<2x256xbf16>, tensor<256xbf16>
  %q = kiln.matmul %h, %w2 {k_chunk = 128 : i64} : tensor<2x256xbf16>, tensor<256x256xbf16> -> tensor<2x2x256xf32>
  %y = kiln.sum_splits %q epilogue(%r : tensor<2x256xbf16>) {
  ^bb0(%acc: f32, %res: f32):
    %s = arith.addf %acc, %res : f32
    kiln.yield %s : f32
  } : tensor<2x2x256xf32> -> tensor<2x256xbf16>
  return %y : tensor<2x256xbf16>
}
