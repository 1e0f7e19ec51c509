//===- GpuPrefill.cpp - the measured prefills of one GPU process ------------===//
#include "h20/Runtime/Cuda/GpuPrefill.h"

#include <algorithm>
#include <thread>

namespace h20::runtime {
namespace {

/// `inputs` cut to the program's first chunk, for a warm-up that loads
/// every kernel without running the whole prompt.
std::vector<HostTensor> firstChunkInputs(const GpuProgram &program,
                                         const std::vector<HostTensor> &inputs) {
  std::vector<HostTensor> cut = inputs;
  if (!program.chunking)
    return cut;
  HostTensor &t = cut[program.chunking->input];
  int dim = program.chunking->dim;
  int64_t outer = 1, inner = dtypeSize(t.dtype);
  for (int d = 0; d < static_cast<int>(t.shape.size()); ++d)
    if (d < dim)
      outer *= t.shape[d];
    else if (d > dim)
      inner *= t.shape[d];
  if (outer == 1 && dim < static_cast<int>(t.shape.size()) &&
      t.shape[dim] > program.chunking->chunk) {
    t.shape[dim] = program.chunking->chunk;
    t.data.resize(static_cast<size_t>(t.shape[dim] * inner));
  }
  return cut;
}

/// One rank's warm-up and measured prefills into `rr`; stops at the first
/// failure (rr.status).
void runRank(GpuExecutor &ex, const GpuProgram &program, const std::vector<HostTensor> &inputs,
             const GpuRunOptions &options, int64_t warmup, int64_t repeat, RankRun &rr) {
  for (int64_t w = 0; w < warmup; ++w) {
    GpuRunOptions wo;
    wo.n = options.n;
    wo.cudaGraph = options.cudaGraph;
    wo.virtualTensorParallel = options.virtualTensorParallel;
    wo.soloTensorParallel = options.soloTensorParallel;
    rr.status = ex.run(firstChunkInputs(program, inputs), wo, rr.outputs, rr.st, rr.error);
    if (rr.status != GpuStatus::Ok)
      return;
    rr.warmupMs.push_back(rr.st.ttftMs);
    if (!rr.st.gemmTuning.empty())
      rr.gemmTuning = rr.st.gemmTuning;
  }
  for (int64_t r = 0; r < repeat; ++r) {
    rr.status = ex.run(inputs, options, rr.outputs, rr.st, rr.error);
    if (rr.status != GpuStatus::Ok)
      return;
    rr.runMs.push_back(rr.st.ttftMs);
    if (!rr.st.gemmTuning.empty())
      rr.gemmTuning = rr.st.gemmTuning;
  }
}

TpCheck compareVirtualRanks(const std::vector<RankRun> &runs) {
  TpCheck c;
  const std::vector<HostTensor> &outputs = runs[0].outputs;
  std::vector<std::vector<TpCollective>> logs;
  for (size_t r = 0; r < runs.size(); ++r) {
    logs.push_back(runs[r].st.tpLog);
    for (size_t o = 0; o < outputs.size() && c.outputsMatch; ++o)
      if (o >= runs[r].outputs.size() || runs[r].outputs[o].data != outputs[o].data) {
        c.outputsMatch = false;
        c.outputsNote = "virtual rank " + std::to_string(r) + "'s output '" + outputs[o].name +
                        "' differs from rank 0's";
      }
  }
  c.logsMatch = tpCollectivesMatch(logs, c.logsNote);
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t mid = v.size() / 2;
  return v.empty() ? 0.0 : v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

} // namespace

bool checkGpusVisible(int gpus, std::string &error) {
  int visible = GpuExecutor::deviceCount(error);
  if (visible < 0)
    error = "no CUDA-capable GPU/driver: " + error;
  else if (visible < gpus)
    error = "--gpus " + std::to_string(gpus) + ": this machine has " + std::to_string(visible) +
            " GPU(s) visible";
  return visible >= gpus;
}

bool planGpuJob(const Manifest &m, const GpuProgram &program,
                const std::vector<HostTensor> &inputs, const GpuJobRequest &rq,
                const std::function<const char *(const char *)> &getenv, GpuJob &job,
                std::string &error) {
  job = GpuJob{};
  RankEnvironment env;
  if (!readRankEnvironment(getenv, env, error))
    return false;
  const int T = m.tensorParallel();
  const bool solo = rq.soloRank >= 0;
  if (solo && (T <= 1 || rq.soloRank >= T)) {
    error = T <= 1 ? "--solo-rank runs one rank of a tensor-parallel artifact (h20-opt --gpus T "
                     "--parallel tensor); '" +
                         rq.artifact + "' is not one"
                   : "--solo-rank " + std::to_string(rq.soloRank) + " is not a rank of '" +
                         rq.artifact + "' (0 to " + std::to_string(T - 1) + ")";
    return false;
  }
  if (solo && env.worldSize && *env.worldSize > 1) {
    error = "--solo-rank runs one rank alone in one process; do not launch it as WORLD_SIZE=" +
            std::to_string(*env.worldSize) + " processes";
    return false;
  }
  RankRequest ranks;
  ranks.gpus = rq.gpus;
  // A solo rank is one process on one GPU, like a virtual group: no NCCL.
  ranks.virtualRanks = rq.virtualRanks || solo;
  ranks.tensorParallel = T;
  ranks.tensorInputs = rq.tokens == 0;
  RankAssignment ra;
  if (!assignRanks(ranks, env, ra, error))
    return false;
  GpuLoadOptions &lo = job.load;
  lo.weightsDir = rq.weightsDir;
  lo.dummyWeights = rq.dummyWeights;
  lo.tuneGemms = rq.tuneGemms;
  lo.ncclRanks = ra.ncclRanks;
  lo.ncclRank = ra.ncclRank;
  lo.device = ra.device;
  if (solo) {
    lo.tensorParallelRank = static_cast<int>(rq.soloRank);
  } else if (!rq.virtualRanks) {
    lo.ncclTimeoutS = ra.ncclTimeoutS;
    lo.tensorParallelRank = ra.tensorParallelRank;
    lo.ncclIdFile = ra.ncclIdFile;
  }
  job.mode = ra.mode;
  job.tensorParallel = T;
  job.virtualTpRanks = T > 1 && rq.virtualRanks ? T : 0;
  job.contextRanks = T > 1                          ? 0
                     : rq.virtualRanks              ? static_cast<int>(rq.gpus)
                     : ra.mode != RankMode::Single ? lo.ncclRanks
                                                    : 0;
  const int cp = job.contextRanks > 1 ? job.contextRanks : 0;
  const int virtualCp = rq.virtualRanks ? cp : 0; // simulated on this GPU
  if (virtualCp && (virtualCp & (virtualCp - 1)) != 0) {
    error = "--virtual-ranks needs a power of two for --gpus (the prompt is cut into 2N equal "
            "chunks), got " + std::to_string(virtualCp);
    return false;
  }
  RunRequest run;
  run.n = rq.tokens;
  run.virtualRanks = virtualCp;
  run.contextParallel = cp && !virtualCp;
  run.tpRanks = T;
  run.tpRank = lo.tensorParallelRank;
  run.virtualTpRanks = job.virtualTpRanks;
  run.soloTp = solo;
  run.ncclRanks = job.virtualTpRanks ? 0 : lo.ncclRanks;
  run.ncclRank = lo.ncclRank;
  if (!planRun(m, program, inputs, run, job.plan, error)) {
    error = "'" + rq.artifact + "': " + error;
    return false;
  }
  GpuRunOptions &ro = job.run;
  ro.n = rq.tokens;
  ro.cudaGraph = !rq.noCudaGraph && !cp;
  ro.profileSteps = rq.profileSteps;
  ro.virtualRanks = virtualCp;
  ro.soloTensorParallel = solo;
  ro.contextParallel = ra.mode == RankMode::Worker && T == 1;
  return true;
}

GpuStatus GpuPrefill::load(const Artifact &artifact, const Manifest &m, const GpuProgram &program,
                           const GpuLoadOptions &lo, int virtualTpRanks, std::string &error) {
  program_ = &program;
  const int executors = virtualTpRanks > 1 ? virtualTpRanks : 1;
  for (int r = 0; r < executors; ++r) {
    executors_.push_back(std::make_unique<GpuExecutor>());
    GpuLoadOptions lr = lo;
    if (virtualTpRanks > 1)
      lr.tensorParallelRank = r;
    GpuStatus s = executors_[r]->load(artifact, m, program, lr, error);
    if (s != GpuStatus::Ok) {
      if (virtualTpRanks > 1)
        error = "virtual rank " + std::to_string(r) + ": " + error;
      return s;
    }
  }
  if (virtualTpRanks > 1)
    group_ = std::make_unique<HostAllReduceGroup>(virtualTpRanks);
  return GpuStatus::Ok;
}

GpuStatus GpuPrefill::run(const std::vector<HostTensor> &inputs, const GpuRunOptions &options,
                          int64_t warmup, int64_t repeat, std::string &error) {
  const int executors = executorCount();
  runs_.assign(executors, RankRun{});
  GpuRunOptions ro = options;
  ro.virtualTensorParallel = group_.get();
  if (executors == 1) {
    runRank(*executors_[0], *program_, inputs, ro, warmup, repeat, runs_[0]);
  } else {
    // One thread per virtual rank, in lockstep at the all-reduces; a
    // failing rank ends the group (the others stop there: PeerFailed).
    std::vector<std::thread> threads;
    for (int r = 0; r < executors; ++r)
      threads.emplace_back([&, r] {
        GpuRunOptions rankOpts = ro;
        if (r != 0)
          rankOpts.progress = nullptr;
        runRank(*executors_[r], *program_, inputs, rankOpts, warmup, repeat, runs_[r]);
        if (runs_[r].status != GpuStatus::Ok)
          group_->abort("virtual rank " + std::to_string(r) + " failed: " + runs_[r].error);
      });
    for (std::thread &t : threads)
      t.join();
  }
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < executors; ++r)
      if (runs_[r].status != GpuStatus::Ok &&
          (pass == 1 || runs_[r].status != GpuStatus::PeerFailed)) {
        error = (executors > 1 ? "virtual rank " + std::to_string(r) + ": " : std::string()) +
                runs_[r].error;
        return runs_[r].status;
      }
  runs_[0].st.ttftMs = median(runs_[0].runMs);
  if (executors > 1)
    tpCheck_ = compareVirtualRanks(runs_);
  return GpuStatus::Ok;
}

} // namespace h20::runtime
