//===- CublasLtGemm.cpp - one GEMM call on cuBLASLt ----------------------===//
#include "CublasLtGemm.h"

#include <algorithm>
#include <cstdint>

namespace h20::runtime {
namespace {

/// Cache entries beyond which the whole cache is dropped (shapes that vary
/// with every chunk would otherwise grow it without bound).
constexpr size_t kMaxCachedPlans = 512;

cudaDataType_t dataType(const std::string &dtype) {
  if (dtype == "float16")
    return CUDA_R_16F;
  if (dtype == "bfloat16")
    return CUDA_R_16BF;
  if (dtype == "float8_e4m3fn")
    return CUDA_R_8F_E4M3;
  return CUDA_R_32F;
}

uint64_t elementBytes(cudaDataType_t type) {
  return type == CUDA_R_32F ? 4 : type == CUDA_R_8F_E4M3 ? 1 : 2;
}

/// Largest power of two <= 256 dividing `p`.
uint32_t alignmentOf(CUdeviceptr p) {
  uint32_t a = 256;
  while (a > 1 && p % a != 0)
    a /= 2;
  return a;
}

/// Bytes a cuBLASLt (column-major) layout spans: ld * (cols - 1) + rows
/// elements per batch, plus the batch stride for each further batch.
uint64_t operandBytes(const GemmLayout &l, int64_t batch, cudaDataType_t type) {
  const uint64_t elem = elementBytes(type);
  uint64_t elems = static_cast<uint64_t>(l.ld * (l.cols - 1) + l.rows);
  if (batch > 1)
    elems += static_cast<uint64_t>(l.batchStride) * static_cast<uint64_t>(batch - 1);
  return elems * elem;
}

/// Sets `call`'s FP8 scale addresses on `desc`, the library's A and B being
/// the program's B and A when `swapped`.
cublasStatus_t setScalePointers(const CublasLtApi &lt, cublasLtMatmulDesc_t desc, bool swapped,
                                const GemmCall &call) {
  const void *sa = reinterpret_cast<const void *>(swapped ? call.scaleB : call.scaleA);
  const void *sb = reinterpret_cast<const void *>(swapped ? call.scaleA : call.scaleB);
  cublasStatus_t s = lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                       &sa, sizeof(sa));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb,
                                          sizeof(sb));
  return s;
}

std::string shapeText(const GemmCall &c) {
  const GemmProblem &p = c.problem;
  return "batch " + std::to_string(p.batch) + ", m " + std::to_string(p.m) + ", n " +
         std::to_string(p.n) + ", k " + std::to_string(p.k) + ", " + c.dtypeA + " x " +
         c.dtypeB + " -> " + c.dtypeC;
}

} // namespace

