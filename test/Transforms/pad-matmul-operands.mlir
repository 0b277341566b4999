// RUN: kiln-opt %s -kiln-pad-matmul-operands=target=sm_90a -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-pad-matmul-operands=target=sm_80 -split-input-file | FileCheck %s --check-prefix=OTHER
// RUN: kiln-opt %s -kiln-pad-matmul-operands -split-input-file | FileCheck %s --check-prefix=OTHER
// RUN: not kiln-opt %s -kiln-pad-matmul-operands=target=sm_70 2>&1 | FileCheck %s --check-prefix=BADTARGET

// kiln-pad-matmul-operands copies the operands of a large bf16/f16 GEMM whose rows are not whole 16-byte chunks
// into zero-padded tensors (K and N rounded up to 8) so that sm_90a's TMA GEMM takes it, and slices the result's
// first N columns. sm_80 and the host (the default target) keep every matmul as it is.
// BADTARGET: for the --target option: Cannot find option named 'sm_70'!

// K = 2047 and N = 2050: the lhs gets one zero column, the rhs one zero row and then six zero columns, the bias
// (an epilogue operand along N) six zeros; the [2048, 2056] result is sliced back to 2050 columns.
// CHECK-LABEL: func.func @unaligned_k_and_n
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<2048x2047xbf16>, %[[B:[a-zA-Z0-9_]+]]: tensor<2047x2050xbf16>, %[[BIAS:[a-zA-Z0-9_]+]]: tensor<2050xbf16>)
// CHECK: %[[ZA:.+]] = kiln.constant dense<0.000000e+00> : tensor<2048x1xbf16>
// CHECK: %[[A2:.+]] = kiln.concat %[[A]], %[[ZA]] axis 1 : tensor<2048x2047xbf16>, tensor<2048x1xbf16> -> tensor<2048x2048xbf16>
// CHECK: %[[ZK:.+]] = kiln.constant dense<0.000000e+00> : tensor<1x2050xbf16>
// CHECK: %[[B1:.+]] = kiln.concat %[[B]], %[[ZK]] axis 0 : tensor<2047x2050xbf16>, tensor<1x2050xbf16> -> tensor<2048x2050xbf16>
// CHECK: %[[ZN:.+]] = kiln.constant dense<0.000000e+00> : tensor<2048x6xbf16>
// CHECK: %[[B2:.+]] = kiln.concat %[[B1]], %[[ZN]] axis 1 : tensor<2048x2050xbf16>, tensor<2048x6xbf16> -> tensor<2048x2056xbf16>
// CHECK: %[[ZBIAS:.+]] = kiln.constant dense<0.000000e+00> : tensor<6xbf16>
// CHECK: %[[BIAS2:.+]] = kiln.concat %[[BIAS]], %[[ZBIAS]] axis 0 : tensor<2050xbf16>, tensor<6xbf16> -> tensor<2056xbf16>
// CHECK: %[[Y:.+]] = kiln.matmul %[[A2]], %[[B2]] epilogue(%[[BIAS2]] : tensor<2056xbf16>) {
// CHECK: arith.addf
// CHECK: } : tensor<2048x2048xbf16>, tensor<2048x2056xbf16> -> tensor<2048x2056xbf16>
// CHECK: %[[R:.+]] = kiln.slice %[[Y]] offsets [0, 0] strides [1, 1] : tensor<2048x2056xbf16> -> tensor<2048x2050xbf16>
// CHECK: return %[[R]]
// OTHER-LABEL: func.func @unaligned_k_and_n
// OTHER-NOT: kiln.concat
// OTHER: kiln.matmul %{{.*}}, %{{.*}} epilogue
func.func @unaligned_k_and_n(%a: tensor<2048x2047xbf16>, %b: tensor<2047x2050xbf16>, %bias: tensor<2050xbf16>) -> tensor<2048x2050xbf16> {
  %0 = kiln.matmul %a, %b epilogue(%bias : tensor<2050xbf16>) {
  ^bb0(%acc: f32, %x: f32):
    %s = arith.addf %acc, %x : f32
    kiln.yield %s : f32
  } : tensor<2048x2047xbf16>, tensor<2047x2050xbf16> -> tensor<2048x2050xbf16>
  return %0 : tensor<2048x2050xbf16>
}

// -----

