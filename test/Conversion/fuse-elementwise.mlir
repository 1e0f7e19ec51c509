// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-fuse-elementwise))' | FileCheck %s

// RoPE over heads after a [B, S, H, D] -> [B, H, S, D] transpose: the body
// reads each element's rotation partner with tensor.extract from the
// transposed tensor. The extract reads the transpose's input at permuted
// indices, the transpose fuses into the generic's input map, and one
// generic over [B, H, S, D] reads x [B, S, H, D] directly.
// CHECK-DAG: #[[$PERM:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func.func @rope_after_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x4x8xf32>
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[$PERM]], #{{.*}}]
// CHECK-SAME: ins(%[[X]] : tensor<1x?x4x8xf32>)
// CHECK: %[[H:.*]] = linalg.index 1
// CHECK: %[[S:.*]] = linalg.index 2
// CHECK: tensor.extract %[[X]][%{{.*}}, %[[S]], %[[H]], %{{.*}}] : tensor<1x?x4x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @rope_after_transpose(%x: tensor<1x?x4x8xf32>) -> tensor<1x4x?x8xf32> {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %s = tensor.dim %x, %c1 : tensor<1x?x4x8xf32>
  %e = tensor.empty(%s) : tensor<1x4x?x8xf32>
  %t = linalg.transpose ins(%x : tensor<1x?x4x8xf32>) outs(%e : tensor<1x4x?x8xf32>)
         permutation = [0, 2, 1, 3]
  %o = tensor.empty(%s) : tensor<1x4x?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                                        affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%t : tensor<1x4x?x8xf32>) outs(%o : tensor<1x4x?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %b = linalg.index 0 : index
    %h = linalg.index 1 : index
    %q = linalg.index 2 : index
    %d = linalg.index 3 : index
    %p = arith.addi %d, %c4 : index
    %pd = arith.remui %p, %c8 : index
    %partner = tensor.extract %t[%b, %h, %q, %pd] : tensor<1x4x?x8xf32>
    %y = arith.subf %in, %partner : f32
    linalg.yield %y : f32
  } -> tensor<1x4x?x8xf32>
  return %r : tensor<1x4x?x8xf32>
}

// -----

// A transpose feeding a library call (the attention routine reads its
// operands as they are) stays; so does one with two generic consumers.
// CHECK-LABEL: func.func @transpose_kept
// CHECK: linalg.transpose
// CHECK: library_call = "h20_gemm"
// CHECK: linalg.transpose
// CHECK: linalg.generic
// CHECK: linalg.generic
func.func @transpose_kept(%x: tensor<4x8xf32>, %w: tensor<4x4xf32>, %y: tensor<4x8xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%x : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>,
                                        affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"], library_call = "h20_gemm"}
      ins(%t, %w : tensor<8x4xf32>, tensor<4x4xf32>) outs(%f : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  %t2 = linalg.transpose ins(%y : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %n1 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%t2 : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<8x4xf32>
  %n2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%t2 : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = math.exp %a : f32
    linalg.yield %n : f32
  } -> tensor<8x4xf32>
  return %g, %n1, %n2 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Elementwise chains fuse (SiLU: x * sigmoid(x) as two generics).
// CHECK-LABEL: func.func @silu_chain
// CHECK: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @silu_chain(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = tensor.empty() : tensor<16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    %ex = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %ex : f32
    %r = arith.divf %one, %d : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x, %s : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

// RoPE in its half-split form reads the transposed input twice (channel
// t * 4 + j and partner (1 - t) * 4 + j): a transpose whose uses are all
// inputs of one generic fuses into each, both reads become reads of
// x [B, S, H, D] at permuted indices, and no transpose is left.
// CHECK-DAG: #[[$XCH:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, d3 * 4 + d4)>
// CHECK-DAG: #[[$XPA:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, (-d3 + 1) * 4 + d4)>
// CHECK-LABEL: func.func @transpose_read_twice
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x2x8xf32>
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [{{.*}}#[[$XCH]]{{.*}}#[[$XPA]]{{.*}}]
// CHECK-SAME: ins(%{{.*}}, %[[X]], %[[X]]{{.*}} : {{.*}}tensor<1x?x2x8xf32>, tensor<1x?x2x8xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @transpose_read_twice(%x: tensor<1x?x2x8xf32>, %c: tensor<1x?x4xf32>, %sg: tensor<2xf32>) -> tensor<1x2x?x8xf32> {
  %c1 = arith.constant 1 : index
  %s = tensor.dim %x, %c1 : tensor<1x?x2x8xf32>
  %e = tensor.empty(%s) : tensor<1x2x?x8xf32>
  %t = linalg.transpose ins(%x : tensor<1x?x2x8xf32>) outs(%e : tensor<1x2x?x8xf32>)
         permutation = [0, 2, 1, 3]
  %o = tensor.empty(%s) : tensor<1x2x?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 4 + d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, (1 - d3) * 4 + d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d3)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 4 + d4)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %t, %t, %sg : tensor<1x?x4xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<2xf32>) outs(%o : tensor<1x2x?x8xf32>) {
  ^bb0(%cs: f32, %in: f32, %partner: f32, %sign: f32, %out: f32):
    %m = arith.mulf %in, %cs : f32
    %q = arith.mulf %sign, %partner : f32
    %y = arith.addf %m, %q : f32
    linalg.yield %y : f32
  } -> tensor<1x2x?x8xf32>
  return %r : tensor<1x2x?x8xf32>
}

// -----

