// The one-layer GQA decoder of tensor-parallel.mlir, planned for N GPUs of
// an H200: the plan is chosen once and recorded on the module; nothing
// else changes (h20-opt then applies it: h20-tensor-parallel for "tensor").
// RUN: h20-opt %S/tensor-parallel.mlir --h20-choose-parallel-plan="target=h200 gpus=2 tokens=64 plan=tensor" | FileCheck %s --check-prefix=TENSOR
// RUN: h20-opt %S/tensor-parallel.mlir --h20-choose-parallel-plan="target=h200 gpus=2 tokens=64" | FileCheck %s --check-prefix=AUTO
// RUN: h20-opt %S/tensor-parallel.mlir --h20-choose-parallel-plan="target=h200 gpus=1" | FileCheck %s --check-prefix=ONE
// RUN: not h20-opt %S/tensor-parallel.mlir --h20-choose-parallel-plan="target=h200 gpus=3 plan=tensor" 2>&1 | FileCheck %s --check-prefix=TP3
// RUN: not h20-opt %S/tensor-parallel.mlir --h20-choose-parallel-plan="target=h200 gpus=6 plan=context" 2>&1 | FileCheck %s --check-prefix=CP6
// RUN: not h20-opt %S/tensor-parallel.mlir --h20-choose-parallel-plan="target=h200 gpus=2 plan=data" 2>&1 | FileCheck %s --check-prefix=BAD

// Asked for tensor parallelism: the user's choice, both plans priced; one
// rank's tensor_ms split by kind (what bounds the plan).
// TENSOR: module attributes {h20.parallel = {attention_rows = true, chosen_by = "user", context_ms = {{[0-9.e+-]+}} : f64, gpus = 2 : i64, plan = "tensor", tensor_breakdown_ms = {all_reduce = {{[0-9.e+-]+}} : f64, attention = {{[0-9.e+-]+}} : f64, gemm = {{[0-9.e+-]+}} : f64, memory_bound = {{[0-9.e+-]+}} : f64, rows = {{[0-9.e+-]+}} : f64}, tensor_ms = {{[0-9.e+-]+}} : f64, tokens = 64 : i64}
// TENSOR-NOT: h20.tensor_parallel
// TENSOR: attn.attention
// The cost model's choice among the two (at 64 tokens the ring's latency
// is cheaper than two all-reduces per layer: context).
// AUTO: h20.parallel = {attention_rows = true, chosen_by = "cost model", {{.*}}plan = "context"
// One GPU: no plan.
// ONE-NOT: h20.parallel
// TP3: error: --parallel tensor: {{.*}}3 ranks
// CP6: error: --parallel context needs a power of two for --gpus (h20-run cuts the prompt into 2N equal chunks), got 6
// BAD: error: --parallel must be auto, context or tensor, got 'data'
