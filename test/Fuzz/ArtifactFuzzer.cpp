//===- ArtifactFuzzer.cpp - libFuzzer target: artifact loading -----------===//
//
// What h20-run does with an artifact file before any code runs, on raw bytes:
//  1. parseArtifact: header, sizes, CRC (as readArtifact);
//  2. parseManifest on the manifest bytes (the M bytes after the 40-byte
//     header, as many as there are), whatever the CRC says, so mutations of
//     the JSON are not all stopped by the checksum;
//  3. for a GPU manifest, parseGpuProgram with the payload size the header
//     declares (the payload bytes are only ever checked for their size), then
//     planBuffers and every step resolved for a few prompt lengths;
//  4. for a CPU manifest, h20-run's argument set-up (input shapes, output
//     shapes from dims_from, weight sizes) and checkCpuAbi against an ABI
//     table read from the payload bytes present. No code from the input is
//     loaded or run: the shared object is never dlopen'ed.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Cpu/CpuExecutor.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace h20::runtime;

namespace {
constexpr size_t kHeaderSize = 40;

void checkCpu(const Manifest &m, const std::string &bytes, size_t payloadStart) {
  // Inputs as a run would give them: dynamic dims 1, then 7.
  for (int64_t dyn : {1, 7}) {
    std::vector<std::vector<int64_t>> inputShapes;
    std::vector<MemRefDescriptor> args;
    static char dummy[64];
    for (const TensorSpec &in : m.inputs) {
      std::vector<int64_t> s = in.shape;
      for (int64_t &d : s)
        if (d < 0)
          d = dyn;
      int64_t count;
      if (!elementCount(s, count))
        return; // no input file could have this shape (h20-run reads it first)
      inputShapes.push_back(s);
      args.emplace_back(dummy, s);
    }
    for (const WeightSpec &w : m.weights) {
      int64_t count;
      if (!elementCount(w.shape, count))
        std::abort(); // parseManifest promised bounded static shapes
      args.emplace_back(dummy, w.shape);
    }
    std::string error;
    for (const TensorSpec &o : m.outputs) {
      std::vector<int64_t> shape;
      int64_t count;
      if (!resolveOutputShape(o, inputShapes, shape, error))
        return;
      if (!elementCount(shape, count))
        std::abort(); // resolveOutputShape promised a bounded shape
      args.emplace_back(dummy, shape);
    }
    // The code's h20_abi table, as the bytes after the manifest hold it.
    std::vector<long long> abi;
    for (size_t at = payloadStart; at + 8 <= bytes.size() && abi.size() < 4096; at += 8) {
      long long v;
      std::memcpy(&v, bytes.data() + at, 8);
      abi.push_back(v);
    }
    checkCpuAbi(abi.data(), abi.size(), args, error);
  }
}

void checkGpu(const Manifest &m, const std::string &manifest, uint64_t payloadSize) {
  GpuProgram p;
  std::string error;
  if (!parseGpuProgram(manifest, m, payloadSize, p, error))
    return;
  BufferPlan plan;
  planBuffers(p, plan, error);
  for (int64_t length : {int64_t(1), int64_t(17), int64_t(4096)}) {
    for (const SymbolValues &s : chunkSchedule(p, length)) {
      for (size_t i = 0; i < p.steps.size(); ++i) {
        ResolvedStep r;
        resolveStep(p, i, s, r, error);
      }
      break; // the first chunk; checkGpuProgramForLength covers the rest
    }
    checkGpuProgramForLength(p, length, error);
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  Artifact a;
  std::string error;
  parseArtifact(bytes, "fuzz.h20", a, error);
  if (size < kHeaderSize)
    return 0;
  uint64_t m, p;
  std::memcpy(&m, data + 16, 8);
  std::memcpy(&p, data + 24, 8);
  size_t manifestBytes = static_cast<size_t>(std::min<uint64_t>(m, size - kHeaderSize));
  std::string manifest = bytes.substr(kHeaderSize, manifestBytes);
  Manifest man;
  if (!parseManifest(manifest, man, error))
    return 0;
  if (man.target == "cpu")
    checkCpu(man, bytes, kHeaderSize + manifestBytes);
  else
    checkGpu(man, manifest, p);
  return 0;
}
