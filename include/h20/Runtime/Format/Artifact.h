//===- Artifact.h - the compiled-model file format --------------*- C++ -*-===//
//
// An h20 artifact is one file:
//   bytes 0..7    magic "H20-ART\n"
//   u32           format version (little-endian; this build writes 1)
//   u32           reserved (0)
//   u64           manifest size M
//   u64           payload size P
//   u32           CRC-32 (zlib) of the manifest and payload bytes
//   u32           reserved (0)
//   M bytes       manifest.json (UTF-8; see DESIGN.md section 5)
//   P bytes       payload: the blobs the manifest's "blobs" list by offset and
//                 size (shared objects, PTX, cubins), each 64-byte aligned
// Plain C++ (no MLIR): both h20-opt and h20-run use it.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_ARTIFACT_H
#define H20_RUNTIME_ARTIFACT_H

#include <cstdint>
#include <string>
#include <vector>

namespace h20::runtime {

/// The format version this build writes; it reads this one and older.
/// 2: the GPU program's dense attention is a launch step (struct arguments,
/// grid_div, role; GpuProgram.h); a format-1 "attention" step is refused
/// with a request to recompile.
constexpr uint32_t kArtifactFormatVersion = 2;

struct Artifact {
  std::string manifest;          ///< JSON text
  std::vector<uint8_t> payload;  ///< concatenated blobs
};

/// Appends `bytes` to `payload` at the next 64-byte boundary and returns its
/// offset in the payload.
uint64_t appendBlob(std::vector<uint8_t> &payload, const void *bytes, uint64_t size);

/// Serialises `a` and writes it to `path` atomically (temporary + rename).
/// Returns false with `error` naming the path on failure.
bool writeArtifact(const std::string &path, const Artifact &a, std::string &error);

/// Reads and checks an artifact: magic, version (a newer one is refused with
/// its number), sizes against the file size, CRC. Returns false with `error`
/// saying what is wrong.
bool readArtifact(const std::string &path, Artifact &a, std::string &error);

/// readArtifact for the bytes of a file already read; `path` only names it
/// in messages.
bool parseArtifact(const std::string &bytes, const std::string &path, Artifact &a,
                   std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_ARTIFACT_H
