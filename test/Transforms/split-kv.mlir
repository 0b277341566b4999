// RUN: kiln-opt %s -kiln-split-kv=target=sm_90a -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-split-kv=target=sm_80 -split-input-file | FileCheck %s --check-prefix=SM80
// RUN: kiln-opt %s -kiln-split-kv -split-input-file | FileCheck %s --check-prefix=HOST
// RUN: not kiln-opt %s -kiln-split-kv=target=sm_70 2>&1 | FileCheck %s --check-prefix=BADTARGET

// kiln-split-kv splits the keys of an attention whose query tiles number less than two per multiprocessor into
// equal chunks of whole 256-key granules (as many as bring the blocks to about two per multiprocessor), and merges
// the chunks by their log-sum-exp. The host target (the default) keeps every attention whole.
// BADTARGET: for the --target option: Cannot find option named 'sm_70'!

// A packed GQA decode step at batch 1: 8 query tiles over 8192 keys. 32 chunks of 256 keys (the most there are)
// make 256 blocks, two per multiprocessor of the H200's 132 wanting 33; the mods, the scale and the causal flag
// move to the split attention.
// CHECK-LABEL: func.func @decode_batch1
// CHECK-SAME: (%[[Q:[a-zA-Z0-9_]+]]: tensor<1x8x4x128xbf16>, %[[K:[a-zA-Z0-9_]+]]: tensor<1x8x8192x128xbf16>, %[[V:[a-zA-Z0-9_]+]]: tensor<1x8x8192x128xbf16>)
// CHECK: %[[P:.+]], %[[L:.+]] = kiln.attention %[[Q]], %[[K]], %[[V]] causal mask_mod {
// CHECK: arith.cmpi sge
// CHECK: } {kv_chunk = 256 : i64, scale = 1.250000e-01 : f32} : tensor<1x8x4x128xbf16>, tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<32x1x8x4x128xf32>, tensor<32x1x8x4xf32>
// CHECK: %[[O:.+]] = kiln.merge_splits %[[P]], %[[L]] : tensor<32x1x8x4x128xf32>, tensor<32x1x8x4xf32> -> tensor<1x8x4x128xbf16>
// CHECK: return %[[O]]
// On sm_80 (108 multiprocessors: 27 chunks wanted) the 32 granules go 2 to a chunk: 16 chunks of 512 keys.
// SM80-LABEL: func.func @decode_batch1
// SM80: } {kv_chunk = 512 : i64, scale = 1.250000e-01 : f32} : {{.*}} -> tensor<16x1x8x4x128xf32>, tensor<16x1x8x4xf32>
// HOST-LABEL: func.func @decode_batch1
// HOST-NOT: kv_chunk
// HOST-NOT: kiln.merge_splits
// HOST: return
func.func @decode_batch1(%q: tensor<1x8x4x128xbf16>, %k: tensor<1x8x8192x128xbf16>, %v: tensor<1x8x8192x128xbf16>) -> tensor<1x8x4x128xbf16> {
  %o = kiln.attention %q, %k, %v causal mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c16 = arith.constant 16 : index
    %w = arith.cmpi sge, %j, %c16 : index
    kiln.yield %w : i1
  } {scale = 0.125 : f32} : tensor<1x8x4x128xbf16>, tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<1x8x4x128xbf16>
  return %o : tensor<1x8x4x128xbf16>
}

// -----

// 1000 keys at batch 4: 32 query tiles (8 chunks wanted), four granules: 4 chunks of 256 keys, the last one 232.
// CHECK-LABEL: func.func @partial_last_chunk
// CHECK: kiln.attention {{.*}}{kv_chunk = 256 : i64} : {{.*}} -> tensor<4x4x8x4x64xf32>, tensor<4x4x8x4xf32>
// CHECK: kiln.merge_splits {{.*}} -> tensor<4x8x4x64xf16>
func.func @partial_last_chunk(%q: tensor<4x8x4x64xf16>, %k: tensor<4x8x1000x64xf16>, %v: tensor<4x8x1000x64xf16>) -> tensor<4x8x4x64xf16> {
  %o = kiln.attention %q, %k, %v : tensor<4x8x4x64xf16>, tensor<4x8x1000x64xf16>, tensor<4x8x1000x64xf16> -> tensor<4x8x4x64xf16>
  return %o : tensor<4x8x4x64xf16>
}

