//===- TargetDescription.cpp - GPUs (and the CPU) as data ----------------===//
#include "h20/Analysis/TargetDescription.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <string>

namespace h20 {
namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// Shared memory and registers of Hopper (sm_90): 228 KB per SM, 227 KB per
// CTA opt-in, 64K registers (NVIDIA Hopper Tuning Guide, "Occupancy").
// Ampere A100 (sm_80): 164 KB per SM, 163 KB per CTA. Ada (sm_89): 100 KB per
// SM, 99 KB per CTA (Ada Tuning Guide). Rates and bandwidths: DESIGN.md
// section 1 (datasheets) for H20/H100/H200; the H800 SXM datasheet (same
// compute as H100, NVLink 400 GB/s); the A100 80GB SXM datasheet; the L20
// product brief (PCIe, no NVLink). Memory: what the driver reported on
// the H100 and H200 h20 ran on (the H800 taken as the H100), else the
// datasheets' GB as GiB (H20 96 GB, DESIGN.md s1).
const TargetDescription kTargets[] = {
    {"h20", 78, 227 * KiB, 228 * KiB, 65536, 60 * MiB, 4.0e12, 148e12, 296e12, 90, 900e9,
     "DESIGN.md s1 / NVIDIA H20 datasheet; Hopper tuning guide (smem, regs)", 44e12, 96 * GiB},
    {"h100", 132, 227 * KiB, 228 * KiB, 65536, 50 * MiB, 3.35e12, 989e12, 1979e12, 90, 900e9,
     "NVIDIA H100 SXM datasheet; Hopper tuning guide", 67e12, 81559 * MiB},
    {"h200", 132, 227 * KiB, 228 * KiB, 65536, 50 * MiB, 4.8e12, 989e12, 1979e12, 90, 900e9,
     "NVIDIA H200 SXM datasheet; Hopper tuning guide", 67e12, 143771 * MiB},
    {"h800", 132, 227 * KiB, 228 * KiB, 65536, 50 * MiB, 3.35e12, 989e12, 1979e12, 90, 400e9,
     "NVIDIA H800 SXM datasheet (H100 compute, 400 GB/s NVLink)", 67e12, 81559 * MiB},
    {"a100", 108, 163 * KiB, 164 * KiB, 65536, 40 * MiB, 2.039e12, 312e12, 0, 80, 600e9,
     "NVIDIA A100 80GB SXM datasheet; Ampere tuning guide", 19.5e12, 80 * GiB},
    {"l20", 92, 99 * KiB, 100 * KiB, 65536, 96 * MiB, 0.864e12, 119.5e12, 239e12, 89, 0,
     "NVIDIA L20 product brief (dense rates); Ada tuning guide", 59.8e12, 48 * GiB},
    // The CPU target: "SMs" are cores, "shared memory" the per-core L2 the
    // reference loops block for; rates are nominal (the CPU target is about
    // correctness, not speed).
    {"cpu", 2, 1 * MiB, 1 * MiB, 0, 32 * MiB, 20e9, 100e9, 0, 0, 0,
     "nominal 2-core x86 host (CI machine)", 100e9},
};

} // namespace

llvm::ArrayRef<TargetDescription> knownTargets() { return kTargets; }

const TargetDescription *findTarget(llvm::StringRef name) {
  for (const TargetDescription &t : kTargets)
    if (t.name == name)
      return &t;
  return nullptr;
}

const TargetDescription *targetForGpuName(llvm::StringRef deviceName) {
  llvm::SmallVector<llvm::StringRef> words;
  std::string lower = deviceName.lower();
  llvm::SplitString(lower, words, " -_");
  for (llvm::StringRef w : words)
    if (const TargetDescription *t = findTarget(w); t && t->computeCapability > 0)
      return t;
  return nullptr;
}

} // namespace h20
