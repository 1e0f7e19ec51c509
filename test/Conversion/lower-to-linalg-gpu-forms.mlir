// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg=library-calls=true | FileCheck %s
// The GPU target's forms (library-calls=true): TopK and ScatterElements as
// parallel generics, one output element each (no scf.for nest over tensors
// carrying the whole result), and the lightning-indexer ops as one
// `h20_indexer` library call with a [264, T (+ NB)] float32 scratch.

// CHECK-LABEL: func.func @topk_parallel
// CHECK-NOT: tensor.insert
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: linalg.index 1
// CHECK: scf.for
// CHECK: scf.for
// CHECK: tensor.extract
// CHECK: linalg.yield
func.func @topk_parallel(%x: tensor<3x8xf32>, %k: tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>) {
  %0:2 = onnx.TopK(%x, %k) : (tensor<3x8xf32>, tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  return %0#0, %0#1 : tensor<3x2xf32>, tensor<3x2xi64>
}

// -----

// Each output element scans the axis positions of its row and applies the
// updates aimed at it, in order (reduction "add" combines them).
// CHECK-LABEL: func.func @scatter_parallel
// CHECK-NOT: tensor.insert
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: scf.for
// CHECK: arith.cmpi eq
// CHECK: arith.addf
// CHECK: arith.select
func.func @scatter_parallel(%d: tensor<3x5xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x5xf32> {
  %0 = onnx.ScatterElements(%d, %i, %u) {axis = 1 : si64, reduction = "add"} : (tensor<3x5xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// CHECK-LABEL: func.func @indexer_topk_call
// CHECK: %[[S:.*]] = tensor.empty(%c40) : tensor<264x?xf32>
// CHECK: linalg.generic
// CHECK-SAME: library_call = "h20_indexer"
// CHECK-SAME: outs(%{{.*}}, %[[S]] : tensor<16x8xi64>, tensor<264x?xf32>)
// CHECK-SAME: h20.indexer = {block = 1 : i64, mode = 0 : i64, ratio = 4 : i64, scale = 2.500000e-01 : f64}
func.func @indexer_topk_call(%q: tensor<16x4x24xf32>, %k: tensor<40x24xf32>, %w: tensor<16x4xf32>) -> tensor<16x8xi64> {
  %0 = attn.indexer_topk %q, %k, %w {ratio = 4 : i64, topk = 8 : i64, scale = 0.25 : f64} : (tensor<16x4x24xf32>, tensor<40x24xf32>, tensor<16x4xf32>) -> tensor<16x8xi64>
  return %0 : tensor<16x8xi64>
}

// -----

// Level one of the two-level top-k: the scratch also holds the NB =
// ceil(T / block) block scores (T + NB columns), NB as the floor division
// (T + block - 1) / block, which a chunked prefill's host program
// evaluates in the chunk index.
// CHECK-LABEL: func.func @indexer_candidates_call
// CHECK: %[[T3:.*]] = arith.addi %c40{{.*}}, %c3
// CHECK: %[[NB:.*]] = arith.divui %[[T3]], %c4
// CHECK: %[[W:.*]] = arith.addi %c40{{.*}}, %[[NB]]
// CHECK: tensor.empty(%[[W]]) : tensor<264x?xf32>
// CHECK: library_call = "h20_indexer"
// CHECK: h20.indexer = {block = 4 : i64, mode = 2 : i64, ratio = 1 : i64
func.func @indexer_candidates_call(%q: tensor<16x4x24xf32>, %k: tensor<40x24xf32>, %w: tensor<16x4xf32>) -> tensor<16x6xi64> {
  %0 = attn.indexer_candidates %q, %k, %w {ratio = 1 : i64, blocks = 6 : i64, block_size = 4 : i64, scale = 0.25 : f64} : (tensor<16x4x24xf32>, tensor<40x24xf32>, tensor<16x4xf32>) -> tensor<16x6xi64>
  return %0 : tensor<16x6xi64>
}

// -----

// A window ring's call: the latent cut to its first start + S -
// latent_start rows, and the start carried as the length - 1 of a last i8
// input (the `ring` attribute says so).
// CHECK-LABEL: func.func @sparse_attention_ring_call
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x64x512xbf16>, %[[L:[a-z0-9]+]]: tensor<?x512xbf16>, %{{.*}}: tensor<64xf32>, %[[P0:[a-z0-9]+]]: index, %[[FIRST:[a-z0-9]+]]: index
// CHECK: %[[S:.*]] = tensor.dim %[[Q]], %c0
// CHECK: %[[END:.*]] = arith.addi %[[P0]], %[[S]]
// CHECK: %[[ROWS:.*]] = arith.subi %[[END]], %[[FIRST]]
// CHECK: %[[LAT:.*]] = tensor.extract_slice %[[L]][0, 0] [%[[ROWS]], 512] [1, 1]
// CHECK: %[[N:.*]] = arith.addi %[[P0]], %c1
// CHECK: %[[CARRIER:.*]] = tensor.empty(%[[N]]) : tensor<?xi8>
// CHECK: linalg.generic
// CHECK-SAME: library_call = "h20_sparse_attention"
// CHECK-SAME: ins(%[[Q]], %[[LAT]], %{{.*}}, %[[CARRIER]] : tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>, tensor<?xi8>)
// CHECK: h20.sparse_attention = {ring, scale = 0.044194173824159216 : f64, window = 128 : i64}
func.func @sparse_attention_ring_call(%q: tensor<?x64x512xbf16>, %l: tensor<?x512xbf16>, %s: tensor<64xf32>,
                                      %p0: index, %first: index) -> tensor<?x64x512xbf16> {
  %0 = attn.sparse_attention %q, %l, %s start(%p0) latent_start(%first) {scale = 0.044194173824159216 : f64, window = 128 : i64} : (tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>) -> tensor<?x64x512xbf16>
  return %0 : tensor<?x64x512xbf16>
}

// -----

// attn.sparse_attention in bf16 (f16 alike) is one `h20_sparse_attention`
// call carrying q, latent, sink, compressed rows, indices and the result;
// its attributes are the scale and the window.
// CHECK-LABEL: func.func @sparse_attention_call
// CHECK: linalg.generic
// CHECK-SAME: library_call = "h20_sparse_attention"
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>, tensor<?x512xbf16>, tensor<?x?xi64>)
// CHECK-SAME: outs(%{{.*}} : tensor<?x64x512xbf16>)
// CHECK: h20.sparse_attention = {scale = 0.044194173824159216 : f64, window = 128 : i64}
func.func @sparse_attention_call(%q: tensor<?x64x512xbf16>, %l: tensor<?x512xbf16>, %s: tensor<64xf32>,
                                 %c: tensor<?x512xbf16>, %i: tensor<?x?xi64>) -> tensor<?x64x512xbf16> {
  %0 = attn.sparse_attention %q, %l, %s compressed(%c : tensor<?x512xbf16>, %i : tensor<?x?xi64>) {scale = 0.044194173824159216 : f64, window = 128 : i64} : (tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>) -> tensor<?x64x512xbf16>
  return %0 : tensor<?x64x512xbf16>
}

// -----

// Window-only: three operands. Float32 (the kernel is 16-bit only), a head
// dim over 512, more than 4096 key slots and an f64 sink keep the
// linear-memory decomposition (no library call).
// CHECK-LABEL: func.func @sparse_attention_window_call
// CHECK: library_call = "h20_sparse_attention"
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x4x40xf16>, tensor<8x40xf16>, tensor<4xf16>)
// CHECK-LABEL: func.func @sparse_attention_f32_decomposed
// CHECK-NOT: h20_sparse_attention
// CHECK-LABEL: func.func @sparse_attention_wide_decomposed
// CHECK-NOT: h20_sparse_attention
// CHECK-LABEL: func.func @sparse_attention_many_slots_decomposed
// CHECK-NOT: h20_sparse_attention
// CHECK-LABEL: func.func @sparse_attention_f64_sink_decomposed
// CHECK-NOT: h20_sparse_attention
// CHECK: return
func.func @sparse_attention_window_call(%q: tensor<8x4x40xf16>, %l: tensor<8x40xf16>, %s: tensor<4xf16>) -> tensor<8x4x40xf16> {
  %0 = attn.sparse_attention %q, %l, %s {scale = 0.5 : f64, window = 16 : i64} : (tensor<8x4x40xf16>, tensor<8x40xf16>, tensor<4xf16>) -> tensor<8x4x40xf16>
  return %0 : tensor<8x4x40xf16>
}
func.func @sparse_attention_f32_decomposed(%q: tensor<8x4x40xf32>, %l: tensor<8x40xf32>, %s: tensor<4xf32>) -> tensor<8x4x40xf32> {
  %0 = attn.sparse_attention %q, %l, %s {scale = 0.5 : f64, window = 16 : i64} : (tensor<8x4x40xf32>, tensor<8x40xf32>, tensor<4xf32>) -> tensor<8x4x40xf32>
  return %0 : tensor<8x4x40xf32>
}
func.func @sparse_attention_wide_decomposed(%q: tensor<8x4x576xbf16>, %l: tensor<8x576xbf16>, %s: tensor<4xf32>) -> tensor<8x4x576xbf16> {
  %0 = attn.sparse_attention %q, %l, %s {scale = 0.5 : f64, window = 16 : i64} : (tensor<8x4x576xbf16>, tensor<8x576xbf16>, tensor<4xf32>) -> tensor<8x4x576xbf16>
  return %0 : tensor<8x4x576xbf16>
}
func.func @sparse_attention_many_slots_decomposed(%q: tensor<8x4x64xbf16>, %l: tensor<8x64xbf16>, %s: tensor<4xf32>,
                                                  %c: tensor<9x64xbf16>, %i: tensor<8x4000xi64>) -> tensor<8x4x64xbf16> {
  %0 = attn.sparse_attention %q, %l, %s compressed(%c : tensor<9x64xbf16>, %i : tensor<8x4000xi64>) {scale = 0.5 : f64, window = 128 : i64} : (tensor<8x4x64xbf16>, tensor<8x64xbf16>, tensor<4xf32>) -> tensor<8x4x64xbf16>
  return %0 : tensor<8x4x64xbf16>
}
func.func @sparse_attention_f64_sink_decomposed(%q: tensor<8x4x64xbf16>, %l: tensor<8x64xbf16>, %s: tensor<4xf64>) -> tensor<8x4x64xbf16> {
  %0 = attn.sparse_attention %q, %l, %s {scale = 0.5 : f64, window = 16 : i64} : (tensor<8x4x64xbf16>, tensor<8x64xbf16>, tensor<4xf64>) -> tensor<8x4x64xbf16>
  return %0 : tensor<8x4x64xbf16>
}

// -----

// onnx.h20.RoutedExperts (DeepSeek-V4.1's routed MoE experts) is one
// `h20_routed_experts` call carrying X, Router, Bias, W1, W3, W2 and Y, with
// the op's attributes; the GPU target runs only the picked experts.
// CHECK-LABEL: func.func @routed_experts_call
// CHECK: linalg.generic
// CHECK-SAME: library_call = "h20_routed_experts"
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x64x32xbf16>, tensor<8x64x32xbf16>, tensor<8x32x64xbf16>)
// CHECK-SAME: outs(%{{.*}} : tensor<?x64xbf16>)
// CHECK: h20.routed_experts = {limit = 1.000000e+01 : f32, scaling = 1.500000e+00 : f32, temp = 1.000000e+00 : f32, top_k = 2 : si64, weights = "float"}
func.func @routed_experts_call(%x: tensor<?x64xbf16>, %r: tensor<64x8xbf16>, %b: tensor<8xf32>,
                               %w1: tensor<8x64x32xbf16>, %w3: tensor<8x64x32xbf16>,
                               %w2: tensor<8x32x64xbf16>) -> tensor<?x64xbf16> {
  %0 = onnx.h20.RoutedExperts(%x, %r, %b, %w1, %w3, %w2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x64x32xbf16>, tensor<8x64x32xbf16>, tensor<8x32x64xbf16>) -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}


// -----

// onnx.h20.RoutedExpertsMxfp4 (MXFP4 experts: packed e2m1 bytes and ue8m0
// scales, i8) is the same call with its nine operands and weights = "mxfp4":
// the GPU target dequantises inside its grouped GEMM.
// CHECK-LABEL: func.func @routed_experts_mxfp4_call
// CHECK: linalg.generic
// CHECK-SAME: library_call = "h20_routed_experts"
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>)
// CHECK: h20.routed_experts = {limit = 1.000000e+01 : f32, scaling = 1.500000e+00 : f32, temp = 1.000000e+00 : f32, top_k = 2 : si64, weights = "mxfp4"}
func.func @routed_experts_mxfp4_call(%x: tensor<?x64xbf16>, %r: tensor<64x8xbf16>, %b: tensor<8xf32>,
                                     %w1: tensor<8x32x32xi8>, %s1: tensor<8x32x2xi8>,
                                     %w3: tensor<8x32x32xi8>, %s3: tensor<8x32x2xi8>,
                                     %w2: tensor<8x64x16xi8>, %s2: tensor<8x64x1xi8>) -> tensor<?x64xbf16> {
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}

