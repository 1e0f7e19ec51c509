//===- AttentionKernel.cpp - NVRTC instantiation of the attention kernel --===//
//
// Variants of lib/Target/GPU/kernels/attention.cuh: naming, shared-memory
// size, support rules, default choice, and compilation to PTX through the
// NVRTC driver (NvrtcCompiler.cpp).
//
//===----------------------------------------------------------------------===//
#include "h20/Target/AttentionKernel.h"

#include <algorithm>
#include <cstdlib>

namespace h20 {

namespace {

/// The embedded kernel sources (generated from kernels/attention*.cuh by
/// EmbedFile.cmake): `static const char kAttentionCuh[] = R"...(...)...";`
/// for the entry (attention.cuh), one per body it includes, and the
/// tensor-core helpers the bodies share with the other kernels.
#include "AttentionCommonSource.inc"
#include "AttentionFmaSource.inc"
#include "AttentionKernelSource.inc"
#include "AttentionMmaSource.inc"
#include "AttentionWgmmaSource.inc"
#include "TensorCoreSource.inc"
#include "WgmmaSource.inc"

const char *dtypeName(int dtype) {
  switch (dtype) {
  case 0:
    return "f32";
  case 1:
    return "f16";
  case 2:
    return "bf16";
  default:
    return "unknown";
  }
}

/// fp32 registers per thread held by accumulators (and, for f16/bf16 with
/// kQInRegs, the Q fragments), as laid out by attention.cuh.
int64_t accumulatorRegisters(const AttentionVariant &v) {
  int64_t warps = v.threads / 32;
  if (v.dtype == 0) {
    int64_t rows = v.blockM / warps;
    return rows * ((v.headDimV + 31) / 32 + v.blockN / 32);
  }
  int64_t mt = v.blockM / (16 * warps);
  int64_t regs = mt * (v.headDimV / 2 + v.blockN / 2);
  if (mt * v.headDim <= 128 && mt * (v.headDimV + v.blockN) <= 192) // kQInRegs
    regs += mt * v.headDim / 4;
  return regs;
}

bool fail(std::string *why, const std::string &msg) {
  if (why)
    *why = msg;
  return false;
}

int64_t pow2Floor(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x)
    p *= 2;
  return p;
}

/// isSupported for kind 1 (the wgmma kernel's static_asserts and #errors in
/// attention.cuh, plus a register and a shared-memory budget).
bool wgmmaSupported(const AttentionVariant &v, std::string *why) {
  const std::string name = v.kernelName();
  if (v.dtype != 1 && v.dtype != 2)
    return fail(why, name + ": the wgmma kernel needs f16 or bf16");
  if (v.headDim != v.headDimV || (v.headDim != 64 && v.headDim != 128 && v.headDim != 256))
    return fail(why, name + ": the wgmma kernel needs D = Dv in {64, 128, 256}");
  if (v.blockM != 128 || v.threads != 384)
    return fail(why, name + ": the wgmma kernel needs blockM 128 and 384 threads");
  if (v.blockN != 64 && v.blockN != 128 && v.blockN != 256)
    return fail(why, name + ": the wgmma kernel needs blockN in {64, 128, 256}");
  if (v.stages != 2 && v.stages != 3)
    return fail(why, name + ": the wgmma kernel needs 2 or 3 stages");
  if (v.schedule < 0 || v.schedule > 2)
    return fail(why, name + ": the wgmma kernel's schedule is 0, 1 or 2");
  // Per consumer thread: S (BN / 2 fp32), O (Dv / 2 fp32), P (BN / 4 x 32 bits).
  const int regs = v.blockN / 2 + v.headDimV / 2 + v.blockN / 4;
  if (regs > 192)
    return fail(why, name + ": " + std::to_string(regs) +
                         " S/O/P registers per consumer thread (at most 192)");
  if (v.smemBytes() > kSm90MaxSmemPerBlock)
    return fail(why, name + ": " + std::to_string(v.smemBytes()) +
                         " bytes of shared memory (at most " +
                         std::to_string(kSm90MaxSmemPerBlock) + ")");
  return true;
}

} // namespace

std::string AttentionVariant::requiredArch() const { return kind == 1 ? "sm_90a" : "sm_90"; }

std::string attentionArch(const std::vector<AttentionVariant> &variants) {
  for (const AttentionVariant &v : variants)
    if (v.requiredArch() == "sm_90a")
      return "sm_90a";
  return "sm_90";
}

std::optional<AttentionVariant> chooseWgmmaAttentionVariant(int dtype, int64_t headDim,
                                                            int64_t headDimV,
                                                            std::string *error) {
  AttentionVariant v;
  v.kind = 1;
  v.dtype = dtype;
  v.headDim = int(std::clamp<int64_t>(headDim, 0, 1 << 20));
  v.headDimV = int(std::clamp<int64_t>(headDimV, 0, 1 << 20));
  v.blockM = 128;
  v.threads = 384;
  // 128 keys per step while S (64), O (<= 64) and P (32) registers fit; D =
  // 256 takes 64 (O alone is 128 registers).
  v.blockN = headDim <= 128 ? 128 : 64;
  // Ping-pong consumers, 2 stages: the fastest measured on an H200
  // (bench/results/attn-variants-h200: 614 TFLOP/s at S = 128K, D = 128,
  // against 556 for the plain schedule and 605 with 3 stages).
  v.stages = 2;
  v.schedule = 1;
  std::string why;
  if (!v.isSupported(&why)) {
    fail(error, "attention: no wgmma kernel variant: " + why);
    return std::nullopt;
  }
  return v;
}

