// RUN: kiln-opt %s -kiln-fuse-split-sums -split-input-file | FileCheck %s

// kiln-fuse-split-sums moves a split matmul's sum into the one glue kernel that reads it per element (through
// reshapes): RoPE's input, the KV append's new rows, another sum's epilogue operand. The reader's kernel takes
// the sum's inputs before its destinations; the plan's call of the sum and the sum's kernel go.

// CHECK-NOT: @step_k0_sum_splits
// CHECK-LABEL: func.func private @step_k1_rope
// CHECK-SAME: (%[[COS:.*]]: tensor<1x64xbf16>, %[[SIN:.*]]: tensor<1x64xbf16>, %[[PARTS:.*]]: tensor<4x1x256xf32>, %[[OUT:.*]]: tensor<1x2x128xbf16>)
// CHECK-NEXT: %[[SUM:.*]] = kiln.sum_splits %[[PARTS]] : tensor<4x1x256xf32> -> tensor<1x256xbf16>
// CHECK-NEXT: %[[Q:.*]] = kiln.reshape %[[SUM]] : tensor<1x256xbf16> -> tensor<1x2x128xbf16>
// CHECK-NEXT: %[[ROPE:.*]] = kiln.rope %[[Q]], %[[COS]], %[[SIN]]
// CHECK-NEXT: bufferization.materialize_in_destination %[[ROPE]] in %[[OUT]]
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[P:.*]]: tensor<4x1x256xf32>, %[[C:.*]]: tensor<1x64xbf16>, %[[S:.*]]: tensor<1x64xbf16>)
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<1x2x128xbf16>
// CHECK-NEXT: %[[R:.*]] = call @step_k1_rope(%[[C]], %[[S]], %[[P]], %[[E]])
// CHECK-NEXT: return %[[R]]
func.func private @step_k0_sum_splits(%parts: tensor<4x1x256xf32>, %out: tensor<1x256xbf16>) -> tensor<1x256xbf16>
    attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts : tensor<4x1x256xf32> -> tensor<1x256xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x256xbf16>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  return %1 : tensor<1x256xbf16>
}
func.func private @step_k1_rope(%x: tensor<1x2x128xbf16>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %out: tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.rope %x, %cos, %sin {seq_dim = 0 : i64} : tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %1 : tensor<1x2x128xbf16>
}
func.func @step(%parts: tensor<4x1x256xf32>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>) -> tensor<1x2x128xbf16> {
  %0 = tensor.empty() : tensor<1x256xbf16>
  %1 = call @step_k0_sum_splits(%parts, %0) : (tensor<4x1x256xf32>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  %2 = kiln.reshape %1 : tensor<1x256xbf16> -> tensor<1x2x128xbf16>
  %3 = tensor.empty() : tensor<1x2x128xbf16>
  %4 = call @step_k1_rope(%2, %cos, %sin, %3) : (tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %4 : tensor<1x2x128xbf16>
}

// -----

// The KV append's v rows, and a gate's sum read by the up projection's sum as its epilogue operand (which then
// computes both sums; an epilogue operand the sum already takes is passed once).

// CHECK-NOT: @step_k0_sum_splits
// CHECK-LABEL: func.func private @step_k1_append_kv
// CHECK-SAME: (%[[KC:[^:]*]]: tensor<8x16x2x64xbf16>, %[[VC:[^:]*]]: tensor<8x16x2x64xbf16>, %[[K:[^:]*]]: tensor<1x2x1x64xbf16>, %[[T:[^:]*]]: tensor<1x4xi32>, %[[POS:[^:]*]]: tensor<1xi32>, %[[VP:[^:]*]]: tensor<2x1x128xf32>, %[[KD:[^:]*]]: tensor<8x16x2x64xbf16>, %[[VD:[^:]*]]: tensor<8x16x2x64xbf16>)
// CHECK-NEXT: %[[V:.*]] = kiln.sum_splits %[[VP]]
// CHECK-NEXT: %[[VR:.*]] = kiln.reshape %[[V]] : tensor<1x128xbf16> -> tensor<1x2x1x64xbf16>
// CHECK-NEXT: kiln.append_kv %[[KC]], %[[VC]], %[[K]], %[[VR]], %[[T]], %[[POS]]
// CHECK-NOT: @step_k2_sum_splits
// CHECK-LABEL: func.func private @step_k3_sum_splits
// CHECK-SAME: (%[[UP:[^:]*]]: tensor<2x1x128xf32>, %[[BIAS:[^:]*]]: tensor<1x128xbf16>, %[[GP:[^:]*]]: tensor<2x1x128xf32>, %[[D:[^:]*]]: tensor<1x128xbf16>)
// CHECK-NEXT: %[[G:.*]] = kiln.sum_splits %[[GP]] epilogue(%[[BIAS]] : tensor<1x128xbf16>)
// CHECK: %[[U:.*]] = kiln.sum_splits %[[UP]] epilogue(%[[G]], %[[BIAS]] : tensor<1x128xbf16>, tensor<1x128xbf16>)
// CHECK: bufferization.materialize_in_destination %[[U]] in %[[D]]
// CHECK-LABEL: func.func @step
// CHECK: call @step_k1_append_kv
// CHECK-NOT: call @step_k0_sum_splits
// CHECK-NOT: call @step_k2_sum_splits
// CHECK: call @step_k3_sum_splits
func.func private @step_k0_sum_splits(%parts: tensor<2x1x128xf32>, %out: tensor<1x128xbf16>) -> tensor<1x128xbf16>
    attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts : tensor<2x1x128xf32> -> tensor<1x128xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  return %1 : tensor<1x128xbf16>
}
func.func private @step_k1_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<1x2x1x64xbf16>, %v: tensor<1x2x1x64xbf16>, %table: tensor<1x4xi32>, %pos: tensor<1xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<1x2x1x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x4xi32>, tensor<1xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func private @step_k2_sum_splits(%parts: tensor<2x1x128xf32>, %bias: tensor<1x128xbf16>,
    %out: tensor<1x128xbf16>) -> tensor<1x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts epilogue(%bias : tensor<1x128xbf16>) {
  ^bb0(%acc: f32, %b: f32):
    %s = arith.addf %acc, %b : f32
    kiln.yield %s : f32
  } : tensor<2x1x128xf32> -> tensor<1x128xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  return %1 : tensor<1x128xbf16>
}
func.func private @step_k3_sum_splits(%parts: tensor<2x1x128xf32>, %gate: tensor<1x128xbf16>, %bias: tensor<1x128xbf16>,
    %out: tensor<1x128xbf16>) -> tensor<1x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts epilogue(%gate, %bias : tensor<1x128xbf16>, tensor<1x128xbf16>) {
  ^bb0(%acc: f32, %g: f32, %b: f32):
    %m = arith.mulf %acc, %g : f32
    %s = arith.addf %m, %b : f32
    kiln.yield %s : f32
  } : tensor<2x1x128xf32> -> tensor<1x128xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  return %1 : tensor<1x128xbf16>
}
func.func @step(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>, %k: tensor<1x2x1x64xbf16>,
    %vparts: tensor<2x1x128xf32>, %table: tensor<1x4xi32>, %pos: tensor<1xi32>, %gparts: tensor<2x1x128xf32>,
    %uparts: tensor<2x1x128xf32>, %bias: tensor<1x128xbf16>)
    -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>, tensor<1x128xbf16>) {
  %0 = tensor.empty() : tensor<1x128xbf16>
  %1 = call @step_k0_sum_splits(%vparts, %0) : (tensor<2x1x128xf32>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  %2 = kiln.reshape %1 : tensor<1x128xbf16> -> tensor<1x2x1x64xbf16>
  %3 = tensor.empty() : tensor<8x16x2x64xbf16>
  %4 = tensor.empty() : tensor<8x16x2x64xbf16>
  %5:2 = call @step_k1_append_kv(%kc, %vc, %k, %2, %table, %pos, %3, %4) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x4xi32>, tensor<1xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  %6 = tensor.empty() : tensor<1x128xbf16>
  %7 = call @step_k2_sum_splits(%gparts, %bias, %6) : (tensor<2x1x128xf32>, tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  %8 = tensor.empty() : tensor<1x128xbf16>
  %9 = call @step_k3_sum_splits(%uparts, %7, %bias, %8) : (tensor<2x1x128xf32>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  return %5#0, %5#1, %9 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>, tensor<1x128xbf16>
}

// -----

// A sum read by two calls of one kernel (whose signature would change under both), by a matmul, or returned by
// the plan stays a kernel of its own; so does a sum whose epilogue reads a cache that an append between the two
// calls writes (in place on the GPU).

// CHECK-LABEL: func.func @step
// CHECK: call @step_k0_sum_splits
// CHECK: call @step_k1_rope
// CHECK: call @step_k1_rope
// CHECK: call @step_k0_sum_splits
// CHECK: call @step_k2_matmul
// CHECK: call @step_k0_sum_splits
// CHECK: call @step_k3_sum_splits
// CHECK: call @step_k4_append_kv
// CHECK: call @step_k5_sum_splits
func.func private @step_k0_sum_splits(%parts: tensor<4x1x256xf32>, %out: tensor<1x256xbf16>) -> tensor<1x256xbf16>
    attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts : tensor<4x1x256xf32> -> tensor<1x256xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x256xbf16>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  return %1 : tensor<1x256xbf16>
}
func.func private @step_k1_rope(%x: tensor<1x2x128xbf16>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %out: tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.rope %x, %cos, %sin {seq_dim = 0 : i64} : tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %1 : tensor<1x2x128xbf16>
}
func.func private @step_k2_matmul(%x: tensor<1x256xbf16>, %w: tensor<256x64xbf16>, %out: tensor<1x64xbf16>)
    -> tensor<1x64xbf16> attributes {kiln.kernel} {
  %0 = kiln.matmul %x, %w : tensor<1x256xbf16>, tensor<256x64xbf16> -> tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
  return %1 : tensor<1x64xbf16>
}
func.func private @step_k3_sum_splits(%parts: tensor<2x8x16x2x64xf32>, %cache: tensor<8x16x2x64xbf16>,
    %out: tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16> attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts epilogue(%cache : tensor<8x16x2x64xbf16>) {
  ^bb0(%acc: f32, %c: f32):
    %s = arith.addf %acc, %c : f32
    kiln.yield %s : f32
  } : tensor<2x8x16x2x64xf32> -> tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1 : tensor<8x16x2x64xbf16>
}
func.func private @step_k4_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<1x2x1x64xbf16>, %v: tensor<1x2x1x64xbf16>, %table: tensor<1x4xi32>, %pos: tensor<1xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<1x2x1x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x4xi32>, tensor<1xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func private @step_k5_sum_splits(%parts: tensor<2x8x16x2x64xf32>, %other: tensor<8x16x2x64xbf16>,
    %out: tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16> attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts epilogue(%other : tensor<8x16x2x64xbf16>) {
  ^bb0(%acc: f32, %o: f32):
    %s = arith.addf %acc, %o : f32
    kiln.yield %s : f32
  } : tensor<2x8x16x2x64xf32> -> tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1 : tensor<8x16x2x64xbf16>
}
func.func @step(%parts: tensor<4x1x256xf32>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %w: tensor<256x64xbf16>, %cparts: tensor<2x8x16x2x64xf32>, %kc: tensor<8x16x2x64xbf16>,
    %vc: tensor<8x16x2x64xbf16>, %k: tensor<1x2x1x64xbf16>, %table: tensor<1x4xi32>, %pos: tensor<1xi32>)
    -> (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x256xbf16>, tensor<8x16x2x64xbf16>,
        tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) {
  // Read by two RoPE kernels.
  %0 = tensor.empty() : tensor<1x256xbf16>
  %1 = call @step_k0_sum_splits(%parts, %0) : (tensor<4x1x256xf32>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  %2 = kiln.reshape %1 : tensor<1x256xbf16> -> tensor<1x2x128xbf16>
  %3 = tensor.empty() : tensor<1x2x128xbf16>
  %4 = call @step_k1_rope(%2, %cos, %sin, %3) : (tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  %5 = tensor.empty() : tensor<1x2x128xbf16>
  %6 = call @step_k1_rope(%2, %cos, %sin, %5) : (tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  // Read by a matmul.
  %7 = tensor.empty() : tensor<1x256xbf16>
  %8 = call @step_k0_sum_splits(%parts, %7) : (tensor<4x1x256xf32>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  %9 = tensor.empty() : tensor<1x64xbf16>
  %10 = call @step_k2_matmul(%8, %w, %9) : (tensor<1x256xbf16>, tensor<256x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
  // Returned.
  %11 = tensor.empty() : tensor<1x256xbf16>
  %12 = call @step_k0_sum_splits(%parts, %11) : (tensor<4x1x256xf32>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  // Its epilogue reads the cache that the append then writes.
  %13 = tensor.empty() : tensor<8x16x2x64xbf16>
  %14 = call @step_k3_sum_splits(%cparts, %kc, %13) : (tensor<2x8x16x2x64xf32>, tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %15 = tensor.empty() : tensor<8x16x2x64xbf16>
  %16 = tensor.empty() : tensor<8x16x2x64xbf16>
  %17:2 = call @step_k4_append_kv(%kc, %vc, %k, %k, %table, %pos, %15, %16) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x4xi32>, tensor<1xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  %18 = tensor.empty() : tensor<8x16x2x64xbf16>
  %19 = call @step_k5_sum_splits(%cparts, %14, %18) : (tensor<2x8x16x2x64xf32>, tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %4, %6, %10, %12, %17#0, %17#1, %19 : tensor<1x2x128xbf16>, tensor<1x2x128xbf16>, tensor<1x64xbf16>,
      tensor<1x256xbf16>, tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}

// -----

// Both of an append's new rows from sums: each moves in. A sum read as RoPE's table, and one read by a RoPE
// kernel that another call shares (its signature would change under that call), stay.

// CHECK-LABEL: func.func private @step_k2_append_kv
// CHECK-SAME: %[[KP:[^:]*]]: tensor<2x1x128xf32>, %[[VP:[^:]*]]: tensor<2x1x128xf32>, %{{[^:]*}}: tensor<8x16x2x64xbf16>, %{{[^:]*}}: tensor<8x16x2x64xbf16>)
// CHECK-NEXT: %[[V:.*]] = kiln.sum_splits %[[VP]]
// CHECK-NEXT: %[[VR:.*]] = kiln.reshape %[[V]]
// CHECK-NEXT: %[[K:.*]] = kiln.sum_splits %[[KP]]
// CHECK-NEXT: %[[KR:.*]] = kiln.reshape %[[K]]
// CHECK-NEXT: kiln.append_kv %{{.*}}, %{{.*}}, %[[KR]], %[[VR]],
// CHECK-LABEL: func.func @step
// CHECK-NOT: call @step_k0_sum_splits(%kparts
// CHECK: call @step_k2_append_kv
// CHECK: call @step_k1_sum_splits
// CHECK: call @step_k3_rope
// CHECK: call @step_k0_sum_splits
// CHECK: call @step_k4_rope
// CHECK: call @step_k4_rope
func.func private @step_k0_sum_splits(%parts: tensor<2x1x128xf32>, %out: tensor<1x128xbf16>) -> tensor<1x128xbf16>
    attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts : tensor<2x1x128xf32> -> tensor<1x128xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  return %1 : tensor<1x128xbf16>
}
func.func private @step_k1_sum_splits(%parts: tensor<2x1x64xf32>, %out: tensor<1x64xbf16>) -> tensor<1x64xbf16>
    attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts : tensor<2x1x64xf32> -> tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
  return %1 : tensor<1x64xbf16>
}
func.func private @step_k2_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<1x2x1x64xbf16>, %v: tensor<1x2x1x64xbf16>, %table: tensor<1x4xi32>, %pos: tensor<1xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<1x2x1x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x4xi32>, tensor<1xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func private @step_k3_rope(%x: tensor<1x2x128xbf16>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %out: tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.rope %x, %cos, %sin {seq_dim = 0 : i64} : tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %1 : tensor<1x2x128xbf16>
}
func.func private @step_k4_rope(%x: tensor<1x1x128xbf16>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %out: tensor<1x1x128xbf16>) -> tensor<1x1x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.rope %x, %cos, %sin {seq_dim = 0 : i64} : tensor<1x1x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x1x128xbf16>, tensor<1x1x128xbf16>) -> tensor<1x1x128xbf16>
  return %1 : tensor<1x1x128xbf16>
}
func.func @step(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>, %kparts: tensor<2x1x128xf32>,
    %vparts: tensor<2x1x128xf32>, %table: tensor<1x4xi32>, %pos: tensor<1xi32>, %x: tensor<1x2x128xbf16>,
    %tparts: tensor<2x1x64xf32>, %sin: tensor<1x64xbf16>, %y: tensor<1x1x128xbf16>, %cos: tensor<1x64xbf16>)
    -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>, tensor<1x2x128xbf16>, tensor<1x1x128xbf16>, tensor<1x1x128xbf16>) {
  %0 = tensor.empty() : tensor<1x128xbf16>
  %1 = call @step_k0_sum_splits(%kparts, %0) : (tensor<2x1x128xf32>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  %2 = kiln.reshape %1 : tensor<1x128xbf16> -> tensor<1x2x1x64xbf16>
  %3 = tensor.empty() : tensor<1x128xbf16>
  %4 = call @step_k0_sum_splits(%vparts, %3) : (tensor<2x1x128xf32>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  %5 = kiln.reshape %4 : tensor<1x128xbf16> -> tensor<1x2x1x64xbf16>
  %6 = tensor.empty() : tensor<8x16x2x64xbf16>
  %7 = tensor.empty() : tensor<8x16x2x64xbf16>
  %8:2 = call @step_k2_append_kv(%kc, %vc, %2, %5, %table, %pos, %6, %7) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x4xi32>, tensor<1xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  // The sum as RoPE's cos table.
  %9 = tensor.empty() : tensor<1x64xbf16>
  %13 = call @step_k1_sum_splits(%tparts, %9) : (tensor<2x1x64xf32>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
  %14 = tensor.empty() : tensor<1x2x128xbf16>
  %15 = call @step_k3_rope(%x, %13, %sin, %14) : (tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  // A RoPE kernel two calls share, one of them reading a sum.
  %16 = tensor.empty() : tensor<1x128xbf16>
  %17 = call @step_k0_sum_splits(%kparts, %16) : (tensor<2x1x128xf32>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
  %18 = kiln.reshape %17 : tensor<1x128xbf16> -> tensor<1x1x128xbf16>
  %19 = tensor.empty() : tensor<1x1x128xbf16>
  %20 = call @step_k4_rope(%18, %cos, %sin, %19) : (tensor<1x1x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x1x128xbf16>) -> tensor<1x1x128xbf16>
  %21 = tensor.empty() : tensor<1x1x128xbf16>
  %22 = call @step_k4_rope(%y, %cos, %sin, %21) : (tensor<1x1x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x1x128xbf16>) -> tensor<1x1x128xbf16>
  return %8#0, %8#1, %15, %20, %22 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>, tensor<1x2x128xbf16>,
      tensor<1x1x128xbf16>, tensor<1x1x128xbf16>
}

// -----

// One sum read by two RoPE kernels: each computes it (4 chunks, 8 chunk reads an element between them). A dead
// reshape of a sum keeps that sum's kernel.

// CHECK-LABEL: func.func private @step_k1_rope
// CHECK-SAME: %[[P1:[^:]*]]: tensor<4x1x256xf32>
// CHECK-NEXT: kiln.sum_splits %[[P1]]
// CHECK-LABEL: func.func private @step_k2_rope
// CHECK-SAME: %[[P2:[^:]*]]: tensor<4x1x256xf32>
// CHECK-NEXT: kiln.sum_splits %[[P2]]
// CHECK-LABEL: func.func @step
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: call @step_k1_rope
// CHECK: call @step_k2_rope
// CHECK: call @step_k0_sum_splits
// CHECK-NEXT: kiln.reshape
// CHECK-NEXT: kiln.reshape
// CHECK: call @step_k3_rope
func.func private @step_k0_sum_splits(%parts: tensor<4x1x256xf32>, %out: tensor<1x256xbf16>) -> tensor<1x256xbf16>
    attributes {kiln.kernel} {
  %0 = kiln.sum_splits %parts : tensor<4x1x256xf32> -> tensor<1x256xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x256xbf16>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  return %1 : tensor<1x256xbf16>
}
func.func private @step_k1_rope(%x: tensor<1x2x128xbf16>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %out: tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.rope %x, %cos, %sin {seq_dim = 0 : i64} : tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %1 : tensor<1x2x128xbf16>
}
func.func private @step_k2_rope(%x: tensor<1x2x128xbf16>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %out: tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.rope %x, %cos, %sin {seq_dim = 0 : i64} : tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %1 : tensor<1x2x128xbf16>
}
func.func private @step_k3_rope(%x: tensor<1x2x128xbf16>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>,
    %out: tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16> attributes {kiln.kernel} {
  %0 = kiln.rope %x, %cos, %sin {seq_dim = 0 : i64} : tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
  %1 = bufferization.materialize_in_destination %0 in %out : (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %1 : tensor<1x2x128xbf16>
}
func.func @step(%parts: tensor<4x1x256xf32>, %cos: tensor<1x64xbf16>, %sin: tensor<1x64xbf16>)
    -> (tensor<1x2x128xbf16>, tensor<1x2x128xbf16>, tensor<1x2x128xbf16>) {
  %0 = tensor.empty() : tensor<1x256xbf16>
  %1 = call @step_k0_sum_splits(%parts, %0) : (tensor<4x1x256xf32>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  %2 = kiln.reshape %1 : tensor<1x256xbf16> -> tensor<1x2x128xbf16>
  %3 = tensor.empty() : tensor<1x2x128xbf16>
  %4 = call @step_k1_rope(%2, %cos, %sin, %3) : (tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  %5 = tensor.empty() : tensor<1x2x128xbf16>
  %6 = call @step_k2_rope(%2, %cos, %sin, %5) : (tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  %7 = tensor.empty() : tensor<1x256xbf16>
  %8 = call @step_k0_sum_splits(%parts, %7) : (tensor<4x1x256xf32>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
  %dead = kiln.reshape %8 : tensor<1x256xbf16> -> tensor<256xbf16>
  %9 = kiln.reshape %8 : tensor<1x256xbf16> -> tensor<1x2x128xbf16>
  %10 = tensor.empty() : tensor<1x2x128xbf16>
  %11 = call @step_k3_rope(%9, %cos, %sin, %10) : (tensor<1x2x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2x128xbf16>) -> tensor<1x2x128xbf16>
  return %4, %6, %11 : tensor<1x2x128xbf16>, tensor<1x2x128xbf16>, tensor<1x2x128xbf16>
}
