//===- Artifact.cpp - the compiled-model file format ---------------------===//
#include "h20/Runtime/Format/Artifact.h"

#include "h20/Runtime/Format/FileUtil.h"

#include <zlib.h>

#include <cstring>
#include <fstream>

namespace h20::runtime {
namespace {
constexpr char kMagic[8] = {'H', '2', '0', '-', 'A', 'R', 'T', '\n'};
constexpr size_t kHeaderSize = 40;

template <typename T> void put(std::string &out, T v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof v);
}
template <typename T> T get(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint32_t checksum(const std::string &manifest, const std::vector<uint8_t> &payload) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef *>(manifest.data()),
              static_cast<uInt>(manifest.size()));
  // zlib's crc32 takes uInt lengths: feed large payloads in chunks.
  for (size_t off = 0; off < payload.size(); off += (1u << 30)) {
    size_t n = std::min<size_t>(payload.size() - off, 1u << 30);
    crc = crc32(crc, payload.data() + off, static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}
} // namespace

uint64_t appendBlob(std::vector<uint8_t> &payload, const void *bytes, uint64_t size) {
  payload.resize((payload.size() + 63) / 64 * 64, 0);
  uint64_t offset = payload.size();
  const auto *b = static_cast<const uint8_t *>(bytes);
  payload.insert(payload.end(), b, b + size);
  return offset;
}

bool writeArtifact(const std::string &path, const Artifact &a, std::string &error) {
  std::string out(kMagic, sizeof kMagic);
  put<uint32_t>(out, kArtifactFormatVersion);
  put<uint32_t>(out, 0);
  put<uint64_t>(out, a.manifest.size());
  put<uint64_t>(out, a.payload.size());
  put<uint32_t>(out, checksum(a.manifest, a.payload));
  put<uint32_t>(out, 0);
  out += a.manifest;
  out.append(reinterpret_cast<const char *>(a.payload.data()), a.payload.size());
  return writeFileAtomically(path, out, error);
}

bool readArtifact(const std::string &path, Artifact &a, std::string &error) {
  std::string bytes;
  if (!readFile(path, bytes, error))
    return false;
  return parseArtifact(bytes, path, a, error);
}

bool parseArtifact(const std::string &bytes, const std::string &path, Artifact &a,
                   std::string &error) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    error = "'" + path + "' is not an h20 artifact (bad magic; compile one with h20-opt --target=...)";
    return false;
  }
  uint32_t version = get<uint32_t>(bytes.data() + 8);
  if (version > kArtifactFormatVersion) {
    error = "'" + path + "' has artifact format version " + std::to_string(version) +
            ", newer than this h20-run supports (" + std::to_string(kArtifactFormatVersion) +
            "); recompile it with this h20-opt or update h20-run";
    return false;
  }
  if (version == 0) {
    error = "'" + path + "' has artifact format version 0 (corrupt header)";
    return false;
  }
  uint64_t m = get<uint64_t>(bytes.data() + 16), p = get<uint64_t>(bytes.data() + 24);
  uint32_t crc = get<uint32_t>(bytes.data() + 32);
  if (m > bytes.size() || p > bytes.size() || kHeaderSize + m + p != bytes.size()) {
    error = "'" + path + "' is truncated or corrupt: header declares " + std::to_string(m) +
            " + " + std::to_string(p) + " bytes, file holds " +
            std::to_string(bytes.size() - kHeaderSize);
    return false;
  }
  a.manifest.assign(bytes.data() + kHeaderSize, m);
  a.payload.assign(bytes.begin() + kHeaderSize + m, bytes.end());
  if (checksum(a.manifest, a.payload) != crc) {
    error = "'" + path + "' is corrupt (CRC-32 mismatch)";
    return false;
  }
  return true;
}

} // namespace h20::runtime
