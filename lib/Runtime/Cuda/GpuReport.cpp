//===- GpuReport.cpp - the report and summary of a GPU prefill --------------===//
#include "h20/Runtime/Cuda/GpuReport.h"

#include "h20/Runtime/Parallel/RankLauncher.h"

#include <algorithm>
#include <map>
#include <unistd.h>
#include <string>
#include <utility>
#include <vector>

namespace h20::runtime {
namespace {

/// What a step is, for the step profile: the kernel's name, or the GEMM's
/// shape (m x n x k, each the expression's constant part, "+n" when it
/// grows with the chunk's tokens), or the op.
std::string stepLabel(const GpuStep &step) {
  if (auto *l = std::get_if<LaunchStep>(&step))
    return l->kernel;
  if (auto *g = std::get_if<GemmStep>(&step)) {
    auto dim = [](const LinearExpr &e) {
      std::string t = std::to_string(e.c);
      if (e.n)
        t = (e.c ? t + "+" : std::string()) + "n";
      return t;
    };
    return std::string(g->groups ? "grouped gemm " : "gemm ") + g->dtypeA + " " + dim(g->m) +
           "x" + dim(g->n) + "x" + dim(g->k);
  }
  return stepOpName(step);
}

/// The step profile of a run made with GpuRunOptions::profileSteps: every
/// step's time (JSON), and the 20 costliest labels (stepLabel, summed over
/// their steps and chunks) printed to `out`.
nlohmann::json stepProfile(const GpuProgram &program, const GpuRunStats &st, FILE *out) {
  nlohmann::json steps = nlohmann::json::array();
  std::map<std::string, std::pair<double, int64_t>> byLabel;
  double total = 0;
  for (size_t i = 0; i < st.stepMs.size() && i < program.steps.size(); ++i) {
    std::string label = stepLabel(program.steps[i]);
    steps.push_back({{"step", i},
                     {"op", stepOpName(program.steps[i])},
                     {"name", label},
                     {"ms", st.stepMs[i]},
                     {"calls", st.stepCalls[i]}});
    byLabel[label].first += st.stepMs[i];
    byLabel[label].second += st.stepCalls[i];
    total += st.stepMs[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(byLabel.begin(),
                                                                       byLabel.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second.first > b.second.first; });
  if (!out)
    return {{"total_ms", total}, {"steps", steps}};
  std::fprintf(out, "step profile: %.1f ms of GPU time in %zu steps (%lld chunks)\n", total,
               st.stepMs.size(), static_cast<long long>(st.chunks));
  std::fprintf(out, "  %10s %6s %8s  %s\n", "ms", "%", "calls", "kernel / GEMM");
  for (size_t r = 0; r < rows.size() && r < 20; ++r)
    std::fprintf(out, "  %10.2f %5.1f%% %8lld  %s\n", rows[r].second.first,
                 total > 0 ? 100.0 * rows[r].second.first / total : 0.0,
                 static_cast<long long>(rows[r].second.second), rows[r].first.c_str());
  return {{"total_ms", total}, {"steps", steps}};
}

/// The report's "gemm_tuning": each GEMM shape's candidates and times.
nlohmann::json gemmTuningReport(const std::vector<GemmTuning> &tunings) {
  nlohmann::json tuning = nlohmann::json::array();
  for (const GemmTuning &t : tunings) {
    nlohmann::json row = {{"shape", t.shape},
                          {"candidates", t.candidates},
                          {"chosen", t.chosen},
                          {"first_ms", t.firstMs},
                          {"chosen_ms", t.chosenMs}};
    if (!t.note.empty())
      row["note"] = t.note;
    tuning.push_back(row);
  }
  return tuning;
}

/// The report's "context_parallel" of a run over `cpN` > 1 ranks (virtual
/// or NCCL): the assignment, the K/V ring per layer (summed into
/// `ringBytes` / `ringMs`), the ranks' collectives.
nlohmann::json contextParallelReport(const GpuRunStats &st, const GpuProgram &program, int cpN,
                                     int64_t &ringBytes, double &ringMs) {
  nlohmann::json ring = nlohmann::json::array();
  for (size_t l = 0; l < st.cpRing.size(); ++l) {
    const CpLayerTraffic &t = st.cpRing[l];
    double ms = l < st.cpRingMs.size() ? st.cpRingMs[l] : 0.0;
    ring.push_back({{"layer", t.layer},
                    {"steps", t.steps},
                    {"sends", t.sends},
                    {"copies", t.copies},
                    {"bytes", t.bytes},
                    {"ms", ms}});
    ringBytes += t.bytes;
    ringMs += ms;
  }
  nlohmann::json perRank = nlohmann::json::array();
  for (const auto &log : st.cpRankLog) {
    int64_t bytes = 0;
    for (const CpCollective &c : log)
      bytes += c.sendBytes;
    perRank.push_back({{"collectives", log.size()}, {"send_bytes", bytes}});
  }
  // A virtual run: rank 0's collectives; an NCCL run: this rank's.
  int shown = st.ncclRanks > 1 ? st.cpRank : 0;
  nlohmann::json rank0 = collectivesToJson(
      shown >= 0 && shown < static_cast<int>(st.cpRankLog.size()) ? st.cpRankLog[shown]
                                                                   : std::vector<CpCollective>{});
  nlohmann::json cp = {{"mode", st.ncclRanks > 1 ? "nccl" : "virtual"},
                       {"ranks", cpN},
                       {"cp_chunks", 2 * cpN},
                       {"cp_chunk_tokens", st.cpChunkTokens},
                       {"compiled_chunk", program.chunking->chunk},
                       {"pieces", st.cpPieces},
                       {"tail_pieces", st.cpTailPieces},
                       {"rank_chunks", st.cpRankChunks},
                       {"ring", ring},
                       {"ring_bytes", ringBytes},
                       {"ring_ms", ringMs},
                       {"ranks_log", perRank},
                       {st.ncclRanks > 1 ? "rank_collectives" : "rank0_collectives",
                        rank0},
                       {"extra_gpu_memory_bytes", st.cpExtraBytes},
                       {"ttft_ms", st.ttftMs}};
  // NCCL: each rank knows only its own collectives; the launcher compares them.
  if (st.virtualRanks > 1)
    cp["collectives_match"] = st.cpCollectivesMatch;
  if (!st.cpCollectivesNote.empty())
    cp["collectives_note"] = st.cpCollectivesNote;
  return cp;
}

/// The report's "tensor_parallel" of a T-rank run: all-reduce counts,
/// bytes and time, and (virtual ranks) whether the ranks' logs and outputs
/// matched.
nlohmann::json tensorParallelReport(const GpuRunStats &st, int T, bool virtualTp, int ncclRank,
                                    const nlohmann::json &perRank, const TpCheck &check) {
  const bool solo = st.tpMode == "solo";
  nlohmann::json tp{{"mode", virtualTp ? "virtual"
                             : solo    ? "solo"
                                       : "nccl"},
                    {"ranks", T},
                    {"all_reduces", st.allReduces},
                    {"all_reduce_bytes", st.allReduceBytes},
                    {"all_reduce_ms", st.allReduceMs}};
  if (virtualTp) {
    tp["logs_match"] = check.logsMatch;
    tp["outputs_match"] = check.outputsMatch;
    if (!check.logsNote.empty())
      tp["logs_note"] = check.logsNote;
    if (!check.outputsNote.empty())
      tp["outputs_note"] = check.outputsNote;
    tp["ranks_log"] = perRank;
  } else if (solo) {
    tp["rank"] = st.tpRank;
    tp["note"] = "one rank alone (--solo-rank): its all-reduces were counted, not run; the "
                 "outputs are not the model's";
    tp["ranks_log"] = perRank; // this rank's
  } else {
    // Each process knows only its own log; the launcher compares them.
    tp["rank"] = ncclRank;
    tp["logs_match"] = nullptr;
    tp["logs_note"] = "each rank's all-reduces are compared by h20-run's launcher (--gpus N "
                      "without WORLD_SIZE) once every rank has finished";
    tp["ranks_log"] = perRank; // this rank's
  }
  tp["rank0_all_reduces"] = tpCollectivesToJson(st.tpLog);
  return tp;
}

/// The report's common part of a GPU run: the device, the prompt's next
/// token and TTFT, per-stage times, memory, NCCL and CUDA-graph use.
nlohmann::json commonReport(const Manifest &m, const GpuDeviceInfo &dev, const GpuLoadStats &ls,
                            const RankRun &run, const GpuReportContext &c) {
  const GpuRunStats &st = run.st;
  const int64_t S = c.tokens;
  const double tokensPerS = st.ttftMs > 0 ? S / (st.ttftMs / 1000.0) : 0.0;
  const std::vector<double> &warmupMs = run.warmupMs, &runMs = run.runMs;
  char driver[32], cc[16];
  std::snprintf(driver, sizeof driver, "%d.%d", dev.driverVersion / 1000,
                (dev.driverVersion % 1000) / 10);
  std::snprintf(cc, sizeof cc, "%d.%d", dev.ccMajor, dev.ccMinor);
  nlohmann::json report{{"device", "gpu"},
                        {"gpu", dev.name},
                        {"driver", driver},
                        {"compute_capability", cc},
                        {"code", ls.code},
                        {"tokens", S},
                        {"next_token_id", c.nextToken},
                        {"ttft_ms", st.ttftMs},
                        {"tokens_per_s", tokensPerS},
                        {"stages_ms",
                         {{"load_weights", ls.loadWeightsMs},
                          {"upload_ids", st.uploadInputsMs},
                          {"prefill", st.prefillMs},
                          {"download", st.downloadMs},
                          {"total", c.totalMs}}},
                        {"warmup_runs", c.warmup},
                        {"warmup_ttft_ms", warmupMs},
                        {"ttft_runs_ms", runMs},
                        {"chunks", st.chunks},
                        {"chunk_ms", st.chunkMs},
                        {"peak_gpu_memory_bytes", st.peakGpuMemoryBytes},
                        {"device_memory_used_bytes", st.deviceMemoryUsedBytes},
                        {"weight_bytes", ls.weightBytes},
                        {"host_weight_bytes", ls.hostWeightBytes},
                        {"logits", m.logits}};
  report["gpus"] = c.physicalGpus;
  if (ls.nccl.empty() || ls.nccl.rfind("unavailable", 0) == 0)
    report["nccl"] = ls.nccl.empty() ? "not used" : ls.nccl;
  else
    report["nccl"] = {{"version", ls.nccl},
                      {"ranks", ls.ncclRanks},
                      {"rank", ls.ncclRank},
                      {"init_ms", ls.ncclInitMs}};
  report["cuda_graph"] = {{"used", st.cudaGraph},
                          {"captures", st.graphCaptures},
                          {"launches", st.graphLaunches},
                          {"node_updates", st.graphNodeUpdates},
                          {"nodes", st.graphNodes}};
  if (!st.cudaGraphNote.empty())
    report["cuda_graph"]["note"] = st.cudaGraphNote;
  return report;
}

/// The one-line summaries of a parallel run (context parallel: virtual or
/// NCCL; tensor parallel) on stdout.
void printParallelSummary(const GpuRunStats &st, const GpuLoadStats &ls, int T, bool virtualTp,
                          const TpCheck &tpCheck, int64_t ringBytes, double ringMs, FILE *out) {
  if (st.virtualRanks > 1)
    std::fprintf(out, "context parallel (virtual): %d ranks x 2 chunks of %lld tokens; ring %.2f GiB "
                "in %.1f ms over %zu layers; collectives %s\n",
                st.virtualRanks, static_cast<long long>(st.cpChunkTokens),
                static_cast<double>(ringBytes) / (1ull << 30), ringMs, st.cpRing.size(),
                st.cpCollectivesMatch ? "match" : ("DIFFER: " + st.cpCollectivesNote).c_str());
  if (st.ncclRanks > 1)
    std::fprintf(out, "context parallel (NCCL %s): rank %d of %d holds the last position; %d x 2 "
                "chunks of %lld tokens; ring %.2f GiB over %zu layers (this rank's share %.1f "
                "ms)\n",
                ls.nccl.c_str(), st.cpRank, st.ncclRanks, st.ncclRanks,
                static_cast<long long>(st.cpChunkTokens),
                static_cast<double>(ringBytes) / (1ull << 30), st.cpRing.size(), ringMs);
  if (T > 1 && st.tpMode == "solo")
    std::fprintf(out,
                 "tensor parallel (solo): rank %d of %d alone; %lld all-reduces of %.2f MiB "
                 "skipped (its outputs are not the model's)\n",
                 st.tpRank, T, static_cast<long long>(st.allReduces),
                 static_cast<double>(st.allReduceBytes) / (1 << 20));
  else if (T > 1)
    std::fprintf(out, "tensor parallel (%s): %d ranks; %lld all-reduces of %.2f MiB in %.1f ms (rank "
                "0)%s%s\n",
                virtualTp ? "virtual" : ("NCCL " + ls.nccl).c_str(), T,
                static_cast<long long>(st.allReduces),
                static_cast<double>(st.allReduceBytes) / (1 << 20), st.allReduceMs,
                virtualTp ? (tpCheck.logsMatch ? "; all-reduce logs match" : "; all-reduce logs DIFFER")
                          : "",
                virtualTp ? (tpCheck.outputsMatch ? "; outputs bitwise equal across ranks"
                                            : "; outputs DIFFER across ranks")
                          : "");
}

} // namespace

GpuReportContext gpuReportContext(const GpuJobRequest &request, const GpuJob &job) {
  GpuReportContext c;
  c.tokens = request.tokens;
  c.warmup = request.warmup;
  c.physicalGpus = request.virtualRanks ? 1 : std::max(job.load.ncclRanks, 1);
  c.ncclRank = job.load.ncclRank;
  c.virtualRanks = request.virtualRanks;
  c.gemmTuning = request.tuneGemms;
  return c;
}

nlohmann::json gpuRunReport(const Manifest &m, const GpuProgram &program, GpuPrefill &prefill,
                            const GpuReportContext &c, FILE *profileOut) {
  const RankRun &run = prefill.ranks()[0];
  const GpuRunStats &st = run.st;
  GpuExecutor &gpu = prefill.executor(0);
  nlohmann::json report = commonReport(m, gpu.device(), gpu.loadStats(), run, c);
  if (c.gemmTuning)
    report["gemm_tuning"] = gemmTuningReport(run.gemmTuning);
  int64_t ringBytes = 0;
  double ringMs = 0;
  const int cpN = st.virtualRanks > 1 ? st.virtualRanks : st.ncclRanks;
  if (cpN > 1)
    report["context_parallel"] = contextParallelReport(st, program, cpN, ringBytes, ringMs);
  if (m.parallel) // the multi-GPU plan h20-opt recorded
    report["parallel"] = nlohmann::json::parse(m.parallel->json, nullptr, false);
  const int T = m.tensorParallel();
  if (T > 1) {
    const bool virtualTp = prefill.executorCount() > 1;
    nlohmann::json perRank = nlohmann::json::array();
    for (int r = 0; r < prefill.executorCount(); ++r) {
      const RankRun &rr = prefill.ranks()[r];
      const GpuLoadStats &ls = prefill.executor(r).loadStats();
      perRank.push_back({{"weight_bytes", ls.weightBytes},
                         {"load_weights_ms", ls.loadWeightsMs},
                         {"all_reduce_ms", rr.st.allReduceMs},
                         {"ttft_ms", rr.runMs.empty() ? 0.0 : rr.runMs.back()}});
    }
    report["tensor_parallel"] =
        tensorParallelReport(st, T, virtualTp, c.ncclRank, perRank, prefill.tpCheck());
  }
  if (!st.stepMs.empty())
    report["step_profile"] = stepProfile(program, st, profileOut);
  return report;
}

void printGpuSummary(GpuPrefill &prefill, const GpuReportContext &c, int tensorParallel,
                     FILE *out) {
  const GpuRunStats &st = prefill.ranks()[0].st;
  const GpuDeviceInfo &dev = prefill.executor(0).device();
  const GpuLoadStats &ls = prefill.executor(0).loadStats();
  int64_t ringBytes = 0;
  double ringMs = 0;
  for (size_t l = 0; l < st.cpRing.size(); ++l) {
    ringBytes += st.cpRing[l].bytes;
    ringMs += l < st.cpRingMs.size() ? st.cpRingMs[l] : 0.0;
  }
  double tokensPerS = st.ttftMs > 0 ? c.tokens / (st.ttftMs / 1000.0) : 0.0;
  std::fprintf(out, "next token id: %lld\n", static_cast<long long>(c.nextToken));
  printParallelSummary(st, ls, tensorParallel, prefill.executorCount() > 1, prefill.tpCheck(),
                       ringBytes, ringMs, out);
  std::fprintf(out,
               "prefill: %lld tokens in %.1f ms (%.0f tokens/s) on %s (GPU %d, %s); weights "
               "%.2f GiB loaded in %.1f ms; peak GPU memory %.2f GiB; total %.1f ms\n",
               static_cast<long long>(c.tokens), st.ttftMs, tokensPerS, dev.name.c_str(),
               dev.ordinal, ls.code.c_str(), static_cast<double>(ls.weightBytes) / (1ull << 30),
               ls.loadWeightsMs, static_cast<double>(st.peakGpuMemoryBytes) / (1ull << 30),
               c.totalMs);
}

void printLoadSummary(GpuPrefill &prefill, FILE *out) {
  const GpuDeviceInfo &dev = prefill.executor().device();
  const GpuLoadStats &loaded = prefill.executor().loadStats();
  const double gib = static_cast<double>(loaded.weightBytes) / (1ull << 30);
  const double s = loaded.loadWeightsMs / 1000.0;
  const double host = static_cast<double>(loaded.hostWeightBytes) / (1ull << 30);
  char onHost[96] = "";
  if (loaded.hostWeightBytes)
    std::snprintf(onHost, sizeof onHost, " (+ %.2f GiB of tables in pinned host memory)", host);
  std::fprintf(out, "h20-run: %s (GPU %d): weights %.2f GiB%s loaded in %.1f s (%.2f GiB/s), "
               "%.2f GiB allocated, %s kernels\n",
               dev.name.c_str(), dev.ordinal, gib, onHost, s, s > 0 ? (gib + host) / s : 0.0,
               static_cast<double>(loaded.planBytes) / (1ull << 30), loaded.code.c_str());
}

void printLoadNotes(GpuPrefill &prefill, FILE *out) {
  const GpuLoadStats &loaded = prefill.executor().loadStats();
  if (loaded.nccl.rfind("unavailable", 0) == 0)
    std::fprintf(out, "h20-run: note: NCCL %s; the 1-GPU prefill runs without it\n",
                 loaded.nccl.c_str());
}

void printChunkProgress(int64_t chunk, int64_t chunks, int64_t tokensDone, int64_t tokens,
                        double ms) {
  static const bool terminal = isatty(STDERR_FILENO);
  std::fprintf(stderr, "%sprefill: chunk %lld/%lld, %lld/%lld tokens (%.1f ms)%s",
               terminal ? "\r" : "", static_cast<long long>(chunk + 1),
               static_cast<long long>(chunks), static_cast<long long>(tokensDone),
               static_cast<long long>(tokens), ms, terminal ? "\x1b[K" : "\n");
  if (terminal && chunk + 1 == chunks)
    std::fputc('\n', stderr);
  std::fflush(stderr);
}

nlohmann::json rankLog(GpuPrefill &prefill, int rank) {
  const GpuRunStats &st = prefill.ranks()[0].st;
  return {{"rank", rank},
          {"gpu", prefill.executor().device().ordinal},
          {"ttft_ms", st.ttftMs},
          {"ttft_runs_ms", prefill.ranks()[0].runMs},
          {"collectives", collectivesToJson(rank < static_cast<int>(st.cpRankLog.size())
                                                ? st.cpRankLog[rank]
                                                : std::vector<CpCollective>{})},
          {"tp_collectives", tpCollectivesToJson(st.tpLog)}};
}

} // namespace h20::runtime