// -----

// MatMul is an `h20_gemm` library call (cuBLASLt), except a contraction over
// at most 8 elements (mHC's 4 x 4 stream mixes, batched over tokens): that
// stays a generic the GPU target turns into a memory-bound kernel.
// CHECK-LABEL: func.func @gemm_or_kernel
// CHECK: linalg.generic {indexing_maps = [{{[^]]*}}], iterator_types = [{{[^]]*}}]} ins(%{{.*}}, %{{.*}} : tensor<?x4x4xbf16>, tensor<?x4x64xbf16>)
// CHECK: linalg.generic {{.*}}library_call = "h20_gemm"} ins(%{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<64x32xbf16>)
func.func @gemm_or_kernel(%m: tensor<?x4x4xbf16>, %x: tensor<?x4x64xbf16>, %w: tensor<64x32xbf16>)
    -> (tensor<?x4x64xbf16>, tensor<?x32xbf16>) {
  %0 = onnx.MatMul(%m, %x) : (tensor<?x4x4xbf16>, tensor<?x4x64xbf16>) -> tensor<?x4x64xbf16>
  %h = tensor.extract_slice %x[0, 0, 0] [1, 4, 64] [1, 1, 1] : tensor<?x4x64xbf16> to tensor<4x64xbf16>
  %c = tensor.cast %h : tensor<4x64xbf16> to tensor<?x64xbf16>
  %1 = onnx.MatMul(%c, %w) : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  return %0, %1 : tensor<?x4x64xbf16>, tensor<?x32xbf16>
}

