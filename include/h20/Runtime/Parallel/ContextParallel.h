//===- ContextParallel.h - context-parallel prefill plans -------*- C++ -*-===//
//
// Context parallelism (issue 8): the prompt's S tokens are cut into 2N equal
// context-parallel (CP) chunks; rank r of N holds chunks r and 2N-1-r
// ("zigzag": every rank gets one early and one late chunk, so the causal
// attention work is balanced). The program runs layer-major: for each
// layer, every rank runs its chunks up to the layer's attention (writing
// its rows of the layer's K/V into its own KV cache), the ranks pass their
// K/V rows around a ring (N-1 steps; at step k rank r receives from rank
// r-1 the block that started at rank r-k, and sends rank r+1 the block that
// started at rank r-k+1), then every rank runs the attention of its chunks.
// Each rank's KV cache is a full-size copy of the program's state buffers:
// its own rows plus what it received. The tail (final norm, LM head) runs
// on the rank holding the last position (for "last" outputs).
//
// This header holds the pure parts, testable without a GPU: the chunk
// assignment, the split of a GpuProgram into layer segments, the rows of
// the state buffers a step writes, and the ring's copy plan with the
// per-rank log of collectives. GpuExecutor (GpuRunOptions::virtualRanks)
// runs the plan on one GPU with N virtual ranks, device-to-device copies
// standing in for NCCL.
//
// CP chunk length L = S / (2N) must be a multiple of the artifact's
// compiled chunk C: a CP chunk runs as L / C compiled chunks with the same
// (p0, n) as the single-GPU run, so the results can be compared bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_CONTEXTPARALLEL_H
#define H20_RUNTIME_CONTEXTPARALLEL_H

#include "h20/Runtime/Format/GpuProgram.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h20::runtime {

/// One context-parallel chunk: positions [begin, end) of the prompt.
struct CpChunk {
  int index = 0;  ///< 0 .. 2N-1, in position order
  int rank = 0;   ///< the rank holding it
  int64_t begin = 0, end = 0;
  int64_t firstPiece = 0, pieces = 0; ///< its compiled chunks: [firstPiece, firstPiece + pieces)
};

/// The zigzag assignment of a run.
struct CpSchedule {
  int ranks = 0;
  int64_t tokens = 0;        ///< S
  int64_t chunkTokens = 0;   ///< L = S / (2N)
  int64_t compiledChunk = 0; ///< C
  std::vector<CpChunk> chunks;               ///< 2N, position order
  std::vector<SymbolValues> pieces;          ///< every compiled chunk (p0, n), position order
  std::vector<int> pieceRank;                ///< per piece: the rank holding it
  std::vector<std::vector<int>> rankChunks;  ///< per rank: its CP chunks {r, 2N-1-r}
  std::vector<std::vector<int64_t>> rankPieces; ///< per rank: its pieces, ascending
  int64_t lastPiece = 0; ///< the piece holding position S-1
};

/// Plans N = `ranks` virtual ranks over `tokens` tokens of a program
/// compiled for chunks of `compiledChunk` tokens. False with `error` when N
/// is not a power of two >= 2, S is not divisible by 2N, or L = S / 2N is
/// not a multiple of C (the messages name the numbers and what would work).
bool planCpSchedule(int ranks, int64_t tokens, int64_t compiledChunk, CpSchedule &schedule,
                    std::string &error);

/// A run of steps [begin, end). A layer segment ends with an attention step
/// (attention == end - 1); the tail (attention == -1) holds what follows
/// the last attention (final norm, LM head).
struct CpSegment {
  size_t begin = 0, end = 0;
  int64_t attention = -1;
  std::vector<size_t> stateWriters; ///< steps in [begin, attention) that reference a state buffer
};

/// The segments of `program` by the layers its compiler declared
/// (GpuProgram::layers): segment l is layer l's steps, ending with its
/// attention step; the last segment is the tail (possibly empty). False
/// with `error` when context parallelism cannot run the program: not
/// chunked, no declared layers, an attention whose K or V is not a state
/// buffer (the KV cache), a step before the tail that references an output
/// buffer, or a step of the tail that references a state buffer.
bool splitLayerSegments(const GpuProgram &program, std::vector<CpSegment> &segments,
                        std::string &error);

