// RUN: kiln-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(gpu.module(kiln-tensor-map-params))' | FileCheck %s

// The tensor maps a lowered kernel lists become 128-byte by-value parameters, 64-byte aligned and grid constants
// (the address the TMA copies use is the parameter's own); the list goes, the other parameters stay as they are.
// CHECK-LABEL: gpu.module @maps
// CHECK: llvm.func @k(%{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// CHECK-SAME: attributes {gpu.kernel, nvvm.kernel}
// CHECK-NOT: kiln.tensor_map_params
gpu.module @maps {
  llvm.func @k(%a: !llvm.ptr, %n: i64, %mapA: !llvm.ptr, %mapB: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel, kiln.tensor_map_params = array<i64: 2, 3>} {
    llvm.return
  }
}

// -----

// A kernel without the list is left alone.
// CHECK-LABEL: gpu.module @none
// CHECK: llvm.func @k(%{{.*}}: !llvm.ptr, %{{.*}}: i64) attributes {gpu.kernel, nvvm.kernel}
gpu.module @none {
  llvm.func @k(%a: !llvm.ptr, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
    llvm.return
  }
}

// -----

gpu.module @not_a_pointer {
  // expected-error @+1 {{kiln.tensor_map_params lists parameter 1, which is not one of its pointer parameters}}
  llvm.func @k(%a: !llvm.ptr, %n: i64) attributes {gpu.kernel, nvvm.kernel, kiln.tensor_map_params = array<i64: 1>} {
    llvm.return
  }
}

// -----

gpu.module @out_of_range {
  // expected-error @+1 {{kiln.tensor_map_params lists parameter 4, which is not one of its pointer parameters}}
  llvm.func @k(%a: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel, kiln.tensor_map_params = array<i64: 4>} {
    llvm.return
  }
}
