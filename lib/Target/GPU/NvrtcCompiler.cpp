//===- NvrtcCompiler.cpp - CUDA source to PTX with NVRTC loaded at run time ===//
//
// The NVRTC driver of h20's CUDA-source kernels (attention, indexer, sparse
// attention, routed experts): libnvrtc is dlopen'ed once (never linked, so
// h20 builds and runs its CPU target without the CUDA toolkit), programs
// are compiled from embedded headers, and kernel headers are instantiated
// per variant by macro blocks. See include/h20/Target/NvrtcCompiler.h.
//
//===----------------------------------------------------------------------===//
#include "h20/Target/NvrtcCompiler.h"

#if H20_HAVE_NVRTC_HEADERS
#include <nvrtc.h>
#endif

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace h20 {

namespace {
bool fail(std::string *why, const std::string &msg) {
  if (why)
    *why = msg;
  return false;
}
} // namespace

std::string instantiateCudaHeader(const char *headerName,
                                  const std::vector<std::pair<std::string, std::string>> &defines) {
  std::string src;
  for (const auto &[macro, value] : defines)
    src += "#define " + macro + " " + value + "\n";
  src += std::string("#include \"") + headerName + "\"\n";
  for (const auto &d : defines)
    src += "#undef " + d.first + "\n";
  return src;
}

//===----------------------------------------------------------------------===//
// NVRTC, loaded at run time
//===----------------------------------------------------------------------===//

#if H20_HAVE_NVRTC_HEADERS
namespace {

struct NvrtcApi {
  decltype(&::nvrtcGetErrorString) getErrorString;
  decltype(&::nvrtcVersion) version;
  decltype(&::nvrtcCreateProgram) createProgram;
  decltype(&::nvrtcDestroyProgram) destroyProgram;
  decltype(&::nvrtcCompileProgram) compileProgram;
  decltype(&::nvrtcGetPTXSize) getPtxSize;
  decltype(&::nvrtcGetPTX) getPtx;
  decltype(&::nvrtcGetProgramLogSize) getProgramLogSize;
  decltype(&::nvrtcGetProgramLog) getProgramLog;
};

/// Candidate paths of libnvrtc, most specific first: the dynamic loader's
/// own search (LD_LIBRARY_PATH, ld.so.cache), then $CUDA_HOME/lib64, then
/// /usr/local/cuda/lib64.
std::vector<std::string> nvrtcCandidates() {
  const char *names[] = {"libnvrtc.so.13", "libnvrtc.so"};
  std::vector<std::string> dirs = {""};
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    dirs.push_back(std::string(home) + "/lib64/");
  dirs.push_back("/usr/local/cuda/lib64/");
  std::vector<std::string> out;
  for (const std::string &d : dirs)
    for (const char *n : names)
      out.push_back(d + n);
  return out;
}

/// Loads NVRTC once (thread-safe); null with `error` set when unavailable.
const NvrtcApi *nvrtcApi(std::string &error) {
  static std::once_flag once;
  static NvrtcApi api;
  static bool ok = false;
  static std::string loadError;
  std::call_once(once, [] {
    void *lib = nullptr;
    std::string tried;
    for (const std::string &path : nvrtcCandidates()) {
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib)
        break;
      tried += (tried.empty() ? "" : ", ") + path;
    }
    if (!lib) {
      loadError = "the GPU target needs NVRTC (libnvrtc.so.13 from the CUDA toolkit): not found "
                  "(tried " +
                  tried + "; set CUDA_HOME or LD_LIBRARY_PATH)";
      return;
    }
    bool all = true;
    auto get = [&](auto &fn, const char *sym) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, sym));
      if (!fn) {
        all = false;
        loadError = "the GPU target needs NVRTC (libnvrtc.so.13 from the CUDA toolkit): " +
                    std::string(sym) + " is missing from the loaded library";
      }
    };
    get(api.getErrorString, "nvrtcGetErrorString");
    get(api.version, "nvrtcVersion");
    get(api.createProgram, "nvrtcCreateProgram");
    get(api.destroyProgram, "nvrtcDestroyProgram");
    get(api.compileProgram, "nvrtcCompileProgram");
    get(api.getPtxSize, "nvrtcGetPTXSize");
    get(api.getPtx, "nvrtcGetPTX");
    get(api.getProgramLogSize, "nvrtcGetProgramLogSize");
    get(api.getProgramLog, "nvrtcGetProgramLog");
    ok = all;
  });
  if (!ok) {
    error = loadError;
    return nullptr;
  }
  return &api;
}

} // namespace
#endif // H20_HAVE_NVRTC_HEADERS

