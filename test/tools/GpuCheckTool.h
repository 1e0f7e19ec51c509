//===- GpuCheckTool.h - CUDA setup shared by the GPU check tools -*- C++ -*-===//
//
// attention-check, sparse-attention-check, moe-check and gemm-fp8-check run
// kernels through
// the dlopen'ed CUDA driver (h20/Runtime/Cuda/CudaDriver.h). This header holds
// what they share: the driver table, the abort-on-error check, opening
// device 0 (or printing the tool's SKIP line where there is none), and the
// median of CUDA-event timings.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TEST_TOOLS_GPUCHECKTOOL_H
#define H20_TEST_TOOLS_GPUCHECKTOOL_H

#include "h20/Runtime/Cuda/CudaDriver.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace h20::checktool {

/// The driver; set by openDevice.
inline const runtime::CudaApi *api = nullptr;
/// The tool's name, the prefix of its error messages; set by openDevice.
inline const char *toolName = "check";

/// Aborts the tool (exit 1) on a driver error: the checks assume a working
/// device once one was found.
inline void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return;
  std::fprintf(stderr, "%s: %s: %s\n", toolName, what, runtime::cudaErrorText(*api, r).c_str());
  std::exit(1);
}

/// Loads the driver and makes device 0's primary context current. Without a
/// driver or device prints "SKIP: no GPU (<reason>)" and returns false (the
/// tool then exits 0); driver errors after that abort through check().
inline bool openDevice(const char *tool, CUdevice &dev) {
  toolName = tool;
  std::string error;
  api = runtime::cudaApi(error);
  int count = 0;
  if (api && api->cuDeviceGetCount(&count) == CUDA_SUCCESS && count == 0)
    error = "no CUDA device";
  if (!api || count == 0) {
    std::printf("SKIP: no GPU (%s)\n", error.c_str());
    return false;
  }
  CUcontext ctx;
  check(api->cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(api->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(api->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return true;
}

/// Median milliseconds of `run` (which enqueues its GPU work on `stream`)
/// over `runs` calls, each between two CUDA events, after `warmups` calls
/// and a synchronisation.
template <class F> double medianMs(F run, CUstream stream, int warmups, int runs) {
  CUevent start, stop;
  check(api->cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(api->cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < warmups; ++i)
    run();
  check(api->cuCtxSynchronize(), "warm-up");
  std::vector<float> ms;
  for (int i = 0; i < runs; ++i) {
    check(api->cuEventRecord(start, stream), "cuEventRecord");
    run();
    check(api->cuEventRecord(stop, stream), "cuEventRecord");
    check(api->cuEventSynchronize(stop), "cuEventSynchronize");
    float t = 0;
    check(api->cuEventElapsedTime(&t, start, stop), "cuEventElapsedTime");
    ms.push_back(t);
  }
  api->cuEventDestroy(start);
  api->cuEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace h20::checktool

#endif // H20_TEST_TOOLS_GPUCHECKTOOL_H
