//===- RankEnvironment.h - this process's place in an N-GPU prefill -*- C++ -*-===//
//
// h20-run runs a prefill on 1..N GPUs of one host: it starts the N rank
// processes itself (--gpus N), or is one of them (WORLD_SIZE, RANK,
// LOCAL_RANK set by it or by a launcher such as torchrun), or simulates
// every rank in one process (--virtual-ranks). These rules, pure and
// unit-tested (RankEnvironmentTest), decide which, from the command line's
// request and the environment. Plain C++, no CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_PARALLEL_RANKENVIRONMENT_H
#define H20_RUNTIME_PARALLEL_RANKENVIRONMENT_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace h20::runtime {

/// The environment variables of a multi-GPU job, as read (absent or empty:
/// nullopt / "").
struct RankEnvironment {
  std::optional<int64_t> worldSize;  ///< WORLD_SIZE
  std::optional<int64_t> rank;       ///< RANK
  std::optional<int64_t> localRank;  ///< LOCAL_RANK: the CUDA device
  std::optional<int64_t> ncclTimeoutS; ///< H20_NCCL_TIMEOUT_S
  std::string ncclIdFile;            ///< H20_NCCL_ID_FILE
};

/// Reads them through `getenv` (std::getenv in h20-run; a map in tests).
/// False with `error` naming the variable when one is set but is not an
/// integer in [0, 2^20].
bool readRankEnvironment(const std::function<const char *(const char *)> &getenv,
                         RankEnvironment &env, std::string &error);

/// How this process takes part in the prefill.
enum class RankMode {
  Single, ///< one GPU (--gpus 1, or --virtual-ranks)
  Launch, ///< --gpus N > 1 without WORLD_SIZE: start the N rank processes
  Worker, ///< rank RANK of WORLD_SIZE > 1 processes
};

/// What the command line asks for.
struct RankRequest {
  int64_t gpus = 0;          ///< --gpus N; 0: not given
  bool virtualRanks = false; ///< --virtual-ranks
  int tensorParallel = 1;    ///< the artifact's T (1: not tensor parallel)
  bool tensorInputs = false; ///< --input / --inputs-from rather than --ids
};

/// The decision.
struct RankAssignment {
  RankMode mode = RankMode::Single;
  int ncclRanks = 1;  ///< N (0 with --virtual-ranks: no NCCL)
  int ncclRank = 0;   ///< RANK
  int device = 0;     ///< LOCAL_RANK (default RANK: rank r on GPU r)
  int tensorParallelRank = 0; ///< RANK when tensor parallel, else 0
  double ncclTimeoutS = 30;   ///< H20_NCCL_TIMEOUT_S (default 30)
  std::string ncclIdFile;     ///< Worker: where rank 0 writes the NCCL id
};

/// Applies the rules: --gpus must agree with WORLD_SIZE; --virtual-ranks
/// is one process (refused under WORLD_SIZE > 1; device LOCAL_RANK);
/// WORLD_SIZE > 1 needs RANK; RANK < N; H20_NCCL_TIMEOUT_S >= 1; an N-GPU
/// prefill runs token ids; context parallelism (T = 1) needs N a power of
/// two; N > 1 without WORLD_SIZE launches, with it is a worker, which needs
/// H20_NCCL_ID_FILE. False with `error` (a sentence for the user) on the
/// first rule broken.
bool assignRanks(const RankRequest &request, const RankEnvironment &env, RankAssignment &out,
                 std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_PARALLEL_RANKENVIRONMENT_H