const char *cublasStatusName(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

CublasLtGemm::~CublasLtGemm() {
  clearCache();
  if (handle)
    lt.cublasLtDestroy(handle);
}

bool CublasLtGemm::init(std::string &error) {
  if (handle)
    return true;
  cublasStatus_t s = lt.cublasLtCreate(&handle);
  if (s != CUBLAS_STATUS_SUCCESS) {
    handle = nullptr;
    error = std::string("cublasLtCreate failed: ") + cublasStatusName(s);
    return false;
  }
  return true;
}

void CublasLtGemm::destroy(Entry &e) {
  if (e.desc)
    lt.cublasLtMatmulDescDestroy(e.desc);
  for (cublasLtMatrixLayout_t l : {e.a, e.b, e.c})
    if (l)
      lt.cublasLtMatrixLayoutDestroy(l);
  e = Entry();
}

void CublasLtGemm::clearCache() {
  for (auto &kv : cache)
    destroy(kv.second);
  cache.clear();
}

CublasLtGemm::Entry *
CublasLtGemm::plan(const GemmCall &call, size_t workspaceBytes, std::string &error,
                   bool &outOfMemory, std::vector<cublasLtMatmulHeuristicResult_t> *candidates,
                   bool *isNew) {
  outOfMemory = false;
  if (isNew)
    *isNew = false;
  GemmPlan plan;
  if (!planGemm(call.problem, plan, error))
    return nullptr;
  CUdeviceptr libA = plan.swapped ? call.b : call.a, libB = plan.swapped ? call.a : call.b;
  cudaDataType_t typeAB = dataType(call.dtypeA), typeC = dataType(call.dtypeC);
  cublasComputeType_t compute = call.tf32 && call.dtypeA == "float32"
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  uint32_t alignA = alignmentOf(libA), alignB = alignmentOf(libB), alignC = alignmentOf(call.c);
  std::vector<int64_t> key = {typeAB, typeC, compute, plan.transA, plan.transB,
                              plan.batch, plan.m, plan.n, plan.k};
  for (const GemmLayout *l : {&plan.a, &plan.b, &plan.c})
    key.insert(key.end(), {l->rows, l->cols, l->ld, l->batchStride});
  key.insert(key.end(), {alignA, alignB, alignC});
  const bool fp8 = typeAB == CUDA_R_8F_E4M3;

  auto fail = [&](const char *what, cublasStatus_t s) {
    error = std::string("cuBLASLt ") + what + " failed: " + cublasStatusName(s) + " (" +
            shapeText(call) + ")";
    outOfMemory = s == CUBLAS_STATUS_ALLOC_FAILED;
    return static_cast<Entry *>(nullptr);
  };

  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxCachedPlans)
      clearCache();
    Entry e;
    cublasStatus_t s = lt.cublasLtMatmulDescCreate(&e.desc, compute, CUDA_R_32F);
    if (s != CUBLAS_STATUS_SUCCESS)
      return fail("cublasLtMatmulDescCreate", s);
    cublasOperation_t opA = plan.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = plan.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    if ((s = lt.cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                                               sizeof(opA))) != CUBLAS_STATUS_SUCCESS ||
        (s = lt.cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB,
                                               sizeof(opB))) != CUBLAS_STATUS_SUCCESS) {
      destroy(e);
      return fail("cublasLtMatmulDescSetAttribute", s);
    }
    if (fp8) {
      // The program's A (activations) has 1 x 128 scales, its B (the
      // weight) 128 x 128 ones; the library's A is the program's B when
      // the plan swapped them.
      cublasLtMatmulMatrixScale_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                                  blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      cublasLtMatmulMatrixScale_t modeA = plan.swapped ? blk : vec,
                                  modeB = plan.swapped ? vec : blk;
      // The heuristic refuses block-scale modes without scale pointers
      // (CUBLAS_STATUS_INVALID_VALUE on an H100): this call's, replaced
      // by each run's.
      if ((s = lt.cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &modeA,
                                                 sizeof(modeA))) != CUBLAS_STATUS_SUCCESS ||
          (s = lt.cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &modeB,
                                                 sizeof(modeB))) != CUBLAS_STATUS_SUCCESS ||
          (s = setScalePointers(lt, e.desc, plan.swapped, call)) != CUBLAS_STATUS_SUCCESS) {
        destroy(e);
        return fail("setting the FP8 scale modes", s);
      }
    }
    struct {
      cublasLtMatrixLayout_t *out;
      const GemmLayout *l;
      cudaDataType_t type;
    } layouts[] = {{&e.a, &plan.a, typeAB}, {&e.b, &plan.b, typeAB}, {&e.c, &plan.c, typeC}};
    for (auto &L : layouts) {
      s = lt.cublasLtMatrixLayoutCreate(L.out, L.type, static_cast<uint64_t>(L.l->rows),
                                        static_cast<uint64_t>(L.l->cols), L.l->ld);
      if (s == CUBLAS_STATUS_SUCCESS && plan.batch > 1) {
        int32_t count = static_cast<int32_t>(plan.batch);
        int64_t stride = L.l->batchStride;
        s = lt.cublasLtMatrixLayoutSetAttribute(*L.out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                &count, sizeof(count));
        if (s == CUBLAS_STATUS_SUCCESS)
          s = lt.cublasLtMatrixLayoutSetAttribute(
              *L.out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
      }
      if (s != CUBLAS_STATUS_SUCCESS) {
        destroy(e);
        return fail("matrix layout", s);
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    if ((s = lt.cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) {
      destroy(e);
      return fail("cublasLtMatmulPreferenceCreate", s);
    }
    uint64_t ws = workspaceBytes;
    s = lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &ws, sizeof(ws));
    struct {
      cublasLtMatmulPreferenceAttributes_t attr;
      uint32_t value;
    } aligns[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
    for (auto &A : aligns)
      if (s == CUBLAS_STATUS_SUCCESS)
        s = lt.cublasLtMatmulPreferenceSetAttribute(pref, A.attr, &A.value, sizeof(A.value));
    const int want = candidates ? kTuneCandidates : 1;
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(want));
    int returned = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.cublasLtMatmulAlgoGetHeuristic(handle, e.desc, e.a, e.b, e.c, e.c, pref, want,
                                            results.data(), &returned);
    lt.cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && returned == 0)
      s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s != CUBLAS_STATUS_SUCCESS) {
      destroy(e);
      return fail("algorithm selection", s);
    }
    e.algo = results[0].algo;
    e.swapped = plan.swapped;
    e.bytes = {operandBytes(plan.a, plan.batch, typeAB), operandBytes(plan.b, plan.batch, typeAB),
               operandBytes(plan.c, plan.batch, typeC)};
    if (candidates) {
      results.resize(static_cast<size_t>(returned));
      *candidates = std::move(results);
    }
    if (isNew)
      *isNew = true;
    it = cache.emplace(std::move(key), e).first;
  }
  return &it->second;
}