bool nvrtcAvailable(std::string *reason) {
#if H20_HAVE_NVRTC_HEADERS
  std::string error;
  if (nvrtcApi(error))
    return true;
  return fail(reason, error);
#else
  return fail(reason, "the GPU target needs NVRTC (libnvrtc.so.13 from the CUDA toolkit): this "
                      "h20 was built without the CUDA toolkit's nvrtc.h");
#endif
}

bool compileCudaToPtx(const std::string &source, const char *header, const char *headerName,
                      const char *programName, const std::string &cc, std::string &ptx,
                      std::string &log) {
  return compileCudaToPtx(source, {{header, headerName}}, programName, cc, ptx, log);
}

bool compileCudaToPtx(const std::string &source,
                      const std::vector<std::pair<const char *, const char *>> &headerList,
                      const char *programName, const std::string &cc, std::string &ptx,
                      std::string &log) {
  ptx.clear();
  log.clear();
#if !H20_HAVE_NVRTC_HEADERS
  (void)source, (void)headerList, (void)programName, (void)cc;
  nvrtcAvailable(&log);
  return false;
#else
  std::string error;
  const NvrtcApi *api = nvrtcApi(error);
  if (!api) {
    log = error;
    return false;
  }
  std::vector<const char *> headers, headerNames;
  for (const auto &[contents, name] : headerList) {
    headers.push_back(contents);
    headerNames.push_back(name);
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = api->createProgram(&prog, source.c_str(), programName,
                                     static_cast<int>(headers.size()), headers.data(),
                                     headerNames.data());
  if (r != NVRTC_SUCCESS) {
    log = std::string(programName) + ": nvrtcCreateProgram: " + api->getErrorString(r);
    return false;
  }
  const std::string archOpt = "-arch=compute_" + cc;
  const char *options[] = {archOpt.c_str(), "-default-device", "-std=c++17"};
  r = api->compileProgram(prog, 3, options);
  size_t logSize = 0;
  if (api->getProgramLogSize(prog, &logSize) == NVRTC_SUCCESS && logSize > 1) {
    log.resize(logSize);
    api->getProgramLog(prog, log.data());
    log.resize(logSize - 1); // drop the terminating NUL
  }
  bool ok = r == NVRTC_SUCCESS;
  if (!ok) {
    log = std::string(programName) + ": NVRTC failed (" + api->getErrorString(r) + "):\n" + log;
  } else {
    size_t size = 0;
    ok = api->getPtxSize(prog, &size) == NVRTC_SUCCESS;
    if (ok) {
      ptx.resize(size);
      ok = api->getPtx(prog, ptx.data()) == NVRTC_SUCCESS;
      if (ok && !ptx.empty() && ptx.back() == '\0')
        ptx.pop_back();
    }
    if (!ok)
      log = std::string(programName) + ": NVRTC produced no PTX\n" + log;
  }
  api->destroyProgram(&prog);
  return ok;
#endif
}

bool computeCapabilityOf(const std::string &arch, std::string &cc) {
  if (arch.rfind("sm_", 0) == 0)
    cc = arch.substr(3);
  else if (arch.rfind("compute_", 0) == 0)
    cc = arch.substr(8);
  else
    cc.clear();
  return cc.size() >= 2 && std::all_of(cc.begin(), cc.end(), [](char c) {
           return (c >= '0' && c <= '9') || c == 'a' || c == 'f';
         });
}

} // namespace h20
