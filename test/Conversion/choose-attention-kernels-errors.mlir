// RUN: not h20-opt %s --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels))' 2>&1 | FileCheck %s

// Picks that do not fit the kernel's shared memory: an error at compile
// time, naming the op.
// CHECK: error: GPU target: sparse attention with head dim 512 and 65664 key slots does not fit the kernel's shared memory
func.func @sparse_too_many_picks(%q: tensor<?x64x512xbf16>, %l: tensor<?x512xbf16>, %s: tensor<64xf32>, %c: tensor<?x512xbf16>, %i: tensor<?x65536xi64>) -> tensor<?x64x512xbf16> {
  %0 = attn.sparse_attention %q, %l, %s compressed(%c : tensor<?x512xbf16>, %i : tensor<?x65536xi64>) {scale = 0.044 : f64, window = 128 : i64} : (tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>) -> tensor<?x64x512xbf16>
  return %0 : tensor<?x64x512xbf16>
}
