// A bool constant in a run plan: one byte (0 or 1) per element in its file, not MLIR's packed bits.
// RUN: rm -rf %t && kilnc %s --target=sm_90a -o %t
// RUN: %python -c "import numpy, sys; a = numpy.fromfile(sys.argv[1], numpy.uint8); print(a.size, *a[:6])" %t/masked_const0.bin | FileCheck %s
// CHECK: 64 1 0 1 1 0 0
func.func @masked(%x: tensor<4x16xbf16>, %y: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  %c = kiln.constant dense<[[true, false, true, true, false, false, true, false, true, true, true, false, false, true, false, true], [true, false, true, true, false, false, true, false, true, true, true, false, false, true, false, true], [false, false, true, true, false, false, true, false, true, true, true, false, false, true, false, true], [true, true, true, true, false, false, true, false, true, true, true, false, false, true, false, true]]> : tensor<4x16xi1>
  %r = kiln.select %c, %x, %y : tensor<4x16xi1>, tensor<4x16xbf16>, tensor<4x16xbf16> -> tensor<4x16xbf16>
  return %r : tensor<4x16xbf16>
}
