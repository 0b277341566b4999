// RUN: kiln-opt %s -kiln-split-kernel-modules -split-input-file | FileCheck %s

// kiln-split-kernel-modules gives every kernel a gpu.module of its own, so that the compile lowers, emits and
// assembles kernels in parallel. Each new module takes what its kernel uses of the old one (its shared-memory
// global, a device function and what that uses) and nothing else, but every op that is no symbol (the module
// flags) goes with each kernel; the host functions follow their kernels. The name `a_module` is taken by a host
// function, so kernel `a`'s module is renamed.
// CHECK-LABEL: func.func private @a(
// CHECK-SAME: kiln.gpu_kernel = @[[AMOD:a_module_[0-9]+]]::@a
// CHECK-LABEL: func.func private @b(
// CHECK-SAME: kiln.gpu_kernel = @b_module::@b
// CHECK-LABEL: func.func @a_module(
// CHECK-NOT: gpu.module @kiln_kernels
// CHECK: gpu.module @[[AMOD]] {
// CHECK-NEXT: llvm.module_flags [#llvm.mlir.module_flag<override, "nvvm-reflect-ftz", 1 : i32>]
// CHECK-NEXT: memref.global "public" @a_smem
// CHECK-NEXT: gpu.func @a(
// CHECK-NOT: @b_smem
// CHECK-NOT: @helper
// CHECK: gpu.module @b_module {
// CHECK-NEXT: llvm.module_flags [#llvm.mlir.module_flag<override, "nvvm-reflect-ftz", 1 : i32>]
// CHECK-NEXT: memref.global "public" @b_smem
// CHECK-NEXT: func.func @helper(
// CHECK: func.func @leaf(
// CHECK: gpu.func @b(
// CHECK-NOT: @a_smem
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func private @a(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @kiln_kernels::@a} {
    return %x : tensor<4xf32>
  }
  func.func private @b(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @kiln_kernels::@b} {
    return %x : tensor<4xf32>
  }
  func.func @a_module(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  gpu.module @kiln_kernels {
    llvm.module_flags [#llvm.mlir.module_flag<override, "nvvm-reflect-ftz", 1 : i32>]
    memref.global "public" @a_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    memref.global "public" @b_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    func.func @helper(%arg0: memref<4xf32>) {
      func.call @leaf(%arg0) : (memref<4xf32>) -> ()
      return
    }
    func.func @leaf(%arg0: memref<4xf32>) {
      return
    }
    gpu.func @a(%arg0: memref<4xf32>) kernel {
      %smem = memref.get_global @a_smem : memref<0xi8, #gpu.address_space<workgroup>>
      gpu.return
    }
    gpu.func @b(%arg0: memref<4xf32>) kernel {
      %smem = memref.get_global @b_smem : memref<0xi8, #gpu.address_space<workgroup>>
      func.call @helper(%arg0) : (memref<4xf32>) -> ()
      gpu.return
    }
  }
}

// -----

// A module of one kernel moves too: every kernel's files are named after its own module.
// CHECK-LABEL: func.func private @only(
// CHECK-SAME: kiln.gpu_kernel = @only_module::@only
// CHECK: gpu.module @only_module {
// CHECK-NEXT: gpu.func @only(
module attributes {gpu.container_module} {
  func.func private @only(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @kiln_kernels::@only} {
    return %x : tensor<4xf32>
  }
  gpu.module @kiln_kernels {
    gpu.func @only(%arg0: memref<4xf32>) kernel {
      gpu.return
    }
  }
}
