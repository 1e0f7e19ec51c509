//===- NvrtcCompiler.h - CUDA source to PTX with NVRTC ----------*- C++ -*-===//
//
// NVRTC, loaded at run time (dlopen of libnvrtc.so.13: the dynamic loader's
// search, then $CUDA_HOME/lib64, then /usr/local/cuda/lib64), for h20's
// CUDA-source kernels. Plain C++ (no LLVM/MLIR types), like the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_NVRTCCOMPILER_H
#define H20_TARGET_NVRTCCOMPILER_H

#include <string>
#include <utility>
#include <vector>

namespace h20 {

/// NVRTC driver shared by h20's CUDA-source kernels: compiles `source`
/// (which may #include the one embedded `header` as `headerName`) for
/// compute capability `cc` ("90", "90a") with -default-device -std=c++17.
/// False with NVRTC's log (or why NVRTC cannot be loaded) in `log`.
bool compileCudaToPtx(const std::string &source, const char *header, const char *headerName,
                      const char *programName, const std::string &cc, std::string &ptx,
                      std::string &log);
/// The same with several embedded headers: (contents, include name) pairs.
bool compileCudaToPtx(const std::string &source,
                      const std::vector<std::pair<const char *, const char *>> &headers,
                      const char *programName, const std::string &cc, std::string &ptx,
                      std::string &log);

/// One instantiation of a macro-parameterised kernel header: `#define NAME
/// VALUE` for each pair, `#include "headerName"`, then `#undef` each NAME.
/// The program sources of compileAttentionPtx and compileIndexerPtx are
/// such instantiations, one per distinct kernel.
std::string instantiateCudaHeader(const char *headerName,
                                  const std::vector<std::pair<std::string, std::string>> &defines);

/// "sm_90" / "sm_90a" / "compute_90" -> "90" / "90a" in `cc`; false when
/// `arch` is malformed.
bool computeCapabilityOf(const std::string &arch, std::string &cc);

/// Whether NVRTC can be loaded on this machine; `reason` says why not.
bool nvrtcAvailable(std::string *reason = nullptr);

} // namespace h20

#endif // H20_TARGET_NVRTCCOMPILER_H
