// RUN: kiln-opt %s -kiln-decompose-rows -split-input-file | FileCheck %s

// kiln-decompose-rows writes the row ops of tiles (inside an scf.forall) as f32 row reductions that keep the
// reduced column and elementwise ops that broadcast it back; the same math runs on the host and the GPU.

// A bf16 softmax tile: cast to f32, the row max (at least the most negative float, so that a row of -inf
// shifts to -inf, not NaN), exp of the shifted row, the row sum, the quotient, cast back.
// CHECK-LABEL: func.func @softmax_tile
// CHECK: scf.forall
// CHECK: %[[X:.+]] = kiln.cast %{{.*}} : tensor<4x512xbf16> to tensor<4x512xf32>
// CHECK: %[[LOWEST:.+]] = kiln.constant dense<-3.40282347E+38> : tensor<f32>
// CHECK: %[[ROW_MAX:.+]] = kiln.reduce max %[[X]] axes [1] keep_dims : tensor<4x512xf32> -> tensor<4x1xf32>
// CHECK: %[[MAX:.+]] = kiln.max %[[ROW_MAX]], %[[LOWEST]] : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
// CHECK: %[[SHIFTED:.+]] = kiln.sub %[[X]], %[[MAX]] : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>
// CHECK: %[[E:.+]] = kiln.exp %[[SHIFTED]] : tensor<4x512xf32>
// CHECK: %[[SUM:.+]] = kiln.reduce sum %[[E]] axes [1] keep_dims : tensor<4x512xf32> -> tensor<4x1xf32>
// CHECK: %[[P:.+]] = kiln.div %[[E]], %[[SUM]] : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>
// CHECK: %[[OUT:.+]] = kiln.cast %[[P]] : tensor<4x512xf32> to tensor<4x512xbf16>
// CHECK: tensor.parallel_insert_slice %[[OUT]]
// CHECK-NOT: kiln.softmax
func.func @softmax_tile(%x: tensor<8x512xbf16>) -> tensor<8x512xbf16> {
  %init = tensor.empty() : tensor<8x512xbf16>
  %r = scf.forall (%i) = (0) to (8) step (4) shared_outs(%o = %init) -> (tensor<8x512xbf16>) {
    %t = tensor.extract_slice %x[%i, 0] [4, 512] [1, 1] : tensor<8x512xbf16> to tensor<4x512xbf16>
    %p = kiln.softmax %t axis 1 : tensor<4x512xbf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %p into %o[%i, 0] [4, 512] [1, 1] : tensor<4x512xbf16> into tensor<8x512xbf16>
    }
  }
  return %r : tensor<8x512xbf16>
}

// -----

// An attention's softmax (zero_empty_rows): a row of -inf has exponentials 0 and sum 0; dividing by max(sum, 1)
// gives it zeros, and changes no other row, whose sum holds exp(0) = 1 of its max.
// CHECK-LABEL: func.func @softmax_zero_empty_rows
// CHECK: %[[E:.+]] = kiln.exp %{{.*}} : tensor<4x64xf32>
// CHECK: %[[SUM:.+]] = kiln.reduce sum %[[E]] axes [1] keep_dims : tensor<4x64xf32> -> tensor<4x1xf32>
// CHECK: %[[ONE:.+]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[TOTAL:.+]] = kiln.max %[[SUM]], %[[ONE]] : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
// CHECK: kiln.div %[[E]], %[[TOTAL]] : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
func.func @softmax_zero_empty_rows(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %init = tensor.empty() : tensor<8x64xf32>
  %r = scf.forall (%i) = (0) to (8) step (4) shared_outs(%o = %init) -> (tensor<8x64xf32>) {
    %t = tensor.extract_slice %x[%i, 0] [4, 64] [1, 1] : tensor<8x64xf32> to tensor<4x64xf32>
    %p = kiln.softmax %t axis 1 zero_empty_rows : tensor<4x64xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %p into %o[%i, 0] [4, 64] [1, 1] : tensor<4x64xf32> into tensor<8x64xf32>
    }
  }
  return %r : tensor<8x64xf32>
}

// -----

