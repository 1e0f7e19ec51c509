//===- CpuExecutor.cpp - run a CPU artifact's shared object --------------===//
#include "h20/Runtime/CpuExecutor.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
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
  if (!entry) {
    error = "the artifact's code has no entry '" + symbol + "'";
    return false;
  }
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
