//===- RankEnvironment.cpp - this process's place in an N-GPU prefill ----===//
#include "h20/Runtime/Parallel/RankEnvironment.h"

#include <cstdlib>

namespace h20::runtime {
namespace {

bool readCount(const std::function<const char *(const char *)> &getenv, const char *name,
               std::optional<int64_t> &out, std::string &error) {
  const char *v = getenv(name);
  if (!v || !*v)
    return true;
  char *end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 0 || n > (1 << 20)) {
    error = std::string(name) + "='" + v + "' is not a non-negative integer";
    return false;
  }
  out = n;
  return true;
}

} // namespace

bool readRankEnvironment(const std::function<const char *(const char *)> &getenv,
                         RankEnvironment &env, std::string &error) {
  env = RankEnvironment();
  if (!readCount(getenv, "WORLD_SIZE", env.worldSize, error) ||
      !readCount(getenv, "RANK", env.rank, error) ||
      !readCount(getenv, "LOCAL_RANK", env.localRank, error) ||
      !readCount(getenv, "H20_NCCL_TIMEOUT_S", env.ncclTimeoutS, error))
    return false;
  if (const char *f = getenv("H20_NCCL_ID_FILE"))
    env.ncclIdFile = f;
  return true;
}

bool assignRanks(const RankRequest &rq, const RankEnvironment &env, RankAssignment &out,
                 std::string &error) {
  out = RankAssignment();
  const bool worldSet = env.worldSize.has_value();
  const int64_t world = env.worldSize.value_or(1), rank = env.rank.value_or(0);
  if (rq.gpus && worldSet && world != rq.gpus) {
    error = "--gpus " + std::to_string(rq.gpus) + " disagrees with WORLD_SIZE=" +
            std::to_string(world);
    return false;
  }
  if (rq.virtualRanks) {
    // One process simulates every rank: no NCCL, GPU LOCAL_RANK (default 0).
    if (worldSet && world > 1) {
      error = "--virtual-ranks simulates the " + std::to_string(rq.gpus) +
              " ranks in one process; do not launch it as WORLD_SIZE=" + std::to_string(world) +
              " processes";
      return false;
    }
    out.ncclRanks = 0;
    out.device = static_cast<int>(env.localRank.value_or(0));
    return true;
  }
  if (worldSet && world > 1 && !env.rank) {
    error = "WORLD_SIZE=" + std::to_string(world) + " without RANK: each process of a " +
            "multi-GPU job needs its RANK (and LOCAL_RANK, its GPU; default RANK)";
    return false;
  }
  const int64_t n = rq.gpus ? rq.gpus : world;
  if (n < 1) {
    error = "WORLD_SIZE=0: no GPU to run on";
    return false;
  }
  if (rank >= n) {
    error = "RANK=" + std::to_string(rank) + " is not below the " + std::to_string(n) +
            " GPU(s) of the prefill";
    return false;
  }
  if (env.ncclTimeoutS && *env.ncclTimeoutS < 1) {
    error = "H20_NCCL_TIMEOUT_S=0: give the seconds a rank may wait for its peers (>= 1)";
    return false;
  }
  out.ncclRanks = static_cast<int>(n);
  out.ncclRank = static_cast<int>(rank);
  out.device = static_cast<int>(env.localRank.value_or(rank)); // one host: rank r on GPU r
  out.ncclTimeoutS = static_cast<double>(env.ncclTimeoutS.value_or(30));
  if (n > 1 && rq.tensorInputs) {
    error = "an N-GPU prefill (N = " + std::to_string(n) + ") runs token ids: give --ids, not "
            "--input / --inputs-from";
    return false;
  }
  if (n > 1 && rq.tensorParallel == 1 && (n & (n - 1)) != 0) {
    error = "--gpus " + std::to_string(n) + ": context parallelism needs a power of two (the "
            "prompt is cut into 2N equal chunks)";
    return false;
  }
  out.tensorParallelRank = rq.tensorParallel > 1 ? static_cast<int>(rank) : 0;
  if (n > 1 && !worldSet) {
    out.mode = RankMode::Launch;
    return true;
  }
  if (n > 1) {
    if (env.ncclIdFile.empty()) {
      error = "WORLD_SIZE=" + std::to_string(n) + ": set H20_NCCL_ID_FILE to a fresh file every "
              "rank can see (rank 0 writes the NCCL unique id there), or let h20-run start the "
              "ranks itself (--gpus N without WORLD_SIZE)";
      return false;
    }
    out.ncclIdFile = env.ncclIdFile;
    out.mode = RankMode::Worker;
  }
  return true;
}

} // namespace h20::runtime
