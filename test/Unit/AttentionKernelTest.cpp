//===- AttentionKernelTest.cpp - attention variants, NVRTC and ptxas -----===//
//
// Without a GPU: the variant rules and default choices, and (when NVRTC and
// ptxas are installed) that every main variant compiles to PTX and
// assembles for sm_90 without spilling, and that the wgmma variants (kind 1)
// compile for sm_90a into wgmma instructions without spilling. Numerical checks of the kernel run
// on a GPU in test/tools/attention-check.cpp.
//
//===----------------------------------------------------------------------===//
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/PtxAssembler.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

using namespace h20;

namespace {

TEST(AttentionKernel, NamesAndSharedMemory) {
  AttentionVariant v{2, 128, 128, 128, 64, 256};
  EXPECT_EQ(v.kernelName(), "h20_attention_bf16_d128_dv128_m128_n64_t256");
  // Q/O 128 x 136, two K and two V buffers of 64 x 136, 2 bytes each.
  EXPECT_EQ(v.smemBytes(), 2 * (128 * 136 + 4 * 64 * 136));
  AttentionVariant f{0, 64, 32, 64, 64, 256};
  EXPECT_EQ(f.kernelName(), "h20_attention_f32_d64_dv32_m64_n64_t256");
  EXPECT_EQ(f.smemBytes(), 4 * (64 * 64 + 64 * 65 + 64 * 32 + 64 * 64));
  EXPECT_TRUE(v.isSupported());
  EXPECT_TRUE(f.isSupported());
}

TEST(AttentionKernel, RejectsUnsupportedVariants) {
  std::string why;
  EXPECT_FALSE((AttentionVariant{3, 128, 128, 128, 64, 256}.isSupported(&why)));
  EXPECT_NE(why.find("dtype"), std::string::npos) << why;
  EXPECT_FALSE((AttentionVariant{2, 72, 72, 128, 64, 256}.isSupported(&why)));
  EXPECT_NE(why.find("multiples of 16"), std::string::npos) << why;
  EXPECT_FALSE((AttentionVariant{2, 512, 512, 64, 64, 128}.isSupported(&why)));
  EXPECT_FALSE((AttentionVariant{2, 128, 128, 128, 64, 96 + 1}.isSupported(&why)));
  // 48 rows per warp is neither one nor two m16 tiles.
  EXPECT_FALSE((AttentionVariant{2, 128, 128, 192, 64, 128}.isSupported(&why)));
  EXPECT_NE(why.find("rows per warp"), std::string::npos) << why;
  // D = Dv = 256 with 128-key steps and two m-tiles per warp: too many
  // accumulators; with 256 keys per step also too much shared memory.
  EXPECT_FALSE((AttentionVariant{2, 256, 256, 128, 128, 128}.isSupported(&why)));
  EXPECT_FALSE((AttentionVariant{0, 256, 256, 64, 256, 256}.isSupported(&why)));
  std::string ptx, log;
  EXPECT_FALSE(compileAttentionPtx({AttentionVariant{2, 72, 72, 128, 64, 256}}, "sm_90", ptx, log));
  EXPECT_NE(log.find("unsupported kernel variant"), std::string::npos) << log;
  EXPECT_FALSE(compileAttentionPtx({AttentionVariant{}}, "gfx90a", ptx, log));
  EXPECT_NE(log.find("malformed GPU architecture"), std::string::npos) << log;
}

// Property: whatever the dims and the #h20.tiles hints, the choice is a
// supported variant of the requested dtype and dims.
TEST(AttentionKernel, ChoicesAreSupported) {
  for (int dtype : {0, 1, 2})
    for (int d = 16; d <= 256; d += 16)
      for (int dv : {16, 64, 128, 256, d})
        for (int64_t bm : {0, 1, 16, 64, 96, 128, 192, 256, 1024})
          for (int64_t bn : {0, 1, 16, 48, 64, 128, 176, 256}) {
            std::string error;
            std::optional<AttentionVariant> v =
                chooseAttentionVariant(dtype, d, dv, bm, bn, &error);
            ASSERT_TRUE(v) << error;
            std::string why;
            EXPECT_TRUE(v->isSupported(&why)) << why;
            EXPECT_EQ(v->dtype, dtype);
            EXPECT_EQ(v->headDim, d);
            EXPECT_EQ(v->headDimV, dv);
            EXPECT_LE(v->smemBytes(), kSm90MaxSmemPerBlock);
          }
  std::string error;
  EXPECT_FALSE(chooseAttentionVariant(2, 512, 512, 0, 0, &error));
  EXPECT_NE(error.find("head dim 512"), std::string::npos) << error;
  EXPECT_FALSE(chooseAttentionVariant(2, 100, 100, 0, 0, &error));
  EXPECT_FALSE(chooseAttentionVariant(5, 128, 128, 0, 0, &error));
}

TEST(AttentionKernel, WgmmaVariants) {
  std::optional<AttentionVariant> v = chooseWgmmaAttentionVariant(2, 128, 128);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, 1);
  EXPECT_EQ(v->kernelName(), "h20_attention_wgmma_bf16_d128_dv128_m128_n128_t384_s2_k1");
  EXPECT_EQ(v->stages, 2);
  EXPECT_EQ(v->schedule, 1); // ping-pong
  EXPECT_EQ(v->requiredArch(), "sm_90a");
  // Q 128 x 128, two K and two V stages of 128 x 128, 2 bytes each; barriers; alignment.
  EXPECT_EQ(v->smemBytes(), 2 * (128 * 128 + 4 * 128 * 128) + 128 + 1024);
  EXPECT_TRUE(v->isSupported());
  // Three stages fit 227 KiB at D = 128 (230528 bytes), not at D = 256.
  AttentionVariant three = *v;
  three.stages = 3;
  EXPECT_TRUE(three.isSupported());
  EXPECT_EQ(three.smemBytes(), 2 * (128 * 128 + 6 * 128 * 128) + 128 + 1024);
  EXPECT_FALSE(three == *v);
  EXPECT_NE(three.kernelName(), v->kernelName());
  AttentionVariant three256 = *chooseWgmmaAttentionVariant(2, 256, 256);
  three256.stages = 3;
  EXPECT_FALSE(three256.isSupported());
  std::string whyStages;
  AttentionVariant four = *v;
  four.stages = 4;
  EXPECT_FALSE(four.isSupported(&whyStages));
  EXPECT_NE(whyStages.find("2 or 3 stages"), std::string::npos) << whyStages;
  AttentionVariant sched = *v;
  sched.schedule = 3;
  EXPECT_FALSE(sched.isSupported(&whyStages));
  EXPECT_NE(whyStages.find("schedule"), std::string::npos) << whyStages;
  // The NVRTC translation unit names the stages and the schedule.
  const std::string src = attentionProgramSource({*v});
  EXPECT_NE(src.find("#define H20_STAGES 2"), std::string::npos) << src;
  EXPECT_NE(src.find("#define H20_SCHEDULE 1"), std::string::npos) << src;
  AttentionVariant kind0 = *v;
  kind0.kind = 0;
  EXPECT_FALSE(kind0 == *v);
  EXPECT_EQ(attentionArch({kind0}), "sm_90");
  EXPECT_EQ(attentionArch({kind0, *v}), "sm_90a");
  for (int dtype : {1, 2})
    for (int d : {64, 128, 256}) {
      std::optional<AttentionVariant> w = chooseWgmmaAttentionVariant(dtype, d, d);
      ASSERT_TRUE(w) << d;
      EXPECT_TRUE(w->isSupported());
      EXPECT_LE(w->smemBytes(), kSm90MaxSmemPerBlock);
    }
  std::string error;
  EXPECT_FALSE(chooseWgmmaAttentionVariant(0, 128, 128, &error)); // f32
  EXPECT_NE(error.find("f16 or bf16"), std::string::npos) << error;
  EXPECT_FALSE(chooseWgmmaAttentionVariant(2, 192, 128, &error)); // D != Dv
  EXPECT_FALSE(chooseWgmmaAttentionVariant(2, 96, 96, &error));
  std::string why;
  AttentionVariant big = *v;
  big.blockN = 256; // S 128 + O 64 + P 64 registers
  EXPECT_FALSE(big.isSupported(&why));
  EXPECT_NE(why.find("registers"), std::string::npos) << why;
  AttentionVariant odd = *v;
  odd.kind = 7;
  EXPECT_FALSE(odd.isSupported(&why));
  std::string ptx, log;
  EXPECT_FALSE(compileAttentionPtx({*v}, "sm_90", ptx, log));
  EXPECT_NE(log.find("needs sm_90a"), std::string::npos) << log;
}