// -----

// Batch 64: 512 query tiles, more than the 396 blocks the H200 holds at once (three of these per multiprocessor by
// shared memory), 1.3 waves; 3 chunks of 11 granules (2816 keys) make 3.9 waves.
// CHECK-LABEL: func.func @many_waves
// CHECK: kiln.attention {{.*}}{kv_chunk = 2816 : i64} : {{.*}} -> tensor<3x64x8x4x128xf32>, tensor<3x64x8x4xf32>
func.func @many_waves(%q: tensor<64x8x4x128xbf16>, %k: tensor<64x8x8192x128xbf16>) -> tensor<64x8x4x128xbf16> {
  %o = kiln.attention %q, %k, %k : tensor<64x8x4x128xbf16>, tensor<64x8x8192x128xbf16>, tensor<64x8x8192x128xbf16> -> tensor<64x8x4x128xbf16>
  return %o : tensor<64x8x4x128xbf16>
}

// -----

// Left alone: query tiles that number two per multiprocessor and fit in one wave (batch 32: 256), keys within one
// granule, an lse result, an epilogue, a seq-major output, a pinned config, a prefill on the wgmma lowering, a
// split attention.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: kiln.merge_splits
// CHECK: return
func.func @left_alone(%q32: tensor<32x8x4x128xbf16>, %k32: tensor<32x8x4096x128xbf16>, %q: tensor<1x8x4x128xbf16>, %k: tensor<1x8x8192x128xbf16>, %ks: tensor<1x8x200x128xbf16>, %qs: tensor<1x4x8x128xbf16>, %kseq: tensor<1x8192x8x128xbf16>, %qp: tensor<1x8x1024x128xbf16>) -> (tensor<32x8x4x128xbf16>, tensor<1x8x4x128xbf16>, tensor<1x8x4x128xbf16>, tensor<1x8x4xf32>, tensor<1x8x4x128xbf16>, tensor<1x4x8x128xbf16>, tensor<1x8x4x128xbf16>, tensor<1x8x1024x128xbf16>, tensor<2x1x8x4x128xf32>) {
  %full = kiln.attention %q32, %k32, %k32 : tensor<32x8x4x128xbf16>, tensor<32x8x4096x128xbf16>, tensor<32x8x4096x128xbf16> -> tensor<32x8x4x128xbf16>
  %short = kiln.attention %q, %ks, %ks : tensor<1x8x4x128xbf16>, tensor<1x8x200x128xbf16>, tensor<1x8x200x128xbf16> -> tensor<1x8x4x128xbf16>
  %o, %lse = kiln.attention %q, %k, %k : tensor<1x8x4x128xbf16>, tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<1x8x4x128xbf16>, tensor<1x8x4xf32>
  %epi = kiln.attention %q, %k, %k epilogue() {
  ^bb0(%x: f32):
    %two = arith.constant 2.0 : f32
    %y = arith.mulf %x, %two : f32
    kiln.yield %y : f32
  } : tensor<1x8x4x128xbf16>, tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<1x8x4x128xbf16>
  %seq = kiln.attention %qs, %kseq, %kseq {layout = "bshd"} : tensor<1x4x8x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16> -> tensor<1x4x8x128xbf16>
  %pinned = kiln.attention %q, %k, %k {kiln.config = #kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = "mma_sync">} : tensor<1x8x4x128xbf16>, tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<1x8x4x128xbf16>
  %prefill = kiln.attention %qp, %k, %k : tensor<1x8x1024x128xbf16>, tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<1x8x1024x128xbf16>
  %split, %splitLse = kiln.attention %q, %k, %k {kv_chunk = 4096 : i64} : tensor<1x8x4x128xbf16>, tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<2x1x8x4x128xf32>, tensor<2x1x8x4xf32>
  return %full, %short, %o, %lse, %epi, %seq, %pinned, %prefill, %split : tensor<32x8x4x128xbf16>, tensor<1x8x4x128xbf16>, tensor<1x8x4x128xbf16>, tensor<1x8x4xf32>, tensor<1x8x4x128xbf16>, tensor<1x4x8x128xbf16>, tensor<1x8x4x128xbf16>, tensor<1x8x1024x128xbf16>, tensor<2x1x8x4x128xf32>
}
