// RUN: h20-opt %s --split-input-file --h20-outline-loop-nests | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-outline-loop-nests=min-ops=10 | FileCheck %s --check-prefix=MIN
// RUN: h20-opt %s --split-input-file --h20-outline-loop-nests | FileCheck %s --check-prefix=DEDUP
// (An elision limit for printing must not make different constants equal.)
// RUN: h20-opt %s --split-input-file --h20-outline-loop-nests --mlir-elide-elementsattrs-if-larger=1 | FileCheck %s --check-prefix=ELIDE

// Each top-level loop nest becomes a call of a private, internal, noinline
// function; what the nest uses from above is passed (memrefs, a dynamic
// bound), constants are cloned into it; the loop itself is unchanged.
// CHECK-LABEL: func.func @main(%arg0: memref<8xf32>, %arg1: memref<8xf32>, %arg2: index)
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[C8:.*]] = arith.constant 8 : index
// CHECK-NEXT: arith.constant 2.000000e+00 : f32
// CHECK-NEXT: call @main_loop0(%arg0, %arg1) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: call @main_loop1(%arg1, %arg2) : (memref<8xf32>, index) -> ()
// CHECK-NEXT: return
// CHECK: func.func private @main_loop1(%arg0: memref<8xf32>, %arg1: index) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK: scf.for %{{.*}} = %{{.*}} to %arg1 step
// CHECK: func.func private @main_loop0(%arg0: memref<8xf32>, %arg1: memref<8xf32>) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-DAG: arith.constant 0 : index
// CHECK-DAG: arith.constant 8 : index
// CHECK-DAG: arith.constant 2.000000e+00 : f32
// CHECK: scf.for
// CHECK: memref.load %arg0
// CHECK: arith.mulf
// CHECK: memref.store %{{.*}}, %arg1
// MIN-LABEL: func.func @main
// MIN: call @main_loop0
// MIN-NOT: call @main_loop1
// MIN: scf.for
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %two = arith.constant 2.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.mulf %x, %two : f32
    %z = arith.addf %y, %two : f32
    %w = arith.mulf %z, %z : f32
    %v = arith.subf %w, %x : f32
    %u = arith.mulf %v, %v : f32
    %t = arith.addf %u, %y : f32
    %s = arith.mulf %t, %two : f32
    %r = arith.addf %s, %x : f32
    %q = arith.mulf %r, %two : f32
    %p = arith.addf %q, %w : f32
    %o = arith.mulf %p, %two : f32
    %m = arith.addf %o, %v : f32
    %l = arith.mulf %m, %two : f32
    %k = arith.addf %l, %u : f32
    memref.store %k, %b[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %n step %c1 {
    memref.store %two, %b[%c0] : memref<8xf32>
  }
  return
}

// -----

// Private functions and nests with results stay as they are.
// CHECK-LABEL: func.func private @helper
// CHECK-NEXT: arith.constant
// CHECK: scf.for
// CHECK-NOT: call
func.func private @helper(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %one, %a[%i] : memref<8xf32>
  }
  return
}

// -----

// Equal nests (the same operations on arguments of the same types) share
// one function; a nest that differs (another constant) gets its own.
// CHECK-LABEL: func.func @layers(
// DEDUP-LABEL: func.func @layers(%arg0: memref<8xf32>, %arg1: memref<8xf32>)
// DEDUP: call @layers_loop0(%arg0, %arg1)
// DEDUP-NEXT: call @layers_loop0(%arg1, %arg0)
// DEDUP-NEXT: call @layers_loop1(%arg0, %arg1)
// DEDUP-NEXT: return
// DEDUP-COUNT-2: func.func private @layers_loop
// DEDUP-NOT: func.func private
func.func @layers(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %b[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %b[%i] : memref<8xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %a[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.mulf %x, %three : f32
    memref.store %y, %b[%i] : memref<8xf32>
  }
  return
}

// -----

// CHECK-LABEL: func.func @tables
// DEDUP-LABEL: func.func @tables
// ELIDE-LABEL: func.func @tables
// ELIDE: call @tables_loop0
// ELIDE: call @tables_loop1
func.func @tables(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t1 = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : vector<4xf32>
  %t2 = arith.constant dense<[5.0, 6.0, 7.0, 8.0]> : vector<4xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = vector.extract %t1[%i] : f32 from vector<4xf32>
    memref.store %x, %a[%i] : memref<4xf32>
  }
  scf.for %i = %c0 to %c4 step %c1 {
    %x = vector.extract %t2[%i] : f32 from vector<4xf32>
    memref.store %x, %a[%i] : memref<4xf32>
  }
  return
}
