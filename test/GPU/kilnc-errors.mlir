// kilnc names the op and the stage when a graph cannot become GPU kernels (here: an attention at head dim 20,
// which the mma tiles do not divide), without printing the lowered op, and rejects unknown options.
// RUN: not kilnc %s --target=sm_90a -o %t 2>&1 | FileCheck %s
// RUN: not kilnc %s --target=sm_75 -o %t 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not kilnc %s --emit=sass -o %t 2>&1 | FileCheck %s --check-prefix=EMIT

// CHECK: kilnc-errors.mlir:[[@LINE+6]]:8: error: 'kiln.attention' op the GPU attention kernel needs head dims that are multiples of 8, got 20 and 20
// CHECK-NOT: see current operation
// CHECK: kilnc: error: the kernel stage failed
// TARGET: kilnc: for the --target option: Cannot find option named 'sm_75'!
// EMIT: kilnc: error: unknown --emit=sass
func.func @a(%q: tensor<1x2x64x20xbf16>, %k: tensor<1x2x64x20xbf16>, %v: tensor<1x2x64x20xbf16>) -> tensor<1x2x64x20xbf16> {
  %o = kiln.attention %q, %k, %v : tensor<1x2x64x20xbf16>, tensor<1x2x64x20xbf16>, tensor<1x2x64x20xbf16> -> tensor<1x2x64x20xbf16>
  return %o : tensor<1x2x64x20xbf16>
}
