//===- NcclComm.cpp - an NCCL communicator, NCCL loaded at run time -------===//
//
// libnccl.so.2 is dlopen'ed; its functions are resolved into the table
// below. The declarations follow NCCL's C API as documented in nccl.h
// (NCCL 2.x: ncclResult_t, ncclDataType_t and ncclRedOp_t are C enums, i.e.
// int; ncclUniqueId is a struct of 128 bytes passed by value; ncclComm_t and
// cudaStream_t are opaque pointers). Where nccl.h is available at build
// time the constants are checked against it.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Parallel/NcclComm.h"

#include "h20/Runtime/Format/FileUtil.h"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(H20_HAVE_CUDA_HEADERS) && H20_HAVE_CUDA_HEADERS && __has_include(<nccl.h>)
#include <nccl.h>
#define H20_CHECK_NCCL_ABI 1
#endif

namespace h20::runtime {
namespace {

// NCCL's C API (nccl.h), the part h20 uses.
constexpr int kNcclSuccess = 0;   // ncclSuccess
constexpr int kNcclInProgress = 7; // ncclInProgress
constexpr int kNcclFloat16 = 6;   // ncclFloat16 (ncclHalf)
constexpr int kNcclFloat32 = 7;   // ncclFloat32
constexpr int kNcclBfloat16 = 9;  // ncclBfloat16
constexpr int kNcclUint8 = 1;     // ncclUint8
constexpr int kNcclSum = 0;       // ncclSum
constexpr size_t kUniqueIdBytes = 128; // NCCL_UNIQUE_ID_BYTES

#ifdef H20_CHECK_NCCL_ABI
static_assert(kNcclSuccess == ncclSuccess && kNcclInProgress == ncclInProgress &&
                  kNcclFloat32 == ncclFloat32 && kNcclSum == ncclSum &&
                  kNcclFloat16 == ncclFloat16 && kNcclBfloat16 == ncclBfloat16 &&
                  kNcclUint8 == ncclUint8,
              "NCCL constants differ from nccl.h");
static_assert(kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES &&
                  sizeof(ncclUniqueId) == sizeof(NcclComm::UniqueId),
              "ncclUniqueId differs from nccl.h");
static_assert(sizeof(ncclResult_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int) &&
                  sizeof(ncclRedOp_t) == sizeof(int),
              "NCCL enums are not int-sized");
#endif
static_assert(sizeof(NcclComm::UniqueId) == kUniqueIdBytes, "UniqueId is 128 bytes");

using NcclCommHandle = void *; // ncclComm_t
struct NcclApi {
  int (*ncclGetVersion)(int *version);
  int (*ncclGetUniqueId)(NcclComm::UniqueId *id);
  int (*ncclCommInitRank)(NcclCommHandle *comm, int nranks, NcclComm::UniqueId id, int rank);
  int (*ncclCommDestroy)(NcclCommHandle comm);
  int (*ncclCommGetAsyncError)(NcclCommHandle comm, int *asyncError);
  int (*ncclAllReduce)(const void *send, void *recv, size_t count, int datatype, int op,
                       NcclCommHandle comm, void *stream);
  int (*ncclSend)(const void *send, size_t count, int datatype, int peer, NcclCommHandle comm,
                  void *stream);
  int (*ncclRecv)(void *recv, size_t count, int datatype, int peer, NcclCommHandle comm,
                  void *stream);
  int (*ncclGroupStart)();
  int (*ncclGroupEnd)();
  int (*ncclCommAbort)(NcclCommHandle comm);
  const char *(*ncclGetErrorString)(int result);
  const char *(*ncclGetLastError)(NcclCommHandle comm); // optional (NCCL >= 2.13)
};

struct NcclState {
  std::once_flag once;
  NcclApi api{};
  bool ok = false;
  std::string error, version;
};

NcclState &ncclState() {
  static NcclState s;
  return s;
}

template <typename Fn> bool resolve(void *lib, Fn &fn, const char *name, std::string &missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn)
    missing += (missing.empty() ? "" : ", ") + std::string(name);
  return fn != nullptr;
}

void loadNccl(NcclState &s) {
  // H20_NCCL_LIBRARY names the one library to try (tests use it to check
  // the path without NCCL).
  std::vector<std::string> candidates;
  if (const char *lib = std::getenv("H20_NCCL_LIBRARY"); lib && *lib) {
    candidates.push_back(lib);
  } else {
    candidates.push_back("libnccl.so.2");
    for (const char *env : {"CUDA_HOME", "CUDA_PATH"})
      if (const char *dir = std::getenv(env); dir && *dir)
        candidates.push_back(std::string(dir) + "/lib64/libnccl.so.2");
    candidates.push_back("/usr/local/cuda/lib64/libnccl.so.2");
  }
  void *lib = nullptr;
  std::string firstError;
  for (const std::string &c : candidates) {
    if ((lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)))
      break;
    if (firstError.empty()) {
      const char *e = dlerror();
      firstError = e ? e : "dlopen failed";
    }
  }
  if (!lib) {
    s.error = "libnccl.so.2 not found (" + firstError + ")";
    return;
  }
  NcclApi &a = s.api;
  std::string missing;
  resolve(lib, a.ncclGetVersion, "ncclGetVersion", missing);
  resolve(lib, a.ncclGetUniqueId, "ncclGetUniqueId", missing);
  resolve(lib, a.ncclCommInitRank, "ncclCommInitRank", missing);
  resolve(lib, a.ncclCommDestroy, "ncclCommDestroy", missing);
  resolve(lib, a.ncclCommGetAsyncError, "ncclCommGetAsyncError", missing);
  resolve(lib, a.ncclAllReduce, "ncclAllReduce", missing);
  resolve(lib, a.ncclSend, "ncclSend", missing);
  resolve(lib, a.ncclRecv, "ncclRecv", missing);
  resolve(lib, a.ncclGroupStart, "ncclGroupStart", missing);
  resolve(lib, a.ncclGroupEnd, "ncclGroupEnd", missing);
  resolve(lib, a.ncclCommAbort, "ncclCommAbort", missing);
  resolve(lib, a.ncclGetErrorString, "ncclGetErrorString", missing);
  std::string optional;
  resolve(lib, a.ncclGetLastError, "ncclGetLastError", optional);
  if (!missing.empty()) {
    s.error = "libnccl.so.2 lacks " + missing;
    return;
  }
  // No NVLink multicast (NVLS): set before NCCL reads its environment,
  // unless the user chose.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  int code = 0;
  if (a.ncclGetVersion(&code) != kNcclSuccess) {
    s.error = "ncclGetVersion failed";
    return;
  }
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9,
  // major * 1000 + minor * 100 + patch before.
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  s.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
  s.ok = true;
}

