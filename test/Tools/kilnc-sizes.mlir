// kilnc refuses, at compile time, a program no GPU launch can run, naming the tensor or the kernel: a zero-size
// tensor (its kernel would get an empty grid, which the driver refuses only at the launch) and a tensor too large
// for a grid (2^40 elements gave grid.x = 2^32, which the launch's 32 bits cannot hold). Nothing is written.
// Each case is one function of this file: sed blanks the others' lines, so that line numbers stay.

// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e '/^\/\/ BEGIN ARGUMENT/,/^\/\/ END ARGUMENT/!s/.*//' %s > %t/argument.mlir
// RUN: not kilnc %t/argument.mlir --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=ARGUMENT
// RUN: not ls %t/out
// RUN: sed -e '/^\/\/ BEGIN INTERMEDIATE/,/^\/\/ END INTERMEDIATE/!s/.*//' %s > %t/intermediate.mlir
// RUN: not kilnc %t/intermediate.mlir --target=sm_80 -o %t/out 2>&1 | FileCheck %s --check-prefix=INTERMEDIATE
// RUN: not ls %t/out
// RUN: sed -e '/^\/\/ BEGIN GRID/,/^\/\/ END GRID/!s/.*//' %s > %t/grid.mlir
// RUN: not kilnc %t/grid.mlir --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=GRID
// RUN: not ls %t/out

// BEGIN ARGUMENT
// ARGUMENT: argument.mlir:[[@LINE+2]]:17: error: argument #0 of @zero has zero-size type 'tensor<0x8xbf16>'; the GPU targets take no zero-size tensors (the host target does)
// ARGUMENT: kilnc: error: the kernel stage failed (see the diagnostics above)
func.func @zero(%a: tensor<0x8xbf16>, %b: tensor<0x8xbf16>) -> tensor<0x8xbf16> {
  %r = kiln.add %a, %b : tensor<0x8xbf16>, tensor<0x8xbf16> -> tensor<0x8xbf16>
  return %r : tensor<0x8xbf16>
}
// END ARGUMENT

// BEGIN INTERMEDIATE
func.func @empty_slice(%a: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  // INTERMEDIATE: intermediate.mlir:[[@LINE+1]]:8: error: 'kiln.slice' op result #0 has zero-size type 'tensor<0x8xbf16>'; the GPU targets take no zero-size tensors (the host target does)
  %s = kiln.slice %a offsets [0, 0] strides [1, 1] : tensor<4x8xbf16> -> tensor<0x8xbf16>
  %r = kiln.add %a, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %r : tensor<4x8xbf16>
}
// END INTERMEDIATE

// BEGIN GRID
func.func @big(%a: tensor<1xbf16>) -> tensor<1099511627775xbf16> {
  // GRID: grid.mlir:[[@LINE+1]]:8: error: kernel 'big_k0_broadcast' (kiln.broadcast) needs a grid of [4294967296, 1, 1] blocks; a GPU grid holds 1 to 2147483647 blocks along x and 1 to 65535 along y and z
  %r = kiln.broadcast %a : tensor<1xbf16> -> tensor<1099511627775xbf16>
  return %r : tensor<1099511627775xbf16>
}
// END GRID
