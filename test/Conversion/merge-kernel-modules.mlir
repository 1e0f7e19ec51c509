// RUN: h20-opt %s --split-input-file --h20-merge-kernel-modules --verify-diagnostics | FileCheck %s

// Two outlined kernels, one gpu.module each, become h20_kernels::<module
// name>, and their launches follow.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: func.func @main
// CHECK: gpu.launch_func  @h20_kernels::@main_kernel blocks
// CHECK: gpu.launch_func  @h20_kernels::@main_kernel_0 blocks
// CHECK-NOT: gpu.module @main_kernel
// CHECK: gpu.module @h20_kernels {
// CHECK: gpu.func @main_kernel(%{{.*}}: memref<4xf32>) kernel
// CHECK: gpu.func @main_kernel_0(%{{.*}}: memref<4xf32>) kernel
module attributes {gpu.container_module} {
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    gpu.func @main_kernel(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
}

// -----

// Identical kernels (two layers of one kind) are kept once: both launches
// of the first and the third module run @k; the different one stays.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.launch_func  @h20_kernels::@k blocks
// CHECK: gpu.launch_func  @h20_kernels::@k_0 blocks
// CHECK: gpu.launch_func  @h20_kernels::@k blocks
// CHECK: gpu.module @h20_kernels {
// CHECK: gpu.func @k(
// CHECK: gpu.func @k_0(
// CHECK-NOT: gpu.func
module attributes {gpu.container_module} {
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @k_0::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @k_1::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
  gpu.module @k {
    gpu.func @k(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @k_0 {
    gpu.func @k(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = arith.constant 2.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @k_1 {
    gpu.func @k(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
}

// -----

// The merged module's name is taken: refused, not silently merged into it.
module attributes {gpu.container_module} {
  // expected-error @+1 {{h20-merge-kernel-modules: a gpu.module is already named 'h20_kernels'}}
  gpu.module @h20_kernels {
  }
}