// A transposed rhs [N, K] (a torch Linear weight) needs only K padded: N may be anything, so no slice. A
// residual of the full [M, N] shape is an epilogue operand along N that N does not change.
// CHECK-LABEL: func.func @transposed_rhs
// CHECK-SAME: (%[[A:[a-zA-Z0-9_]+]]: tensor<1100x1001xf16>, %[[W:[a-zA-Z0-9_]+]]: tensor<1000x1001xf16>, %[[RES:[a-zA-Z0-9_]+]]: tensor<1100x1000xf16>)
// CHECK: %[[A2:.+]] = kiln.concat %[[A]], %{{.*}} axis 1 : tensor<1100x1001xf16>, tensor<1100x7xf16> -> tensor<1100x1008xf16>
// CHECK: %[[W2:.+]] = kiln.concat %[[W]], %{{.*}} axis 1 : tensor<1000x1001xf16>, tensor<1000x7xf16> -> tensor<1000x1008xf16>
// CHECK-NOT: kiln.concat
// CHECK: %[[Y:.+]] = kiln.matmul %[[A2]], %[[W2]] transpose_rhs epilogue(%[[RES]] : tensor<1100x1000xf16>)
// CHECK: } : tensor<1100x1008xf16>, tensor<1000x1008xf16> -> tensor<1100x1000xf16>
// CHECK-NOT: kiln.slice
// CHECK: return %[[Y]]
func.func @transposed_rhs(%a: tensor<1100x1001xf16>, %w: tensor<1000x1001xf16>, %res: tensor<1100x1000xf16>) -> tensor<1100x1000xf16> {
  %0 = kiln.matmul %a, %w transpose_rhs epilogue(%res : tensor<1100x1000xf16>) {
  ^bb0(%acc: f32, %r: f32):
    %s = arith.addf %acc, %r : f32
    kiln.yield %s : f32
  } : tensor<1100x1001xf16>, tensor<1000x1001xf16> -> tensor<1100x1000xf16>
  return %0 : tensor<1100x1000xf16>
}

// -----

// Left alone: aligned rows; fewer than 2^30 multiply-adds (1000 x 1000 x 1001); a decode-shaped M of 64; f32
// operands (no TMA GEMM for them); a transposed lhs; a pinned config.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: kiln.concat
// CHECK-NOT: kiln.slice
// CHECK: return
func.func @left_alone(%a: tensor<2048x2048xbf16>, %b: tensor<2048x2048xbf16>, %small: tensor<1000x1001xbf16>,
                      %small_b: tensor<1001x1000xbf16>, %decode: tensor<64x14335xbf16>, %decode_b: tensor<14335x4100xbf16>,
                      %f: tensor<2048x2047xf32>, %f_b: tensor<2047x2050xf32>, %t: tensor<2047x2048xbf16>,
                      %t_b: tensor<2047x2050xbf16>, %p: tensor<2048x2047xbf16>, %p_b: tensor<2047x2050xbf16>)
    -> (tensor<2048x2048xbf16>, tensor<1000x1000xbf16>, tensor<64x4100xbf16>, tensor<2048x2050xf32>,
        tensor<2048x2050xbf16>, tensor<2048x2050xbf16>) {
  %0 = kiln.matmul %a, %b : tensor<2048x2048xbf16>, tensor<2048x2048xbf16> -> tensor<2048x2048xbf16>
  %1 = kiln.matmul %small, %small_b : tensor<1000x1001xbf16>, tensor<1001x1000xbf16> -> tensor<1000x1000xbf16>
  %2 = kiln.matmul %decode, %decode_b : tensor<64x14335xbf16>, tensor<14335x4100xbf16> -> tensor<64x4100xbf16>
  %3 = kiln.matmul %f, %f_b : tensor<2048x2047xf32>, tensor<2047x2050xf32> -> tensor<2048x2050xf32>
  %4 = kiln.matmul %t, %t_b transpose_lhs : tensor<2047x2048xbf16>, tensor<2047x2050xbf16> -> tensor<2048x2050xbf16>
  %5 = kiln.matmul %p, %p_b {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 3, lowering = "mma_sync">} : tensor<2048x2047xbf16>, tensor<2047x2050xbf16> -> tensor<2048x2050xbf16>
  return %0, %1, %2, %3, %4, %5 : tensor<2048x2048xbf16>, tensor<1000x1000xbf16>, tensor<64x4100xbf16>, tensor<2048x2050xf32>, tensor<2048x2050xbf16>, tensor<2048x2050xbf16>
}
