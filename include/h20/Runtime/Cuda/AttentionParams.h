/*===- AttentionParams.h - the attention kernel's one parameter ---*- C -*-===//
 *
 * The dense attention kernel takes exactly one parameter: this struct, passed
 * by value. A compiled program launches it as a launch step whose one
 * argument is a struct with these fields at these offsets (GpuProgram.h;
 * written by LibraryCallSteps.cpp, packed by LaunchParams.cpp);
 * attention-check fills it directly. The CUDA kernel source declares the
 * same struct, field for field, and reads it. Plain C so both sides can include or mirror
 * it; the layout is fixed (640 bytes, 64-byte aligned, no implicit padding):
 *
 *   offset   0  q, k, v, o        4 device pointers (8 bytes each)
 *   offset  32  q_stride[4]       long long, elements: batch, head, seq, dim
 *   offset  64  k_stride[4]
 *   offset  96  v_stride[4]
 *   offset 128  o_stride[4]
 *   offset 160  batch, heads, kv_heads, sq, skv      long long
 *   offset 200  window_left                          long long
 *   offset 208  scale, softcap                       float
 *   offset 216  causal, tma                          int
 *   offset 224  pad_[4]                              long long (zero)
 *   offset 256  tm_q, tm_k, tm_v  3 TMA tensor maps (CUtensorMap, 128 bytes each)
 *
 * tma = 1 says tm_q/tm_k/tm_v hold tensor maps of Q, K and V (the program's
 * tensor_map fields and tensor_maps_valid flag; encodeAttentionTensorMaps in
 * attention-check, AttentionTma.h): 4-D (dim, seq, head, batch)
 * maps with 64 x 64 boxes and the 128-byte swizzle, sized to sq / skv so rows
 * past the end load as zeros. The wgmma kernel then loads its tiles with the
 * tensor copy engine (cp.async.bulk.tensor); with tma = 0 it uses cp.async
 * and the maps are not read. The other kernels ignore both.
 *
 * Semantics (row i of the query block, key j):
 *   O[b, h, i, :] = softmax_j(s_ij) V[b, h / (heads / kv_heads), j, :]
 *   s_ij = scale * <Q[b, h, i, :], K[b, h / (heads / kv_heads), j, :]>,
 *          then softcap * tanh(s_ij / softcap) when softcap != 0,
 *   masked (excluded) when causal and j > i' (i' = skv - sq + i), or when
 *   window_left >= 0 and j <= i' - window_left.
 * Q, K, V, O have the element type of the kernel variant (float32, float16
 * or bfloat16); pointers already include the view's offset.
 *
 *===----------------------------------------------------------------------===*/
#ifndef H20_RUNTIME_ATTENTIONPARAMS_H
#define H20_RUNTIME_ATTENTIONPARAMS_H

/* An opaque TMA tensor map (CUtensorMap of cuda.h: 128 bytes, 64-byte aligned). */
typedef struct { unsigned long long opaque[16]; } __attribute__((aligned(64))) H20TensorMap;

struct __attribute__((aligned(64))) H20AttnParams { /* all strides in elements */
  const void *q, *k, *v; void *o; /* device pointers of element 0 (base + offset*elem_size) */
  long long q_stride[4], k_stride[4], v_stride[4], o_stride[4]; /* batch, head, seq, dim */
  long long batch, heads, kv_heads, sq, skv;
  long long window_left;          /* -1: no window; else key j visible iff j > i' - window_left */
  float scale, softcap;           /* softcap 0: none */
  int causal;                     /* 1: query i sits at position i' = skv - sq + i and sees keys j <= i' */
  int tma;                        /* 1: tm_q, tm_k, tm_v are valid tensor maps (see above) */
  long long pad_[4];
  H20TensorMap tm_q, tm_k, tm_v;
};

#ifdef __cplusplus
#include <cstddef>
static_assert(sizeof(void *) == 8, "H20AttnParams assumes 64-bit pointers");
static_assert(sizeof(H20AttnParams) == 640, "H20AttnParams layout changed");
static_assert(alignof(H20AttnParams) == 64, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, q_stride) == 32, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, batch) == 160, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, window_left) == 200, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, scale) == 208, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, causal) == 216, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, tma) == 220, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, tm_q) == 256, "H20AttnParams layout changed");
static_assert(offsetof(H20AttnParams, tm_v) == 512, "H20AttnParams layout changed");
#endif

#endif /* H20_RUNTIME_ATTENTIONPARAMS_H */
