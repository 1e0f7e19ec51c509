//===- RankLauncherTest.cpp - the N-process launcher of h20-run ----------===//
//
// launchRanks with /bin/sh as the "rank" program, so the fault handling is
// tested without GPUs: a killed or failing rank stops the others quickly,
// every rank gets its RANK / WORLD_SIZE / H20_NCCL_ID_FILE, and the ranks'
// collective logs are compared.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Parallel/RankLauncher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

using namespace h20::runtime;

namespace {

/// launchRanks(ranks, /bin/sh, sh -c SCRIPT), timed.
int runShell(int ranks, const std::string &script, double graceS, double &seconds) {
  std::vector<std::string> args{"sh", "-c", script};
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  auto t0 = std::chrono::steady_clock::now();
  int code = launchRanks(ranks, "/bin/sh", argv.data(), graceS);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return code;
}

/// A rank log with `collectives` (JSON array text) for this rank.
std::string writeLog(const std::string &collectives) {
  return "printf '{\"rank\": %s, \"ttft_ms\": 1.5, \"collectives\": " + collectives +
         "}' \"$RANK\" > \"$H20_RANK_LOG_DIR/rank-$RANK.json\"";
}

TEST(RankLauncher, EveryRankSucceedsAndLogsMatch) {
  double s = 0;
  // Each rank checks its environment; the id file path is shared and fresh.
  std::string script = "test \"$WORLD_SIZE\" = 4 && test \"$LOCAL_RANK\" = \"$RANK\" && "
                       "test -n \"$H20_NCCL_ID_FILE\" && test ! -e \"$H20_NCCL_ID_FILE\" && " +
                       writeLog("[]");
  EXPECT_EQ(runShell(4, script, 2, s), 0);
}

TEST(RankLauncher, KilledRankStopsTheOthers) {
  double s = 0;
  // Rank 1 dies by SIGKILL; the others would sleep 60 s.
  int code = runShell(3, "if [ \"$RANK\" = 1 ]; then kill -9 $$; fi; exec sleep 60", 2, s);
  EXPECT_EQ(code, 1);
  EXPECT_LT(s, 10.0) << "the launcher must stop the other ranks, not wait for them";
}

TEST(RankLauncher, FailingRankExitCodeIsReturned) {
  double s = 0;
  int code = runShell(2, "if [ \"$RANK\" = 0 ]; then exit 3; fi; exec sleep 60", 2, s);
  EXPECT_EQ(code, 3);
  EXPECT_LT(s, 10.0);
}

TEST(RankLauncher, RankIgnoringSigtermIsKilledAfterTheGrace) {
  double s = 0;
  int code = runShell(2, "if [ \"$RANK\" = 0 ]; then exit 2; fi; trap '' TERM; "
                      "while :; do sleep 0.1; done",
                      1, s);
  EXPECT_EQ(code, 2);
  EXPECT_LT(s, 10.0);
}

TEST(RankLauncher, MissingOrDifferingLogsFail) {
  double s = 0;
  EXPECT_EQ(runShell(2, "true", 2, s), 1) << "ranks that leave no log";
  // Rank 1 issues one collective that rank 0 does not.
  std::string one = "[{\"layer\": 0, \"step\": 1, \"send_to\": 0, \"recv_from\": 0, "
                    "\"send_block_of\": 1, \"recv_block_of\": 0, \"send_bytes\": 8, "
                    "\"recv_bytes\": 8}]";
  std::string script = "if [ \"$RANK\" = 1 ]; then " + writeLog(one) + "; else " +
                       writeLog("[]") + "; fi";
  EXPECT_EQ(runShell(2, script, 2, s), 1);
}

TEST(RankLauncher, PairedCollectivesMatch) {
  double s = 0;
  // Two ranks, one ring step: each sends its block to the other.
  std::string log = "[{\"layer\": 0, \"step\": 1, \"send_to\": %d, \"recv_from\": %d, "
                    "\"send_block_of\": %d, \"recv_block_of\": %d, \"send_bytes\": 8, "
                    "\"recv_bytes\": 8}]";
  std::string script = "o=$((1 - RANK)); printf '{\"rank\": %s, \"collectives\": " + log +
                       "}' \"$RANK\" $o $o \"$RANK\" $o > \"$H20_RANK_LOG_DIR/rank-$RANK.json\"";
  EXPECT_EQ(runShell(2, script, 2, s), 0);
}

} // namespace
