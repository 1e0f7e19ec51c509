//===- MoeKernelTest.cpp - the routed-experts kernels, NVRTC, ptxas -------===//
//
// Without a GPU: names, grids and shape limits of the MoE kernels
// (include/h20/Target/MoeKernel.h), and (when NVRTC and ptxas are
// installed) that kernels/moe.cuh compiles to PTX with every entry point
// and assembles for sm_90 without spilling. Its numerics are checked on a
// GPU by moe-check (every kernel against a CPU reference).
//
//===----------------------------------------------------------------------===//
#include "h20/Target/MoeKernel.h"
#include "PtxasExpectations.h"
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/PtxAssembler.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace h20;

namespace {

std::vector<std::string> allKernels() {
  std::vector<std::string> names{moePositionsKernel()};
  for (int t = 0; t < 3; ++t) {
    names.push_back(moeRouteKernel(t));
    names.push_back(moeGatherKernel(t));
    names.push_back(moeSwigluKernel(t));
    names.push_back(moeCombineKernel(t));
    names.push_back(moeFp4GemmKernel(t));
  }
  return names;
}

/// A failure for each kernel of `names` without an entry in `ptx`.
void expectEntries(const std::string &ptx, const std::vector<std::string> &names) {
  for (const std::string &name : names)
    EXPECT_NE(ptx.find(".entry " + name + "("), std::string::npos) << name;
}

/// Assembles `ptx` for `arch` into `report` (ptxas's -v output), every
/// kernel of `names` listed without spills. False when ptxas is missing
/// (the caller skips); a failed assembly is a test failure.
bool assembleWithoutSpills(const std::string &ptx, const char *arch,
                           const std::vector<std::string> &names, std::string &report) {
  if (findPtxas().empty()) {
    std::printf("SKIP: ptxas not found; PTX not assembled\n");
    return false;
  }
  std::string cubin, error;
  EXPECT_EQ(assemblePtx(ptx, arch, cubin, report, error), PtxasStatus::Ok) << error;
  test::expectListedWithoutSpills(report, names);
  return true;
}

} // namespace

TEST(MoeKernel, NamesGridsAndLimits) {
  EXPECT_EQ(moeRouteKernel(0), "h20_moe_route_bf32");
  EXPECT_EQ(moeRouteKernel(1), "h20_moe_route_bf16");
  EXPECT_EQ(moeRouteKernel(2), "h20_moe_route_bbf16");
  EXPECT_EQ(moePositionsKernel(), "h20_moe_positions");
  EXPECT_EQ(moeGatherKernel(2), "h20_moe_gather_bf16");
  EXPECT_EQ(moeSwigluKernel(1), "h20_moe_swiglu_f16");
  EXPECT_EQ(moeCombineKernel(0), "h20_moe_combine_f32");
  EXPECT_EQ(moeGatherFp8Kernel(2), "h20_moe_gather_fp8_bf16");
  EXPECT_EQ(moeGatherFp8Kernel(3), "");
  EXPECT_EQ(moeSwigluFp8Kernel(), "h20_moe_swiglu_fp8");
  EXPECT_EQ(moeRouteKernel(3), "");
  EXPECT_EQ(moeCombineKernel(-1), "");

  EXPECT_EQ(moeRouteGrid(0), 1);
  EXPECT_EQ(moeRouteGrid(8), 1);
  EXPECT_EQ(moeRouteGrid(9), 2);
  EXPECT_EQ(moePositionsGrid(384), 384);
  EXPECT_EQ(moeGatherGrid(6 * 1000), 750);
  EXPECT_EQ(moeGatherGrid(6 * 1001), 751);
  EXPECT_EQ(moeSwigluGrid(0), 1);
  EXPECT_EQ(moeSwigluGrid(4097), 2);
  // 512K tokens x top-6 x I 2048: capped, the kernel strides over the rest.
  EXPECT_EQ(moeSwigluGrid(int64_t(524288) * 6 * 2048), kMoeSwigluMaxCtas);
  EXPECT_EQ(moeCombineGrid(300), 300);

  // The MXFP4 expert GEMM: 128 x 128 tensor-core tiles (bf16), 64 x 64
  // CUDA-core ones (f32, f16); y bounds the experts' row tiles.
  EXPECT_EQ(moeFp4GemmKernel(2), "h20_moe_fp4_gemm_bf16");
  EXPECT_EQ(moeFp4GemmKernel(0), "h20_moe_fp4_gemm_f32");
  EXPECT_EQ(moeFp4GemmKernel(3), "");
  EXPECT_EQ(moeFp4GemmGridX(2304, 2), 18);
  EXPECT_EQ(moeFp4GemmGridX(72, 0), 2);
  EXPECT_EQ(moeFp4GemmGridY(16384 * 6, 384, 2), 768 + 384);
  EXPECT_EQ(moeFp4GemmGridY(138, 4, 1), 3 + 4);
  EXPECT_EQ(moeFp4GemmSmemBytes(2), 77824);
  EXPECT_EQ(moeFp4GemmSmemBytes(0), 0);
  // The wgmma variant: bf16 only; three stages + three dequantised W tiles
  // + 16 + 1024 bytes, two CTAs within an SM's 228 KiB (1 KiB reserved each).
  EXPECT_EQ(moeFp4GemmKernel(2, true), "h20_moe_fp4_gemm_bf16_wg");
  EXPECT_EQ(moeFp4GemmKernel(0, true), "");
  EXPECT_TRUE(moeFp4GemmWgmmaTakes(2));
  EXPECT_FALSE(moeFp4GemmWgmmaTakes(1));
  EXPECT_EQ(moeFp4GemmSmemBytes(2, true), 111632);
  EXPECT_LE(2 * (moeFp4GemmSmemBytes(2, true) + 1024), 228 * 1024);
  EXPECT_EQ(moeFp4GemmFp8Kernel(), "h20_moe_fp4_gemm_fp8_wg");
  EXPECT_EQ(moeFp4GemmFp8SmemBytes(), 126992);

  std::string why;
  EXPECT_TRUE(moeShapeSupported(384, 6, &why)) << why;
  EXPECT_TRUE(moeShapeSupported(8, 2, &why)) << why;
  EXPECT_TRUE(moeShapeSupported(1024, 16, &why)) << why;
  EXPECT_TRUE(moeShapeSupported(1, 1, &why)) << why;
  EXPECT_FALSE(moeShapeSupported(1025, 6, &why));
  EXPECT_NE(why.find("1025 experts"), std::string::npos) << why;
  EXPECT_FALSE(moeShapeSupported(384, 17, &why));
  EXPECT_NE(why.find("top_k 17"), std::string::npos) << why;
  EXPECT_FALSE(moeShapeSupported(4, 5, &why));
  EXPECT_FALSE(moeShapeSupported(8, 0, &why));
  EXPECT_FALSE(moeShapeSupported(0, 1, &why));

  std::string ptx, log;
  EXPECT_FALSE(compileMoePtx("gfx90", ptx, log));
  EXPECT_NE(log.find("malformed"), std::string::npos) << log;
}

