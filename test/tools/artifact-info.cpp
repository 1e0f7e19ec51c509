//===- artifact-info.cpp - print an artifact's manifest for FileCheck ----===//
//
// artifact-info model.h20 [--steps]
// Prints the manifest's JSON (keys sorted, two-space indent) after checking
// the artifact's header and CRC, then, with --steps, one line per GPU step:
// "step K: OP KERNEL [ROLE]" so tests can check the launch plan's shape.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/Artifact.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: artifact-info MODEL.h20 [--steps]\n");
    return 2;
  }
  h20::runtime::Artifact a;
  std::string error;
  if (!h20::runtime::readArtifact(argv[1], a, error)) {
    std::fprintf(stderr, "artifact-info: %s\n", error.c_str());
    return 2;
  }
  nlohmann::json m = nlohmann::json::parse(a.manifest, nullptr, false);
  if (m.is_discarded()) {
    std::fprintf(stderr, "artifact-info: the manifest is not JSON\n");
    return 2;
  }
  bool steps = argc > 2 && std::strcmp(argv[2], "--steps") == 0;
  if (!steps) {
    std::printf("%s\n", m.dump(2).c_str());
    return 0;
  }
  if (!m.contains("gpu")) {
    std::fprintf(stderr, "artifact-info: not a GPU artifact\n");
    return 2;
  }
  int k = 0;
  for (const auto &s : m["gpu"]["steps"]) {
    std::string op = s.value("op", "?");
    std::string kernel = s.value("kernel", "");
    std::string role = s.value("role", "");
    std::printf("step %d: %s %s%s\n", k++, op.c_str(), kernel.c_str(),
                role.empty() ? "" : (" " + role).c_str());
  }
  return 0;
}