// -----

// A later prefill chunk (start %p0): the kernel takes the queries as the
// last S of the latent's rows, so the call reads the latent cut to its
// first %p0 + S rows (a view).
// CHECK-LABEL: func.func @sparse_attention_at_start_call
// CHECK: %[[S:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x64x512xbf16>
// CHECK: %[[ROWS:.*]] = arith.addi %{{.*}}, %[[S]] : index
// CHECK: %[[CUT:.*]] = tensor.extract_slice %{{.*}}[0, 0] [%[[ROWS]], 512] [1, 1] : tensor<?x512xbf16> to tensor<?x512xbf16>
// CHECK: library_call = "h20_sparse_attention"
// CHECK-SAME: ins(%{{.*}}, %[[CUT]], %{{.*}} : tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>)
func.func @sparse_attention_at_start_call(%q: tensor<?x64x512xbf16>, %l: tensor<?x512xbf16>, %s: tensor<64xf32>,
                                          %p0: index) -> tensor<?x64x512xbf16> {
  %0 = attn.sparse_attention %q, %l, %s start(%p0) {scale = 0.125 : f64, window = 128 : i64} : (tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>) -> tensor<?x64x512xbf16>
  return %0 : tensor<?x64x512xbf16>
}

// -----

// An indexer at a start: the call carries it as the length minus one of a
// last i8 input (the host program passes it to the kernel, which sees
// query row i as position start + i).
// CHECK-LABEL: func.func @indexer_topk_at_start_call
// CHECK-SAME: %[[P0:[a-z0-9]+]]: index
// CHECK: %[[N:.*]] = arith.addi %[[P0]], %c1{{.*}} : index
// CHECK: %[[C:.*]] = tensor.empty(%[[N]]) : tensor<?xi8>
// CHECK: linalg.generic
// CHECK-SAME: library_call = "h20_indexer"
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[C]] : tensor<16x4x24xbf16>, tensor<40x24xbf16>, tensor<16x4xbf16>, tensor<?xi8>)
// CHECK: h20.indexer = {block = 1 : i64, mode = 0 : i64, ratio = 4 : i64
func.func @indexer_topk_at_start_call(%q: tensor<16x4x24xbf16>, %k: tensor<40x24xbf16>, %w: tensor<16x4xbf16>, %p0: index) -> tensor<16x8xi64> {
  %0 = attn.indexer_topk %q, %k, %w start(%p0) {ratio = 4 : i64, topk = 8 : i64, scale = 0.25 : f64} : (tensor<16x4x24xbf16>, tensor<40x24xbf16>, tensor<16x4xbf16>) -> tensor<16x8xi64>
  return %0 : tensor<16x8xi64>
}
