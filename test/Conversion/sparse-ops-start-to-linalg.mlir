// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg | FileCheck %s
// The CPU forms of the V4.1 ops at a start (query row i is prompt
// position start + i): the window's latent row is start + i - j, and an
// indexer query sees (start + i + 1) / ratio compressed entries.

// CHECK-LABEL: func.func @sparse_attention_at_start
// CHECK-SAME: %[[P0:[a-z0-9]+]]: index
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[J:.*]] = linalg.index 2 : index
// CHECK: %[[POS:.*]] = arith.addi %[[I]], %[[P0]] : index
// CHECK: %[[ROW:.*]] = arith.subi %[[POS]], %[[J]] : index
// CHECK: arith.cmpi sge, %[[ROW]]
// CHECK: tensor.extract %{{.*}}[%[[ROW]], %{{.*}}] : tensor<?x40xf32>
func.func @sparse_attention_at_start(%q: tensor<?x4x40xf32>, %l: tensor<?x40xf32>, %s: tensor<4xf32>, %p0: index) -> tensor<?x4x40xf32> {
  %0 = attn.sparse_attention %q, %l, %s start(%p0) {scale = 0.125 : f64, window = 16 : i64} : (tensor<?x4x40xf32>, tensor<?x40xf32>, tensor<4xf32>) -> tensor<?x4x40xf32>
  return %0 : tensor<?x4x40xf32>
}

// -----

// A window ring: the window position start + i - j is latent row
// start + i - j - latent_start, read only when both are >= 0.
// CHECK-LABEL: func.func @sparse_attention_ring
// CHECK-SAME: %[[P0:[a-z0-9]+]]: index, %[[FIRST:[a-z0-9]+]]: index
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[J:.*]] = linalg.index 2 : index
// CHECK: %[[POS:.*]] = arith.addi %[[I]], %[[P0]] : index
// CHECK: %[[WPOS:.*]] = arith.subi %[[POS]], %[[J]] : index
// CHECK: %[[POSOK:.*]] = arith.cmpi sge, %[[WPOS]]
// CHECK: %[[ROW:.*]] = arith.subi %[[WPOS]], %[[FIRST]] : index
// CHECK: %[[ROWOK:.*]] = arith.cmpi sge, %[[ROW]]
// CHECK: arith.andi %[[POSOK]], %[[ROWOK]]
// CHECK: tensor.extract %{{.*}}[%[[ROW]], %{{.*}}] : tensor<?x40xf32>
func.func @sparse_attention_ring(%q: tensor<?x4x40xf32>, %l: tensor<?x40xf32>, %s: tensor<4xf32>, %p0: index, %first: index) -> tensor<?x4x40xf32> {
  %0 = attn.sparse_attention %q, %l, %s start(%p0) latent_start(%first) {scale = 0.125 : f64, window = 16 : i64} : (tensor<?x4x40xf32>, tensor<?x40xf32>, tensor<4xf32>) -> tensor<?x4x40xf32>
  return %0 : tensor<?x4x40xf32>
}

// -----

// CHECK-LABEL: func.func @indexer_at_start
// CHECK-SAME: %[[P0:[a-z0-9]+]]: index
// CHECK: scf.for %[[I:.*]] = %c0
// CHECK: %[[POS:.*]] = arith.addi %[[I]], %[[P0]] : index
// CHECK: %[[NEXT:.*]] = arith.addi %[[POS]], %c1{{.*}} : index
// CHECK: %[[VIS:.*]] = arith.divsi %[[NEXT]], %c4{{.*}} : index
// CHECK: arith.cmpi slt, %{{.*}}, %[[VIS]] : index
func.func @indexer_at_start(%q: tensor<?x4x24xf32>, %k: tensor<?x24xf32>, %w: tensor<?x4xf32>, %p0: index) -> tensor<?x?xi64> {
  %0 = attn.indexer_topk %q, %k, %w start(%p0) {ratio = 4 : i64, topk = 8 : i64, scale = 0.25 : f64} : (tensor<?x4x24xf32>, tensor<?x24xf32>, tensor<?x4xf32>) -> tensor<?x?xi64>
  return %0 : tensor<?x?xi64>
}

// -----

// CHECK-LABEL: func.func @candidates_at_start
// CHECK-SAME: %[[P0:[a-z0-9]+]]: index
// CHECK: scf.for %[[I:.*]] = %c0
// CHECK: %[[POS:.*]] = arith.addi %[[I]], %[[P0]] : index
// CHECK: arith.divsi
// CHECK: %[[POS2:.*]] = arith.addi %[[I]], %[[P0]] : index
// CHECK: %[[NEXT:.*]] = arith.addi %[[POS2]], %c1{{.*}} : index
// CHECK: %[[VIS:.*]] = arith.divsi %[[NEXT]], %c2{{.*}} : index
// CHECK: arith.cmpi sgt, %[[VIS]], %c0
func.func @candidates_at_start(%q: tensor<?x4x24xf32>, %k: tensor<?x24xf32>, %w: tensor<?x4xf32>, %p0: index) -> tensor<?x?xi64> {
  %0 = attn.indexer_candidates %q, %k, %w start(%p0) {ratio = 2 : i64, blocks = 4 : i64, block_size = 4 : i64, scale = 0.25 : f64} : (tensor<?x4x24xf32>, tensor<?x24xf32>, tensor<?x4xf32>) -> tensor<?x?xi64>
  return %0 : tensor<?x?xi64>
}

// -----

// A chunked prefill's picks keep the static K of its last chunk (here 8)
// while an earlier chunk may see fewer entries: every one of the K columns
// is written (the picks past the visible entries are `none`, the number
// of keys), not only min(topk, T) of them.
// CHECK-LABEL: func.func @indexer_static_k
// CHECK-NOT: arith.minsi
// CHECK: %[[K:.*]] = arith.constant 8 : index
// CHECK: scf.for %[[I:.*]] = %c0{{.*}} to %{{.*}}
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[K]] step
// CHECK: tensor.insert %{{.*}}[%[[I]], %{{.*}}] : tensor<?x8xi64>
func.func @indexer_static_k(%q: tensor<?x4x24xf32>, %k: tensor<?x24xf32>, %w: tensor<?x4xf32>, %p0: index) -> tensor<?x8xi64> {
  %0 = attn.indexer_topk %q, %k, %w start(%p0) {ratio = 4 : i64, topk = 8 : i64, scale = 0.25 : f64} : (tensor<?x4x24xf32>, tensor<?x24xf32>, tensor<?x4xf32>) -> tensor<?x8xi64>
  return %0 : tensor<?x8xi64>
}
