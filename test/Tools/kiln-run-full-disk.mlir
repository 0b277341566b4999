// kiln-run on a full disk: an --output it cannot write (a symlink to /dev/full, where every write fails with
// ENOSPC) is an error naming the file and a non-zero exit, never LLVM's "IO failure on output stream" abort
// (`not` without --crash fails on a signal).
// RUN: rm -rf %t && mkdir -p %t && ln -s /dev/full %t/out.npy
// RUN: not kiln-run %s --random-inputs --seed=1 --output=%t/out.npy 2>&1 | FileCheck %s

// CHECK-NOT: LLVM ERROR
// CHECK: error: {{.*}}out.npy: write failed: No space left on device
func.func @double(%a: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %y = kiln.add %a, %a : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
