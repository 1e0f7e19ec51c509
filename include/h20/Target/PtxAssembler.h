//===- PtxAssembler.h - run ptxas over emitted PTX --------------*- C++ -*-===//
//
// The GPU target emits PTX; when the CUDA toolkit's ptxas is on the machine
// it is also assembled into a cubin (loaded without a JIT step at run time)
// and ptxas's -v report shows registers and spills per kernel. ptxas is an
// optional tool: its absence is reported as such and the caller decides
// (ship PTX only, or skip a test).
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_PTXASSEMBLER_H
#define H20_TARGET_PTXASSEMBLER_H

#include <cstdint>
#include <string>
#include <vector>

namespace h20 {

/// Path of ptxas: the first of PATH, $CUDA_HOME/bin, /usr/local/cuda/bin
/// that holds an executable ptxas; empty when none does.
std::string findPtxas();

enum class PtxasStatus {
  Ok,       ///< assembled: the cubin and the -v report are set
  NotFound, ///< no ptxas on this machine (message in `error`)
  Failed,   ///< ptxas (or a temporary file) failed; `error` holds ptxas's output
};

/// Runs `ptxas -arch=<arch> -v in.ptx -o out.cubin` in a fresh temporary
/// directory (removed afterwards). `arch` is an SM name, e.g. "sm_90" or
/// "sm_90a". On Ok, `cubin` holds the ELF bytes and `report` the -v text
/// (both of ptxas's output streams: "ptxas info : Used N registers ...",
/// "N bytes stack frame, N bytes spill stores, N bytes spill loads" per
/// function).
PtxasStatus assemblePtx(const std::string &ptx, const std::string &arch, std::string &cubin,
                        std::string &report, std::string &error);

/// One function's line of a ptxas -v report.
struct PtxasFunctionStats {
  std::string name;
  int registers = -1;         ///< -1 when the report has no "Used N registers"
  int64_t stackFrame = 0;     ///< bytes
  int64_t spillStores = 0;    ///< bytes
  int64_t spillLoads = 0;     ///< bytes
};

/// Parses a ptxas -v report into per-function statistics, in report order.
std::vector<PtxasFunctionStats> parsePtxasReport(const std::string &report);

} // namespace h20

#endif // H20_TARGET_PTXASSEMBLER_H
