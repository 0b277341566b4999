// RUN: kiln-opt %s -kiln-fuse-attention -kiln-fuse-epilogue -kiln-outline-kernels -split-input-file | FileCheck %s
// Outlining is idempotent: a second run finds only kernels and plans with nothing left to outline.
// RUN: kiln-opt %s -kiln-fuse-attention -kiln-fuse-epilogue -kiln-outline-kernels -kiln-outline-kernels -split-input-file | FileCheck %s

// kiln-outline-kernels (after the two fusion passes, as in the kernel pipeline) moves every compute op into a
// private `kiln.kernel` function whose last arguments are destinations, written with
// bufferization.materialize_in_destination; the original function becomes the plan, which allocates a
// tensor.empty per result and calls the kernels in order. Constants and reshapes stay in the plan.

// The block of examples/attention_block.mlir: three kernels (the fused attention, the head transpose, the
// output projection with its bias + residual epilogue); the reshape between them stays in the plan.
// CHECK-LABEL: func.func private @attention_block_k0_attention
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x8x77x64xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x77x64xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x77x64xf32>, %[[DEST:[a-zA-Z0-9_]+]]: tensor<1x8x77x64xf32>) -> tensor<1x8x77x64xf32> attributes {kiln.kernel} {
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f32} : tensor<1x8x77x64xf32>, tensor<1x2x77x64xf32>, tensor<1x2x77x64xf32> -> tensor<1x8x77x64xf32>
// CHECK-NEXT: %[[STORED:[a-zA-Z0-9_]+]] = bufferization.materialize_in_destination %[[OUT]] in %[[DEST]] : (tensor<1x8x77x64xf32>, tensor<1x8x77x64xf32>) -> tensor<1x8x77x64xf32>
// CHECK-NEXT: return %[[STORED]] : tensor<1x8x77x64xf32>
// CHECK-NEXT: }

// CHECK-LABEL: func.func private @attention_block_k1_transpose
// CHECK-SAME: (%[[IN:[a-zA-Z0-9_]+]]: tensor<1x8x77x64xf32>, %[[DEST:[a-zA-Z0-9_]+]]: tensor<1x77x8x64xf32>) -> tensor<1x77x8x64xf32> attributes {kiln.kernel} {
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]] = kiln.transpose %[[IN]] [0, 2, 1, 3] : tensor<1x8x77x64xf32> -> tensor<1x77x8x64xf32>
// CHECK-NEXT: %[[STORED:[a-zA-Z0-9_]+]] = bufferization.materialize_in_destination %[[OUT]] in %[[DEST]]
// CHECK-NEXT: return %[[STORED]] : tensor<1x77x8x64xf32>
// CHECK-NEXT: }

