//===- CudaDriver.cpp - the CUDA driver API, loaded at run time ----------===//
//
// libcuda.so.1 and libcublasLt are opened with dlopen on first use; every
// function is resolved by the symbol name that cuda.h's macros map the API
// name to (cuMemAlloc -> cuMemAlloc_v2, ...), so the pointer types taken from
// the headers match the entry points actually called.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/CudaDriver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <vector>

namespace h20::runtime {
namespace {

/// Resolves `names` in order (the first one found wins) into `fn`; on
/// failure appends the first name to `missing`.
template <typename Fn>
void resolve(void *lib, Fn &fn, std::initializer_list<const char *> names,
             std::string &missing) {
  for (const char *name : names) {
    if (void *p = dlsym(lib, name)) {
      fn = reinterpret_cast<Fn>(p);
      return;
    }
  }
  fn = nullptr;
  missing += (missing.empty() ? "" : ", ") + std::string(*names.begin());
}

std::string dlerrorText() {
  const char *e = dlerror();
  return e ? e : "unknown dlopen error";
}

struct CudaState {
  std::once_flag once;
  CudaApi api{};
  bool ok = false;
  std::string error;
};

CudaState &cudaState() {
  static CudaState s;
  return s;
}

void loadCuda(CudaState &s) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    s.error = "no NVIDIA driver: libcuda.so.1 not found (" + dlerrorText() + ")";
    return;
  }
  CudaApi &a = s.api;
  std::string missing;
  // Versioned names: what cuda.h #defines each API name to (CUDA 12/13,
  // without per-thread default streams). Older drivers lack some _v2 names;
  // the unversioned ones share the signature and are tried second.
  resolve(lib, a.cuInit, {"cuInit"}, missing);
  resolve(lib, a.cuDriverGetVersion, {"cuDriverGetVersion"}, missing);
  resolve(lib, a.cuDeviceGetCount, {"cuDeviceGetCount"}, missing);
  resolve(lib, a.cuDeviceGet, {"cuDeviceGet"}, missing);
  resolve(lib, a.cuDeviceGetName, {"cuDeviceGetName"}, missing);
  resolve(lib, a.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, missing);
  resolve(lib, a.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"}, missing);
  resolve(lib, a.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, missing);
  resolve(lib, a.cuDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2"}, missing);
  resolve(lib, a.cuCtxSetCurrent, {"cuCtxSetCurrent"}, missing);
  resolve(lib, a.cuCtxSynchronize, {"cuCtxSynchronize"}, missing);
  resolve(lib, a.cuMemGetInfo, {"cuMemGetInfo_v2"}, missing);
  resolve(lib, a.cuMemAlloc, {"cuMemAlloc_v2"}, missing);
  resolve(lib, a.cuMemFree, {"cuMemFree_v2"}, missing);
  resolve(lib, a.cuMemAllocHost, {"cuMemAllocHost_v2"}, missing);
  resolve(lib, a.cuMemFreeHost, {"cuMemFreeHost"}, missing);
  resolve(lib, a.cuMemHostAlloc, {"cuMemHostAlloc"}, missing);
  resolve(lib, a.cuMemHostGetDevicePointer, {"cuMemHostGetDevicePointer_v2"}, missing);
  resolve(lib, a.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"}, missing);
  resolve(lib, a.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"}, missing);
  resolve(lib, a.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"}, missing);
  resolve(lib, a.cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"}, missing);
  resolve(lib, a.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, missing);
  resolve(lib, a.cuMemsetD8Async, {"cuMemsetD8Async"}, missing);
  resolve(lib, a.cuModuleLoadDataEx, {"cuModuleLoadDataEx"}, missing);
  resolve(lib, a.cuModuleUnload, {"cuModuleUnload"}, missing);
  resolve(lib, a.cuModuleGetFunction, {"cuModuleGetFunction"}, missing);
  resolve(lib, a.cuFuncSetAttribute, {"cuFuncSetAttribute"}, missing);
  resolve(lib, a.cuFuncGetAttribute, {"cuFuncGetAttribute"}, missing);
  resolve(lib, a.cuLaunchKernel, {"cuLaunchKernel"}, missing);
  resolve(lib, a.cuStreamCreate, {"cuStreamCreate"}, missing);
  resolve(lib, a.cuStreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"}, missing);
  resolve(lib, a.cuStreamSynchronize, {"cuStreamSynchronize"}, missing);
  resolve(lib, a.cuStreamQuery, {"cuStreamQuery"}, missing);
  resolve(lib, a.cuEventCreate, {"cuEventCreate"}, missing);
  resolve(lib, a.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}, missing);
  resolve(lib, a.cuEventRecord, {"cuEventRecord"}, missing);
  resolve(lib, a.cuEventSynchronize, {"cuEventSynchronize"}, missing);
  resolve(lib, a.cuEventQuery, {"cuEventQuery"}, missing);
  resolve(lib, a.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, missing);
  resolve(lib, a.cuGetErrorString, {"cuGetErrorString"}, missing);
  resolve(lib, a.cuGetErrorName, {"cuGetErrorName"}, missing);
  // CUDA graphs: optional (the executor falls back to plain launches).
  // cuStreamGetCaptureInfo_v3 and the _v2 kernel-node calls exist since
  // CUDA 12.3 / 12.0.
  std::string optional;
  resolve(lib, a.cuStreamBeginCapture, {"cuStreamBeginCapture_v2"}, optional);
  resolve(lib, a.cuStreamEndCapture, {"cuStreamEndCapture"}, optional);
  resolve(lib, a.cuStreamGetCaptureInfo, {"cuStreamGetCaptureInfo_v3"}, optional);
  resolve(lib, a.cuGraphInstantiate, {"cuGraphInstantiateWithFlags"}, optional);
  resolve(lib, a.cuGraphLaunch, {"cuGraphLaunch"}, optional);
  resolve(lib, a.cuGraphNodeGetType, {"cuGraphNodeGetType"}, optional);
  resolve(lib, a.cuGraphKernelNodeGetParams, {"cuGraphKernelNodeGetParams_v2"}, optional);
  resolve(lib, a.cuGraphExecKernelNodeSetParams, {"cuGraphExecKernelNodeSetParams_v2"},
          optional);
  resolve(lib, a.cuGraphGetNodes, {"cuGraphGetNodes"}, optional);
  resolve(lib, a.cuGraphDestroy, {"cuGraphDestroy"}, optional);
  resolve(lib, a.cuGraphExecDestroy, {"cuGraphExecDestroy"}, optional);
  resolve(lib, a.cuTensorMapEncodeTiled, {"cuTensorMapEncodeTiled"}, optional);
  if (!missing.empty()) {
    s.error = "no usable NVIDIA driver: libcuda.so.1 lacks " + missing +
              " (driver too old for CUDA 13?)";
    return; // the library stays loaded; nothing else refers to it
  }
  CUresult r = a.cuInit(0);
  if (r != CUDA_SUCCESS) {
    s.error = "cuInit failed: " + cudaErrorText(a, r);
    return;
  }
  s.ok = true;
}

struct LtState {
  std::once_flag once;
  CublasLtApi api{};
  bool ok = false;
  std::string error;
};

LtState &ltState() {
  static LtState s;
  return s;
}

void loadLt(LtState &s) {
  std::vector<std::string> candidates = {"libcublasLt.so.13"};
  for (const char *env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *dir = std::getenv(env); dir && *dir)
      candidates.push_back(std::string(dir) + "/lib64/libcublasLt.so.13");
  candidates.push_back("/usr/local/cuda/lib64/libcublasLt.so.13");
  candidates.push_back("libcublasLt.so");
  candidates.push_back("/usr/local/cuda/lib64/libcublasLt.so");
  void *lib = nullptr;
  std::string firstError;
  for (const std::string &c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib)
      break;
    if (firstError.empty())
      firstError = dlerrorText();
  }
  if (!lib) {
    s.error = "cuBLASLt not found: tried libcublasLt.so.13 and libcublasLt.so on the library "
              "path and in /usr/local/cuda/lib64 (" + firstError + ")";
    return;
  }
  CublasLtApi &a = s.api;
  std::string missing;
  resolve(lib, a.cublasLtCreate, {"cublasLtCreate"}, missing);
  resolve(lib, a.cublasLtDestroy, {"cublasLtDestroy"}, missing);
  resolve(lib, a.cublasLtMatmulDescCreate, {"cublasLtMatmulDescCreate"}, missing);
  resolve(lib, a.cublasLtMatmulDescDestroy, {"cublasLtMatmulDescDestroy"}, missing);
  resolve(lib, a.cublasLtMatmulDescSetAttribute, {"cublasLtMatmulDescSetAttribute"}, missing);
  resolve(lib, a.cublasLtMatrixLayoutCreate, {"cublasLtMatrixLayoutCreate"}, missing);
  resolve(lib, a.cublasLtMatrixLayoutDestroy, {"cublasLtMatrixLayoutDestroy"}, missing);
  resolve(lib, a.cublasLtMatrixLayoutSetAttribute, {"cublasLtMatrixLayoutSetAttribute"},
          missing);
  resolve(lib, a.cublasLtMatmulPreferenceCreate, {"cublasLtMatmulPreferenceCreate"}, missing);
  resolve(lib, a.cublasLtMatmulPreferenceDestroy, {"cublasLtMatmulPreferenceDestroy"}, missing);
  resolve(lib, a.cublasLtMatmulPreferenceSetAttribute,
          {"cublasLtMatmulPreferenceSetAttribute"}, missing);
  resolve(lib, a.cublasLtMatmulAlgoGetHeuristic, {"cublasLtMatmulAlgoGetHeuristic"}, missing);
  resolve(lib, a.cublasLtMatmul, {"cublasLtMatmul"}, missing);
  if (!missing.empty()) {
    s.error = "cuBLASLt library lacks " + missing;
    return;
  }
  s.ok = true;
}

} // namespace

const CudaApi *cudaApi(std::string &error) {
  CudaState &s = cudaState();
  std::call_once(s.once, [&] { loadCuda(s); });
  if (!s.ok) {
    error = s.error;
    return nullptr;
  }
  return &s.api;
}

const CublasLtApi *cublasLtApi(std::string &error) {
  LtState &s = ltState();
  std::call_once(s.once, [&] { loadLt(s); });
  if (!s.ok) {
    error = s.error;
    return nullptr;
  }
  return &s.api;
}

bool cudaGraphSupport(const CudaApi &api, std::string &missing) {
  struct Entry {
    bool present;
    const char *name;
  } entries[] = {
      {api.cuStreamBeginCapture != nullptr, "cuStreamBeginCapture_v2"},
      {api.cuStreamEndCapture != nullptr, "cuStreamEndCapture"},
      {api.cuStreamGetCaptureInfo != nullptr, "cuStreamGetCaptureInfo_v3"},
      {api.cuGraphInstantiate != nullptr, "cuGraphInstantiateWithFlags"},
      {api.cuGraphLaunch != nullptr, "cuGraphLaunch"},
      {api.cuGraphNodeGetType != nullptr, "cuGraphNodeGetType"},
      {api.cuGraphKernelNodeGetParams != nullptr,
       "cuGraphKernelNodeGetParams_v2"},
      {api.cuGraphExecKernelNodeSetParams != nullptr,
       "cuGraphExecKernelNodeSetParams_v2"},
      {api.cuGraphGetNodes != nullptr, "cuGraphGetNodes"},
      {api.cuGraphDestroy != nullptr, "cuGraphDestroy"},
      {api.cuGraphExecDestroy != nullptr, "cuGraphExecDestroy"}};
  for (const Entry &e : entries)
    if (!e.present) {
      missing = std::string("the driver lacks ") + e.name;
      return false;
    }
  return true;
}

std::string cudaErrorText(const CudaApi &api, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (api.cuGetErrorName)
    api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString)
    api.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text)
    out += std::string(": ") + text;
  return out;
}

} // namespace h20::runtime
