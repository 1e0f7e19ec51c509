//===- MoeKernel.h - the GPU routed-experts (MoE) kernels -*- C++ -*-===//
//
// Names, launch geometry, limits and NVRTC compilation of
// lib/Target/GPU/kernels/moe.cuh: DeepSeek-V4.1's routed-experts routing,
// permutation, SwiGLU and combine kernels, which run around the grouped
// cuBLASLt GEMMs (moe.cuh's header states the pipeline and the formula).
// One module holds every kernel and type variant. Plain C++ (no MLIR).
//
// Element types are numbered as elsewhere in the GPU target: 0 float32,
// 1 float16, 2 bfloat16.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_MOEKERNEL_H
#define H20_TARGET_MOEKERNEL_H

#include <cstdint>
#include <string>

namespace h20 {

/// Threads per CTA of every MoE kernel (H20_MOE_THREADS).
inline constexpr int kMoeThreads = 256;
/// Tokens per route CTA (one warp each): grid ceil(T / 8).
inline constexpr int64_t kMoeRouteTokensPerCta = 8;
/// Permuted rows per gather CTA (one warp each): grid ceil(R / 8).
inline constexpr int64_t kMoeGatherRowsPerCta = 8;
/// Largest expert count E (the route kernel's shared scores and per-lane
/// taken mask) and top_k K (the combine kernel's shared pairs).
inline constexpr int64_t kMoeMaxExperts = 1024;
inline constexpr int64_t kMoeMaxTopK = 16;
/// Largest R = T * K (pos and rowToken hold int32 row numbers).
inline constexpr int64_t kMoeMaxRows = 2147483647;
/// SwiGLU grid: one CTA per kMoeSwigluElemsPerCta elements (16 per
/// thread), at most kMoeSwigluMaxCtas CTAs (the kernel is grid-stride).
inline constexpr int64_t kMoeSwigluElemsPerCta = 4096;
inline constexpr int64_t kMoeSwigluMaxCtas = 65535;

/// Whether the kernels take E = `experts` and K = `topK`: 1 <= E <= 1024
/// and 1 <= K <= min(E, 16). On false, `why` (if given) says which rule
/// failed. (R = T * K < 2^31 is checked where T is known: kMoeMaxRows.)
bool moeShapeSupported(int64_t experts, int64_t topK, std::string *why = nullptr);

/// Kernel names; "" for a type outside 0..2.
/// h20_moe_route_b{f32,f16,bf16} by the bias' type `biasType`: (logits
/// [T, E] f32, bias [E], ids [T, K] i32, weights [T, K] f32, counts [El]
/// i32, pos [T, K] i32, float temp, float scaling, i32 first); counts must
/// be zero before (it is accumulated with atomics). The rank holds experts
/// [first, first + El) (one GPU: 0 and E): counts are over those, and a
/// pick of another expert gets pos -1 (expert parallelism).
std::string moeRouteKernel(int biasType);
/// h20_moe_positions: (ids [T, K] i32, counts [El] i32, offsets [El + 1]
/// i32, pos [T, K] i32, rowToken [R] i32, i32 first): CTA e places the
/// picks of expert first + e.
std::string moePositionsKernel();
/// h20_moe_gather_{f32,f16,bf16} by the element type `dt` of X and Xp:
/// (X [T, Dm], rowToken [R] i32, Xp [R, Dm]).
std::string moeGatherKernel(int dt);
/// h20_moe_swiglu_{f32,f16,bf16} by the element type `dt` of A: (G [R, I]
/// f32, U [R, I] f32, A [R, I], float limit).
std::string moeSwigluKernel(int dt);
/// The FP8 expert GEMM's forms of the two (sm_90a modules only; moe.cuh,
/// "4 / 6 in FP8"): h20_moe_gather_fp8_{f32,f16,bf16} by X's type (X [T,
/// Dm], rowToken [R] i32, Xq [R, Dm] e4m3, Xs [ceil(Dm / 128), R] f32,
/// offsets [E + 1] i32) and h20_moe_swiglu_fp8 (G, U [R, I] f32, Aq [R, I]
/// e4m3, As [ceil(I / 128), R] f32, offsets, float limit): A quantised per
/// 1 x 128 block as fp8_quant.cuh does, for the placed rows. Both run one
/// warp per row: grid moeGatherGrid(R).
std::string moeGatherFp8Kernel(int dt);
std::string moeSwigluFp8Kernel();
/// h20_moe_combine_{f32,f16,bf16} by the element type `dt` of Y: (Yp [R, Dm]
/// f32, pos [T, K] i32, weights [T, K] f32, Y [T, Dm]).
std::string moeCombineKernel(int dt);

/// h20_moe_fp4_gemm_{f32,f16,bf16} by the element type `dt` of A (moe_fp4_gemm.cuh):
/// (A [R, K], Wq [E, N, K / 2] i8, Ws [E, N, K / 32] i8, offsets [E + 1]
/// i32, C [R, N] f32): per expert e, C[r, :] = A[r, :] . W_e^T for its rows
/// r in [offsets[e], offsets[e + 1]), W_e the MXFP4 weight (packed e2m1
/// pairs, ue8m0 scales per 32 inputs) dequantised in the kernel's load
/// path. Needs K a multiple of 32, unit inner strides, A's row stride a
/// multiple of 8 elements and Wq's of 16 bytes, 16-byte aligned origins.
/// `wgmma`: h20_moe_fp4_gemm_bf16_wg, the same GEMM on Hopper's warpgroup
/// MMA (sm_90a only: compileMoePtx with "sm_90a"), for bf16 A only (""
/// for other types: moeFp4GemmWgmmaTakes).
std::string moeFp4GemmKernel(int dt, bool wgmma = false);
/// Whether the wgmma variant takes element type `dt` (bf16 only).
bool moeFp4GemmWgmmaTakes(int dt);

/// h20_moe_fp4_gemm_fp8_wg (sm_90a): the same grouped GEMM in FP8 (A e4m3
/// [R, K] with float scales As [K / 128, R], as fp8QuantizeKernel writes
/// them; each 128-input block of a weight row made e4m3 with one
/// power-of-two scale in the load path; float32 promotion per block; C
/// [R, N] f32): (Aq, As, Wq, Ws, offsets, C). Needs K a multiple of
/// kMoeFp4GemmFp8BlockK; grid and tile as moeFp4GemmGridX / Y for bf16.
std::string moeFp4GemmFp8Kernel();
inline constexpr int64_t kMoeFp4GemmFp8BlockK = 128;
/// Its dynamic shared memory: 126992 bytes (one CTA an SM).
int64_t moeFp4GemmFp8SmemBytes();
/// Its tile (rows x columns of C per CTA): 128 x 128 for bf16 (tensor
/// cores), 64 x 64 for f32 / f16 (CUDA cores).
int64_t moeFp4GemmTileRows(int dt);
int64_t moeFp4GemmTileCols(int dt);
/// Its dynamic shared memory in bytes: 77824 for bf16 (three stages of the
/// A and packed W tiles and the dequantised W tile: moe_fp4_gemm.cuh's
/// H20_FP4_SMEM_BYTES; above 48 KiB, so the launcher raises the kernel's
/// limit), 0 for f32 / f16. The wgmma variant: 111632 (three stages, three
/// dequantised W tiles, 1024 bytes of alignment slack: two CTAs an SM).
int64_t moeFp4GemmSmemBytes(int dt, bool wgmma = false);
/// Its grid: x = ceil(N / tile columns); y = ceil(R / tile rows) + E, an
/// upper bound on the experts' row tiles (CTAs past them exit).
int64_t moeFp4GemmGridX(int64_t cols, int dt);
int64_t moeFp4GemmGridY(int64_t rows, int64_t experts, int dt);

/// The scratch the routed experts' tile may take: 8 GiB, beside a
/// layer's other temporaries in the arena; up to kMoeTileScratchMaxBytes
/// where that keeps a prefill chunk in one tile (every expert's rows in one
/// GEMM, not two each with a part-empty last row tile: V4.1-Flash's
/// 33792-token chunk needs 10.2 GiB).
inline constexpr int64_t kMoeTileScratchBytes = int64_t(8) << 30;
inline constexpr int64_t kMoeTileScratchMaxBytes = int64_t(16) << 30;

/// Token rows of one routed-experts tile (the host program runs a layer's
/// experts a tile of tokens at a time and reuses one scratch): the most
/// whose scratch (router logits, picks, the permuted rows Xp, G, U, A, Yp
/// of `experts` experts, `topK` picks, hidden `dm`, intermediate `inter`,
/// `elementBytes` per token element) fits in kMoeTileScratchBytes, or in
/// up to kMoeTileScratchMaxBytes when that holds a whole prefill chunk of
/// `chunkTokens` (0: unknown); a multiple of 256 from 256 on, and with
/// topK rows per token at most kMoeMaxRows picked rows. >= 1.
int64_t moeTileTokens(int64_t experts, int64_t topK, int64_t dm, int64_t inter,
                      int64_t elementBytes, int64_t chunkTokens = 0);

/// Grids (CTAs along x; all kernels take kMoeThreads threads and no
/// dynamic shared memory). Each is at least 1; the kernels skip the CTAs
/// past their work, so an empty tile still launches validly.
/// Route: ceil(T / kMoeRouteTokensPerCta).
int64_t moeRouteGrid(int64_t tokens);
/// Positions: E (one CTA per expert).
int64_t moePositionsGrid(int64_t experts);
/// Gather: ceil(R / kMoeGatherRowsPerCta).
int64_t moeGatherGrid(int64_t rows);
/// SwiGLU over `elements` = R * I: min(ceil(elements / 4096), 65535).
int64_t moeSwigluGrid(int64_t elements);
/// Combine: T (one CTA per token).
int64_t moeCombineGrid(int64_t tokens);

/// The NVRTC translation unit: `#include "h20_moe.cuh"` (every kernel of
/// this header is defined there).
std::string moeProgramSource();

/// Compiles the MoE module (all 16 kernels, and for "sm_90a" the wgmma
/// GEMM too) to PTX for `arch` ("sm_90", or any later "sm_XX[a]"). True with the module in `ptx`; false with the
/// reason in `log` when `arch` is malformed, NVRTC cannot be loaded, or the
/// compilation fails (NVRTC's log). `log` also receives NVRTC's warnings
/// on success. Thread-safe.
bool compileMoePtx(const std::string &arch, std::string &ptx, std::string &log);

} // namespace h20

#endif // H20_TARGET_MOEKERNEL_H