/// A byte range of a state buffer: [offsetBytes, offsetBytes + bytes).
struct StateRun {
  int buffer = -1;
  int64_t offsetBytes = 0, bytes = 0;
  bool operator==(const StateRun &o) const {
    return buffer == o.buffer && offsetBytes == o.offsetBytes && bytes == o.bytes;
  }
};

/// The byte ranges of state buffers that step `index` may write for the
/// symbol values `s`: every view it declares on a state buffer (memref
/// arguments of a launch, a gemm's C, an attention's O, a memset's or
/// copy's or all_reduce's destination) as contiguous runs, in the buffer's element size
/// (else the memref's dtype, else bytes). False with `error` when the step
/// does not resolve or its views break into more than 2^20 runs.
bool stateWriteRuns(const GpuProgram &program, size_t index, const SymbolValues &s,
                    std::vector<StateRun> &runs, std::string &error);

/// Sorts `runs` and merges touching or overlapping ones (same buffer).
void mergeStateRuns(std::vector<StateRun> &runs);

/// One simulated collective as a rank issues it: at ring step `step` of
/// layer `layer`, send the block that started at rank `sendOrigin` to rank
/// `sendTo` and receive the block that started at `recvOrigin` from
/// `recvFrom` (one ncclSend + ncclRecv pair in a group on real GPUs).
struct CpCollective {
  int layer = 0, step = 0;
  int sendTo = 0, recvFrom = 0;
  int sendOrigin = 0, recvOrigin = 0;
  int64_t sendBytes = 0, recvBytes = 0;
};

/// One simulated transfer: `run` of rank `from`'s KV cache copied to the
/// same place in rank `to`'s, as part of the block that started at `origin`.
struct CpCopy {
  int layer = 0, step = 0;
  int from = 0, to = 0, origin = 0;
  StateRun run;
};

/// Traffic of one layer's ring.
struct CpLayerTraffic {
  int layer = 0;
  int steps = 0;     ///< ring steps (N - 1)
  int64_t sends = 0; ///< block transfers (N per step)
  int64_t copies = 0; ///< device copies (runs)
  int64_t bytes = 0; ///< bytes moved, all ranks together
};

/// The ring of every layer.
struct CpRingPlan {
  /// [layer][rank]: the merged state runs the rank writes in that layer's
  /// segment (its block).
  std::vector<std::vector<std::vector<StateRun>>> blocks;
  std::vector<CpCopy> copies;                      ///< in issue order
  std::vector<std::vector<CpCollective>> rankLog;  ///< per rank, in issue order
  std::vector<CpLayerTraffic> layers;
};

/// The ring plan for `written` ([layer][rank]: runs the rank writes in the
/// layer, any order, merged here). False with `error` when two ranks write
/// the same bytes in one layer (the blocks must be disjoint).
bool planCpRing(int ranks, std::vector<std::vector<std::vector<StateRun>>> written,
                CpRingPlan &plan, std::string &error);

/// Everything a virtual context-parallel run needs: the schedule, the
/// segments, the state rows each rank writes per layer (from the segments'
/// state writers resolved for its pieces) and the ring.
struct CpPlan {
  CpSchedule schedule;
  std::vector<CpSegment> segments;
  CpRingPlan ring;
};
bool planContextParallel(const GpuProgram &program, int ranks, int64_t tokens, CpPlan &plan,
                         std::string &error);

/// True when every rank issues the same sequence of collectives (same
/// count, same layer and ring step at each position) and they pair up:
/// rank r's send at position i goes to the rank whose receive at i names r
/// as its source, with the same bytes. Else false with `why`.
bool collectivesMatch(const std::vector<std::vector<CpCollective>> &rankLog, std::string &why);

} // namespace h20::runtime

#endif // H20_RUNTIME_CONTEXTPARALLEL_H
