//===- CpuExecutor.cpp - run a CPU artifact's shared object --------------===//
#include "h20/Runtime/Cpu/CpuExecutor.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace h20::runtime {

MemRefDescriptor::MemRefDescriptor(void *data, const std::vector<int64_t> &shape) {
  size_t r = shape.size();
  words.resize(3 + 2 * r);
  words[0] = reinterpret_cast<int64_t>(data);
  words[1] = reinterpret_cast<int64_t>(data);
  words[2] = 0;
  int64_t stride = 1;
  for (size_t k = r; k-- > 0;) {
    words[3 + k] = shape[k];
    words[3 + r + k] = stride;
    stride *= shape[k];
  }
}

MemRefDescriptor MemRefDescriptor::index(int64_t value) {
  MemRefDescriptor d;
  d.words = {value};
  d.scalar = true;
  return d;
}

std::vector<int64_t> MemRefDescriptor::shape() const {
  if (scalar)
    return {};
  size_t r = (words.size() - 3) / 2;
  return std::vector<int64_t>(words.begin() + 3, words.begin() + 3 + r);
}

bool CpuModule::load(const std::vector<uint8_t> &payload, uint64_t offset, uint64_t size,
                     const std::string &symbol, std::string &error) {
  if (offset > payload.size() || size > payload.size() - offset) {
    error = "the artifact's shared object lies outside its payload";
    return false;
  }
  int fd = memfd_create("h20-model.so", MFD_CLOEXEC);
  if (fd < 0) {
    error = std::string("memfd_create failed: ") + std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, payload.data() + offset + done, size - done);
    if (n <= 0) {
      error = std::string("cannot stage the shared object: ") + std::strerror(errno);
      close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  close(fd);
  if (!handle) {
    error = std::string("cannot load the artifact's code: ") + dlerror();
    return false;
  }
  entry = reinterpret_cast<void (*)(void **)>(dlsym(handle, symbol.c_str()));
  // A table and its length in words, from its ELF symbol: the checks
  // never read past it. Null (0 words) when the code has no such table.
  auto table = [&](const char *name, size_t &words) {
    auto *t = static_cast<const long long *>(dlsym(handle, name));
    Dl_info info;
    void *extra = nullptr; // dladdr1 stores a `const ElfW(Sym) *` here
    words = t && dladdr1(t, &info, &extra, RTLD_DL_SYMENT) && extra
                ? static_cast<const ElfW(Sym) *>(extra)->st_size / sizeof(long long)
                : 0;
    return t;
  };
  abi = table("h20_abi", abiWords);
  // A chunked artifact's facts (CpuTarget.cpp writes them beside h20_abi).
  chunking = table("h20_chunking", chunkingWords);
  if (!entry || !abi || abiWords == 0) {
    error = "the artifact's code has no entry '" + symbol + "' or no ABI description";
    return false;
  }
  return true;
}

bool CpuModule::checkAbi(const std::vector<MemRefDescriptor> &args, std::string &error) const {
  return checkCpuAbi(abi, abiWords, args, error);
}

bool checkCpuAbi(const long long *abi, size_t words, const std::vector<MemRefDescriptor> &args,
                 std::string &error) {
  size_t at = 0;
  auto next = [&](long long &v) {
    if (at >= words)
      return false;
    v = abi[at++];
    return true;
  };
  auto truncated = [&] {
    error = "the code's ABI description ends after " + std::to_string(words) + " words";
    return false;
  };
  long long count;
  if (!next(count))
    return truncated();
  if (count != static_cast<long long>(args.size())) {
    error = "the manifest describes " + std::to_string(args.size()) +
            " arguments but the code takes " + std::to_string(count);
    return false;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    std::vector<int64_t> shape = args[i].shape();
    long long rank;
    if (!next(rank))
      return truncated();
    if ((rank == -1) != args[i].isScalar()) {
      error = "argument " + std::to_string(i) + " is " +
              (args[i].isScalar() ? "an index scalar" : "a tensor") + " but the code takes " +
              (rank == -1 ? "an index scalar" : "a tensor");
      return false;
    }
    bool ok = rank == -1 || rank == static_cast<long long>(shape.size());
    for (size_t k = 0; ok && k < shape.size(); ++k) {
      long long dim;
      if (!next(dim))
        return truncated();
      ok = dim < 0 || dim == shape[k];
    }
    if (!ok) {
      error = "argument " + std::to_string(i) + " does not match the shape the code was "
              "compiled for";
      return false;
    }
  }
  return true;
}

bool CpuModule::checkChunking(const CpuChunking &c, std::string &error) const {
  if (!chunking || chunkingWords < 3) {
    error = "the manifest describes a chunked prefill but the code was not compiled for one";
    return false;
  }
  auto differs = [&](const std::string &what, long long code, long long manifest) {
    error = "the manifest's cpu_chunked " + what + " is " + std::to_string(manifest) +
            " but the code was compiled for " + std::to_string(code);
    return false;
  };
  if (chunking[0] != c.chunk)
    return differs("chunk", chunking[0], c.chunk);
  if (chunking[1] != c.capacity)
    return differs("capacity", chunking[1], c.capacity);
  const long long count = chunking[2];
  if (count < 0 || chunkingWords != static_cast<size_t>(3 + count)) {
    error = "the code's chunking table is malformed";
    return false;
  }
  if (count != static_cast<long long>(c.caches.size()))
    return differs("cache count", count, static_cast<long long>(c.caches.size()));
  for (size_t k = 0; k < c.caches.size(); ++k)
    if (chunking[3 + k] != dtypeSize(c.caches[k].dtype))
      return differs("cache " + std::to_string(k) + " bytes per element ('" +
                         c.caches[k].dtype + "')",
                     chunking[3 + k], dtypeSize(c.caches[k].dtype));
  return true;
}

CpuModule::~CpuModule() {
  if (handle)
    dlclose(handle);
}

void CpuModule::run(std::vector<MemRefDescriptor> &args) {
  std::vector<void *> argv;
  for (MemRefDescriptor &d : args)
    argv.push_back(d.get());
  entry(argv.data());
}

} // namespace h20::runtime
