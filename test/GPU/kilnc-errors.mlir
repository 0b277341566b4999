// kilnc names the op and the stage when a graph cannot become GPU kernels (here: an integer table to gather
// from), and rejects unknown options.
// RUN: not kilnc %s --target=sm_90a -o %t 2>&1 | FileCheck %s
// RUN: not kilnc %s --target=sm_75 -o %t 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not kilnc %s --emit=sass -o %t 2>&1 | FileCheck %s --check-prefix=EMIT

// CHECK: kilnc-errors.mlir:[[@LINE+5]]:8: error: 'kiln.gather' op the GPU glue kernels take float (and i1 condition, i32/i64 index) tensors only
// CHECK: kilnc: error: the kernel stage failed
// TARGET: kilnc: for the --target option: Cannot find option named 'sm_75'!
// EMIT: kilnc: error: unknown --emit=sass
func.func @row(%t: tensor<77x512xi64>, %i: tensor<3xi64>) -> tensor<3x512xi64> {
  %p = kiln.gather %t[%i] axis 0 : tensor<77x512xi64>, tensor<3xi64> -> tensor<3x512xi64>
  return %p : tensor<3x512xi64>
}
