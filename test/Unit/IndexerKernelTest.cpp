//===- IndexerKernelTest.cpp - the lightning-indexer kernel, NVRTC, ptxas -===//
//
// Without a GPU: names, shared-memory sizes, and (when NVRTC and ptxas are
// installed) that every instantiation of indexer.cuh compiles to PTX and
// assembles for sm_90 without spilling. Its numerics are checked on a GPU
// by models/deepseek_v41/gpu-tiny-check.sh (the tiny V4.1 config against
// the numpy reference).
//
//===----------------------------------------------------------------------===//
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/IndexerKernel.h"
#include "h20/Target/PtxAssembler.h"
#include "PtxasExpectations.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace h20;

TEST(IndexerKernel, NamesAndSharedMemory) {
  EXPECT_EQ((IndexerKernel{2, 2, 2, 0}.name()), "h20_indexer_m0_bf16_bf16_bf16");
  EXPECT_EQ((IndexerKernel{0, 1, 2, 1}.name()), "h20_indexer_m1_f32_f16_bf16");
  // 4 heads x 24 + 4 floats = 400 bytes; mode 1 adds 6 int64 block indices.
  EXPECT_EQ(indexerSmemBytes(0, 4, 24, 6), 400);
  EXPECT_EQ(indexerSmemBytes(1, 4, 24, 6), 448);
  // Rounded up to 8 bytes: 3 heads x 1 + 3 = 6 floats = 24 bytes; 1 x 1 + 1 = 8.
  EXPECT_EQ(indexerSmemBytes(2, 1, 1, 0), 8);
  std::string ptx, log;
  EXPECT_FALSE(compileIndexerPtx({IndexerKernel{3, 0, 0, 0}}, "sm_90", ptx, log));
  EXPECT_NE(log.find("unsupported"), std::string::npos) << log;
  EXPECT_FALSE(compileIndexerPtx({IndexerKernel{}}, "gfx90", ptx, log));
  EXPECT_NE(log.find("malformed"), std::string::npos) << log;
}

TEST(IndexerKernel, TensorCoreVariantChoice) {
  IndexerKernel k;
  ASSERT_TRUE(chooseIndexerMma(0, 2, 2, 0, 32, 128, 512, k));
  EXPECT_EQ(k.name(), "h20_indexer_mma_m0_bf16_f32_h32_d128_c1024_o4");
  EXPECT_EQ(k.rowsPerCta(), 2);
  // 2 x 64 x 128 x 2 (key tiles) + max(64 x 128 x 2 (query), 2 x 1024 x 8
  // (buffers)) + 2 x 8 + 32 (tau, a cut's state) + 256 + 1024 + 12 -> 16.
  // Every buffer from 576 to 1024 entries fits 4 CTAs an SM: the largest.
  EXPECT_EQ(indexerMmaSmemBytes(k), 32768 + 16384 + 48 + 1280 + 16);
  EXPECT_EQ(k.ctasPerSm, 4);
  ASSERT_TRUE(chooseIndexerMma(0, 1, 1, 1, 4, 24, 8, k));
  EXPECT_EQ(k.paddedHeads, 16);
  EXPECT_EQ(k.paddedDim, 64);
  EXPECT_EQ(k.cap, 128);
  EXPECT_EQ(k.rowsPerCta(), 4);
  EXPECT_FALSE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, k)) << "mode 1, T unknown";
  // Mode 1: V4.1-Flash's reindex layer at 512K (T = 524288, blocks of 8):
  // after the mode-0 layout, 2 rows x 65536 block bits and 8192 tile bits.
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, k, 8, 524288));
  EXPECT_EQ(k.name(), "h20_indexer_mma_m1_bf16_bf16_h32_d128_c1024_o3");
  EXPECT_EQ(indexerMmaSmemBytes(k, 524288, 8), 32768 + 16384 + 48 + 1280 + 16 + 2 * 8192 + 1024);
  // The same with its 2048 candidate blocks: 2 rows x 16K picked entries
  // are under half of 524288, so it gathers them: three gathered tiles'
  // entries, segments and counts (2336 bytes) instead of the tile bits.
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, k, 8, 524288, kIndexerMmaMaxSmem,
                               kIndexerMmaSmemPerSm, 2048));
  EXPECT_EQ(k.name(), "h20_indexer_mma_m1_bf16_bf16_h32_d128_c1024_o3_g");
  EXPECT_EQ(indexerMmaSmemBytes(k, 524288, 8), 32768 + 16384 + 48 + 1280 + 16 + 2336 + 2 * 8192);
  // At 32K entries (ratio 4 at 128K) the picks cover most key tiles: no.
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, k, 8, 32768, kIndexerMmaMaxSmem,
                               kIndexerMmaSmemPerSm, 2048));
  EXPECT_FALSE(k.gather);
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, k, 8, 32768, kIndexerMmaMaxSmem,
                               kIndexerMmaSmemPerSm, 2048, 1))
      << "forced";
  EXPECT_TRUE(k.gather);
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 4, 24, 8, k, 3, 0)) << "any block size, no entries";
  EXPECT_FALSE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, k, 1, 4 << 20)) << "bits over 227 KiB";
  EXPECT_FALSE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, k, 0, 2048)) << "block 0";
  // Mode 2 (candidate blocks) with a block size dividing 32: V4.1-Flash's
  // 2048 blocks of 8. Buffers of 4096 (2K) would leave room for 2 CTAs an
  // SM; 2624 is the largest that fits 3 ((76096 + 1024) x 3 <= 228 KiB,
  // 64 more entries a row would not); 4 need buffers under K + 64.
  ASSERT_TRUE(chooseIndexerMma(2, 2, 2, 2, 32, 128, 2048, k, 8));
  EXPECT_EQ(k.name(), "h20_indexer_mma_m2_bf16_bf16_h32_d128_c2624_o3");
  EXPECT_EQ(indexerMmaSmemBytes(k), 32768 + 2 * 2624 * 8 + 48 + 1280 + 16)
      << "buffers over the query block";
  EXPECT_EQ(k.ctasPerSm, 3);
  IndexerKernel bigger = k;
  bigger.cap += 64;
  EXPECT_GT((indexerMmaSmemBytes(bigger) + kIndexerMmaSmemReservedPerCta) * 3,
            kIndexerMmaSmemPerSm);
  // K not a power of two: the buffer also holds the power of two >= K that
  // the final sort takes.
  ASSERT_TRUE(chooseIndexerMma(0, 2, 2, 2, 32, 128, 600, k));
  EXPECT_GE(k.cap, 1024);
  EXPECT_EQ(k.cap % 64, 0);
  EXPECT_FALSE(chooseIndexerMma(2, 2, 2, 2, 32, 128, 512, k, 64)) << "block over a warp";
  EXPECT_FALSE(chooseIndexerMma(2, 2, 2, 2, 32, 128, 512, k, 6)) << "block not a power of two";
  EXPECT_FALSE(chooseIndexerMma(0, 0, 0, 0, 32, 128, 512, k)) << "f32: scalar kernel";
  EXPECT_FALSE(chooseIndexerMma(0, 2, 1, 2, 32, 128, 512, k)) << "mixed 16-bit types";
  EXPECT_FALSE(chooseIndexerMma(0, 2, 2, 2, 65, 128, 512, k));
  EXPECT_FALSE(chooseIndexerMma(0, 2, 2, 2, 32, 257, 512, k));
  EXPECT_FALSE(chooseIndexerMma(0, 2, 2, 2, 32, 128, 4096, k));
}

