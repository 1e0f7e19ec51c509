//===- RankLauncher.h - start one h20-run process per GPU -------*- C++ -*-===//
//
// `h20-run MODEL.h20 --ids IDS --gpus N` (N > 1, WORLD_SIZE not set) starts
// N copies of itself, one per GPU, the way torchrun would: child r gets
// RANK=r, LOCAL_RANK=r, WORLD_SIZE=N, LOCAL_WORLD_SIZE=N, plus
// H20_NCCL_ID_FILE (a fresh file in a private temporary directory, through
// which rank 0 hands the ncclUniqueId to the others) and H20_RANK_LOG_DIR
// (where each rank leaves its log: the collectives it issued, its TTFT).
//
// Faults: when a rank exits non-zero or is killed, the launcher sends the
// others SIGTERM (SIGKILL after `graceS` seconds), says which rank failed
// and how, and exits non-zero: a dead rank never leaves the job hanging.
// Each rank leads its own process group (the signals reach what it
// started) and gets SIGTERM if the launcher dies. SIGINT/SIGTERM/SIGHUP to
// the launcher stop the ranks the same way.
// When every rank succeeded the launcher compares the ranks' logs
// (collectivesMatch: same collectives in the same order, paired sends and
// receives; tpCollectivesMatch: the same all-reduces of a tensor-parallel
// run) and fails when they differ.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_RANKLAUNCHER_H
#define H20_RUNTIME_RANKLAUNCHER_H

#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Parallel/TensorParallel.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace h20::runtime {

/// The environment variable naming the rank-log directory (set by the
/// launcher for its children).
inline constexpr const char *kRankLogDirEnv = "H20_RANK_LOG_DIR";

/// Runs `ranks` copies of the program `exe` (h20-run: "/proc/self/exe",
/// itself) with `argv` (argv[0] included, null-terminated) and the
/// environment above; waits for them. Returns
/// the exit code for the launcher: 0 when every rank exited 0 and their
/// collective logs match; otherwise, with the reason on stderr, the first
/// failing rank's exit code (127: it could not be started), 1 for a rank
/// killed by a signal, a fork failure or differing logs, 128 + signal
/// when the launcher itself was stopped by SIGINT/SIGTERM/SIGHUP.
/// `graceS`: seconds between SIGTERM and SIGKILL when stopping.
int launchRanks(int ranks, const std::string &exe, char **argv, double graceS = 10);

/// A rank's log, written by the rank (RANK) into kRankLogDirEnv when that
/// is set: rank-R.json with {"rank", "ttft_ms", "collectives": [...],
/// "tp_collectives": [...]} (the last optional: tensor parallelism).
/// `json` is the serialised object; false with `error` when it cannot be
/// written.
bool writeRankLog(int rank, const std::string &json, std::string &error);

/// One rank's collectives as the rank log and h20-run's report list them:
/// [{"layer", "step", "send_to", "send_block_of", "send_bytes", "recv_from",
/// "recv_block_of", "recv_bytes"}, ...]; and back (missing fields read as
/// -1, which collectivesMatch rejects).
nlohmann::json collectivesToJson(const std::vector<CpCollective> &log);
std::vector<CpCollective> collectivesFromJson(const nlohmann::json &array);

/// A rank's all-reduces (tensor parallelism) as the rank log and the report
/// list them: [{"step", "chunk", "bytes", "dtype"}, ...]; and back (missing
/// fields read as -1 / "", which tpCollectivesMatch reports as differences
/// unless every rank lacks them alike).
nlohmann::json tpCollectivesToJson(const std::vector<TpCollective> &log);
std::vector<TpCollective> tpCollectivesFromJson(const nlohmann::json &array);

/// Reads rank-0.json .. rank-(ranks-1).json from `dir` (the launcher's
/// log directory) and checks that the ranks' collectives match, both the
/// context-parallel ring (collectivesMatch) and the tensor-parallel
/// all-reduces (tpCollectivesMatch). True with a one-line `summary`
/// ("context parallel (NCCL): N ranks, ..." or "tensor parallel ..."); false
/// with `error` naming the rank whose log is missing or unreadable, or the
/// first difference.
bool checkRankLogs(const std::string &dir, int ranks, std::string &summary, std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_RANKLAUNCHER_H