// CHECK-LABEL: func.func private @attention_block_k2_matmul
// CHECK-SAME: (%[[H:[a-zA-Z0-9_]+]]: tensor<1x77x512xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<512x512xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<512xf32>, %[[X:[a-zA-Z0-9_]+]]: tensor<1x77x512xf32>, %[[DEST:[a-zA-Z0-9_]+]]: tensor<1x77x512xf32>) -> tensor<1x77x512xf32> attributes {kiln.kernel} {
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]] = kiln.matmul %[[H]], %[[W]] epilogue(%[[B]], %[[X]] : tensor<512xf32>, tensor<1x77x512xf32>) {
// CHECK-NEXT: ^bb0(%[[ACC:[a-zA-Z0-9_]+]]: f32, %[[BIAS:[a-zA-Z0-9_]+]]: f32, %[[RES:[a-zA-Z0-9_]+]]: f32):
// CHECK-NEXT: %[[BIASED:[a-zA-Z0-9_]+]] = arith.addf %[[ACC]], %[[BIAS]] : f32
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = arith.addf %[[BIASED]], %[[RES]] : f32
// CHECK-NEXT: kiln.yield %[[SUM]] : f32
// CHECK-NEXT: } : tensor<1x77x512xf32>, tensor<512x512xf32> -> tensor<1x77x512xf32>
// CHECK-NEXT: %[[STORED:[a-zA-Z0-9_]+]] = bufferization.materialize_in_destination %[[OUT]] in %[[DEST]]
// CHECK-NEXT: return %[[STORED]] : tensor<1x77x512xf32>
// CHECK-NEXT: }

// The plan: a destination per result, the calls in order, the reshape in place, nothing else.
// CHECK-LABEL: func.func @attention_block
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x8x77x64xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x77x64xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x77x64xf32>, %[[W:[a-zA-Z0-9_]+]]: tensor<512x512xf32>, %[[B:[a-zA-Z0-9_]+]]: tensor<512xf32>, %[[X:[a-zA-Z0-9_]+]]: tensor<1x77x512xf32>) -> tensor<1x77x512xf32> {
// CHECK-NEXT: %[[E0:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<1x8x77x64xf32>
// CHECK-NEXT: %[[ATT:[a-zA-Z0-9_]+]] = call @attention_block_k0_attention(%[[Q]], %[[K]], %[[V]], %[[E0]])
// CHECK-NEXT: %[[E1:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<1x77x8x64xf32>
// CHECK-NEXT: %[[T:[a-zA-Z0-9_]+]] = call @attention_block_k1_transpose(%[[ATT]], %[[E1]])
// CHECK-NEXT: %[[HID:[a-zA-Z0-9_]+]] = kiln.reshape %[[T]] : tensor<1x77x8x64xf32> -> tensor<1x77x512xf32>
// CHECK-NEXT: %[[E2:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<1x77x512xf32>
// CHECK-NEXT: %[[Y:[a-zA-Z0-9_]+]] = call @attention_block_k2_matmul(%[[HID]], %[[W]], %[[B]], %[[X]], %[[E2]])
// CHECK-NEXT: return %[[Y]] : tensor<1x77x512xf32>
// CHECK-NOT: kiln.kernel
func.func @attention_block(%q: tensor<1x8x77x64xf32>, %k: tensor<1x2x77x64xf32>, %v: tensor<1x2x77x64xf32>,
                           %w: tensor<512x512xf32>, %b: tensor<512xf32>, %x: tensor<1x77x512xf32>)
    -> tensor<1x77x512xf32> {
  %k5 = kiln.reshape %k : tensor<1x2x77x64xf32> -> tensor<1x2x1x77x64xf32>
  %ke = kiln.broadcast %k5 : tensor<1x2x1x77x64xf32> -> tensor<1x2x4x77x64xf32>
  %kr = kiln.reshape %ke : tensor<1x2x4x77x64xf32> -> tensor<1x8x77x64xf32>
  %v5 = kiln.reshape %v : tensor<1x2x77x64xf32> -> tensor<1x2x1x77x64xf32>
  %ve = kiln.broadcast %v5 : tensor<1x2x1x77x64xf32> -> tensor<1x2x4x77x64xf32>
  %vr = kiln.reshape %ve : tensor<1x2x4x77x64xf32> -> tensor<1x8x77x64xf32>
  %kt = kiln.transpose %kr [0, 1, 3, 2] : tensor<1x8x77x64xf32> -> tensor<1x8x64x77xf32>
  %s = kiln.matmul %q, %kt : tensor<1x8x77x64xf32>, tensor<1x8x64x77xf32> -> tensor<1x8x77x77xf32>
  %sqrt_d = kiln.constant dense<8.0> : tensor<f32>
  %scaled = kiln.div %s, %sqrt_d : tensor<1x8x77x77xf32>, tensor<f32> -> tensor<1x8x77x77xf32>
  %p = kiln.softmax %scaled axis 3 : tensor<1x8x77x77xf32>
  %o = kiln.matmul %p, %vr : tensor<1x8x77x77xf32>, tensor<1x8x77x64xf32> -> tensor<1x8x77x64xf32>
  %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<1x8x77x64xf32> -> tensor<1x77x8x64xf32>
  %h = kiln.reshape %ot : tensor<1x77x8x64xf32> -> tensor<1x77x512xf32>
  %y = kiln.matmul %h, %w : tensor<1x77x512xf32>, tensor<512x512xf32> -> tensor<1x77x512xf32>
  %yb = kiln.add %y, %b : tensor<1x77x512xf32>, tensor<512xf32> -> tensor<1x77x512xf32>
  %r = kiln.add %yb, %x : tensor<1x77x512xf32>, tensor<1x77x512xf32> -> tensor<1x77x512xf32>
  return %r : tensor<1x77x512xf32>
}

// -----

// An attention with its log-sum-exp has two results, hence two destinations and two buffers in the plan.
// CHECK-LABEL: func.func private @with_lse_k0_attention
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x2x4x8xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x4x8xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x4x8xf32>, %[[OUT_DEST:[a-zA-Z0-9_]+]]: tensor<1x2x4x8xf32>, %[[LSE_DEST:[a-zA-Z0-9_]+]]: tensor<1x2x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) attributes {kiln.kernel} {
// CHECK-NEXT: %[[OUT:[a-zA-Z0-9_]+]], %[[LSE:[a-zA-Z0-9_]+]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
// CHECK-NEXT: %[[OUT_STORED:[a-zA-Z0-9_]+]] = bufferization.materialize_in_destination %[[OUT]] in %[[OUT_DEST]] : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[LSE_STORED:[a-zA-Z0-9_]+]] = bufferization.materialize_in_destination %[[LSE]] in %[[LSE_DEST]] : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
// CHECK-NEXT: return %[[OUT_STORED]], %[[LSE_STORED]] : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
// CHECK-LABEL: func.func @with_lse
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x2x4x8xf32>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x2x4x8xf32>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x2x4x8xf32>)
// CHECK-NEXT: %[[E_OUT:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[E_LSE:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<1x2x4xf32>
// CHECK-NEXT: %[[CALL:[a-zA-Z0-9_]+]]:2 = call @with_lse_k0_attention(%[[Q]], %[[K]], %[[V]], %[[E_OUT]], %[[E_LSE]]) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
// CHECK-NEXT: return %[[CALL]]#0, %[[CALL]]#1
func.func @with_lse(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>)
    -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {
  %o, %lse = kiln.attention %q, %k, %v causal
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %o, %lse : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
}