TEST(IndexerKernel, CompilesAndAssemblesForSm90WithoutSpills) {
  std::string reason;
  if (!nvrtcAvailable(&reason)) {
    std::printf("SKIP: %s\n", reason.c_str());
    GTEST_SKIP() << reason;
  }
  std::vector<IndexerKernel> kernels;
  for (int mode : {0, 1, 2})
    for (int t : {0, 1, 2})
      kernels.push_back(IndexerKernel{t, t, t, mode});
  // The tensor-core variants: the tiny config's (4 heads x 24, K 8) and
  // V4.1-Flash's (32 heads x 128, K 512), f16 with f32 weights.
  IndexerKernel tiny, flash, f16;
  ASSERT_TRUE(chooseIndexerMma(0, 2, 2, 2, 4, 24, 8, tiny));
  ASSERT_TRUE(chooseIndexerMma(0, 2, 2, 2, 32, 128, 512, flash));
  ASSERT_TRUE(chooseIndexerMma(0, 1, 1, 0, 64, 256, 2048, f16));
  IndexerKernel tinyBlocks, flashBlocks;
  ASSERT_TRUE(chooseIndexerMma(2, 2, 2, 2, 4, 24, 6, tinyBlocks, 4));
  ASSERT_TRUE(chooseIndexerMma(2, 2, 2, 2, 32, 128, 2048, flashBlocks, 8));
  IndexerKernel tinyWithin, flashWithin, tinyGather, flashGather;
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 4, 24, 8, tinyWithin, 4, 250));
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, flashWithin, 8, 131072));
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 4, 24, 8, tinyGather, 4, 250, kIndexerMmaMaxSmem,
                               kIndexerMmaSmemPerSm, 0, 1));
  ASSERT_TRUE(chooseIndexerMma(1, 2, 2, 2, 32, 128, 512, flashGather, 8, 131072,
                               kIndexerMmaMaxSmem, kIndexerMmaSmemPerSm, 2048));
  ASSERT_TRUE(flashGather.gather && tinyGather.gather && !flashWithin.gather);
  kernels.insert(kernels.end(), {tiny, flash, f16, tinyBlocks, flashBlocks, tinyWithin, flashWithin,
                                 tinyGather, flashGather});
  std::string ptx, log;
  ASSERT_TRUE(compileIndexerPtx(kernels, "sm_90", ptx, log)) << log;
  EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
  for (const IndexerKernel &k : kernels)
    EXPECT_NE(ptx.find(".entry " + k.name() + "("), std::string::npos) << k.name();
  if (findPtxas().empty()) {
    std::printf("SKIP: ptxas not found; PTX not assembled\n");
    GTEST_SKIP() << "ptxas not found";
  }
  std::string cubin, report, error;
  ASSERT_EQ(assemblePtx(ptx, "sm_90", cubin, report, error), PtxasStatus::Ok) << error;
  std::vector<std::string> names;
  for (const IndexerKernel &k : kernels)
    names.push_back(k.name());
  test::expectListedWithoutSpills(report, names);
  std::printf("%s", report.c_str());
}
