// RUN: h20-opt %s --split-input-file --h20-outline-kernels --verify-diagnostics | FileCheck %s

// Two launches with different bodies: two kernels in one gpu.module, named
// as upstream outlining names its modules; the values used from above
// become arguments.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: func.func @main
// CHECK: gpu.launch_func  @h20_kernels::@main_kernel blocks in ({{.*}}) threads in ({{.*}}) args(%{{.*}} : memref<4xf32>)
// CHECK: gpu.launch_func  @h20_kernels::@main_kernel_0 blocks
// CHECK-NOT: gpu.launch blocks
// CHECK: gpu.module @h20_kernels {
// CHECK: gpu.func @main_kernel(%{{.*}}: memref<4xf32>) kernel
// CHECK: gpu.func @main_kernel_0(%{{.*}}: memref<4xf32>) kernel
// CHECK-NOT: gpu.module
module {
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.terminator
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %c0 = arith.constant 0 : index
      %x = arith.constant 2.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.terminator
    }
    return
  }
}

// -----

// Identical kernels (two layers of one kind) are kept once: the first and
// third launch both run @main_kernel; the third's name is used up anyway.
// A top-level symbol named like a kernel moves the names on (main_kernel
// is taken here).
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.launch_func  @h20_kernels::@main_kernel_0 blocks
// CHECK: gpu.launch_func  @h20_kernels::@main_kernel_1 blocks
// CHECK: gpu.launch_func  @h20_kernels::@main_kernel_0 blocks
// CHECK: gpu.module @h20_kernels {
// CHECK: gpu.func @main_kernel_0(
// CHECK: gpu.func @main_kernel_1(
// CHECK-NOT: gpu.func
module {
  func.func private @main_kernel()
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.terminator
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %c0 = arith.constant 0 : index
      %x = arith.constant 2.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.terminator
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.terminator
    }
    return
  }
}

// -----

// A module-level symbol a kernel reads is copied into the gpu.module.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @h20_kernels {
// CHECK-DAG: gpu.func @main_kernel(
// CHECK-DAG: memref.global "private" constant @table : memref<4xf32>
module {
  memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %c0 = arith.constant 0 : index
      %t = memref.get_global @table : memref<4xf32>
      %x = memref.load %t[%c0] : memref<4xf32>
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.terminator
    }
    return
  }
}

// -----

// The module's name is taken: refused, not silently merged into it.
module {
  // expected-error @+1 {{h20-outline-kernels: a symbol is already named 'h20_kernels'}}
  func.func private @h20_kernels()
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      gpu.terminator
    }
    return
  }
}

// -----

// A launch that names its own module and function is refused: every
// kernel goes into the one module.
module {
  func.func @main(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    // expected-error @+1 {{h20-outline-kernels: this launch names its own kernel module or function; every kernel goes into 'h20_kernels'}}
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@mine) function(@k) {
      gpu.terminator
    }
    return
  }
}