// chooseAttentionVariant picks kind 1 (wgmma) where the wgmma kernel has a
// variant; elsewhere (f32, D != Dv) kind 0; family Mma keeps kind 0.
TEST(AttentionKernel, WgmmaByDefaultMmaOnRequest) {
  EXPECT_EQ(chooseAttentionVariant(2, 128, 128)->kind, 1);
  EXPECT_EQ(chooseAttentionVariant(1, 64, 64, 64, 32)->kind, 1); // hints ignored
  EXPECT_EQ(chooseAttentionVariant(0, 128, 128)->kind, 0);
  EXPECT_EQ(chooseAttentionVariant(2, 192, 128)->kind, 0);
  EXPECT_EQ(chooseAttentionVariant(2, 128, 128, 0, 0, nullptr, AttentionKernelFamily::Mma)->kind, 0);
  EXPECT_EQ(*chooseAttentionVariant(2, 128, 128, 0, 0, nullptr, AttentionKernelFamily::Mma),
            *chooseMmaAttentionVariant(2, 128, 128));
}

TEST(AttentionKernel, ParsesPtxasReport) {
  const char *report =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'kern_a' for 'sm_90'\n"
      "ptxas info    : Function properties for kern_a\n"
      "    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 224 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'kern_b' for 'sm_90'\n"
      "ptxas info    : Function properties for kern_b\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, 224 bytes cmem[0]\n";
  std::vector<PtxasFunctionStats> stats = parsePtxasReport(report);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].name, "kern_a");
  EXPECT_EQ(stats[0].registers, 255);
  EXPECT_EQ(stats[0].stackFrame, 8);
  EXPECT_EQ(stats[0].spillStores, 12);
  EXPECT_EQ(stats[0].spillLoads, 16);
  EXPECT_EQ(stats[1].name, "kern_b");
  EXPECT_EQ(stats[1].registers, 40);
  EXPECT_EQ(stats[1].spillStores, 0);
}