bool CublasLtGemm::run(const GemmCall &call, CUstream stream, CUdeviceptr workspace,
                       size_t workspaceBytes, std::string &error, bool &outOfMemory) {
  const Entry *e = plan(call, workspaceBytes, error, outOfMemory);
  if (!e)
    return false;
  CUdeviceptr libA = e->swapped ? call.b : call.a, libB = e->swapped ? call.a : call.b;
  const void *a = reinterpret_cast<const void *>(libA), *b = reinterpret_cast<const void *>(libB);
  void *c = reinterpret_cast<void *>(call.c);
  if (call.scaleA || call.scaleB) {
    // Scale addresses change from chunk to chunk; the cached descriptor
    // takes this call's (read when the GEMM is enqueued).
    if (cublasStatus_t s = setScalePointers(lt, e->desc, e->swapped, call);
        s != CUBLAS_STATUS_SUCCESS) {
      error = std::string("cuBLASLt: setting the FP8 scale pointers failed: ") +
              cublasStatusName(s) + " (" + shapeText(call) + ")";
      return false;
    }
  }
  cublasStatus_t s = lt.cublasLtMatmul(handle, e->desc, &call.alpha, a, e->a, b, e->b, &call.beta,
                                       c, e->c, c, e->c, &e->algo,
                                       reinterpret_cast<void *>(workspace), workspaceBytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cuBLASLt cublasLtMatmul failed: ") + cublasStatusName(s) + " (" +
            shapeText(call) + ")";
    outOfMemory = s == CUBLAS_STATUS_ALLOC_FAILED;
    return false;
  }
  return true;
}

namespace {

/// Frees what tune() allocated, whatever way it leaves.
struct TuneScratch {
  const CudaApi &cu;
  std::vector<CUdeviceptr> buffers;
  CUstream stream = nullptr;
  std::vector<CUevent> events;
  ~TuneScratch() {
    if (stream)
      cu.cuStreamSynchronize(stream);
    for (CUevent e : events)
      if (e)
        cu.cuEventDestroy(e);
    if (stream)
      cu.cuStreamDestroy(stream);
    for (CUdeviceptr p : buffers)
      if (p)
        cu.cuMemFree(p);
  }
};

std::string cuText(const CudaApi &cu, CUresult r) {
  const char *name = nullptr;
  cu.cuGetErrorName(r, &name);
  return name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
}

} // namespace

bool CublasLtGemm::tune(const GemmCall &call, const CudaApi &cu, size_t workspaceBytes,
                        std::string &error) {
  bool oom = false, isNew = false;
  std::vector<cublasLtMatmulHeuristicResult_t> cand;
  Entry *e = plan(call, workspaceBytes, error, oom, &cand, &isNew);
  if (!e)
    return false;
  if (!isNew)
    return true;
  GemmTuning rec;
  const GemmProblem &p = call.problem;
  rec.shape = call.dtypeA + " " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
              std::to_string(p.k) + (p.batch > 1 ? " batch " + std::to_string(p.batch) : "");
  if (cand.size() < 2) {
    rec.candidates = static_cast<int>(cand.size());
    rec.note = "the heuristic offered one algorithm";
    tuned.push_back(rec);
    return true;
  }
  TuneScratch t{cu, {}, nullptr, {}};
  // Operands, C (also read when beta != 0) and a workspace of our own: the
  // candidates never touch the program's buffers.
  for (uint64_t bytes : {e->bytes[0], e->bytes[1], e->bytes[2], uint64_t(workspaceBytes)}) {
    CUdeviceptr d = 0;
    CUresult r = cu.cuMemAlloc(&d, std::max<uint64_t>(bytes, 256));
    if (r != CUDA_SUCCESS) {
      rec.note = "no device memory for scratch operands (" + cuText(cu, r) +
                 "): the heuristic's first choice is kept";
      tuned.push_back(rec);
      return true;
    }
    t.buffers.push_back(d);
  }
  auto ck = [&](CUresult r, const char *what) {
    if (r == CUDA_SUCCESS)
      return true;
    error = std::string("tuning the GEMM ") + rec.shape + ": " + what + ": " + cuText(cu, r);
    return false;
  };
  if (!ck(cu.cuStreamCreate(&t.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return false;
  // A and B hold random signs and mantissas of magnitude [1, 2): a GEMM's
  // speed depends on its data through power and clocks (constant inputs
  // ran 15-20% faster than random ones on an H200), so the candidates are
  // timed on data that toggles like real activations and weights. A 1 MiB
  // pattern repeats over each operand; C starts at zero.
  if (!ck(cu.cuMemsetD8Async(t.buffers[2], 0, e->bytes[2], t.stream), "cuMemsetD8Async"))
    return false;
  std::vector<uint32_t> pattern(size_t(1) << 18);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  const cudaDataType_t abType = dataType(call.dtypeA);
  for (uint32_t &w : pattern) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17; // xorshift64
    const uint32_t r = static_cast<uint32_t>(state >> 16);
    w = abType == CUDA_R_32F   ? 0x3F800000u | (r & 0x807FFFFFu)
        : abType == CUDA_R_16F ? 0x3C003C00u | (r & 0x83FF83FFu)
                               : 0x3F803F80u | (r & 0x807F807Fu);
  }
  const uint64_t patternBytes = pattern.size() * sizeof(uint32_t);
  for (size_t i = 0; i < 2; ++i)
    for (uint64_t at = 0; at < e->bytes[i]; at += patternBytes)
      if (!ck(cu.cuMemcpyHtoDAsync(t.buffers[i] + at, pattern.data(),
                                   std::min(patternBytes, e->bytes[i] - at), t.stream),
              "filling the scratch operands"))
        return false;
  const size_t n = cand.size();
  t.events.assign(n * kTuneRuns * 2, nullptr);
  for (CUevent &ev : t.events)
    if (!ck(cu.cuEventCreate(&ev, CU_EVENT_DEFAULT), "cuEventCreate"))
      return false;
  const void *a = reinterpret_cast<const void *>(t.buffers[0]);
  const void *b = reinterpret_cast<const void *>(t.buffers[1]);
  void *c = reinterpret_cast<void *>(t.buffers[2]);
  void *ws = reinterpret_cast<void *>(t.buffers[3]);
  std::vector<bool> ran(n, false);
  for (size_t i = 0; i < n; ++i) {
    auto launch = [&] {
      return lt.cublasLtMatmul(handle, e->desc, &call.alpha, a, e->a, b, e->b, &call.beta, c,
                               e->c, c, e->c, &cand[i].algo, ws, workspaceBytes, t.stream) ==
             CUBLAS_STATUS_SUCCESS;
    };
    if (!launch()) // warm-up; an algorithm that refuses is skipped
      continue;
    ran[i] = true;
    for (int r = 0; r < kTuneRuns && ran[i]; ++r) {
      CUevent *ev = &t.events[(i * kTuneRuns + r) * 2];
      if (!ck(cu.cuEventRecord(ev[0], t.stream), "cuEventRecord"))
        return false;
      ran[i] = launch();
      if (!ck(cu.cuEventRecord(ev[1], t.stream), "cuEventRecord"))
        return false;
    }
  }
  if (!ck(cu.cuStreamSynchronize(t.stream), "running the candidates"))
    return false;
  std::vector<double> median(n, -1.0);
  for (size_t i = 0; i < n; ++i) {
    if (!ran[i])
      continue;
    std::vector<double> ms;
    for (int r = 0; r < kTuneRuns; ++r) {
      float v = 0;
      CUevent *ev = &t.events[(i * kTuneRuns + r) * 2];
      if (!ck(cu.cuEventElapsedTime(&v, ev[0], ev[1]), "cuEventElapsedTime"))
        return false;
      ms.push_back(v);
    }
    std::sort(ms.begin(), ms.end());
    median[i] = ms[ms.size() / 2];
    ++rec.candidates;
  }
  if (median[0] < 0) {
    rec.note = "the heuristic's first choice did not run on scratch operands: kept untimed";
    tuned.push_back(rec);
    return true;
  }
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (median[i] >= 0 && median[i] < median[best])
      best = i;
  if (median[best] > 0.99 * median[0])
    best = 0;
  rec.chosen = static_cast<int>(best);
  rec.firstMs = median[0];
  rec.chosenMs = median[best];
  e->algo = cand[best].algo;
  tuned.push_back(rec);
  return true;
}

} // namespace h20::runtime