const NcclApi *ncclApi(std::string &error) {
  NcclState &s = ncclState();
  std::call_once(s.once, [&] { loadNccl(s); });
  if (!s.ok) {
    error = s.error;
    return nullptr;
  }
  return &s.api;
}

std::string resultText(const NcclApi &a, int r, NcclCommHandle comm = nullptr) {
  const char *text = a.ncclGetErrorString ? a.ncclGetErrorString(r) : nullptr;
  std::string out = (text ? text : "NCCL error") + std::string(" (") + std::to_string(r) + ")";
  if (comm && a.ncclGetLastError)
    if (const char *last = a.ncclGetLastError(comm); last && *last)
      out += ": " + std::string(last);
  return out;
}

} // namespace

bool ncclAvailable(std::string &reason) { return ncclApi(reason) != nullptr; }

std::string ncclVersionText() {
  std::string ignored;
  return ncclApi(ignored) ? ncclState().version : std::string();
}

NcclComm::~NcclComm() { destroy(); }

bool NcclComm::newUniqueId(UniqueId &id, std::string &error) {
  const NcclApi *a = ncclApi(error);
  if (!a)
    return false;
  int r = a->ncclGetUniqueId(&id);
  if (r != kNcclSuccess) {
    error = "ncclGetUniqueId failed: " + resultText(*a, r);
    return false;
  }
  return true;
}