/// The variants the GPU target instantiates by default (chooseAttentionVariant
/// without hints) for f32/f16/bf16 and D = Dv = 16 (the fixture shape), 64,
/// 128, 256, plus D != Dv (192 / 128).
std::vector<AttentionVariant> mainVariants() {
  // The mma.sync family (kind 0); the wgmma variants have their own test.
  std::vector<AttentionVariant> out;
  for (int dtype : {0, 1, 2})
    for (int d : {16, 64, 128, 256})
      out.push_back(*chooseMmaAttentionVariant(dtype, d, d));
  out.push_back(*chooseMmaAttentionVariant(2, 192, 128));
  return out;
}

/// Every variant's kernel is in ptxas's `report` without spill stores or
/// loads (and, with `noStack`, without a stack frame); prints its registers.
void expectNoSpills(const std::string &report, const std::vector<AttentionVariant> &variants,
                    bool noStack) {
  std::vector<PtxasFunctionStats> stats = parsePtxasReport(report);
  for (const AttentionVariant &v : variants) {
    const PtxasFunctionStats *s = nullptr;
    for (const PtxasFunctionStats &f : stats)
      if (f.name == v.kernelName())
        s = &f;
    ASSERT_NE(s, nullptr) << v.kernelName() << " missing from the ptxas report";
    std::printf("%-52s %3d registers, %6lld bytes smem, %lld bytes spill stores, %lld loads\n",
                s->name.c_str(), s->registers, static_cast<long long>(v.smemBytes()),
                static_cast<long long>(s->spillStores), static_cast<long long>(s->spillLoads));
    EXPECT_EQ(s->spillStores, 0) << v.kernelName();
    EXPECT_EQ(s->spillLoads, 0) << v.kernelName();
    if (noStack)
      EXPECT_EQ(s->stackFrame, 0) << v.kernelName();
  }
}

