//===- AttentionTmaTest.cpp - tensor maps for the attention kernel --------===//
//
// encodeAttentionTensorMaps against a recording stand-in for the driver's
// cuTensorMapEncodeTiled (no GPU needed): the dims, byte strides, box,
// swizzle and fill it asks for, and the views it refuses (the kernel then
// uses cp.async). The maps themselves are exercised on a GPU by
// attention-check, whose cases run the wgmma kernel with TMA loads.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/AttentionTma.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace h20::runtime;

namespace {

struct Call {
  CUtensorMapDataType type;
  cuuint32_t rank;
  void *base;
  cuuint64_t dims[4];
  cuuint64_t strides[3];
  cuuint32_t box[4];
  CUtensorMapSwizzle swizzle;
  CUtensorMapFloatOOBfill fill;
};
std::vector<Call> calls;
CUresult result = CUDA_SUCCESS;

CUresult fakeEncode(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *base,
                    const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle swizzle,
                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill fill) {
  Call c{type, rank, base, {}, {}, {}, swizzle, fill};
  std::memcpy(c.dims, dims, sizeof c.dims);
  std::memcpy(c.strides, strides, sizeof c.strides);
  std::memcpy(c.box, box, sizeof c.box);
  calls.push_back(c);
  std::memset(map, 0x5a, sizeof *map);
  return result;
}

/// B=2, H=8, KV heads 2, S=1000 (K/V 1500), D=128, contiguous BHSD views.
H20AttnParams params() {
  H20AttnParams p;
  std::memset(&p, 0, sizeof p);
  p.q = reinterpret_cast<const void *>(0x10000);
  p.k = reinterpret_cast<const void *>(0x20000);
  p.v = reinterpret_cast<const void *>(0x30000);
  p.o = reinterpret_cast<void *>(0x40000);
  p.batch = 2, p.heads = 8, p.kv_heads = 2, p.sq = 1000, p.skv = 1500;
  const long long q[4] = {8 * 1000 * 128, 1000 * 128, 128, 1};
  const long long kv[4] = {2 * 1500 * 128, 1500 * 128, 128, 1};
  std::memcpy(p.q_stride, q, sizeof q);
  std::memcpy(p.k_stride, kv, sizeof kv);
  std::memcpy(p.v_stride, kv, sizeof kv);
  std::memcpy(p.o_stride, q, sizeof q);
  return p;
}

class AttentionTma : public ::testing::Test {
protected:
  void SetUp() override {
    calls.clear();
    result = CUDA_SUCCESS;
    std::memset(&api, 0, sizeof api);
    api.cuTensorMapEncodeTiled = fakeEncode;
    unsetenv("H20_ATTENTION_TMA");
  }
  CudaApi api;
};

} // namespace

TEST_F(AttentionTma, EncodesQKVAsFourDimensionalMaps) {
  H20AttnParams p = params();
  std::string why;
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 1) << why;
  ASSERT_EQ(calls.size(), 3u);
  const Call &q = calls[0], &k = calls[1];
  EXPECT_EQ(q.rank, 4u);
  EXPECT_EQ(q.type, CU_TENSOR_MAP_DATA_TYPE_UINT16);
  EXPECT_EQ(q.base, p.q);
  EXPECT_EQ(k.base, p.k);
  EXPECT_EQ(calls[2].base, p.v);
  // (dim, seq, head, batch); strides in bytes of seq, head, batch.
  const cuuint64_t qDims[4] = {128, 1000, 8, 2}, kDims[4] = {128, 1500, 2, 2};
  const cuuint64_t qStrides[3] = {256, 1000 * 256, 8 * 1000 * 256};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(q.dims[i], qDims[i]) << i;
    EXPECT_EQ(k.dims[i], kDims[i]) << i;
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(q.strides[i], qStrides[i]) << i;
  for (const Call &c : calls) {
    EXPECT_EQ(c.box[0], 64u);
    EXPECT_EQ(c.box[1], 64u);
    EXPECT_EQ(c.box[2], 1u);
    EXPECT_EQ(c.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
    EXPECT_EQ(c.fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE); // zeros past the end
  }
  // The maps are copied into the parameter.
  unsigned char expect[128];
  std::memset(expect, 0x5a, sizeof expect);
  EXPECT_EQ(std::memcmp(&p.tm_k, expect, sizeof expect), 0);
}

// A dim of size 1 gets a placeholder stride: batch stride 0 of a one-batch
// view is never stepped over.
TEST_F(AttentionTma, SizeOneDimsTakeAnyStride) {
  H20AttnParams p = params();
  p.batch = 1;
  p.q_stride[0] = p.k_stride[0] = p.v_stride[0] = 0;
  encodeAttentionTensorMaps(api, p, 2, 128, 128);
  EXPECT_EQ(p.tma, 1);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].strides[2], 16u);
}

TEST_F(AttentionTma, RefusedViewsFallBackToCpAsync) {
  std::string why;
  H20AttnParams p = params();
  p.v_stride[3] = 2; // dim stride 2
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("v: innermost stride 2 is not 1"), std::string::npos) << why;

  p = params();
  p.k = reinterpret_cast<const void *>(0x20008); // 8-byte aligned only
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("k: base address"), std::string::npos) << why;

  p = params();
  p.q_stride[2] = 129; // 258-byte rows
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("multiple of 16 bytes"), std::string::npos) << why;

  p = params();
  encodeAttentionTensorMaps(api, p, 2, 96, 96, &why); // not a multiple of the 64-element box
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("multiple of 64"), std::string::npos) << why;

  p = params();
  p.skv = (1LL << 31) - 256; // past the kernel's int32 row coordinates
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("outside [1, 2^31 - 512]"), std::string::npos) << why;

  p = params();
  encodeAttentionTensorMaps(api, p, 4, 128, 128, &why); // f32
  EXPECT_EQ(p.tma, 0);

  p = params();
  result = CUDA_ERROR_INVALID_VALUE;
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("cuTensorMapEncodeTiled"), std::string::npos) << why;
}

TEST_F(AttentionTma, OffWithoutTheDriverFunctionOrByEnvironment) {
  std::string why;
  H20AttnParams p = params();
  setenv("H20_ATTENTION_TMA", "0", 1);
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_TRUE(calls.empty());
  unsetenv("H20_ATTENTION_TMA");
  api.cuTensorMapEncodeTiled = nullptr;
  encodeAttentionTensorMaps(api, p, 2, 128, 128, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("no cuTensorMapEncodeTiled"), std::string::npos) << why;
}
