// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops{block-size=128}))' | FileCheck %s
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops{block-size=128 vector-width=1}))' | FileCheck %s --check-prefix=SCALAR

// RMSNorm's apply step: x [?, 4096] and the weight [4096] are read along the
// innermost loop (vectors of 8), the row's scale [?] is one element per
// iteration (broadcast), the constant becomes a splat; the innermost loop
// runs 4096 / 8 = 512 times. Rows of 8192 bytes from a 256-byte aligned
// base: every vector access is 16-byte aligned.
// CHECK-LABEL: func.func @norm_apply
// CHECK-DAG: %[[C512:.*]] = arith.constant 512 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: scf.parallel
// CHECK: arith.muli %{{.*}}, %[[C8]] : index
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
// CHECK: memref.load %{{.*}} : memref<?xf32>
// CHECK: vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<4096xbf16>, vector<8xbf16>
// CHECK: arith.constant dense<2.000000e+00> : vector<8xf32>
// CHECK: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
// CHECK: processor = thread_x
// CHECK: processor = block_x
// SCALAR-LABEL: func.func @norm_apply
// SCALAR-NOT: vector.
// SCALAR: memref.store
func.func @norm_apply(%x: memref<?x4096xbf16>, %r: memref<?xf32>, %w: memref<4096xbf16>,
                      %y: memref<?x4096xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>,
                                   affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %r, %w : memref<?x4096xbf16>, memref<?xf32>, memref<4096xbf16>)
      outs(%y : memref<?x4096xbf16>) {
  ^bb0(%a: bf16, %s: f32, %g: bf16, %o: bf16):
    %two = arith.constant 2.0 : f32
    %af = arith.extf %a : bf16 to f32
    %gf = arith.extf %g : bf16 to f32
    %m = arith.mulf %af, %s : f32
    %n = arith.mulf %m, %gf : f32
    %p = arith.mulf %n, %two : f32
    %t = arith.truncf %p : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A copy into a strided view with unit innermost stride (a KV-cache slot):
// linalg.copy is generalized, then vectorized. The view is an argument with
// a dynamic offset: nothing is known of its alignment.
// CHECK-LABEL: func.func @copy_into_cache
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<32x?x128xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}}] : memref<32x?x128xbf16, strided<[524288, 128, 1], offset: ?>>, vector<8xbf16>
func.func @copy_into_cache(%src: memref<32x?x128xbf16>,
                           %dst: memref<32x?x128xbf16, strided<[524288, 128, 1], offset: ?>>) {
  linalg.copy ins(%src : memref<32x?x128xbf16>)
              outs(%dst : memref<32x?x128xbf16, strided<[524288, 128, 1], offset: ?>>)
  return
}

// -----

// Alignment from the layout. A cache slot taken by memref.subview at a
// dynamic position (rows of 128 elements): its offset is a multiple of 128
// elements, so stores are 16-byte aligned. A static offset of 4 elements
// (8 bytes) or a row stride of 4100 bf16 (8200 bytes) leaves 8; a subview
// at an unknown column offset leaves the element's own (no attribute).
// CHECK-LABEL: func.func @alignment_from_layout
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<32x?x128xbf16, strided<[4194304, 128, 1], offset: ?>>
// CHECK: vector.load %{{.*}} {alignment = 8 : i64} : memref<?x64xbf16, strided<[64, 1], offset: 4>>
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<?x64xbf16, strided<[4100, 1]>>
// CHECK: vector.load %{{.*}}] : memref<?x64xbf16, strided<[4100, 1], offset: ?>>, vector<8xbf16>
// A memref.view at a byte shift of 2: its type says offset 0, the address
// is not; no alignment is claimed.
// CHECK: vector.load %{{.*}}] : memref<4x64xbf16>, vector<8xbf16>
func.func @alignment_from_layout(%src: memref<32x?x128xbf16>, %cache: memref<2x32x32768x128xbf16>,
                                 %p0: index, %n: index,
                                 %a: memref<?x64xbf16, strided<[64, 1], offset: 4>>,
                                 %b: memref<?x64xbf16, strided<[4100, 1]>>, %col: index) {
  %slot = memref.subview %cache[1, 0, %p0, 0] [1, 32, %n, 128] [1, 1, 1, 1]
      : memref<2x32x32768x128xbf16> to memref<32x?x128xbf16, strided<[4194304, 128, 1], offset: ?>>
  linalg.copy ins(%src : memref<32x?x128xbf16>)
              outs(%slot : memref<32x?x128xbf16, strided<[4194304, 128, 1], offset: ?>>)
  linalg.copy ins(%a : memref<?x64xbf16, strided<[64, 1], offset: 4>>)
              outs(%b : memref<?x64xbf16, strided<[4100, 1]>>)
  %c0 = arith.constant 0 : index
  %rows = memref.dim %b, %c0 : memref<?x64xbf16, strided<[4100, 1]>>
  %cols = memref.subview %b[0, %col] [%rows, 64] [1, 1]
      : memref<?x64xbf16, strided<[4100, 1]>> to memref<?x64xbf16, strided<[4100, 1], offset: ?>>
  linalg.copy ins(%cols : memref<?x64xbf16, strided<[4100, 1], offset: ?>>)
              outs(%a : memref<?x64xbf16, strided<[64, 1], offset: 4>>)
  %raw = memref.alloc() : memref<4096xi8>
  %c2 = arith.constant 2 : index
  %shifted = memref.view %raw[%c2][] : memref<4096xi8> to memref<4x64xbf16>
  %dst = memref.alloc() : memref<4x64xbf16>
  linalg.copy ins(%shifted : memref<4x64xbf16>) outs(%dst : memref<4x64xbf16>)
  return
}

