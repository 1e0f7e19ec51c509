// RUN: h20-opt %s --h20-predict-prefill="seq-len=1024" -o /dev/null | FileCheck %s
// RUN: h20-opt %s --h20-predict-prefill="targets=h20 gpus=1,2,8,512 seq-len=65536 output=%t.json" -o /dev/null | FileCheck %s --check-prefix=RING
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: h20-opt %s --h20-predict-prefill="targets=l20 gpus=1,8 seq-len=1024" -o /dev/null | FileCheck %s --check-prefix=PCIE
// RUN: not h20-opt %s --h20-predict-prefill="targets=v100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not h20-opt %s --h20-predict-prefill="gpus=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO

// One decoder-like block with a dynamic sequence dim. FLOPs at 1024 tokens:
// causal attention 2 x 4 heads x (64 + 64) x 1024 x 1025 / 2 visible pairs
// = 5.374e8, the projection 2 x 1024 x 256 x 512 = 2.684e8. The default
// targets are h20 and h200, the default GPU counts 1 and 8; the Add is the
// one unfused memory-bound op (the weight-free rms_norm is a row kernel).
// CHECK: h20-predict-prefill: cost model, not a measurement: seq_len=1024 element_bytes=2 flops=8.058e+08 attention_flops=5.374e+08 gemm_flops=2.684e+08 attention_ops=1 gemm_ops=1 row_ops=1 memory_ops=1
// CHECK-NEXT: target=h20 gpus=1 predicted_ms={{[0-9.]+}} attention_ms={{[0-9.]+}} gemm_ms={{[0-9.]+}} rows_ms={{[0-9.]+}} memory_ms={{[0-9.]+}} ring_comm_ms=0.000 exposed_comm_ms=0.000 tflops_per_gpu={{[0-9.]+}} peak_fraction={{[0-9.]+}}
// CHECK-NEXT: target=h20 gpus=8 predicted_ms=
// CHECK-NEXT: target=h200 gpus=1 predicted_ms=
// CHECK-NEXT: target=h200 gpus=8 predicted_ms=
// CHECK-NOT: target=

// Ring K/V at 65536 tokens: K + V of the layer are 4 KV heads x 65536 x
// (64 + 64) x 2 bytes = 64 MiB, of which each GPU receives (N-1)/N at
// 450 GB/s (half the H20's 900 GB/s NVLink figure): 0.075 ms on 2 GPUs,
// 0.130 ms on 8, hidden behind the attention (19 ms / N); on 512 GPUs the
// attention share (0.037 ms) no longer hides it and the rest is exposed.
// The attention's 2 x 4 x 128 x 65536 x 65537 / 2 = 2.199e12 FLOPs.
// RING: flops=2.216e+12 attention_flops=2.199e+12 gemm_flops=1.718e+10
// RING: target=h20 gpus=1 {{.*}} ring_comm_ms=0.000 exposed_comm_ms=0.000
// RING-NEXT: target=h20 gpus=2 {{.*}} ring_comm_ms=0.075 exposed_comm_ms=0.000
// RING-NEXT: target=h20 gpus=8 {{.*}} ring_comm_ms=0.130 exposed_comm_ms=0.000
// RING-NEXT: target=h20 gpus=512 {{.*}} ring_comm_ms=0.149 exposed_comm_ms=0.1{{[0-9]+}}
// JSON-DAG: "what": "predicted prefill time from h20's cost model
// JSON-DAG: "seq_len": 65536
// JSON-DAG: "gpus": 8
// JSON-DAG: "target": "h20"
// The rates behind DeepSeek-V4.1's kernel estimates on the H20 (78 SMs,
// 148 / 296 TFLOP/s): a kernel at 17% of an H200's peak keeps 66 TFLOP/s,
// not 17% of 148; memory-bound kernels at 80% of 4.0 TB/s.
// JSON-DAG: "kernel_rates": {
// JSON-DAG: "indexer_tflops": 66.17
// JSON-DAG: "fp4_experts_tflops": 97.74
// JSON-DAG: "fp8_gemm_tflops": 251.7
// JSON-DAG: "memory_gbytes_per_s": 3200

// The L20 has no NVLink: one GPU only.
// PCIE: target=l20 gpus=1 predicted_ms=
// PCIE-NEXT: target=l20 gpus=8 predicted_ms=n/a (no NVLink)
// UNKNOWN: error: h20-predict-prefill: unknown target 'v100'
// ZERO: error: h20-predict-prefill: GPU counts must be positive, got 0
func.func @block(%x: tensor<1x?x256xbf16>, %g: tensor<256xbf16>, %w: tensor<256x512xbf16>,
                 %q: tensor<1x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>, %v: tensor<1x4x?x64xbf16>)
    -> (tensor<1x?x512xbf16>, tensor<1x4x?x64xbf16>) {
  %n = attn.rms_norm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<1x?x256xbf16>, tensor<256xbf16>) -> tensor<1x?x256xbf16>
  %y = onnx.MatMul(%n, %w) : (tensor<1x?x256xbf16>, tensor<256x512xbf16>) -> tensor<1x?x512xbf16>
  %z = onnx.Add(%y, %y) : (tensor<1x?x512xbf16>, tensor<1x?x512xbf16>) -> tensor<1x?x512xbf16>
  %a = attn.attention %q, %k, %v {scale = 0.125 : f64, causal = true, kv_group = 1 : i64} : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  return %z, %a : tensor<1x?x512xbf16>, tensor<1x4x?x64xbf16>
}