std::string AttentionVariant::kernelName() const {
  std::string name = std::string(kind == 1 ? "h20_attention_wgmma_" : "h20_attention_") +
                     dtypeName(dtype) + "_d" + std::to_string(headDim) + "_dv" +
                     std::to_string(headDimV) + "_m" + std::to_string(blockM) + "_n" +
                     std::to_string(blockN) + "_t" + std::to_string(threads);
  if (kind == 1)
    name += "_s" + std::to_string(stages) + "_k" + std::to_string(schedule);
  return name;
}

int64_t AttentionVariant::smemBytes() const {
  int64_t d = headDim, dv = headDimV, bm = blockM, bn = blockN;
  if (kind == 1) // WgLayout: Q [BM][D], ST x K [BN][D], ST x V [BN][DV], mbarriers, alignment
    return 2 * (bm * d + stages * bn * d + stages * bn * dv) + 128 + 1024;
  if (dtype == 0) // FmaLayout: Q [BM][D], K [BN][D+1], V [BN][DV], P [BM][BN]
    return 4 * (bm * d + bn * (d + 1) + bn * dv + bm * bn);
  // TcLayout: Q/O [BM][max(D,DV)+8], 2 x K [BN][D+8], 2 x V [BN][DV+8]
  return 2 * (bm * (std::max(d, dv) + 8) + 2 * bn * (d + 8) + 2 * bn * (dv + 8));
}

bool AttentionVariant::isSupported(std::string *why) const {
  const std::string name = kernelName();
  if (kind == 1)
    return wgmmaSupported(*this, why);
  if (kind != 0)
    return fail(why, "kernel kind " + std::to_string(kind) + " is not 0 (mma.sync) or 1 (wgmma)");
  if (dtype < 0 || dtype > 2)
    return fail(why, "dtype " + std::to_string(dtype) + " is not 0 (f32), 1 (f16) or 2 (bf16)");
  for (int d : {headDim, headDimV})
    if (d < 16 || d > 256 || d % 16)
      return fail(why, name + ": head dims must be multiples of 16 in [16, 256]");
  if (threads < 32 || threads > 512 || threads % 32)
    return fail(why, name + ": threads must be a multiple of 32 in [32, 512]");
  int warps = threads / 32;
  if (dtype == 0) {
    if (blockM % warps || blockM / warps < 1 || blockM / warps > 16)
      return fail(why, name + ": f32 needs blockM = 1..16 rows per warp");
    if (blockN < 32 || blockN > 256 || blockN % 32)
      return fail(why, name + ": f32 needs blockN a multiple of 32 in [32, 256]");
  } else {
    if (blockM != 16 * warps && blockM != 32 * warps)
      return fail(why, name + ": f16/bf16 need blockM = 16 or 32 rows per warp");
    if (blockN < 16 || blockN > 256 || blockN % 16)
      return fail(why, name + ": blockN must be a multiple of 16 in [16, 256]");
  }
  if (accumulatorRegisters(*this) > 192)
    return fail(why, name + ": " + std::to_string(accumulatorRegisters(*this)) +
                         " accumulator registers per thread (at most 192)");
  if (smemBytes() > kSm90MaxSmemPerBlock)
    return fail(why, name + ": " + std::to_string(smemBytes()) +
                         " bytes of shared memory (at most " +
                         std::to_string(kSm90MaxSmemPerBlock) + ")");
  return true;
}

std::optional<AttentionVariant> chooseAttentionVariant(int dtype, int64_t headDim,
                                                       int64_t headDimV, int64_t blockMHint,
                                                       int64_t blockNHint, std::string *error,
                                                       AttentionKernelFamily family) {
  // The wgmma kernel where it has a variant (measured 1.35x the mma.sync
  // kernel on an H200, BENCHMARKS.md); AttentionKernelFamily::Mma opts out.
  if (family == AttentionKernelFamily::Auto && dtype >= 0 && dtype <= 2)
    if (std::optional<AttentionVariant> w = chooseWgmmaAttentionVariant(dtype, headDim, headDimV))
      return w;
  return chooseMmaAttentionVariant(dtype, headDim, headDimV, blockMHint, blockNHint, error);
}

