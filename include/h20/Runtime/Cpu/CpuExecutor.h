//===- CpuExecutor.h - run a CPU artifact's shared object -------*- C++ -*-===//
#ifndef H20_RUNTIME_CPUEXECUTOR_H
#define H20_RUNTIME_CPUEXECUTOR_H

#include <cstdint>
#include <string>
#include <vector>

#include "h20/Runtime/Format/Manifest.h"

namespace h20::runtime {

/// A strided-memref descriptor as MLIR's C interface expects it:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}, row-major.
class MemRefDescriptor {
public:
  MemRefDescriptor(void *data, const std::vector<int64_t> &shape);
  /// An index scalar (a chunked prefill's chunk_start, chunk_tokens): the
  /// entry wrapper passes the word itself, not a descriptor.
  static MemRefDescriptor index(int64_t value);
  void *get() { return words.data(); }
  /// Rank and sizes, as described (empty for a scalar).
  std::vector<int64_t> shape() const;
  bool isScalar() const { return scalar; }

private:
  MemRefDescriptor() = default;
  std::vector<int64_t> words;
  bool scalar = false;
};

/// A loaded CPU kernel library: the artifact's shared object, loaded from
/// memory (memfd) so nothing is left on disk.
class CpuModule {
public:
  /// Loads `so` and resolves `symbol` (void(void **)); false with `error`.
  bool load(const std::vector<uint8_t> &payload, uint64_t offset, uint64_t size,
            const std::string &symbol, std::string &error);
  ~CpuModule();

  /// Checks `args` against the ABI the code was compiled for (argument
  /// count, ranks, static dims); false with `error` naming the argument.
  bool checkAbi(const std::vector<MemRefDescriptor> &args, std::string &error) const;

  /// Calls the entry with pointers to descriptors (inputs, weights, outputs).
  void run(std::vector<MemRefDescriptor> &args);

  /// Checks a chunked artifact's manifest (`c`) against what its code was
  /// compiled for (the code's h20_chunking table: chunk, capacity, cache
  /// count, bytes per element of each cache): the ring moves assume the
  /// chunk, and the caches' buffers are sized from the manifest. False
  /// with `error` naming the field when they differ or the table is absent.
  bool checkChunking(const CpuChunking &c, std::string &error) const;

private:
  void *handle = nullptr;
  void (*entry)(void **) = nullptr;
  const long long *abi = nullptr;
  size_t abiWords = 0; ///< length of the code's h20_abi table
  const long long *chunking = nullptr; ///< h20_chunking; null when not chunked
  size_t chunkingWords = 0;
};

/// The ABI check of CpuModule::checkAbi on a table `abi` of `words` words
/// (argument count, then per argument its rank and dims, -1 for dynamic;
/// rank -1 for an index scalar, which only a scalar argument matches):
/// false with `error` when `args` differ in count, rank or a static dim, or
/// when the table is shorter than it says. Never reads past `words`.
bool checkCpuAbi(const long long *abi, size_t words, const std::vector<MemRefDescriptor> &args,
                 std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_CPUEXECUTOR_H