// -----

// Not vectorized: an innermost trip count not divisible by 8, a transposed
// read (the innermost loop is not the operand's last dim), a body reading
// its indices, and an innermost stride that is not 1.
// CHECK-LABEL: func.func @scalar_cases
// CHECK-NOT: vector.
// CHECK: return
func.func @scalar_cases(%a: memref<?x100xf32>, %b: memref<?x100xf32>, %t: memref<64x64xf32>,
                        %u: memref<64x64xf32>, %s: memref<?x64xf32, strided<[128, 2]>>,
                        %v: memref<?x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<?x100xf32>) outs(%b : memref<?x100xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<64x64xf32>) outs(%u : memref<64x64xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      outs(%u : memref<64x64xf32>) {
  ^bb0(%y: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    linalg.yield %f : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%s : memref<?x64xf32, strided<[128, 2]>>) outs(%v : memref<?x64xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

// i1 memrefs hold a byte per element, a vector<8xi1> in memory is 8 bits:
// a comparison stored as i1 stays one element per thread.
// CHECK-LABEL: func.func @bool_output
// CHECK-NOT: vector.
// CHECK: arith.cmpf
// CHECK: memref.store
func.func @bool_output(%a: memref<?x64xf32>, %b: memref<?x64xf32>, %c: memref<?x64xi1>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<?x64xf32>, memref<?x64xf32>) outs(%c : memref<?x64xi1>) {
  ^bb0(%x: f32, %y: f32, %o: i1):
    %l = arith.cmpf olt, %x, %y : f32
    linalg.yield %l : i1
  }
  return
}

// -----

// RoPE in its half-split form after the head transpose fused in: loops
// [B, H, S, 2, 64] (half t, pair j), x [B, S, H, 128] read at channel
// t * 64 + j and at its partner (1 - t) * 64 + j, cos/sin [B, S, 64] at j,
// the sign at t. Every read along j is a vector of 8 (the further term of
// the channel, t * 64 or (1 - t) * 64, is a multiple of 8, so each vector
// starts 16-byte aligned); the sign is one element, broadcast.
// CHECK-LABEL: func.func @rope_half_split
// CHECK: scf.parallel
// CHECK-COUNT-2: vector.load %{{.*}} {alignment = 16 : i64} : memref<1x?x32x128xbf16>, vector<8xbf16>
// CHECK-COUNT-2: vector.load %{{.*}} {alignment = 16 : i64} : memref<1x?x64xf32>, vector<8xf32>
// CHECK: memref.load %{{.*}} : memref<2xf32>
// CHECK: vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<1x32x?x128xbf16>, vector<8xbf16>
// SCALAR-LABEL: func.func @rope_half_split
// SCALAR-NOT: vector.
func.func @rope_half_split(%x: memref<1x?x32x128xbf16>, %c: memref<1x?x64xf32>, %s: memref<1x?x64xf32>,
                           %sg: memref<2xf32>, %y: memref<1x32x?x128xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, d3 * 64 + d4)>,
                                   affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, (1 - d3) * 64 + d4)>,
                                   affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>,
                                   affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>,
                                   affine_map<(d0, d1, d2, d3, d4) -> (d3)>,
                                   affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 64 + d4)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %x, %c, %s, %sg : memref<1x?x32x128xbf16>, memref<1x?x32x128xbf16>, memref<1x?x64xf32>,
                                memref<1x?x64xf32>, memref<2xf32>)
      outs(%y : memref<1x32x?x128xbf16>) {
  ^bb0(%a: bf16, %p: bf16, %cs: f32, %sn: f32, %g: f32, %o: bf16):
    %af = arith.extf %a : bf16 to f32
    %pf = arith.extf %p : bf16 to f32
    %m = arith.mulf %af, %cs : f32
    %q = arith.mulf %g, %pf : f32
    %r = arith.mulf %q, %sn : f32
    %t = arith.addf %m, %r : f32
    %u = arith.truncf %t : f32 to bf16
    linalg.yield %u : bf16
  }
  return
}

