// RUN: kiln-opt %s --kiln-host-loops -split-input-file \
// RUN:   | FileCheck %s --check-prefixes=LOOPS,TILED --implicit-check-not='tensor<' --implicit-check-not='= kiln.' \
// RUN:       --implicit-check-not=kiln.config --implicit-check-not=linalg. --implicit-check-not=bufferization. \
// RUN:       --implicit-check-not=scf.forall
// RUN: kiln-opt %s --kiln-host-loops=tile=false -split-input-file \
// RUN:   | FileCheck %s --check-prefixes=LOOPS,REF --implicit-check-not='tensor<' --implicit-check-not='= kiln.' \
// RUN:       --implicit-check-not=kiln.config --implicit-check-not=linalg. --implicit-check-not=bufferization. \
// RUN:       --implicit-check-not=scf.forall --implicit-check-not=affine.min --implicit-check-not=memref.subview \
// RUN:       --implicit-check-not=math.exp2
// RUN: kiln-opt %s --kiln-host-pipeline -split-input-file \
// RUN:   | FileCheck %s --check-prefix=LLVM --implicit-check-not=memref. --implicit-check-not=scf. \
// RUN:       --implicit-check-not=affine. --implicit-check-not=arith. --implicit-check-not=math. \
// RUN:       --implicit-check-not=cf. --implicit-check-not=func.func --implicit-check-not='tensor<' \
// RUN:       --implicit-check-not=unrealized_conversion_cast --implicit-check-not='= kiln.'
// RUN: kiln-opt %s --kiln-host-pipeline=tile=false -split-input-file \
// RUN:   | FileCheck %s --check-prefix=LLVM --implicit-check-not=memref. --implicit-check-not=scf. \
// RUN:       --implicit-check-not=affine. --implicit-check-not=arith. --implicit-check-not=math. \
// RUN:       --implicit-check-not=cf. --implicit-check-not=func.func --implicit-check-not='tensor<' \
// RUN:       --implicit-check-not=unrealized_conversion_cast --implicit-check-not='= kiln.'

// The host backend. kiln-host-loops ends on memrefs and scf loops, with results turned into out-parameters and
// no kiln op, tensor or linalg op left. With tile=true (the default) kernels are tiled first: the scf.forall
// tiles become scf.for loops over clamped (affine.min), padded tiles read through sub-views, and attention uses
// the online softmax (exp2). With tile=false the untiled reference lowering is used: plain element loops, none
// of that. kiln-host-pipeline continues to the LLVM dialect and leaves nothing else.

// A matmul feeding a softmax; 100x64 * 64x80 does not fit one 64x64x64 host tile.
// TILED: affine.min
// TILED: memref.subview
// TILED: scf.for
// The public function keeps its name, gets its result as a trailing memref argument and returns nothing.
// LOOPS-LABEL: func.func @matmul_softmax(
// LOOPS-SAME: %{{[a-z0-9_]+}}: memref<100x64xf32>, %{{[a-z0-9_]+}}: memref<64x80xf32>, %[[RESULT:[a-z0-9_]+]]: memref<100x80xf32>) {
// REF: scf.for
// REF: memref.copy %{{.*}}, %[[RESULT]]
// LOOPS: return{{$}}
// LOOPS-NEXT: }
// LLVM: llvm.func @matmul_softmax(
// LLVM: llvm.return{{$}}
func.func @matmul_softmax(%x: tensor<100x64xf32>, %w: tensor<64x80xf32>) -> tensor<100x80xf32> {
  %0 = kiln.matmul %x, %w : tensor<100x64xf32>, tensor<64x80xf32> -> tensor<100x80xf32>
  %1 = kiln.softmax %0 axis 1 : tensor<100x80xf32>
  return %1 : tensor<100x80xf32>
}

// -----

// Causal grouped-query attention over 128 keys: tiled, it becomes the online softmax with exp2; the reference
// computes the full row with exp.
// TILED: math.exp2
// TILED: scf.for
// LOOPS-LABEL: func.func @attention(
// LOOPS-SAME: %{{[a-z0-9_]+}}: memref<1x2x128x16xf32>, %{{[a-z0-9_]+}}: memref<1x1x128x16xf32>, %{{[a-z0-9_]+}}: memref<1x1x128x16xf32>, %[[RESULT:[a-z0-9_]+]]: memref<1x2x128x16xf32>) {
// REF: scf.for
// REF: math.exp
// REF: memref.copy %{{.*}}, %[[RESULT]]
// LOOPS: return{{$}}
// LOOPS-NEXT: }
// LLVM: llvm.func @attention(
// LLVM: llvm.return{{$}}
func.func @attention(%q: tensor<1x2x128x16xf32>, %k: tensor<1x1x128x16xf32>, %v: tensor<1x1x128x16xf32>) -> tensor<1x2x128x16xf32> {
  %0 = kiln.attention %q, %k, %v causal : tensor<1x2x128x16xf32>, tensor<1x1x128x16xf32>, tensor<1x1x128x16xf32> -> tensor<1x2x128x16xf32>
  return %0 : tensor<1x2x128x16xf32>
}
