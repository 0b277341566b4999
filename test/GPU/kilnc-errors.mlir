// kilnc names the op and the stage when a graph cannot become GPU kernels, and rejects unknown options.
// RUN: not kilnc %s --target=sm_90a -o %t 2>&1 | FileCheck %s
// RUN: not kilnc %s --target=sm_75 -o %t 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not kilnc %s --emit=sass -o %t 2>&1 | FileCheck %s --check-prefix=EMIT

// CHECK: kilnc-errors.mlir:[[@LINE+5]]:8: error: convert-kiln-to-gpu: the GPU backend has no lowering for 'kiln.softmax' yet (matmul, attention, row, elementwise and data-movement kernels only)
// CHECK: kilnc: error: the kernel stage failed
// TARGET: kilnc: error: unsupported --target=sm_75 (expected sm_80 or sm_90a)
// EMIT: kilnc: error: unknown --emit=sass
func.func @row(%x: tensor<77x512xbf16>) -> tensor<77x512xbf16> {
  %p = kiln.softmax %x axis 0 : tensor<77x512xbf16>
  return %p : tensor<77x512xbf16>
}