TEST(AttentionKernel, CompilesAndAssemblesForSm90WithoutSpills) {
  std::string reason;
  if (!nvrtcAvailable(&reason)) {
    std::printf("SKIP: %s\n", reason.c_str());
    GTEST_SKIP() << reason;
  }
  std::vector<AttentionVariant> variants = mainVariants();
  std::string ptx, log;
  ASSERT_TRUE(compileAttentionPtx(variants, "sm_90", ptx, log)) << log;
  for (const AttentionVariant &v : variants)
    EXPECT_NE(ptx.find(".entry " + v.kernelName() + "("), std::string::npos) << v.kernelName();
  if (findPtxas().empty()) {
    std::printf("SKIP: ptxas not found; PTX not assembled\n");
    GTEST_SKIP() << "ptxas not found";
  }
  std::string cubin, report, error;
  ASSERT_EQ(assemblePtx(ptx, "sm_90", cubin, report, error), PtxasStatus::Ok) << error;
  EXPECT_GT(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF"));
  std::printf("%s", report.c_str());
  expectNoSpills(report, variants, /*noStack=*/false);
}

// The wgmma variants (f16/bf16, D = Dv = 64, 128, 256, and the other
// schedules and stage counts at D = 128) compile for sm_90a (compute_90a PTX
// with wgmma.mma_async and TMA copies) and assemble without spills and
// without ptxas falling back (setmaxnreg ignored: C7508; wgmma serialized:
// C7510/C7515/C7520 "serialized"). Whether the SASS holds HGMMA needs
// cuobjdump, which is not part of this check.
TEST(AttentionKernel, WgmmaCompilesAndAssemblesForSm90aWithoutSpills) {
  std::string reason;
  if (!nvrtcAvailable(&reason)) {
    std::printf("SKIP: %s\n", reason.c_str());
    GTEST_SKIP() << reason;
  }
  std::vector<AttentionVariant> variants;
  for (int dtype : {1, 2})
    for (int d : {64, 128, 256})
      variants.push_back(*chooseWgmmaAttentionVariant(dtype, d, d));
  for (auto [stages, schedule] : {std::pair{2, 0}, {2, 2}, {3, 1}}) {
    AttentionVariant v = *chooseWgmmaAttentionVariant(2, 128, 128);
    v.stages = stages, v.schedule = schedule;
    variants.push_back(v);
  }
  std::string ptx, log;
  ASSERT_EQ(attentionArch(variants), "sm_90a");
  ASSERT_TRUE(compileAttentionPtx(variants, "sm_90a", ptx, log)) << log;
  EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos);
  for (const AttentionVariant &v : variants) {
    size_t at = ptx.find(".entry " + v.kernelName() + "(");
    ASSERT_NE(at, std::string::npos) << v.kernelName();
    size_t next = ptx.find(".entry ", at + 1);
    std::string body = ptx.substr(at, next == std::string::npos ? std::string::npos : next - at);
    // D/16 wgmmas for S = Q K^T and BN/16 for O += P V per tile; the
    // pipelined schedules (1, 2) have each twice: the loop's burst, and
    // the first S and the last P V outside it.
    size_t count = 0;
    for (size_t p = body.find("wgmma.mma_async"); p != std::string::npos;
         p = body.find("wgmma.mma_async", p + 1))
      ++count;
    const size_t perTile = size_t(v.headDim / 16 + v.blockN / 16);
    EXPECT_EQ(count, v.schedule == 0 ? perTile : 2 * perTile) << v.kernelName();
    EXPECT_NE(body.find("cp.async.bulk.tensor.4d"), std::string::npos) << v.kernelName();
    EXPECT_NE(body.find("mbarrier.arrive.expect_tx"), std::string::npos) << v.kernelName();
    EXPECT_EQ(body.find("bar.arrive") != std::string::npos, v.schedule == 1) << v.kernelName();
    EXPECT_NE(body.find("setmaxnreg.inc.sync.aligned.u32 232"), std::string::npos);
    EXPECT_NE(body.find("fence.proxy.async.shared::cta"), std::string::npos);
  }
  if (findPtxas().empty()) {
    std::printf("SKIP: ptxas not found; PTX not assembled\n");
    GTEST_SKIP() << "ptxas not found";
  }
  std::string cubin, report, error;
  ASSERT_EQ(assemblePtx(ptx, "sm_90a", cubin, report, error), PtxasStatus::Ok) << error;
  std::printf("%s", report.c_str());
  EXPECT_EQ(report.find("C7508"), std::string::npos) << report;
  EXPECT_EQ(report.find("serialized"), std::string::npos) << report;
  expectNoSpills(report, variants, /*noStack=*/true);
}

TEST(AttentionKernel, AssemblerReportsPtxErrors) {
  if (findPtxas().empty())
    GTEST_SKIP() << "ptxas not found";
  std::string cubin, report, error;
  EXPECT_EQ(assemblePtx("this is not PTX", "sm_90", cubin, report, error), PtxasStatus::Failed);
  EXPECT_NE(error.find("ptxas -arch=sm_90 failed"), std::string::npos) << error;
}

} // namespace
