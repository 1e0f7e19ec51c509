//===- TargetDescription.h - GPUs (and the CPU) as data ---------*- C++ -*-===//
#ifndef H20_ANALYSIS_TARGETDESCRIPTION_H
#define H20_ANALYSIS_TARGETDESCRIPTION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace h20 {

/// What the tile cost model needs to know about a target. Figures are
/// datasheet values; `source` says where each row's numbers come from.
struct TargetDescription {
  llvm::StringRef name;
  int64_t sms;                 ///< streaming multiprocessors (CPU: cores)
  int64_t smemPerBlock;        ///< max dynamic shared memory per CTA, bytes
  int64_t smemPerSM;           ///< shared memory per SM, bytes
  int64_t registersPerSM;      ///< 32-bit registers per SM
  int64_t l2Bytes;
  double hbmBytesPerS;         ///< memory bandwidth
  double bf16Flops;            ///< dense bf16 tensor-core FLOP/s
  double fp8Flops;             ///< dense fp8 FLOP/s (0: none)
  int computeCapability;       ///< e.g. 90 for sm_90 (0: CPU)
  double nvlinkBytesPerS;      ///< per GPU, 0 when PCIe only
  llvm::StringRef source;
  double fp32Flops = 0;        ///< dense fp32 CUDA-core FLOP/s (an FMA is 2)
  /// Device memory per GPU, bytes, as the driver reports it (0: not a
  /// GPU): measured where h20 has run (H100 80GB HBM3: 81559 MiB; H200:
  /// 143771 MiB), else the datasheet's "GB" taken as GiB, which is how
  /// those two compare. The CUDA context takes about 0.5 GiB of it.
  int64_t memoryBytes = 0;
};

/// All known targets: h20, h100, h200, h800, a100, l20, cpu.
llvm::ArrayRef<TargetDescription> knownTargets();

/// The description named `name`, or null.
const TargetDescription *findTarget(llvm::StringRef name);

/// The target of a GPU the driver names `deviceName` ("NVIDIA H200",
/// "NVIDIA H100 80GB HBM3", "NVIDIA H20", "NVIDIA A100-SXM4-80GB", ...): the
/// known target whose name is one of its words (after splitting at spaces
/// and dashes, case-insensitive), or null.
const TargetDescription *targetForGpuName(llvm::StringRef deviceName);

} // namespace h20

#endif // H20_ANALYSIS_TARGETDESCRIPTION_H
