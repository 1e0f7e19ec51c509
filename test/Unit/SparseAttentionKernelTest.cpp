//===- SparseAttentionKernelTest.cpp - the sparse-attention kernel, NVRTC, ptxas -===//
//
// Without a GPU: names, shared-memory sizes, rejected variants, and (when
// NVRTC and ptxas are installed) that the instantiations of
// sparse_attention.cuh compile to PTX and assemble for sm_90 with tensor-core
// MMAs and without spilling. Its numerics are checked on a GPU by
// sparse-attention-check (random cases against a float64 reference) and by
// the tiny V4.1 config in scripts/gpu-test.sh.
//
//===----------------------------------------------------------------------===//
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/PtxAssembler.h"
#include "PtxasExpectations.h"
#include "h20/Target/SparseAttentionKernel.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace h20;

TEST(SparseAttentionKernel, NamesSharedMemoryAndRejectedVariants) {
  EXPECT_EQ((SparseAttentionKernel{2, 0, 512, true}.name()), "h20_sparse_attn_bf16_sf32_d512_c");
  EXPECT_EQ((SparseAttentionKernel{1, 1, 64, false}.name()), "h20_sparse_attn_f16_sf16_d64_w");
  EXPECT_EQ(sparseAttentionPaddedDim(40), 64);
  EXPECT_EQ(sparseAttentionPaddedDim(64), 64);
  EXPECT_EQ(sparseAttentionPaddedDim(65), 128);
  EXPECT_EQ(sparseAttentionPaddedDim(512), 512);
  // DP = 512 (the Flash shape): Q 64 KiB + 2 key tiles 128 KiB + P 8 KiB +
  // 1 KiB softmax exchange + 64 B counts + 640 slots x 4 B.
  EXPECT_EQ(sparseAttentionSmemBytes(512, 640), 65536 + 131072 + 8192 + 1024 + 64 + 2560);
  EXPECT_LE(sparseAttentionSmemBytes(512, 640), kSparseAttentionSmemLimit);
  std::string ptx, log;
  EXPECT_FALSE(compileSparseAttentionPtx({SparseAttentionKernel{0, 0, 64, true}}, "sm_90", ptx, log));
  EXPECT_NE(log.find("unsupported"), std::string::npos) << log;
  EXPECT_FALSE(compileSparseAttentionPtx({SparseAttentionKernel{2, 2, 576, true}}, "sm_90", ptx, log));
  EXPECT_NE(log.find("unsupported"), std::string::npos) << log;
  EXPECT_FALSE(compileSparseAttentionPtx({SparseAttentionKernel{}}, "gfx90", ptx, log));
  EXPECT_NE(log.find("malformed"), std::string::npos) << log;
}

TEST(SparseAttentionKernel, WgmmaVariantNamesArchAndSharedMemory) {
  const SparseAttentionKernel wg{2, 0, 512, true, 1};
  EXPECT_EQ(wg.name(), "h20_sparse_attn_bf16_sf32_d512_c_wg");
  EXPECT_EQ(wg.threads(), kSparseAttentionWgmmaThreads);
  EXPECT_EQ(wg.requiredArch(), "sm_90a");
  EXPECT_EQ((SparseAttentionKernel{2, 0, 512, true}.threads()), kSparseAttentionThreads);
  EXPECT_EQ(sparseAttentionArch({SparseAttentionKernel{}}), "sm_90");
  EXPECT_EQ(sparseAttentionArch({SparseAttentionKernel{}, wg}), "sm_90a");
  // Its O columns per consumer (paddedDim / 2) must be a wgmma N.
  EXPECT_TRUE(sparseAttentionWgmmaTakes(512));
  EXPECT_TRUE(sparseAttentionWgmmaTakes(128));
  EXPECT_FALSE(sparseAttentionWgmmaTakes(64));
  EXPECT_FALSE(sparseAttentionWgmmaTakes(192));
  // SawLayout at DP = 512: Q + 2 key tiles 192 KiB, 2 P tiles 16 KiB, 128 B
  // of mbarriers (9 used), 1 KiB maxima and sums, 64 B counts, 640 slots,
  // 1 KiB of base alignment: still under the 227 KiB a CTA may use.
  EXPECT_EQ(sparseAttentionSmemBytes(512, 640, 1),
            196608 + 16384 + 128 + 1024 + 64 + 2560 + 1024);
  EXPECT_LE(sparseAttentionSmemBytes(512, 640, 1), kSparseAttentionSmemLimit);
  std::string ptx, log;
  EXPECT_FALSE(compileSparseAttentionPtx({wg}, "sm_90", ptx, log));
  EXPECT_NE(log.find("needs sm_90a"), std::string::npos) << log;
  EXPECT_FALSE(compileSparseAttentionPtx({SparseAttentionKernel{2, 0, 64, true, 1}}, "sm_90a",
                                         ptx, log));
  EXPECT_NE(log.find("unsupported"), std::string::npos) << log;
}

TEST(SparseAttentionKernel, CompilesAndAssemblesForSm90aWithoutSpills) {
  std::string reason;
  if (!nvrtcAvailable(&reason)) {
    std::printf("SKIP: %s\n", reason.c_str());
    GTEST_SKIP() << reason;
  }
  // Both families: mma.sync (kind 0) at every padded dim, wgmma (kind 1,
  // sm_90a) where it takes the dim.
  std::vector<SparseAttentionKernel> kernels;
  for (int kind : {0, 1})
    for (int dp : {64, 128, 256, 512})
      for (int dt : {1, 2})
        for (bool compressed : {false, true})
          if (kind == 0 ? dp != 256 : sparseAttentionWgmmaTakes(dp))
            kernels.push_back(SparseAttentionKernel{dt, dt == 2 ? 0 : 1, dp, compressed, kind});
  const std::string arch = sparseAttentionArch(kernels);
  ASSERT_EQ(arch, "sm_90a");
  std::string ptx, log;
  ASSERT_TRUE(compileSparseAttentionPtx(kernels, arch, ptx, log)) << log;
  for (const SparseAttentionKernel &k : kernels)
    EXPECT_NE(ptx.find(".entry " + k.name() + "("), std::string::npos) << k.name();
  EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
  EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos);
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(ptx.find("cp.async.mbarrier.arrive.noinc"), std::string::npos);
  if (findPtxas().empty()) {
    std::printf("SKIP: ptxas not found; PTX not assembled\n");
    GTEST_SKIP() << "ptxas not found";
  }
  std::string cubin, report, error;
  ASSERT_EQ(assemblePtx(ptx, arch, cubin, report, error), PtxasStatus::Ok) << error;
  std::vector<std::string> names;
  for (const SparseAttentionKernel &k : kernels)
    names.push_back(k.name());
  test::expectListedWithoutSpills(report, names);
  std::printf("%s", report.c_str());
}
