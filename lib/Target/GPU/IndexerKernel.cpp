//===- IndexerKernel.cpp - NVRTC instantiation of the indexer kernel ------===//
//
// Variants of lib/Target/GPU/kernels/indexer.cuh: names, shared memory, and
// compilation to PTX through the NVRTC driver of AttentionKernel.cpp.
//
//===----------------------------------------------------------------------===//
#include "h20/Target/IndexerKernel.h"

#include "h20/Target/AttentionKernel.h"

#include <algorithm>

namespace h20 {

namespace {

/// The embedded kernel source (generated from indexer.cuh by
/// EmbedFile.cmake): `static const char kIndexerCuh[] = R"...(...)...";`.
#include "IndexerKernelSource.inc"
#include "IndexerMmaKernelSource.inc"
#include "TensorCoreSource.inc"

const char *typeName(int t) { return t == 0 ? "f32" : t == 1 ? "f16" : t == 2 ? "bf16" : "x"; }

} // namespace

std::string IndexerKernel::name() const {
  if (mma)
    return std::string("h20_indexer_mma_m") + std::to_string(mode) + "_" + typeName(queryType) + "_" + typeName(weightType) +
           "_h" + std::to_string(paddedHeads) + "_d" + std::to_string(paddedDim) + "_c" +
           std::to_string(cap) + "_o" + std::to_string(ctasPerSm) + (gather ? "_g" : "");
  return std::string("h20_indexer_m") + std::to_string(mode) + "_" + typeName(queryType) + "_" +
         typeName(keyType) + "_" + typeName(weightType);
}

int64_t indexerSmemBytes(int mode, int64_t heads, int64_t dim, int64_t blocks) {
  int64_t bytes = ((heads * dim + heads) * 4 + 7) / 8 * 8;
  if (mode == 1)
    bytes += blocks * 8;
  return bytes;
}

int64_t indexerMmaSmemBytes(const IndexerKernel &k, int64_t entries, int64_t block) {
  const int64_t rows = k.rowsPerCta();
  int64_t bytes = 2 * 64 * int64_t(k.paddedDim) * 2;               // 2 key tiles
  bytes += std::max<int64_t>(64 * int64_t(k.paddedDim) * 2, rows * k.cap * 8); // query block, then the candidate buffers
  bytes += rows * 8 + 32;                                          // tau, a cut's state
  bytes += 64 * 4 + 4 * 64 * 4;                      // weights, per-warp head sums
  bytes += rows * 4 + 4;                             // counts, flag
  if (k.mode == 1) {
    const int64_t t = std::max<int64_t>(entries, 0), b = std::max<int64_t>(block, 1);
    const int64_t blocks = (t + b - 1) / b, tiles = (t + 63) / 64;
    bytes = (bytes + 15) / 16 * 16;
    if (k.gather)
      bytes += 3 * 3 * 64 * 4 + 2 * 4 * 4; // three gathered tiles: entries, segment offsets and
                                           // first entries; tile and segment counts
    bytes += rows * ((blocks + 31) / 32) * 4; // a bit per candidate block and row
    if (!k.gather)
      bytes += (tiles + 31) / 32 * 4; // a bit per key tile
  }
  return (bytes + 15) / 16 * 16;
}

bool chooseIndexerMma(int mode, int queryType, int keyType, int weightType, int64_t heads,
                      int64_t dim, int64_t k, IndexerKernel &kernel, int64_t block,
                      int64_t entries, int64_t smemPerCta, int64_t smemPerSm,
                      int64_t candidateBlocks, int gather) {
  // Mode 2's block maxima are segmented shuffles within a warp.
  const bool blockOk = block >= 1 && block <= 32 && (block & (block - 1)) == 0;
  const bool candidatesOk = block >= 1 && entries >= 0 && entries < (int64_t(1) << 31);
  if ((mode != 0 && !(mode == 2 && blockOk) && !(mode == 1 && candidatesOk)) || queryType != keyType ||
      (queryType != 1 && queryType != 2) ||
      weightType < 0 || weightType > 2 || heads < 1 || heads > 64 || dim < 1 || dim > 256 ||
      k < 0 || k > kIndexerMaxK)
    return false;
  IndexerKernel c;
  c.queryType = queryType, c.keyType = keyType, c.weightType = weightType, c.mode = mode;
  c.mma = true;
  c.paddedHeads = heads <= 16 ? 16 : heads <= 32 ? 32 : 64;
  c.paddedDim = static_cast<int>((dim + 63) / 64 * 64);
  if (mode == 1)
    c.gather = gather >= 0 ? gather != 0
                           : candidateBlocks > 0 && entries > 0 &&
                                 2 * c.rowsPerCta() * candidateBlocks * block <= entries;
  // The buffer holds the K kept and one tile of 64 newcomers, and the
  // power of two >= K that the final sort takes. A larger buffer cuts less
  // often (a cut per cap - K newcomers; beyond 2K cuts are rare), a smaller
  // one lets more CTAs share an SM (the kernel is latency-bound: the top-k
  // at 4 CTAs per SM ran at twice the rate of the candidate blocks at 2).
  // So: the most CTAs per SM, then the largest buffer with them.
  int64_t pow2 = 1;
  while (pow2 < k)
    pow2 <<= 1;
  const int64_t minCap = std::max<int64_t>({(k + 64 + 63) / 64 * 64, pow2, 128});
  const int64_t maxCap = std::max<int64_t>(minCap, (2 * k + 63) / 64 * 64);
  int bestCtas = 0;
  for (int64_t cap = minCap; cap <= maxCap; cap += 64) {
    c.cap = static_cast<int>(cap);
    const int64_t smem = indexerMmaSmemBytes(c, entries, block);
    if (smem > smemPerCta)
      break;
    const int ctas = static_cast<int>(std::min<int64_t>(
        kIndexerMmaMaxCtasPerSm, smemPerSm / (smem + kIndexerMmaSmemReservedPerCta)));
    if (ctas >= bestCtas) {
      bestCtas = ctas;
      kernel = c;
      kernel.ctasPerSm = ctas;
    }
  }
  if (bestCtas == 0)
    return false;
  return true;
}

std::string indexerProgramSource(const std::vector<IndexerKernel> &kernels) {
  std::string src = "// h20 indexer kernels, generated by compileIndexerPtx\n";
  std::vector<std::string> seen;
  for (const IndexerKernel &k : kernels) {
    std::string name = k.name();
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      continue;
    seen.push_back(name);
    if (k.mma) {
      src += instantiateCudaHeader("h20_indexer_mma.cuh",
                                   {{"H20_IDXM_DT", std::to_string(k.queryType)},
                                    {"H20_IDXM_W", std::to_string(k.weightType)},
                                    {"H20_IDXM_HP", std::to_string(k.paddedHeads)},
                                    {"H20_IDXM_DP", std::to_string(k.paddedDim)},
                                    {"H20_IDXM_CAP", std::to_string(k.cap)},
                                    {"H20_IDXM_MINB", std::to_string(k.ctasPerSm)},
                                    {"H20_IDXM_MODE", std::to_string(k.mode)},
                                    {"H20_IDXM_GATHER", k.gather ? "1" : "0"},
                                    {"H20_IDXM_NAME", name}});
      continue;
    }
    src += instantiateCudaHeader("h20_indexer.cuh", {{"H20_INDEXER_Q", std::to_string(k.queryType)},
                                                     {"H20_INDEXER_K", std::to_string(k.keyType)},
                                                     {"H20_INDEXER_W", std::to_string(k.weightType)},
                                                     {"H20_INDEXER_MODE", std::to_string(k.mode)},
                                                     {"H20_INDEXER_NAME", name}});
  }
  return src;
}

bool compileIndexerPtx(const std::vector<IndexerKernel> &kernels, const std::string &arch,
                       std::string &ptx, std::string &log) {
  ptx.clear();
  log.clear();
  for (const IndexerKernel &k : kernels) {
    bool ok = k.mode >= 0 && k.mode <= 2 && k.queryType >= 0 && k.queryType <= 2 &&
              k.keyType >= 0 && k.keyType <= 2 && k.weightType >= 0 && k.weightType <= 2;
    if (k.mma)
      ok = ok && k.queryType == k.keyType && k.queryType != 0 &&
           (k.paddedHeads == 16 || k.paddedHeads == 32 || k.paddedHeads == 64) &&
           k.paddedDim >= 64 && k.paddedDim <= 256 && k.paddedDim % 64 == 0 && k.cap >= 128 &&
           k.cap % 64 == 0 && k.ctasPerSm >= 1 && k.ctasPerSm <= kIndexerMmaMaxCtasPerSm;
    if (!ok) {
      log = "indexer: unsupported kernel variant " + k.name();
      return false;
    }
  }
  if (kernels.empty()) {
    log = "indexer: no kernel to compile";
    return false;
  }
  std::string cc;
  if (!computeCapabilityOf(arch, cc)) {
    log = "indexer: malformed GPU architecture '" + arch + "' (expected e.g. sm_90)";
    return false;
  }
  return compileCudaToPtx(indexerProgramSource(kernels),
                          {{kIndexerCuh, "h20_indexer.cuh"},
                           {kIndexerMmaCuh, "h20_indexer_mma.cuh"},
                           {kTensorCoreCuh, "h20_tensor_core.cuh"}},
                          "h20_indexer.cu", cc, ptx, log);
}

} // namespace h20