// -----

// A function with nothing but a reshape has no kernel (a kernel would be printed before the plan).
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @only_reshape
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[R:[a-zA-Z0-9_]+]] = kiln.reshape %[[X]] : tensor<2x8xf32> -> tensor<16xf32>
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: func.func
// CHECK-NOT: kiln.kernel
func.func @only_reshape(%x: tensor<2x8xf32>) -> tensor<16xf32> {
  %r = kiln.reshape %x : tensor<2x8xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

// A row kernel and an unfused elementwise op each get a kernel; the constant they read stays in the plan and is
// passed to the kernel as an argument. A private declaration is not a plan and is left alone.
// CHECK-LABEL: func.func private @row_and_constant_k0_softmax
// CHECK-SAME: (%[[IN:[a-zA-Z0-9_]+]]: tensor<4x16xf32>, %[[DEST:[a-zA-Z0-9_]+]]: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {kiln.kernel}
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = kiln.softmax %[[IN]] axis 1 : tensor<4x16xf32>
// CHECK-NEXT: bufferization.materialize_in_destination %[[P]] in %[[DEST]]
// CHECK-LABEL: func.func private @row_and_constant_k1_add
// CHECK-SAME: (%[[LHS:[a-zA-Z0-9_]+]]: tensor<4x16xf32>, %[[RHS:[a-zA-Z0-9_]+]]: tensor<16xf32>, %[[DEST:[a-zA-Z0-9_]+]]: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {kiln.kernel}
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = kiln.add %[[LHS]], %[[RHS]]
// CHECK-NEXT: bufferization.materialize_in_destination %[[SUM]] in %[[DEST]]
// CHECK-LABEL: func.func @row_and_constant
// CHECK-SAME: (%[[X:[a-zA-Z0-9_]+]]: tensor<4x16xf32>)
// CHECK-NEXT: %[[C:[a-zA-Z0-9_]+]] = kiln.constant dense<5.000000e-01> : tensor<16xf32>
// CHECK-NEXT: %[[E0:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<4x16xf32>
// CHECK-NEXT: %[[P:[a-zA-Z0-9_]+]] = call @row_and_constant_k0_softmax(%[[X]], %[[E0]])
// CHECK-NEXT: %[[E1:[a-zA-Z0-9_]+]] = tensor.empty() : tensor<4x16xf32>
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = call @row_and_constant_k1_add(%[[P]], %[[C]], %[[E1]])
// CHECK-NEXT: return %[[SUM]]
// CHECK: func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: kiln.kernel
func.func @row_and_constant(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %c = kiln.constant dense<0.5> : tensor<16xf32>
  %p = kiln.softmax %x axis 1 : tensor<4x16xf32>
  %a = kiln.add %p, %c : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %a : tensor<4x16xf32>
}
func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>

// -----

// Two plans in one module: each names its kernels after itself and counts from k0.
// CHECK-LABEL: func.func private @first_k0_relu
// CHECK-LABEL: func.func @first
// CHECK: call @first_k0_relu
// CHECK-LABEL: func.func private @second_k0_matmul
// CHECK-SAME: attributes {kiln.kernel}
// CHECK-NEXT: kiln.matmul {{.*}} epilogue() {
// CHECK: math.exp
// CHECK-LABEL: func.func @second
// CHECK: call @second_k0_matmul
func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = kiln.relu %x : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @second(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = kiln.sigmoid %y : tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// Paged attention (as kiln-expand-paged-attention writes it): the kernel takes the views of the caches in with
// it, so that its tiles read the pages; its inputs are q, the caches, the block table and seq_lens, each once
// (seq_lens feeds both views and the mask_mod). No view is left in the plan.
// CHECK-LABEL: func.func private @paged_k0_attention
// CHECK-SAME: (%[[Q:.+]]: tensor<2x8x4x64xbf16>, %[[KC:.+]]: tensor<16x16x2x64xbf16>, %[[T:.+]]: tensor<2x4xi32>, %[[L:.+]]: tensor<2xi32>, %[[VC:.+]]: tensor<16x16x2x64xbf16>, %[[OUT:.+]]: tensor<2x8x4x64xbf16>) -> tensor<2x8x4x64xbf16> attributes {kiln.kernel}
// CHECK: %[[K:.+]] = kiln.gather_pages %[[KC]], %[[T]], %[[L]]
// CHECK: %[[V:.+]] = kiln.gather_pages %[[VC]], %[[T]], %[[L]]
// CHECK: kiln.attention %[[Q]], %[[K]], %[[V]] mod_operands(%[[L]] : tensor<2xi32>)
// CHECK-LABEL: func.func @paged
// CHECK-NOT: kiln.gather_pages
// CHECK: call @paged_k0_attention(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}})
// CHECK-NOT: kiln.gather_pages
func.func @paged(%q: tensor<2x8x4x64xbf16>, %kc: tensor<16x16x2x64xbf16>, %vc: tensor<16x16x2x64xbf16>,
                 %t: tensor<2x4xi32>, %l: tensor<2xi32>) -> tensor<2x8x4x64xbf16> {
  %k = kiln.gather_pages %kc, %t, %l : tensor<16x16x2x64xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x2x64x64xbf16>
  %v = kiln.gather_pages %vc, %t, %l : tensor<16x16x2x64xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x2x64x64xbf16>
  %o = kiln.attention %q, %k, %v mod_operands(%l : tensor<2xi32>) mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %lens: tensor<2xi32>):
    %n = tensor.extract %lens[%b] : tensor<2xi32>
    %len = arith.index_cast %n : i32 to index
    %seen = arith.cmpi slt, %j, %len : index
    kiln.yield %seen : i1
  } : tensor<2x8x4x64xbf16>, tensor<2x2x64x64xbf16>, tensor<2x2x64x64xbf16> -> tensor<2x8x4x64xbf16>
  return %o : tensor<2x8x4x64xbf16>
}

