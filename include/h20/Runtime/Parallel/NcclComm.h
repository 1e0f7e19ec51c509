//===- NcclComm.h - an NCCL communicator, NCCL loaded at run time -*- C++ -*-===//
//
// The multi-GPU prefill talks between GPUs through NCCL. Like libcuda,
// libnccl.so.2 is never linked: it is dlopen'ed on first use, so h20-run
// starts on machines without it (a 1-GPU run continues without NCCL). The
// few NCCL types used are declared in NcclComm.cpp after NCCL's C API
// (nccl.h); this header includes neither CUDA nor NCCL headers.
//
// One code path for 1 GPU and for N: rank 0 makes a unique id, every rank
// joins with init(ranks, rank, id) on the GPU whose CUDA context is current
// to the calling thread. Before NCCL's first call NCCL_NVLS_ENABLE=0 is set
// (unless the user set it): NVLink multicast (NVLS) is not used.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_NCCLCOMM_H
#define H20_RUNTIME_NCCLCOMM_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace h20::runtime {

/// Loads libnccl.so.2 (once, thread-safe). False with `reason` when it is
/// missing or lacks a function h20 uses.
bool ncclAvailable(std::string &reason);

/// The loaded library's version, "2.28.9"; empty when unavailable.
std::string ncclVersionText();

/// NCCL's ncclDataType_t for a manifest dtype: ncclFloat32 (7) for
/// "float32", ncclFloat16 (6) for "float16", ncclBfloat16 (9) for
/// "bfloat16"; -1 for any other (no all-reduce of it).
int ncclDataType(const std::string &dtype);

class NcclComm {
public:
  /// NCCL's ncclUniqueId: made once by rank 0, given to every rank.
  struct UniqueId {
    char bytes[128];
  };

  NcclComm() = default;
  ~NcclComm();
  NcclComm(const NcclComm &) = delete;
  NcclComm &operator=(const NcclComm &) = delete;

  /// ncclGetUniqueId; false with `error`.
  static bool newUniqueId(UniqueId &id, std::string &error);

  /// Shares the unique id of an N-process job through the file `path`
  /// (on a file system every rank sees; a fresh path per job): rank 0
  /// makes the id and writes it atomically (writeFileAtomically, so no
  /// rank reads a partial id); every other rank polls for the file every
  /// 10 ms and reads it. False with `error` naming the file when rank 0
  /// cannot write it, when the file has another size than an id's 128
  /// bytes (at once), or when it does not appear within `timeoutS` seconds
  /// (then `*timedOut` is set). Rank 0 should remove the file once every
  /// rank has joined (GpuExecutor::load does), so a later job cannot read
  /// a stale id from it.
  static bool exchangeUniqueId(const std::string &path, int rank, double timeoutS, UniqueId &id,
                               std::string &error, bool *timedOut = nullptr);

  /// ncclCommInitRank: joins the `ranks`-rank communicator `id` as `rank`,
  /// on the GPU of the calling thread's current CUDA context. Blocks until
  /// every rank joined. False with `error` (NCCL's message), the object
  /// unchanged. Call once. With `timeoutS` > 0 the call runs on a helper
  /// thread (which first calls `threadSetup`: make the CUDA context
  /// current there) and this rank gives up after `timeoutS` seconds with
  /// an error saying not every rank joined.
  bool init(int ranks, int rank, const UniqueId &id, std::string &error, double timeoutS = 0,
            const std::function<void()> &threadSetup = {});

  /// ncclAllReduce (sum) of `count` float32 from device address `send` into
  /// `recv` (equal: in place), enqueued on `stream` (a CUstream). False with
  /// `error` when NCCL refuses to enqueue it.
  bool allReduceSumF32(uint64_t send, uint64_t recv, size_t count, void *stream,
                       std::string &error);

  /// ncclAllReduce (ncclSum) of `count` elements of `dtype` ("float32",
  /// "float16", "bfloat16": ncclDataType) from device address `send` into
  /// `recv` (equal: in place), enqueued on `stream` (a CUstream). False
  /// with `error` for another dtype or when NCCL refuses to enqueue it.
  bool allReduceSum(uint64_t send, uint64_t recv, size_t count, const std::string &dtype,
                    void *stream, std::string &error);

  /// One point-to-point transfer of a group: `bytes` bytes at device
  /// address `addr`, sent to (send) or received from (!send) rank `peer`.
  struct Transfer {
    bool send = true;
    int peer = 0;
    uint64_t addr = 0;
    size_t bytes = 0;
  };

  /// ncclGroupStart, one ncclSend / ncclRecv (ncclUint8) per transfer in
  /// order, ncclGroupEnd, enqueued on `stream` (a CUstream). Transfers
  /// between two ranks match in issue order, so both sides must list their
  /// sends and receives of a pair in the same order. False with `error`
  /// (NCCL's message) when NCCL refuses to enqueue them.
  bool groupSendRecv(const std::vector<Transfer> &transfers, void *stream, std::string &error);

  /// ncclCommGetAsyncError: false with `error` when an operation of this
  /// communicator failed asynchronously (or the query itself failed).
  bool checkAsync(std::string &error);

  /// ncclCommDestroy; the object can no longer be used. Idempotent.
  void destroy();

  /// ncclCommAbort: ends the communicator without waiting for its
  /// operations (they fail; kernels stuck waiting for a dead peer return).
  /// Use on a timeout or a peer's failure instead of destroy(). Idempotent.
  void abort();

  bool valid() const { return comm != nullptr; }
  int ranks() const { return nranks; }
  int rank() const { return myRank; }

private:
  /// ncclCommAbort or ncclCommDestroy, then the object is empty.
  void release(bool abortOperations);

  void *comm = nullptr; ///< ncclComm_t
  int nranks = 0, myRank = -1;
};

} // namespace h20::runtime

#endif // H20_RUNTIME_NCCLCOMM_H
