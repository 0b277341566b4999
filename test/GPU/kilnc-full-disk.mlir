// kilnc on a full disk: a file it cannot write (here each one in turn, a symlink to /dev/full, where every
// write fails with ENOSPC) is an error naming the file and a non-zero exit, never LLVM's "IO failure on output
// stream" abort (`not` without --crash fails on a signal). ptxas itself exits with 0 after writing a cubin cut
// short on a full disk; kilnc checks the cubin and refuses it.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t/ptx %t/cubin %t/manifest %t/constant
// RUN: ln -s /dev/full %t/ptx/scaled_k0_mul_module.ptx
// RUN: not kilnc %s --target=sm_90a -o %t/ptx 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: ln -s /dev/full %t/cubin/scaled_k0_mul_module.sm_90a.cubin
// RUN: not kilnc %s --target=sm_90a -o %t/cubin 2>&1 | FileCheck %s --check-prefix=CUBIN
// RUN: ln -s /dev/full %t/manifest/manifest.json
// RUN: not kilnc %s --target=sm_90a -o %t/manifest 2>&1 | FileCheck %s --check-prefix=MANIFEST
// RUN: ln -s /dev/full %t/constant/scaled_const0.bin
// RUN: not kilnc %s --target=sm_90a -o %t/constant 2>&1 | FileCheck %s --check-prefix=CONSTANT

// PTX-NOT: LLVM ERROR
// PTX: kilnc: error: cannot write {{.*}}ptx{{/|\\}}scaled_k0_mul_module.ptx: No space left on device
// CUBIN-NOT: LLVM ERROR
// CUBIN: kilnc: error: ptxas wrote an incomplete cubin {{.*}}scaled_k0_mul_module.sm_90a.cubin (not a regular file; is the disk full?)
// MANIFEST-NOT: LLVM ERROR
// MANIFEST: kilnc: error: cannot write {{.*}}manifest{{/|\\}}manifest.json: No space left on device
// CONSTANT-NOT: LLVM ERROR
// CONSTANT: kilnc-full-disk.mlir:[[@LINE+3]]:8: error: 'kiln.constant' op kilnc: cannot write {{.*}}scaled_const0.bin: No space left on device
// CONSTANT: kilnc: error: the run plan stage failed
func.func @scaled(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = kiln.constant dense<1.5> : tensor<4x8xf32>
  %r = kiln.mul %a, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
