//===- CublasLtGemm.cpp - one GEMM call on cuBLASLt ----------------------===//
#include "CublasLtGemm.h"

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
  return CUDA_R_32F;
}

/// Largest power of two <= 256 dividing `p`.
uint32_t alignmentOf(CUdeviceptr p) {
  uint32_t a = 256;
  while (a > 1 && p % a != 0)
    a /= 2;
  return a;
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

bool CublasLtGemm::run(const GemmCall &call, CUstream stream, CUdeviceptr workspace,
                       size_t workspaceBytes, std::string &error, bool &outOfMemory) {
  outOfMemory = false;
  GemmPlan plan;
  if (!planGemm(call.problem, plan, error))
    return false;
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

  auto fail = [&](const char *what, cublasStatus_t s) {
    error = std::string("cuBLASLt ") + what + " failed: " + cublasStatusName(s) + " (" +
            shapeText(call) + ")";
    outOfMemory = s == CUBLAS_STATUS_ALLOC_FAILED;
    return false;
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
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.cublasLtMatmulAlgoGetHeuristic(handle, e.desc, e.a, e.b, e.c, e.c, pref, 1, &result,
                                            &returned);
    lt.cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && returned == 0)
      s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s != CUBLAS_STATUS_SUCCESS) {
      destroy(e);
      return fail("algorithm selection", s);
    }
    e.algo = result.algo;
    it = cache.emplace(std::move(key), e).first;
  }
  const Entry &e = it->second;
  const void *a = reinterpret_cast<const void *>(libA), *b = reinterpret_cast<const void *>(libB);
  void *c = reinterpret_cast<void *>(call.c);
  cublasStatus_t s = lt.cublasLtMatmul(handle, e.desc, &call.alpha, a, e.a, b, e.b, &call.beta, c,
                                       e.c, c, e.c, &e.algo, reinterpret_cast<void *>(workspace),
                                       workspaceBytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS)
    return fail("cublasLtMatmul", s);
  return true;
}

} // namespace h20::runtime
