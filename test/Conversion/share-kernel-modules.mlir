// RUN: kiln-opt %s -kiln-share-kernel-modules -split-input-file | FileCheck %s

// kiln-share-kernel-modules keeps one gpu.module per distinct kernel. @b_module is @a_module but for the names of
// the module, its kernel and its shared-memory global: it goes, and @b's host function launches @a's kernel.
// @c_module differs in one constant (a size baked in) and stays. Each host function keeps its own launch.
// CHECK-LABEL: func.func private @a(
// CHECK-SAME: kiln.gpu_kernel = @a_module::@a
// CHECK-SAME: sizes = array<i64: 64, 32, 16>
// CHECK-LABEL: func.func private @b(
// CHECK-SAME: kiln.gpu_kernel = @a_module::@a
// CHECK-SAME: sizes = array<i64: 128, 64, 16>
// CHECK-LABEL: func.func private @c(
// CHECK-SAME: kiln.gpu_kernel = @c_module::@c
// CHECK: gpu.module @a_module
// CHECK: memref.global "public" @a_smem
// CHECK: gpu.func @a(
// CHECK: memref.get_global @a_smem
// CHECK-NOT: gpu.module @b_module
// CHECK: gpu.module @c_module
// CHECK: gpu.func @c(
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func private @a(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @a_module::@a, kiln.launch = {block = array<i64: 32, 1, 1>, dynamic_shared_bytes = 0 : i64, grid = array<i64: 1, 1, 1>, sizes = array<i64: 64, 32, 16>}} {
    return %x : tensor<4xf32>
  }
  func.func private @b(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @b_module::@b, kiln.launch = {block = array<i64: 32, 1, 1>, dynamic_shared_bytes = 0 : i64, grid = array<i64: 2, 1, 1>, sizes = array<i64: 128, 64, 16>}} {
    return %x : tensor<4xf32>
  }
  func.func private @c(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @c_module::@c} {
    return %x : tensor<4xf32>
  }
  gpu.module @a_module {
    memref.global "public" @a_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    gpu.func @a(%arg0: memref<4xf32>, %n: index) kernel {
      %smem = memref.get_global @a_smem : memref<0xi8, #gpu.address_space<workgroup>>
      %c1 = arith.constant 1 : index
      %v = memref.load %arg0[%n] : memref<4xf32>
      memref.store %v, %arg0[%c1] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @b_module {
    memref.global "public" @b_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    gpu.func @b(%arg0: memref<4xf32>, %n: index) kernel {
      %smem = memref.get_global @b_smem : memref<0xi8, #gpu.address_space<workgroup>>
      %c1 = arith.constant 1 : index
      %v = memref.load %arg0[%n] : memref<4xf32>
      memref.store %v, %arg0[%c1] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @c_module {
    memref.global "public" @c_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    gpu.func @c(%arg0: memref<4xf32>, %n: index) kernel {
      %smem = memref.get_global @c_smem : memref<0xi8, #gpu.address_space<workgroup>>
      %c2 = arith.constant 2 : index
      %v = memref.load %arg0[%n] : memref<4xf32>
      memref.store %v, %arg0[%c2] : memref<4xf32>
      gpu.return
    }
  }
}

// -----

// The symbols are matched by position: @y_module's kernel refers to its own helper function under another name,
// and is still the same kernel as @x_module's, whose kernel and helper @y's host function now names.
// CHECK-LABEL: func.func private @x(
// CHECK-SAME: kiln.gpu_kernel = @x_module::@x
// CHECK-LABEL: func.func private @y(
// CHECK-SAME: kiln.gpu_kernel = @x_module::@x
// CHECK: gpu.module @x_module
// CHECK: func.func @x_helper
// CHECK: gpu.func @x(
// CHECK: call @x_helper
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func private @x(%v: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @x_module::@x} {
    return %v : tensor<4xf32>
  }
  func.func private @y(%v: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.gpu_kernel = @y_module::@y} {
    return %v : tensor<4xf32>
  }
  gpu.module @x_module {
    func.func @x_helper(%arg0: memref<4xf32>) {
      return
    }
    gpu.func @x(%arg0: memref<4xf32>) kernel {
      func.call @x_helper(%arg0) : (memref<4xf32>) -> ()
      gpu.return
    }
  }
  gpu.module @y_module {
    func.func @y_helper(%arg0: memref<4xf32>) {
      return
    }
    gpu.func @y(%arg0: memref<4xf32>) kernel {
      func.call @y_helper(%arg0) : (memref<4xf32>) -> ()
      gpu.return
    }
  }
}
