// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg=library-calls=true --verify-diagnostics | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg --verify-diagnostics | FileCheck %s --check-prefix=CPU
// A MatMul of 16-bit operands with a float32 result (the float32 sums that
// attn.rms_scale reads: h20-norm-scale-after-matmul) is one GEMM whose
// accumulator is its result: the body extends the operands, nothing is
// rounded. A result narrower than its operands has no GEMM form.

// CHECK-LABEL: func.func @sums
// CHECK: linalg.generic {{.*}}library_call = "h20_gemm"{{.*}} ins(%arg0, %arg1 : tensor<?x64xbf16>, tensor<64x8xbf16>) outs(%{{.*}} : tensor<?x8xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[C:.*]]: f32):
// CHECK-NEXT: %[[EA:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[EB:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[EA]], %[[EB]] : f32
// CHECK-NEXT: arith.addf %[[C]], %[[P]] : f32
// CHECK-NOT: arith.truncf
// CHECK: return
// CPU-LABEL: func.func @sums
// CPU: outs(%{{.*}} : tensor<?x8xf32>)
// CPU: arith.extf %{{.*}} : bf16 to f32
// CPU-NOT: arith.truncf
// CPU: return
func.func @sums(%x: tensor<?x64xbf16>, %w: tensor<64x8xbf16>) -> tensor<?x8xf32> {
  %y = onnx.MatMul(%x, %w) : (tensor<?x64xbf16>, tensor<64x8xbf16>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @narrower(%x: tensor<4x64xf32>, %w: tensor<64x8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{MatMul whose result type is not its operands' or wider floats}}
  %y = onnx.MatMul(%x, %w) : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}