bool NcclComm::exchangeUniqueId(const std::string &path, int rank, double timeoutS, UniqueId &id,
                                std::string &error, bool *timedOut) {
  if (timedOut)
    *timedOut = false;
  if (path.empty()) {
    error = "no file to share the NCCL unique id through (H20_NCCL_ID_FILE)";
    return false;
  }
  if (rank == 0) {
    if (!newUniqueId(id, error))
      return false;
    std::string bytes(id.bytes, sizeof id.bytes);
    if (!writeFileAtomically(path, bytes, error)) {
      error = "rank 0 could not share the NCCL unique id: " + error;
      return false;
    }
    return true;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    int64_t size = fileSize(path);
    if (size == static_cast<int64_t>(sizeof id.bytes)) {
      std::string bytes;
      if (!readFile(path, bytes, error))
        return false;
      if (bytes.size() == sizeof id.bytes) {
        std::memcpy(id.bytes, bytes.data(), sizeof id.bytes);
        return true;
      }
    } else if (size > 0) {
      error = "'" + path + "' holds " + std::to_string(size) + " bytes, not an NCCL unique id (" +
              std::to_string(sizeof id.bytes) + " bytes); give each job a fresh H20_NCCL_ID_FILE";
      return false;
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited >= timeoutS) {
      if (timedOut)
        *timedOut = true;
      error = "rank " + std::to_string(rank) + " waited " + std::to_string(int(waited)) +
              " s for rank 0's NCCL unique id in '" + path + "' (did rank 0 start?)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool NcclComm::init(int ranks, int rank, const UniqueId &id, std::string &error,
                    double timeoutS, const std::function<void()> &threadSetup) {
  if (comm) {
    error = "NcclComm::init called twice";
    return false;
  }
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    error = "NCCL rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
            " is out of range";
    return false;
  }
  const NcclApi *a = ncclApi(error);
  if (!a)
    return false;
  NcclCommHandle c = nullptr;
  int r = kNcclSuccess;
  if (timeoutS <= 0) {
    r = a->ncclCommInitRank(&c, ranks, id, rank);
  } else {
    // ncclCommInitRank blocks until every rank joined; a peer that never
    // starts would block it for ever. It runs on a detached thread that
    // owns its state; after the timeout this rank gives up (the thread
    // aborts the communicator should it still come up).
    struct InitState {
      std::mutex m;
      std::condition_variable cv;
      bool done = false, abandoned = false;
      int result = kNcclSuccess;
      NcclCommHandle comm = nullptr;
    };
    auto st = std::make_shared<InitState>();
    std::function<void()> setup = threadSetup;
    std::thread([st, a, ranks, id, rank, setup] {
      if (setup)
        setup();
      NcclCommHandle made = nullptr;
      int result = a->ncclCommInitRank(&made, ranks, id, rank);
      std::lock_guard<std::mutex> lock(st->m);
      if (st->abandoned) {
        if (made)
          a->ncclCommAbort(made);
        return;
      }
      st->done = true;
      st->result = result;
      st->comm = made;
      st->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(st->m);
    if (!st->cv.wait_for(lock, std::chrono::duration<double>(timeoutS), [&] { return st->done; })) {
      st->abandoned = true;
      error = "ncclCommInitRank (rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
              ") did not complete within " + std::to_string(static_cast<int>(timeoutS)) +
              " s: not every rank joined (did one fail to start?)";
      return false;
    }
    r = st->result;
    c = st->comm;
  }
  if (r != kNcclSuccess) {
    error = "ncclCommInitRank (rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
            ") failed: " + resultText(*a, r);
    if (c)
      a->ncclCommDestroy(c);
    return false;
  }
  comm = c;
  nranks = ranks;
  myRank = rank;
  return true;
}

int ncclDataType(const std::string &dtype) {
  return dtype == "float32"    ? kNcclFloat32
         : dtype == "float16"  ? kNcclFloat16
         : dtype == "bfloat16" ? kNcclBfloat16
                               : -1;
}

bool NcclComm::allReduceSumF32(uint64_t send, uint64_t recv, size_t count, void *stream,
                               std::string &error) {
  return allReduceSum(send, recv, count, "float32", stream, error);
}

bool NcclComm::allReduceSum(uint64_t send, uint64_t recv, size_t count, const std::string &dtype,
                            void *stream, std::string &error) {
  const int type = ncclDataType(dtype);
  if (type < 0) {
    error = "ncclAllReduce of " + dtype + " is not supported (float32, float16, bfloat16)";
    return false;
  }
  const NcclApi *a = ncclApi(error);
  if (!a)
    return false;
  if (!comm) {
    error = "ncclAllReduce on a communicator that is not initialised";
    return false;
  }
  int r = a->ncclAllReduce(reinterpret_cast<const void *>(send), reinterpret_cast<void *>(recv),
                           count, type, kNcclSum, comm, stream);
  if (r != kNcclSuccess) {
    error = "ncclAllReduce failed: " + resultText(*a, r, comm);
    return false;
  }
  return true;
}

bool NcclComm::groupSendRecv(const std::vector<Transfer> &transfers, void *stream,
                             std::string &error) {
  const NcclApi *a = ncclApi(error);
  if (!a)
    return false;
  if (!comm) {
    error = "ncclSend/ncclRecv on a communicator that is not initialised";
    return false;
  }
  int r = a->ncclGroupStart();
  if (r != kNcclSuccess) {
    error = "ncclGroupStart failed: " + resultText(*a, r, comm);
    return false;
  }
  for (const Transfer &t : transfers) {
    if (t.peer < 0 || t.peer >= nranks) {
      a->ncclGroupEnd();
      error = "a transfer names rank " + std::to_string(t.peer) + " of " + std::to_string(nranks);
      return false;
    }
    r = t.send ? a->ncclSend(reinterpret_cast<const void *>(t.addr), t.bytes, kNcclUint8, t.peer,
                             comm, stream)
               : a->ncclRecv(reinterpret_cast<void *>(t.addr), t.bytes, kNcclUint8, t.peer, comm,
                             stream);
    if (r != kNcclSuccess) {
      a->ncclGroupEnd();
      error = std::string(t.send ? "ncclSend to" : "ncclRecv from") + " rank " +
              std::to_string(t.peer) + " failed: " + resultText(*a, r, comm);
      return false;
    }
  }
  r = a->ncclGroupEnd();
  if (r != kNcclSuccess && r != kNcclInProgress) {
    error = "ncclGroupEnd failed: " + resultText(*a, r, comm);
    return false;
  }
  return true;
}

bool NcclComm::checkAsync(std::string &error) {
  const NcclApi *a = ncclApi(error);
  if (!a)
    return false;
  if (!comm) {
    error = "the NCCL communicator is not initialised";
    return false;
  }
  int async = kNcclSuccess;
  int r = a->ncclCommGetAsyncError(comm, &async);
  if (r != kNcclSuccess) {
    error = "ncclCommGetAsyncError failed: " + resultText(*a, r, comm);
    return false;
  }
  if (async != kNcclSuccess && async != kNcclInProgress) {
    error = "NCCL asynchronous error: " + resultText(*a, async, comm);
    return false;
  }
  return true;
}

void NcclComm::release(bool abortOperations) {
  if (!comm)
    return;
  std::string ignored;
  if (const NcclApi *a = ncclApi(ignored))
    abortOperations ? a->ncclCommAbort(comm) : a->ncclCommDestroy(comm);
  comm = nullptr;
  nranks = 0;
  myRank = -1;
}

void NcclComm::abort() { release(/*abortOperations=*/true); }

void NcclComm::destroy() { release(/*abortOperations=*/false); }

} // namespace h20::runtime