// RMSNorm: the mean of squares, rsqrt(ms + epsilon) and the weight, cast to f32 once.
// CHECK-LABEL: func.func @rms_norm_tile
// CHECK-SAME: %[[W:[a-zA-Z0-9_]+]]: tensor<64xbf16>
// CHECK: %[[X:.+]] = kiln.cast %{{.*}} : tensor<2x64xbf16> to tensor<2x64xf32>
// CHECK: %[[SQ:.+]] = kiln.mul %[[X]], %[[X]]
// CHECK: %[[MS:.+]] = kiln.reduce mean %[[SQ]] axes [1] keep_dims : tensor<2x64xf32> -> tensor<2x1xf32>
// CHECK: %[[EPS:.+]] = kiln.constant dense<9.99999997E-7> : tensor<f32>
// CHECK: %[[SHIFTED:.+]] = kiln.add %[[MS]], %[[EPS]] : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
// CHECK: %[[INV:.+]] = kiln.rsqrt %[[SHIFTED]] : tensor<2x1xf32>
// CHECK: %[[NORMED:.+]] = kiln.mul %[[X]], %[[INV]]
// CHECK: %[[WF:.+]] = kiln.cast %[[W]] : tensor<64xbf16> to tensor<64xf32>
// CHECK: %[[Y:.+]] = kiln.mul %[[NORMED]], %[[WF]] : tensor<2x64xf32>, tensor<64xf32> -> tensor<2x64xf32>
// CHECK: kiln.cast %[[Y]] : tensor<2x64xf32> to tensor<2x64xbf16>
// CHECK-NOT: kiln.rms_norm
func.func @rms_norm_tile(%x: tensor<6x64xbf16>, %w: tensor<64xbf16>) -> tensor<6x64xbf16> {
  %init = tensor.empty() : tensor<6x64xbf16>
  %r = scf.forall (%i) = (0) to (6) step (2) shared_outs(%o = %init) -> (tensor<6x64xbf16>) {
    %t = tensor.extract_slice %x[%i, 0] [2, 64] [1, 1] : tensor<6x64xbf16> to tensor<2x64xbf16>
    %n = kiln.rms_norm %t, %w epsilon 1.0e-06 : tensor<2x64xbf16>, tensor<64xbf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %n into %o[%i, 0] [2, 64] [1, 1] : tensor<2x64xbf16> into tensor<6x64xbf16>
    }
  }
  return %r : tensor<6x64xbf16>
}

// -----

// LayerNorm (f32 rows: no casts): the mean, the centred row, its mean square, the weight and the bias.
// CHECK-LABEL: func.func @layer_norm_tile
// CHECK-NOT: kiln.cast
// CHECK: %[[MEAN:.+]] = kiln.reduce mean %[[X:.+]] axes [1] keep_dims
// CHECK: %[[C:.+]] = kiln.sub %[[X]], %[[MEAN]]
// CHECK: %[[SQ:.+]] = kiln.mul %[[C]], %[[C]]
// CHECK: %[[VAR:.+]] = kiln.reduce mean %[[SQ]] axes [1] keep_dims
// CHECK: kiln.rsqrt
// CHECK: kiln.mul %[[C]],
// CHECK: kiln.mul
// CHECK: kiln.add %{{.*}}, %{{.*}} : tensor<2x32xf32>, tensor<32xf32> -> tensor<2x32xf32>
// CHECK-NOT: kiln.layer_norm
func.func @layer_norm_tile(%x: tensor<4x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %init = tensor.empty() : tensor<4x32xf32>
  %r = scf.forall (%i) = (0) to (4) step (2) shared_outs(%o = %init) -> (tensor<4x32xf32>) {
    %t = tensor.extract_slice %x[%i, 0] [2, 32] [1, 1] : tensor<4x32xf32> to tensor<2x32xf32>
    %n = kiln.layer_norm %t, %g, %b epsilon 1.0e-05 : tensor<2x32xf32>, tensor<32xf32>, tensor<32xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %n into %o[%i, 0] [2, 32] [1, 1] : tensor<2x32xf32> into tensor<4x32xf32>
    }
  }
  return %r : tensor<4x32xf32>
}

// -----

// logsumexp: max + log(sum(exp(x - max))) as a [R, 1] column, reshaped to the op's [R]; a row of -inf gives
// the most negative float + log(0) = -inf.
// CHECK-LABEL: func.func @logsumexp_tile
// CHECK: %[[ROW_MAX:.+]] = kiln.reduce max %{{.*}} axes [1] keep_dims : tensor<4x100xf32> -> tensor<4x1xf32>
// CHECK: %[[MAX:.+]] = kiln.max %[[ROW_MAX]], %{{.*}} : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
// CHECK: kiln.exp
// CHECK: %[[SUM:.+]] = kiln.reduce sum
// CHECK: %[[LOG:.+]] = kiln.log %[[SUM]] : tensor<4x1xf32>
// CHECK: %[[LSE:.+]] = kiln.add %[[MAX]], %[[LOG]]
// CHECK: kiln.reshape %[[LSE]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NOT: kiln.logsumexp
func.func @logsumexp_tile(%x: tensor<8x100xbf16>) -> tensor<8xf32> {
  %init = tensor.empty() : tensor<8xf32>
  %r = scf.forall (%i) = (0) to (8) step (4) shared_outs(%o = %init) -> (tensor<8xf32>) {
    %t = tensor.extract_slice %x[%i, 0] [4, 100] [1, 1] : tensor<8x100xbf16> to tensor<4x100xbf16>
    %l = kiln.logsumexp %t axis 1 : tensor<4x100xbf16> -> tensor<4xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %l into %o[%i] [4] [1] : tensor<4xf32> into tensor<8xf32>
    }
  }
  return %r : tensor<8xf32>
}

// -----

// Row ops outside a tiled loop (a whole kernel op) and softmax along another axis are left alone.
// CHECK-LABEL: func.func @untiled_left_alone
// CHECK: kiln.softmax %{{.*}} axis 1
// CHECK: kiln.softmax %{{.*}} axis 0
// CHECK-NOT: kiln.reduce
func.func @untiled_left_alone(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = kiln.softmax %x axis 1 : tensor<4x8xf32>
  %1 = kiln.softmax %x axis 0 : tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}