std::optional<AttentionVariant> chooseMmaAttentionVariant(int dtype, int64_t headDim,
                                                          int64_t headDimV, int64_t blockMHint,
                                                          int64_t blockNHint, std::string *error) {
  if (dtype < 0 || dtype > 2) {
    fail(error, "attention: unknown dtype " + std::to_string(dtype));
    return std::nullopt;
  }
  for (int64_t d : {headDim, headDimV})
    if (d < 16 || d > 256 || d % 16) {
      fail(error, "attention: head dim " + std::to_string(d) +
                      " is not supported by the GPU kernel (a multiple of 16 in [16, 256])");
      return std::nullopt;
    }
  AttentionVariant v;
  v.dtype = dtype;
  v.headDim = int(headDim);
  v.headDimV = int(headDimV);
  // Defaults measured on an H200 (attention-check --sweep, bf16, causal,
  // B=1 H=32 S=8192): the fastest variant without ptxas spills per head dim.
  // D <= 64: 128x64 tiles, 32 rows per warp (220 TFLOP/s); D <= 128: 128x128,
  // 16 rows per warp (248); D <= 256: 128x64, 16 rows per warp (253).
  const int64_t dMax = std::max(headDim, headDimV);
  int64_t bm, bn, rowsPerWarp, mMin, mMax, nMin, nMax;
  if (dtype == 0) {
    bm = 64, bn = 64, rowsPerWarp = 8, mMin = 32, mMax = 64, nMin = 32, nMax = 64;
  } else {
    bm = 128, bn = dMax <= 64 || dMax > 128 ? 64 : 128, rowsPerWarp = dMax <= 64 ? 32 : 16;
    mMin = 16, mMax = 128, nMin = 16, nMax = 128;
  }
  if (blockMHint > 0)
    bm = std::clamp(pow2Floor(blockMHint), mMin, mMax);
  if (blockNHint > 0)
    bn = std::clamp(pow2Floor(blockNHint), nMin, nMax);
  // Register budget for the accumulators: below the 192 of isSupported, so
  // the compiler keeps addresses and fragments without spilling.
  const int64_t regBudget = dtype == 0 ? 96 : 160;
  for (;;) {
    const int64_t rows = std::min(rowsPerWarp, bm); // per warp
    v.blockM = int(bm);
    v.blockN = int(bn);
    v.threads = int(std::max<int64_t>(bm / rows, 1) * 32);
    if (v.isSupported() && accumulatorRegisters(v) <= regBudget)
      return v;
    if (rowsPerWarp > 16 && dtype != 0)
      rowsPerWarp = 16;
    else if (bn > nMin)
      bn /= 2;
    else if (bm > mMin)
      bm /= 2;
    else
      break;
  }
  std::string why;
  v.isSupported(&why);
  fail(error, "attention: no kernel variant fits (" + why + ")");
  return std::nullopt;
}

std::string attentionProgramSource(const std::vector<AttentionVariant> &variants) {
  std::string src = "// h20 attention kernels, generated by compileAttentionPtx\n";
  std::vector<std::string> seen;
  for (const AttentionVariant &v : variants) {
    std::string name = v.kernelName();
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      continue;
    seen.push_back(name);
    auto str = [](int64_t x) { return std::to_string(x); };
    std::vector<std::pair<std::string, std::string>> defines = {
        {"H20_DTYPE", str(v.dtype)},         {"H20_HEAD_DIM", str(v.headDim)},
        {"H20_HEAD_DIM_V", str(v.headDimV)}, {"H20_BLOCK_M", str(v.blockM)},
        {"H20_BLOCK_N", str(v.blockN)},      {"H20_THREADS", str(v.threads)},
        {"H20_KIND", str(v.kind)}};
    if (v.kind == 1) {
      defines.push_back({"H20_STAGES", str(v.stages)});
      defines.push_back({"H20_SCHEDULE", str(v.schedule)});
    }
    defines.push_back({"H20_KERNEL_NAME", name});
    src += instantiateCudaHeader("h20_attention.cuh", defines);
  }
  return src;
}

bool compileAttentionPtx(const std::vector<AttentionVariant> &variants, const std::string &arch,
                         std::string &ptx, std::string &log) {
  ptx.clear();
  log.clear();
  if (variants.empty()) {
    log = "attention: no kernel variant to compile";
    return false;
  }
  for (const AttentionVariant &v : variants) {
    std::string why;
    if (!v.isSupported(&why)) {
      log = "attention: unsupported kernel variant: " + why;
      return false;
    }
  }
  std::string cc;
  if (!computeCapabilityOf(arch, cc)) {
    log = "attention: malformed GPU architecture '" + arch + "' (expected e.g. sm_90)";
    return false;
  }
  for (const AttentionVariant &v : variants)
    if (v.requiredArch() == "sm_90a" && cc != "90a") {
      log = "attention: " + v.kernelName() + " (wgmma) needs sm_90a, not '" + arch +
            "' (compile with attentionArch(variants))";
      return false;
    }
  return compileCudaToPtx(attentionProgramSource(variants),
                          {{kAttentionCuh, "h20_attention.cuh"},
                           {kAttentionCommonCuh, "h20_attention_common.cuh"},
                           {kAttentionMmaCuh, "h20_attention_mma.cuh"},
                           {kAttentionFmaCuh, "h20_attention_fma.cuh"},
                           {kAttentionWgmmaCuh, "h20_attention_wgmma.cuh"},
                           {kWgmmaCuh, "h20_wgmma.cuh"},
                           {kTensorCoreCuh, "h20_tensor_core.cuh"}},
                          "h20_attention.cu", cc, ptx, log);
}

} // namespace h20
