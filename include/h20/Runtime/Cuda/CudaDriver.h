//===- CudaDriver.h - the CUDA driver API, loaded at run time -------------===//
//
// h20-run must start on machines without a GPU (the CPU target), so neither
// libcuda nor libcublasLt is linked: both are dlopen'ed on first use and the
// functions h20 calls are resolved into these tables. Types come from the
// CUDA toolkit's headers (cuda.h, cublasLt.h), available at build time.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_CUDADRIVER_H
#define H20_RUNTIME_CUDADRIVER_H

#include <cublasLt.h>
#include <cuda.h>

#include <string>

namespace h20::runtime {

/// The driver API functions h20 uses; members are named like the API.
struct CudaApi {
  decltype(&::cuInit) cuInit;
  decltype(&::cuDriverGetVersion) cuDriverGetVersion;
  decltype(&::cuDeviceGetCount) cuDeviceGetCount;
  decltype(&::cuDeviceGet) cuDeviceGet;
  decltype(&::cuDeviceGetName) cuDeviceGetName;
  decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute;
  decltype(&::cuDeviceTotalMem) cuDeviceTotalMem;
  decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain;
  decltype(&::cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent;
  decltype(&::cuCtxSynchronize) cuCtxSynchronize;
  decltype(&::cuMemGetInfo) cuMemGetInfo;
  decltype(&::cuMemAlloc) cuMemAlloc;
  decltype(&::cuMemFree) cuMemFree;
  decltype(&::cuMemAllocHost) cuMemAllocHost;
  decltype(&::cuMemFreeHost) cuMemFreeHost;
  decltype(&::cuMemHostAlloc) cuMemHostAlloc;
  decltype(&::cuMemHostGetDevicePointer) cuMemHostGetDevicePointer;
  decltype(&::cuMemcpyHtoD) cuMemcpyHtoD;
  decltype(&::cuMemcpyDtoH) cuMemcpyDtoH;
  decltype(&::cuMemcpyHtoDAsync) cuMemcpyHtoDAsync;
  decltype(&::cuMemcpyDtoHAsync) cuMemcpyDtoHAsync;
  decltype(&::cuMemcpyDtoDAsync) cuMemcpyDtoDAsync;
  decltype(&::cuMemsetD8Async) cuMemsetD8Async;
  decltype(&::cuModuleLoadDataEx) cuModuleLoadDataEx;
  decltype(&::cuModuleUnload) cuModuleUnload;
  decltype(&::cuModuleGetFunction) cuModuleGetFunction;
  decltype(&::cuFuncSetAttribute) cuFuncSetAttribute;
  decltype(&::cuFuncGetAttribute) cuFuncGetAttribute;
  decltype(&::cuLaunchKernel) cuLaunchKernel;
  decltype(&::cuStreamCreate) cuStreamCreate;
  decltype(&::cuStreamDestroy) cuStreamDestroy;
  decltype(&::cuStreamSynchronize) cuStreamSynchronize;
  decltype(&::cuStreamQuery) cuStreamQuery;
  decltype(&::cuEventCreate) cuEventCreate;
  decltype(&::cuEventDestroy) cuEventDestroy;
  decltype(&::cuEventRecord) cuEventRecord;
  decltype(&::cuEventSynchronize) cuEventSynchronize;
  decltype(&::cuEventQuery) cuEventQuery;
  decltype(&::cuEventElapsedTime) cuEventElapsedTime;
  decltype(&::cuGetErrorString) cuGetErrorString;
  decltype(&::cuGetErrorName) cuGetErrorName;
  // CUDA graphs (stream capture, replay with updated kernel parameters).
  // Optional: null when the driver lacks them (cudaGraphSupport says which);
  // the executor then runs without graphs.
  decltype(&::cuStreamBeginCapture) cuStreamBeginCapture;
  decltype(&::cuStreamEndCapture) cuStreamEndCapture;
  decltype(&::cuStreamGetCaptureInfo) cuStreamGetCaptureInfo;
  decltype(&::cuGraphInstantiate) cuGraphInstantiate;
  decltype(&::cuGraphLaunch) cuGraphLaunch;
  decltype(&::cuGraphNodeGetType) cuGraphNodeGetType;
  decltype(&::cuGraphKernelNodeGetParams) cuGraphKernelNodeGetParams;
  decltype(&::cuGraphExecKernelNodeSetParams) cuGraphExecKernelNodeSetParams;
  decltype(&::cuGraphGetNodes) cuGraphGetNodes;
  decltype(&::cuGraphDestroy) cuGraphDestroy;
  decltype(&::cuGraphExecDestroy) cuGraphExecDestroy;
  // TMA tensor maps (AttentionTma.h). Optional: null when the driver lacks
  // it; the attention kernel then loads its tiles with cp.async.
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled;
};

/// cuBLASLt functions h20 uses (GEMMs: bf16/fp16/fp32 in, fp32 accumulate).
struct CublasLtApi {
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtDestroy) cublasLtDestroy;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) cublasLtMatrixLayoutSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
};

/// Loads libcuda.so.1 (once, thread-safe) and calls cuInit(0). Returns null
/// with `error` set ("no NVIDIA driver: libcuda.so.1 not found", or the
/// cuInit error) when the machine cannot run GPU code.
const CudaApi *cudaApi(std::string &error);

/// True when `api` has every CUDA graph entry point the executor uses;
/// otherwise false with `missing` naming the first absent one.
bool cudaGraphSupport(const CudaApi &api, std::string &missing);

/// Loads libcublasLt.so.13 (then libcublasLt.so), searching the default
/// library path and /usr/local/cuda/lib64. Null with `error` when absent.
const CublasLtApi *cublasLtApi(std::string &error);

/// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for a driver result code.
std::string cudaErrorText(const CudaApi &api, CUresult r);

} // namespace h20::runtime

#endif // H20_RUNTIME_CUDADRIVER_H
