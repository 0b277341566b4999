// kilnc writes into a staging folder and puts the compile in place only once it has written everything: into a
// new output folder, or over an earlier compile's folder, whose files (named by its manifest) it replaces while
// other files stay. A failed compile leaves the folder as it was and no staging folder behind.
// (test_bad_inputs.py::test_kilnc_interrupted_leaves_no_partial_folder interrupts one.)

// RUN: rm -rf %t && mkdir -p %t
// RUN: kilnc %S/../../examples/gpu_attention_block.mlir --target=sm_90a -o %t/out
// RUN: touch %t/out/notes.txt
// RUN: kilnc %s --target=sm_90a -o %t/out
// RUN: ls -A %t/out | FileCheck %s --check-prefix=REPLACED
// REPLACED-NOT: gpu_attention_block
// REPLACED: manifest.json
// REPLACED-NEXT: notes.txt
// REPLACED-NEXT: small_k0_add_module.ptx
// REPLACED-NOT: gpu_attention_block
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/out/manifest.json
// MANIFEST-NOT: gpu_attention_block
// MANIFEST: "name": "small_k0_add"

// A failed compile over it (an op the verifier refuses, an assembler that fails after the PTX is written):
// the folder as it was, nothing beside it.
// RUN: ls -A %t/out > %t/before
// RUN: sed -e 's/bf16/i1/g' %s > %t/int.mlir
// RUN: not kilnc %t/int.mlir --target=sm_90a -o %t/out
// RUN: ls -A %t/out | diff %t/before -
// RUN: mkdir -p %t/bin && printf '#!/bin/sh\necho "ptxas fatal: broken" >&2\nexit 1\n' > %t/bin/ptxas && chmod +x %t/bin/ptxas
// RUN: not env PATH=%t/bin:%PATH% kilnc %S/../../examples/gpu_attention_block.mlir --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=ASSEMBLER
// ASSEMBLER: kilnc: error: ptxas failed on {{.*}}.ptx: ptxas fatal: broken
// RUN: ls -A %t/out | diff %t/before -
// RUN: not kilnc %t/int.mlir --target=sm_90a -o %t/new
// RUN: ls -A %t | FileCheck %s --check-prefix=NOTHING-LEFT
// NOTHING-LEFT-NOT: staging
// NOTHING-LEFT-NOT: new

func.func @small(%a: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %r = kiln.add %a, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %r : tensor<4x8xbf16>
}
