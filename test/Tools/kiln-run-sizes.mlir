// kiln-run refuses a size no buffer can hold, naming the .npy file or the op, with a non-zero exit and no
// crash (`not` without --crash fails on a signal). Unchecked, such byte counts wrap: a .npy header claiming 2^62
// f32 elements needs 2^64 bytes, which wrapped to the 0 bytes the file holds and passed the size check, and a
// 2^62-element intermediate made the JIT code allocate a wrapped size and write past it.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy.lib.format as f; f.write_array_header_1_0(open('%t/huge.npy', 'wb'), {'descr': '<f4', 'fortran_order': False, 'shape': (2**62,)})"
// RUN: %python -c "import numpy; numpy.save('%t/w.npy', numpy.zeros((8, 16), numpy.float32))"
// RUN: not kiln-run %s --entry=matmul --input=%t/huge.npy --input=%t/w.npy --output=%t/out.npy 2>&1 | FileCheck %s --check-prefix=NPY
// RUN: not kiln-run %s --entry=huge_result --random-inputs 2>&1 | FileCheck %s --check-prefix=RESULT
// RUN: not kiln-run %s --entry=huge_intermediate --random-inputs 2>&1 | FileCheck %s --check-prefix=INTERMEDIATE

// NPY: error: input #0: {{.*}}huge.npy: shape (4611686018427387904,) of f32 has more bytes than int64 can count
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// RESULT: kiln-run-sizes.mlir:[[@LINE+1]]:1: error: result #0 has type 'tensor<4611686018427387904xf32>', whose size in bytes does not fit in int64; no host buffer can hold it
func.func @huge_result(%a: tensor<1xf32>) -> tensor<4611686018427387904xf32> {
  %y = kiln.broadcast %a : tensor<1xf32> -> tensor<4611686018427387904xf32>
  return %y : tensor<4611686018427387904xf32>
}

func.func @huge_intermediate(%a: tensor<1xf32>) -> tensor<f32> {
  // INTERMEDIATE: kiln-run-sizes.mlir:[[@LINE+1]]:8: error: 'kiln.broadcast' op result #0 has type 'tensor<4611686018427387904xf32>', whose size in bytes does not fit in int64; no host buffer can hold it
  %y = kiln.broadcast %a : tensor<1xf32> -> tensor<4611686018427387904xf32>
  %z = kiln.exp %y : tensor<4611686018427387904xf32>
  %r = kiln.reduce sum %z axes [0] : tensor<4611686018427387904xf32> -> tensor<f32>
  return %r : tensor<f32>
}