// The same transpose also returned: it has a use outside the consumer, so
// it stays (fusing it would compute it twice) and the generic reads it.
// CHECK-LABEL: func.func @transpose_read_twice_and_returned
// CHECK: %[[T:.*]] = linalg.transpose
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %[[T]], %[[T]],
// CHECK: return %[[T]], %{{.*}} :
func.func @transpose_read_twice_and_returned(%x: tensor<1x?x2x8xf32>, %c: tensor<1x?x4xf32>, %sg: tensor<2xf32>) -> (tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>) {
  %c1 = arith.constant 1 : index
  %s = tensor.dim %x, %c1 : tensor<1x?x2x8xf32>
  %e = tensor.empty(%s) : tensor<1x2x?x8xf32>
  %t = linalg.transpose ins(%x : tensor<1x?x2x8xf32>) outs(%e : tensor<1x2x?x8xf32>)
         permutation = [0, 2, 1, 3]
  %o = tensor.empty(%s) : tensor<1x2x?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 4 + d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, (1 - d3) * 4 + d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d3)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 4 + d4)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %t, %t, %sg : tensor<1x?x4xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<2xf32>) outs(%o : tensor<1x2x?x8xf32>) {
  ^bb0(%cs: f32, %in: f32, %partner: f32, %sign: f32, %out: f32):
    %m = arith.mulf %in, %cs : f32
    %q = arith.mulf %sign, %partner : f32
    %y = arith.addf %m, %q : f32
    linalg.yield %y : f32
  } -> tensor<1x2x?x8xf32>
  return %t, %r : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>
}

// -----

// A transpose whose only use is a generic's output init is not an input
// the fusion could fold: it stays a linalg.transpose.
// CHECK-LABEL: func.func @transpose_as_init
// CHECK: %[[T:.*]] = linalg.transpose
// CHECK: linalg.generic
// CHECK-SAME: outs(%[[T]] :
func.func @transpose_as_init(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%x : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x4xf32>) outs(%t : tensor<8x4xf32>) {
  ^bb0(%a: f32, %out: f32):
    %m = arith.addf %a, %out : f32
    linalg.yield %m : f32
  } -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A producer that computes (here a cos per position, standing for RoPE's
// table gathers) and is read by two inputs of one consumer at different
// indices stays its own op: fusing it would compute it once per read.
// CHECK-LABEL: func.func @computing_producer_read_twice
// CHECK: math.cos
// CHECK: linalg.yield
// CHECK: linalg.generic
// CHECK-NOT: math.cos
// CHECK: return
func.func @computing_producer_read_twice(%p: tensor<1x?x4xf32>, %x: tensor<1x2x?x8xf32>, %sg: tensor<2xf32>) -> tensor<1x2x?x8xf32> {
  %c1 = arith.constant 1 : index
  %s = tensor.dim %p, %c1 : tensor<1x?x4xf32>
  %e = tensor.empty(%s) : tensor<1x?x4xf32>
  %cos = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                          affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                         iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<1x?x4xf32>) outs(%e : tensor<1x?x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = math.cos %in : f32
    linalg.yield %c : f32
  } -> tensor<1x?x4xf32>
  %o = tensor.empty(%s) : tensor<1x2x?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, 3 - d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 4 + d4)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d3)>,
                                        affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 4 + d4)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%cos, %cos, %x, %sg : tensor<1x?x4xf32>, tensor<1x?x4xf32>, tensor<1x2x?x8xf32>, tensor<2xf32>) outs(%o : tensor<1x2x?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %in: f32, %sign: f32, %out: f32):
    %m = arith.mulf %in, %a : f32
    %n = arith.mulf %sign, %b : f32
    %y = arith.addf %m, %n : f32
    linalg.yield %y : f32
  } -> tensor<1x2x?x8xf32>
  return %r : tensor<1x2x?x8xf32>
}

// -----

// A [t, 4] row sum rounded to bf16, reshaped to [t, 4, 1] and divided into
// [t, 4, 4] (a V4.1 Sinkhorn step): the divide reads the rounded sum
// through the unit dim it was given, so the cast fuses into it and one
// generic is left (the reshape's inserted dim, read at 0, is dropped from
// the map).
// CHECK-LABEL: func.func @unit_reshape
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %arg1 : tensor<?x4x4xf32>, tensor<?x4xf32>)
// CHECK: arith.truncf
// CHECK: arith.divf
// CHECK-NOT: linalg.generic
// CHECK-NOT: tensor.reshape
#i2 = affine_map<(d0, d1) -> (d0, d1)>
#i3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#s3 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
func.func @unit_reshape(%x: tensor<?x4x4xf32>, %sum: tensor<?x4xf32>) -> tensor<?x4x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t = tensor.dim %x, %c0 : tensor<?x4x4xf32>
  %e = tensor.empty(%t) : tensor<?x4xbf16>
  %r = linalg.generic {indexing_maps = [#i2, #i2], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<?x4xf32>) outs(%e : tensor<?x4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %b = arith.truncf %a : f32 to bf16
    linalg.yield %b : bf16
  } -> tensor<?x4xbf16>
  %shape = tensor.from_elements %t, %c4, %c1 : tensor<3xindex>
  %rs = tensor.reshape %r(%shape) : (tensor<?x4xbf16>, tensor<3xindex>) -> tensor<?x4x1xbf16>
  %e2 = tensor.empty(%t) : tensor<?x4x4xf32>
  %y = linalg.generic {indexing_maps = [#i3, #s3, #i3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %rs : tensor<?x4x4xf32>, tensor<?x4x1xbf16>) outs(%e2 : tensor<?x4x4xf32>) {
  ^bb0(%v: f32, %s: bf16, %o: f32):
    %w = arith.extf %s : bf16 to f32
    %q = arith.divf %v, %w : f32
    linalg.yield %q : f32
  } -> tensor<?x4x4xf32>
  return %y : tensor<?x4x4xf32>
}