// -----

// A view that is also a result of the plan: the kernel takes a copy of it in, and the view becomes a kernel of
// its own for the plan's result, called where the view was (a gather on the host; the GPU backend has none).
// CHECK-LABEL: func.func private @view_returned_k0_attention
// CHECK: kiln.gather_pages
// CHECK-LABEL: func.func private @view_returned_k1_gather_pages
// CHECK: kiln.gather_pages
// CHECK-LABEL: func.func @view_returned
// CHECK: call @view_returned_k1_gather_pages
// CHECK: call @view_returned_k0_attention
func.func @view_returned(%q: tensor<2x8x4x64xbf16>, %kc: tensor<16x16x2x64xbf16>, %t: tensor<2x4xi32>,
                         %l: tensor<2xi32>) -> (tensor<2x8x4x64xbf16>, tensor<2x2x64x64xbf16>) {
  %k = kiln.gather_pages %kc, %t, %l : tensor<16x16x2x64xbf16>, tensor<2x4xi32>, tensor<2xi32> -> tensor<2x2x64x64xbf16>
  %o = kiln.attention %q, %k, %k : tensor<2x8x4x64xbf16>, tensor<2x2x64x64xbf16>, tensor<2x2x64x64xbf16> -> tensor<2x8x4x64xbf16>
  return %o, %k : tensor<2x8x4x64xbf16>, tensor<2x2x64x64xbf16>
}
