// The GPU compile on a full disk: a file it cannot write (here each one in turn, a symlink to /dev/full, where
// every write fails with ENOSPC) is an error naming the file, never LLVM's "IO failure on output stream" abort
// (`not` without --crash fails on a signal). ptxas itself exits with 0 after writing a cubin cut short on a full
// disk; the compile checks the cubin and refuses it. kilnc writes into a staging folder of its own, so the
// links are placed for the compile it shares with kiln.compile (compileForGpu, which writes into the folder it
// is given), run here through the extension; kilnc prints the same errors.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t/ptx %t/cubin %t/manifest %t/constant
// RUN: ln -s /dev/full %t/ptx/scaled_k0_mul_module.ptx
// RUN: not env PYTHONPATH=%kiln_python %python -c "import sys; from kiln import _kiln; _kiln.compile_gpu(open(sys.argv[1]).read(), 'sm_90a', sys.argv[2])" %s %t/ptx 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: ln -s /dev/full %t/cubin/scaled_k0_mul_module.sm_90a.cubin
// RUN: not env PYTHONPATH=%kiln_python %python -c "import sys; from kiln import _kiln; _kiln.compile_gpu(open(sys.argv[1]).read(), 'sm_90a', sys.argv[2])" %s %t/cubin 2>&1 | FileCheck %s --check-prefix=CUBIN
// RUN: ln -s /dev/full %t/manifest/manifest.json
// RUN: not env PYTHONPATH=%kiln_python %python -c "import sys; from kiln import _kiln; _kiln.compile_gpu(open(sys.argv[1]).read(), 'sm_90a', sys.argv[2])" %s %t/manifest 2>&1 | FileCheck %s --check-prefix=MANIFEST
// RUN: ln -s /dev/full %t/constant/scaled_const0.bin
// RUN: not env PYTHONPATH=%kiln_python %python -c "import sys; from kiln import _kiln; _kiln.compile_gpu(open(sys.argv[1]).read(), 'sm_90a', sys.argv[2])" %s %t/constant 2>&1 | FileCheck %s --check-prefix=CONSTANT

// PTX-NOT: LLVM ERROR
// PTX: CompileError: compiling for sm_90a failed: cannot write {{.*}}ptx{{/|\\}}scaled_k0_mul_module.ptx: No space left on device
// CUBIN-NOT: LLVM ERROR
// CUBIN: CompileError: compiling for sm_90a failed: ptxas wrote an incomplete cubin {{.*}}scaled_k0_mul_module.sm_90a.cubin (not a regular file; is the disk full?)
// MANIFEST-NOT: LLVM ERROR
// MANIFEST: CompileError: compiling for sm_90a failed: cannot write {{.*}}manifest{{/|\\}}manifest.json: No space left on device
// CONSTANT-NOT: LLVM ERROR
// CONSTANT: CompileError: compiling for sm_90a failed: the run plan stage failed
// CONSTANT: <kiln source>:[[@LINE+2]]:8: error: 'kiln.constant' op kilnc: cannot write {{.*}}scaled_const0.bin: No space left on device
func.func @scaled(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = kiln.constant dense<1.5> : tensor<4x8xf32>
  %r = kiln.mul %a, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
