//===- RankEnvironmentTest.cpp - h20-run's rank rules, without GPUs ------===//
//
// assignRanks (RankEnvironment.h) decides from --gpus / --virtual-ranks and
// WORLD_SIZE / RANK / LOCAL_RANK / H20_NCCL_* whether this process runs one
// GPU, launches N ranks or is one of them; each rule and its message.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Parallel/RankEnvironment.h"

#include <gtest/gtest.h>

#include <map>

using namespace h20::runtime;

namespace {

RankEnvironment env(std::map<std::string, std::string> vars) {
  RankEnvironment e;
  std::string error;
  EXPECT_TRUE(readRankEnvironment(
      [&](const char *name) -> const char * {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      e, error))
      << error;
  return e;
}

std::string refused(const RankRequest &rq, const RankEnvironment &e) {
  RankAssignment a;
  std::string error;
  return assignRanks(rq, e, a, error) ? "(accepted)" : error;
}

} // namespace

TEST(RankEnvironment, ReadsAndRejectsValues) {
  RankEnvironment e = env({{"WORLD_SIZE", "4"}, {"RANK", "2"}, {"LOCAL_RANK", ""},
                           {"H20_NCCL_ID_FILE", "/tmp/id"}});
  EXPECT_EQ(e.worldSize, 4);
  EXPECT_EQ(e.rank, 2);
  EXPECT_FALSE(e.localRank.has_value()); // empty: unset
  EXPECT_EQ(e.ncclIdFile, "/tmp/id");
  RankEnvironment bad;
  std::string error;
  EXPECT_FALSE(readRankEnvironment(
      [](const char *name) -> const char * { return std::string(name) == "RANK" ? "-1" : nullptr; },
      bad, error));
  EXPECT_EQ(error, "RANK='-1' is not a non-negative integer");
}

TEST(RankEnvironment, OneGpuByDefault) {
  RankAssignment a;
  std::string error;
  ASSERT_TRUE(assignRanks({}, env({}), a, error)) << error;
  EXPECT_EQ(a.mode, RankMode::Single);
  EXPECT_EQ(a.ncclRanks, 1);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.ncclTimeoutS, 30);
}

TEST(RankEnvironment, LaunchesWithoutWorldSize) {
  RankAssignment a;
  std::string error;
  RankRequest rq;
  rq.gpus = 4;
  ASSERT_TRUE(assignRanks(rq, env({}), a, error)) << error;
  EXPECT_EQ(a.mode, RankMode::Launch);
  EXPECT_EQ(a.ncclRanks, 4);
}

TEST(RankEnvironment, WorkerTakesItsRankAndDevice) {
  RankAssignment a;
  std::string error;
  RankRequest rq;
  rq.tensorParallel = 2;
  ASSERT_TRUE(assignRanks(rq, env({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"H20_NCCL_ID_FILE", "/f"},
                                   {"H20_NCCL_TIMEOUT_S", "5"}}),
                          a, error))
      << error;
  EXPECT_EQ(a.mode, RankMode::Worker);
  EXPECT_EQ(a.ncclRank, 1);
  EXPECT_EQ(a.device, 1); // LOCAL_RANK defaults to RANK
  EXPECT_EQ(a.tensorParallelRank, 1);
  EXPECT_EQ(a.ncclTimeoutS, 5);
  EXPECT_EQ(a.ncclIdFile, "/f");
}

TEST(RankEnvironment, VirtualRanksAreOneProcess) {
  RankAssignment a;
  std::string error;
  RankRequest rq;
  rq.gpus = 8;
  rq.virtualRanks = true;
  ASSERT_TRUE(assignRanks(rq, env({{"LOCAL_RANK", "3"}}), a, error)) << error;
  EXPECT_EQ(a.mode, RankMode::Single);
  EXPECT_EQ(a.ncclRanks, 0);
  EXPECT_EQ(a.device, 3);
  EXPECT_NE(refused(rq, env({{"WORLD_SIZE", "8"}, {"RANK", "0"}})).find("one process"),
            std::string::npos);
}

TEST(RankEnvironment, RefusesInconsistentJobs) {
  RankRequest four;
  four.gpus = 4;
  EXPECT_EQ(refused(four, env({{"WORLD_SIZE", "2"}, {"RANK", "0"}})),
            "--gpus 4 disagrees with WORLD_SIZE=2");
  EXPECT_NE(refused({}, env({{"WORLD_SIZE", "2"}})).find("without RANK"), std::string::npos);
  EXPECT_NE(refused({}, env({{"WORLD_SIZE", "2"}, {"RANK", "2"}})).find("is not below"),
            std::string::npos);
  EXPECT_NE(refused({}, env({{"WORLD_SIZE", "0"}})).find("no GPU"), std::string::npos);
  EXPECT_NE(refused({}, env({{"H20_NCCL_TIMEOUT_S", "0"}})).find(">= 1"), std::string::npos);
  EXPECT_NE(refused({}, env({{"WORLD_SIZE", "2"}, {"RANK", "0"}})).find("H20_NCCL_ID_FILE"),
            std::string::npos);
  RankRequest three;
  three.gpus = 3;
  EXPECT_NE(refused(three, env({})).find("power of two"), std::string::npos);
  three.tensorParallel = 3; // tensor parallelism: any N
  EXPECT_EQ(refused(three, env({})), "(accepted)");
  four.tensorInputs = true;
  EXPECT_NE(refused(four, env({})).find("runs token ids"), std::string::npos);
}
