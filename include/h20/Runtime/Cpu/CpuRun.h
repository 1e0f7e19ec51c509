//===- CpuRun.h - one prefill of a CPU artifact -----------------*- C++ -*-===//
//
// The CPU runner: the artifact's shared object loaded (CpuModule), the
// weights read by byte range from the model's files, the outputs sized from
// the input dims the manifest ties them to, one call (or, for an artifact
// compiled with --chunk, one call per chunk with the caches kept between
// them: Manifest's CpuChunking). h20-run's CPU path; the GPU's is
// GpuPrefill.h.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_CPU_CPURUN_H
#define H20_RUNTIME_CPU_CPURUN_H

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace h20::runtime {

/// Why a CPU run stopped (h20-run maps these to exit codes 2, 3, 1).
enum class CpuStatus { Ok, BadInput, Resources, Internal };

/// What a CPU prefill produced.
struct CpuRunResult {
  std::vector<HostTensor> outputs; ///< in manifest order, named
  uint64_t weightBytes = 0;        ///< bytes of weights read
  double loadMs = 0;               ///< code and weights
  double prefillMs = 0;            ///< the call of the entry function
};

/// Runs `inputs` (manifest order, already checked against it) through the
/// CPU artifact `artifact`/`m`, named `name` in messages. Weights come from `weightsDir` when given,
/// else from the model's directory recorded at compile time. Errors name
/// the weight, file or output: a missing or resized weight file
/// (BadInput: recompile or give weightsDir), weights stored in typed
/// protobuf fields (BadInput), host memory exhausted (Resources), code
/// that does not load or match the ABI (Internal / BadInput), a prompt
/// longer than a chunked artifact's caches (BadInput).
CpuStatus runCpuPrefill(const std::string &name, const Artifact &artifact, const Manifest &m,
                        const std::vector<HostTensor> &inputs, const std::string &weightsDir,
                        CpuRunResult &result, std::string &error);

/// The --report of a token-id CPU prefill of `tokens` tokens (keys:
/// device "cpu", tokens, next_token_id, ttft_ms, tokens_per_s,
/// peak_host_memory_bytes (this process's maximum resident set),
/// weight_bytes, stages_ms {load, prefill, total}, logits (the manifest's
/// all / last)). `totalMs`: the whole run, from process start.
nlohmann::json cpuRunReport(const Manifest &m, const CpuRunResult &r, int64_t tokens,
                            int64_t nextToken, double totalMs);

/// The console lines of that run on `out`: the next token; tokens, TTFT,
/// tokens/s, weights and their load time, peak host memory, total time.
void printCpuSummary(const nlohmann::json &report, FILE *out);

} // namespace h20::runtime

#endif // H20_RUNTIME_CPU_CPURUN_H
