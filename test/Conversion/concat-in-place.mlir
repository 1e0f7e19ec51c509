// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-concat-in-place))' | FileCheck %s

// RoPE on the last 64 of 512 channels: x split into [a | b], b rotated,
// concat(a, rope(b)). The concat becomes an insert of rope(b) into x
// itself: a (x's own slice at its own place) is not copied.
// CHECK-LABEL: func.func @rope_part
// CHECK: %[[X:.*]] = tensor.reshape
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-NOT: tensor.empty(%arg1) : tensor<1x4x?x16xf32>
// CHECK: %[[Y:.*]] = tensor.insert_slice %[[R]] into %[[X]][0, 0, 0, 12] [1, 4, %arg1, 4] [1, 1, 1, 1]
// CHECK-NEXT: return %[[Y]]
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @rope_part(%src: tensor<4x?x16xf32>, %n: index) -> tensor<1x4x?x16xf32> {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %shape = tensor.from_elements %c1, %c4, %n, %c16 : tensor<4xindex>
  %x = tensor.reshape %src(%shape) : (tensor<4x?x16xf32>, tensor<4xindex>) -> tensor<1x4x?x16xf32>
  %a = tensor.extract_slice %x[0, 0, 0, 0] [1, 4, %n, 12] [1, 1, 1, 1] : tensor<1x4x?x16xf32> to tensor<1x4x?x12xf32>
  %b = tensor.extract_slice %x[0, 0, 0, 12] [1, 4, %n, 4] [1, 1, 1, 1] : tensor<1x4x?x16xf32> to tensor<1x4x?x4xf32>
  %e = tensor.empty(%n) : tensor<1x4x?x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%b : tensor<1x4x?x4xf32>) outs(%e : tensor<1x4x?x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.negf %v : f32
    linalg.yield %m : f32
  } -> tensor<1x4x?x4xf32>
  %c = tensor.empty(%n) : tensor<1x4x?x16xf32>
  %i0 = tensor.insert_slice %a into %c[0, 0, 0, 0] [1, 4, %n, 12] [1, 1, 1, 1] : tensor<1x4x?x12xf32> into tensor<1x4x?x16xf32>
  %i1 = tensor.insert_slice %r into %i0[0, 0, 0, 12] [1, 4, %n, 4] [1, 1, 1, 1] : tensor<1x4x?x4xf32> into tensor<1x4x?x16xf32>
  return %i1 : tensor<1x4x?x16xf32>
}

// -----

// Left alone: the slice is taken elsewhere than where it is inserted; the
// source's rows are not provably the concat's (an argument of dynamic
// size); the pieces do not cover the whole axis.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-6: tensor.insert_slice
func.func @kept(%x: tensor<2x16xf32>, %y: tensor<?x16xf32>, %n: index, %r: tensor<2x4xf32>, %s: tensor<?x4xf32>) -> (tensor<2x16xf32>, tensor<?x16xf32>, tensor<2x16xf32>) {
  %a = tensor.extract_slice %x[0, 4] [2, 12] [1, 1] : tensor<2x16xf32> to tensor<2x12xf32>
  %c = tensor.empty() : tensor<2x16xf32>
  %i0 = tensor.insert_slice %a into %c[0, 0] [2, 12] [1, 1] : tensor<2x12xf32> into tensor<2x16xf32>
  %i1 = tensor.insert_slice %r into %i0[0, 12] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x16xf32>
  %b = tensor.extract_slice %y[0, 0] [%n, 12] [1, 1] : tensor<?x16xf32> to tensor<?x12xf32>
  %d = tensor.empty(%n) : tensor<?x16xf32>
  %j0 = tensor.insert_slice %b into %d[0, 0] [%n, 12] [1, 1] : tensor<?x12xf32> into tensor<?x16xf32>
  %j1 = tensor.insert_slice %s into %j0[0, 12] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<?x16xf32>
  %g = tensor.extract_slice %x[0, 0] [2, 8] [1, 1] : tensor<2x16xf32> to tensor<2x8xf32>
  %h = tensor.empty() : tensor<2x16xf32>
  %k0 = tensor.insert_slice %g into %h[0, 0] [2, 8] [1, 1] : tensor<2x8xf32> into tensor<2x16xf32>
  %k1 = tensor.insert_slice %r into %k0[0, 12] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x16xf32>
  return %i1, %j1, %k1 : tensor<2x16xf32>, tensor<?x16xf32>, tensor<2x16xf32>
}