// -----

// A read along the innermost loop shifted by 4 elements (not a multiple of
// the vector width 8) would start vectors off their alignment: the op
// stays scalar.
// CHECK-LABEL: func.func @shifted_read
// CHECK-NOT: vector.
// CHECK: memref.store
func.func @shifted_read(%x: memref<?x136xf32>, %y: memref<?x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1 + 4)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x136xf32>) outs(%y : memref<?x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// Shifted by 8 (a multiple of the width): vectors of 8, still aligned.
// CHECK-LABEL: func.func @shifted_read_by_width
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x136xf32>, vector<8xf32>
// CHECK: vector.store
func.func @shifted_read_by_width(%x: memref<?x136xf32>, %y: memref<?x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1 + 8)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x136xf32>) outs(%y : memref<?x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// A scalar weight read in the body at an index the loops do not change
// (DeepSeek-V4.1's mHC scale, hc_scale[1], after fusion): one scalar load
// per vector, broadcast; the generic still vectorizes. A load whose index
// is a loop value (a gather) keeps the scalar path: see @gather_in_body.
// CHECK-LABEL: func.func @uniform_load_in_body
// CHECK: scf.parallel
// CHECK: vector.load %{{.*}} : memref<?x5120xbf16>, vector<8xbf16>
// CHECK: %[[S:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<3xbf16>
// CHECK: vector.broadcast %[[S]] : bf16 to vector<8xbf16>
// CHECK: arith.mulf %{{.*}} : vector<8xbf16>
// CHECK: vector.store
// SCALAR-LABEL: func.func @uniform_load_in_body
// SCALAR-NOT: vector.
func.func @uniform_load_in_body(%x: memref<?x5120xbf16>, %scale: memref<3xbf16>,
                                %y: memref<?x5120xbf16>) {
  %c1 = arith.constant 1 : index
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x5120xbf16>) outs(%y : memref<?x5120xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %s = memref.load %scale[%c1] : memref<3xbf16>
    %m = arith.mulf %a, %s : bf16
    linalg.yield %m : bf16
  }
  return
}

// -----

// CHECK-LABEL: func.func @gather_in_body
// CHECK-NOT: vector.load
// CHECK: memref.load %{{.*}} : memref<64xbf16>
func.func @gather_in_body(%x: memref<?x64xbf16>, %table: memref<64xbf16>,
                          %y: memref<?x64xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x64xbf16>) outs(%y : memref<?x64xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %j = linalg.index 1 : index
    %s = memref.load %table[%j] : memref<64xbf16>
    %m = arith.mulf %a, %s : bf16
    linalg.yield %m : bf16
  }
  return
}

// -----

// A load of memory the generic itself writes is not uniform (another
// iteration may have stored there): the scalar path.
// CHECK-LABEL: func.func @load_of_own_output
// CHECK-NOT: vector.load
// CHECK: memref.load %{{.*}} : memref<?x64xbf16>
func.func @load_of_own_output(%x: memref<?x64xbf16>, %y: memref<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x64xbf16>) outs(%y : memref<?x64xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %s = memref.load %y[%c0, %c0] : memref<?x64xbf16>
    %m = arith.mulf %a, %s : bf16
    linalg.yield %m : bf16
  }
  return
}