TEST(MoeKernel, CompilesAndAssemblesForSm90WithoutSpills) {
  std::string reason;
  if (!nvrtcAvailable(&reason)) {
    std::printf("SKIP: %s\n", reason.c_str());
    GTEST_SKIP() << reason;
  }
  std::string ptx, log;
  ASSERT_TRUE(compileMoePtx("sm_90", ptx, log)) << log;
  const std::vector<std::string> names = allKernels();
  expectEntries(ptx, names);
  // The route kernel counts picks with atomics (the permutation itself uses none).
  EXPECT_NE(ptx.find("atom.global.add.u32"), std::string::npos);
  std::string report;
  if (!assembleWithoutSpills(ptx, "sm_90", names, report))
    GTEST_SKIP() << "ptxas not found";
  std::printf("%s", report.c_str());
}

// sm_90a adds the wgmma MXFP4 GEMM (absent from the sm_90 module: it needs
// the arch-specific features), assembled without spills, with every wgmma
// of the k loop kept asynchronous (ptxas says C7515 / C7518-style
// "wgmma ... serialized" when it cannot).
TEST(MoeKernel, CompilesTheWgmmaGemmForSm90a) {
  std::string reason;
  if (!nvrtcAvailable(&reason)) {
    std::printf("SKIP: %s\n", reason.c_str());
    GTEST_SKIP() << reason;
  }
  std::string ptx, log;
  ASSERT_TRUE(compileMoePtx("sm_90", ptx, log)) << log;
  EXPECT_EQ(ptx.find(".entry h20_moe_fp4_gemm_bf16_wg("), std::string::npos);
  EXPECT_EQ(ptx.find(".entry h20_moe_swiglu_fp8("), std::string::npos); // FP8: sm_90a only
  ASSERT_TRUE(compileMoePtx("sm_90a", ptx, log)) << log;
  std::vector<std::string> names = allKernels();
  names.push_back(moeFp4GemmKernel(2, true));
  names.push_back(moeFp4GemmFp8Kernel());
  for (int t = 0; t < 3; ++t)
    names.push_back(moeGatherFp8Kernel(t));
  names.push_back(moeSwigluFp8Kernel());
  expectEntries(ptx, names);
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), std::string::npos);
  std::string report;
  if (!assembleWithoutSpills(ptx, "sm_90a", names, report))
    GTEST_SKIP() << "ptxas not found";
  EXPECT_EQ(report.find("serializ"), std::string::npos) << report;
}
