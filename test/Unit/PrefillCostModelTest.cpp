//===- PrefillCostModelTest.cpp - DeepSeek-V4.1 kernel pricing ------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Transforms/PrefillCostModel.h"

#include <gtest/gtest.h>

using namespace h20;

namespace {

const TargetDescription &target(const char *name) {
  const TargetDescription *t = findTarget(name);
  EXPECT_NE(t, nullptr) << name;
  return *t;
}

// On the GPUs the rates were measured on (132 SMs, the reference peaks)
// a kernel runs at its measured share of the peak.
TEST(PrefillCostModel, V41KernelsKeepTheirMeasuredRateOnTheReferenceGpus) {
  const double flops = 1e15;
  for (const char *name : {"h100", "h200"}) {
    const TargetDescription &t = target(name);
    EXPECT_NEAR(v41KernelMs(flops, 0.17, false, t), flops / (0.17 * 989e12) * 1e3, 1e-6) << name;
    EXPECT_NEAR(v41KernelMs(flops, 0.59, true, t), flops / (0.59 * 1979e12) * 1e3, 1e-6) << name;
  }
}

// On an H20 (148 / 296 TFLOP/s, 78 SMs): the tensor work at its peak plus
// the rest of the measured time scaled by 132 / 78, between the tensor
// floor and "the same share of the H20's peak".
TEST(PrefillCostModel, V41KernelsOnAnH20ScaleTheirNonTensorTimeBySms) {
  const TargetDescription &t = target("h20");
  ASSERT_EQ(t.sms, 78);
  const double flops = 1e15;
  for (double share : {0.17, 0.2, 0.59, 1.0}) {
    const double ms = v41KernelMs(flops, share, false, t);
    const double expect = (flops / 148e12 + (flops / (share * 989e12) - flops / 989e12) * 132 / 78) * 1e3;
    EXPECT_NEAR(ms, expect, 1e-6 * expect) << share;
    EXPECT_GE(ms, flops / 148e12 * 1e3 * (1 - 1e-12)) << share;
    EXPECT_LE(ms, flops / (share * 148e12) * 1e3 * (1 + 1e-12)) << share;
  }
  // A kernel at 0.17 of an H200 (the indexer today): 66.2 TFLOP/s on an H20, not
  // 0.17 x 148 = 25.2.
  EXPECT_NEAR(1e15 / (v41KernelMs(1e15, 0.17, false, t) * 1e-3) / 1e12, 66.2, 0.1);
}

// Nothing is priced where the target has no such peak (FP8 on an A100).
TEST(PrefillCostModel, V41KernelsNeedThePeak) {
  EXPECT_EQ(v41KernelMs(1e15, 0.59, true, target("a100")), 0.0);
  EXPECT_EQ(v41KernelMs(0, 0.59, false, target("h20")), 0.0);
}

} // namespace
