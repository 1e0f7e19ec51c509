//===- GpuReport.h - the report and summary of a GPU prefill ----*- C++ -*-===//
//
// h20-run's JSON report of a GPU run (`--report`) and the console lines
// beside it, built from what GpuPrefill measured. Kept apart from the
// runners so that the report's schema lives in one place, here:
//   device "gpu", gpu (name), driver, compute_capability, code ("cubin",
//   "ptx", "none"), gpus (physical GPUs of the job), tokens (S),
//   next_token_id, ttft_ms (median of the measured runs, host wall time:
//   ids on the host -> logits on the host), tokens_per_s, ttft_runs_ms,
//   warmup_runs, warmup_ttft_ms, stages_ms {load_weights, upload_ids,
//   prefill, download, total}, chunks, chunk_ms[], peak_gpu_memory_bytes
//   (this process's allocations), device_memory_used_bytes (all users),
//   weight_bytes (GPU memory), host_weight_bytes (tables in pinned host
//   memory, h20-place-tables), logits ("all" or "last"), nccl ("not used",
//   "unavailable: ...", or {version, ranks, rank, init_ms}), cuda_graph
//   {used, captures, launches, node_updates, nodes, note?};
//   when they apply: gemm_tuning[] {shape, candidates, chosen, first_ms,
//   chosen_ms, note?}, context_parallel {mode, ranks, ring[], ...},
//   parallel (the plan h20-opt recorded), tensor_parallel {mode, ranks,
//   all_reduces, all_reduce_bytes, all_reduce_ms, logs_match, ...},
//   step_profile {total_ms, steps[] {step, op, name, ms, calls}}.
// Times are milliseconds, sizes bytes. A CPU run's report (h20-run.cpp)
// has device "cpu", tokens, next_token_id, ttft_ms, tokens_per_s,
// peak_host_memory_bytes, weight_bytes, stages_ms {load, prefill, total},
// logits.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_CUDA_GPUREPORT_H
#define H20_RUNTIME_CUDA_GPUREPORT_H

#include "h20/Runtime/Cuda/GpuPrefill.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>

namespace h20::runtime {

/// What a report says beside the measurements.
struct GpuReportContext {
  int64_t tokens = 0;        ///< S
  int64_t nextToken = 0;     ///< argmax of the last position's logits
  double totalMs = 0;        ///< h20-run's wall time so far
  int64_t warmup = 0;        ///< warm-up runs (--warmup)
  int physicalGpus = 1;      ///< GPUs of the job (virtual ranks count as 1)
  int ncclRank = 0;          ///< this process's rank (NCCL runs)
  bool virtualRanks = false; ///< --virtual-ranks
  bool gemmTuning = false;   ///< --tune-gemms: add "gemm_tuning"
};

/// The context of job `job` planned from `request` (planGpuJob); the
/// caller adds the next token and the wall time.
GpuReportContext gpuReportContext(const GpuJobRequest &request, const GpuJob &job);

/// The whole report of a GPU run: device, next token, TTFT, per-stage
/// times, memory, NCCL and CUDA graphs; "gemm_tuning", "context_parallel",
/// "parallel" (the plan h20-opt recorded), "tensor_parallel" and
/// "step_profile" when they apply. The step profile's 20 costliest rows
/// are printed to `profileOut` (nullptr: not printed).
nlohmann::json gpuRunReport(const Manifest &m, const GpuProgram &program, GpuPrefill &prefill,
                            const GpuReportContext &c, FILE *profileOut);

/// The console lines of a GPU run (stdout): the next token, the parallel
/// modes' one-line summaries, the prefill time, tokens/s, weights and peak
/// GPU memory.
void printGpuSummary(GpuPrefill &prefill, const GpuReportContext &c, int tensorParallel,
                     FILE *out);

/// "h20-run: GPU (GPU d): weights X GiB loaded in T s (R GiB/s), A GiB
/// allocated, CODE kernels" on `out` (progress).
void printLoadSummary(GpuPrefill &prefill, FILE *out);

/// What the load leaves for the user to know, on `out`: a note when NCCL is
/// unavailable (the 1-GPU prefill runs without it).
void printLoadNotes(GpuPrefill &prefill, FILE *out);

/// A GpuProgressFn that prints "prefill: chunk i/n, t/S tokens (ms)" on
/// stderr after each chunk: rewritten in place on a terminal, one line per
/// chunk otherwise.
void printChunkProgress(int64_t chunk, int64_t chunks, int64_t tokensDone, int64_t tokens,
                        double ms);

/// The log a rank of an N-process job leaves for the launcher
/// (RankLauncher.h checkRankLogs compares the ranks' collectives):
/// {rank, gpu, ttft_ms, ttft_runs_ms, collectives, tp_collectives}.
nlohmann::json rankLog(GpuPrefill &prefill, int rank);

} // namespace h20::runtime

#endif // H20_RUNTIME_CUDA_GPUREPORT_H
