//===- LaunchParamsTest.cpp - a launch's parameter bytes ------------------===//
//
// packLaunchParams without a GPU: scalars and memref descriptors in 8-byte
// slots; a struct argument's fields at their byte offsets, laid out here as
// the attention kernel's H20AttnParams; its tensor maps through a recording
// stand-in for cuTensorMapEncodeTiled, and the fallback when one cannot be
// made (all maps zero, tensor_maps_valid 0). The kernels reading these
// bytes run on a GPU in h20-gpu-unittests and gpu-test.sh.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/LaunchParams.h"
#include "h20/Runtime/Cuda/AttentionParams.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

using namespace h20::runtime;

namespace {

int encodes = 0;
cuuint64_t lastDims[5], lastStrides[4];
cuuint32_t lastBox[5];

CUresult fakeEncode(CUtensorMap *map, CUtensorMapDataType, cuuint32_t rank, void *,
                    const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  ++encodes;
  std::memcpy(lastDims, dims, rank * sizeof *dims);
  std::memcpy(lastStrides, strides, (rank - 1) * sizeof *strides);
  std::memcpy(lastBox, box, rank * sizeof *box);
  std::memset(map, 0x5a, sizeof *map);
  return CUDA_SUCCESS;
}

uint64_t addressOf(int buffer) { return 0x1000000ull * static_cast<uint64_t>(buffer + 1); }

StructField scalar(StructField::Kind kind, int64_t at, int64_t v) {
  StructField f;
  f.kind = kind;
  f.at = at;
  f.value = LinearExpr::constant(v);
  return f;
}

/// A [1, 2, 100, 64] bfloat16 view of buffer 0 at element `offset`.
StructField view(StructField::Kind kind, int64_t at, int64_t offset) {
  StructField f;
  f.kind = kind;
  f.at = at;
  f.buffer = 0;
  f.offset = LinearExpr::constant(offset);
  f.sizes = {LinearExpr::constant(1), LinearExpr::constant(2), LinearExpr::constant(100),
             LinearExpr::constant(64)};
  f.strides = {LinearExpr::constant(12800), LinearExpr::constant(6400), LinearExpr::constant(64),
               LinearExpr::constant(1)};
  f.box = {1, 1, 64, 64};
  f.swizzle = 128;
  return f;
}

class LaunchParams : public ::testing::Test {
protected:
  void SetUp() override {
    encodes = 0;
    std::memset(&api, 0, sizeof api);
    api.cuTensorMapEncodeTiled = fakeEncode;
    unsetenv("H20_ATTENTION_TMA");
    program.buffers.push_back({BufferKind::Temp, -1, 1 << 20, "bfloat16", 0, "", 0});
  }

  /// A launch of one struct argument with `fields`, resolved as the parser
  /// would (constant expressions), packed.
  H20AttnParams pack(std::vector<StructField> fields, std::string *why = nullptr) {
    LaunchArg a;
    a.kind = LaunchArg::Struct;
    a.structBytes = sizeof(H20AttnParams);
    a.structAlign = alignof(H20AttnParams);
    a.fields = std::move(fields);
    ResolvedLaunchArg ra;
    ra.kind = LaunchArg::Struct;
    for (const StructField &f : a.fields) {
      ResolvedStructField rf;
      rf.value = f.value.c;
      if (f.isView()) {
        rf.view.buffer = f.buffer;
        rf.view.offset = f.offset.c;
        for (size_t d = 0; d < f.sizes.size(); ++d) {
          rf.view.sizes.push_back(f.sizes[d].c);
          rf.view.strides.push_back(f.strides[d].c);
        }
      }
      ra.fields.push_back(rf);
    }
    step.args = {a};
    resolved.args = {ra};
    packLaunchParams(program, step, resolved, addressOf, api, params, why);
    EXPECT_EQ(params.count(), 1u);
    H20AttnParams p;
    std::memcpy(&p, params.pointers()[0], sizeof p);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(params.pointers()[0]) % 64, 0u);
    return p;
  }

  CudaApi api;
  GpuProgram program;
  LaunchStep step;
  ResolvedLaunch resolved;
  KernelParams params;
};

} // namespace

TEST_F(LaunchParams, ScalarsAndMemrefsTakeOneSlotEach) {
  LaunchArg i64, i32, f16, m;
  i64.kind = LaunchArg::I64;
  i32.kind = LaunchArg::I32;
  f16.kind = LaunchArg::F16;
  m.kind = LaunchArg::MemRef;
  m.buffer = 0;
  step.args = {i64, i32, f16, m};
  ResolvedLaunchArg r64, r32, rh, rm;
  r64.kind = LaunchArg::I64, r64.value = -5;
  r32.kind = LaunchArg::I32, r32.value = 7;
  rh.kind = LaunchArg::F16, rh.half = 0x3c00;
  rm.kind = LaunchArg::MemRef;
  rm.memref = {0, 12, {3, 4}, {4, 1}};
  resolved.args = {r64, r32, rh, rm};
  packLaunchParams(program, step, resolved, addressOf, api, params);
  ASSERT_EQ(params.count(), 3u + 3 + 2 * 2);
  void **p = params.pointers();
  EXPECT_EQ(*static_cast<int64_t *>(p[0]), -5);
  EXPECT_EQ(*static_cast<int32_t *>(p[1]), 7);
  EXPECT_EQ(*static_cast<uint16_t *>(p[2]), 0x3c00);
  EXPECT_EQ(*static_cast<uint64_t *>(p[3]), addressOf(0)); // allocated
  EXPECT_EQ(*static_cast<uint64_t *>(p[4]), addressOf(0)); // aligned
  EXPECT_EQ(*static_cast<int64_t *>(p[5]), 12);            // offset
  EXPECT_EQ(*static_cast<int64_t *>(p[6]), 3);
  EXPECT_EQ(*static_cast<int64_t *>(p[9]), 1);
  // Equal parameters compare equal; one changed byte does not.
  KernelParams same = params;
  EXPECT_TRUE(same == params);
  resolved.args[1].value = 8;
  packLaunchParams(program, step, resolved, addressOf, api, same);
  EXPECT_FALSE(same == params);
}

TEST_F(LaunchParams, StructFieldsLandAtTheirOffsets) {
  using P = H20AttnParams;
  StructField scale;
  scale.kind = StructField::F32;
  scale.at = offsetof(P, scale);
  scale.f32 = 0.125f;
  StructField valid;
  valid.kind = StructField::TensorMapsValid;
  valid.at = offsetof(P, tma);
  H20AttnParams p = pack({view(StructField::Pointer, offsetof(P, q), 8),
                          view(StructField::Pointer, offsetof(P, o), 0),
                          scalar(StructField::I64, offsetof(P, k_stride) + 16, 64),
                          scalar(StructField::I64, offsetof(P, skv), 1000),
                          scalar(StructField::I64, offsetof(P, window_left), -1),
                          scalar(StructField::I32, offsetof(P, causal), 1), scale,
                          view(StructField::TensorMap, offsetof(P, tm_k), 64), valid});
  EXPECT_EQ(reinterpret_cast<uint64_t>(p.q), addressOf(0) + 8 * 2); // element 8, 2 bytes each
  EXPECT_EQ(reinterpret_cast<uint64_t>(p.o), addressOf(0));
  EXPECT_EQ(p.k, nullptr); // not a field: zero
  EXPECT_EQ(p.k_stride[2], 64);
  EXPECT_EQ(p.skv, 1000);
  EXPECT_EQ(p.window_left, -1);
  EXPECT_EQ(p.causal, 1);
  EXPECT_EQ(p.scale, 0.125f);
  EXPECT_EQ(p.tma, 1);
  EXPECT_EQ(encodes, 1);
  EXPECT_EQ(p.tm_k.opaque[0], 0x5a5a5a5a5a5a5a5aull);
  EXPECT_EQ(p.tm_q.opaque[0], 0u);
  // The driver's order: innermost dim first, byte strides of the outer dims.
  EXPECT_EQ(lastDims[0], 64u);
  EXPECT_EQ(lastDims[1], 100u);
  EXPECT_EQ(lastStrides[0], 128u);      // a row: 64 x 2 bytes
  EXPECT_EQ(lastStrides[1], 6400u * 2); // a head
  EXPECT_EQ(lastBox[0], 64u);
  EXPECT_EQ(lastBox[2], 1u);
}

TEST_F(LaunchParams, ATensorMapThatCannotBeMadeTurnsAllOff) {
  using P = H20AttnParams;
  StructField valid;
  valid.kind = StructField::TensorMapsValid;
  valid.at = offsetof(P, tma);
  std::string why;
  // Q's map is fine; K's base is element 3 (6 bytes): not 16-byte aligned.
  H20AttnParams p = pack({view(StructField::TensorMap, offsetof(P, tm_q), 0),
                          view(StructField::TensorMap, offsetof(P, tm_k), 3), valid},
                         &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_EQ(p.tm_q.opaque[0], 0u) << "every map is zero when one cannot be made";
  EXPECT_EQ(p.tm_k.opaque[0], 0u);
  EXPECT_NE(why.find("16-byte aligned"), std::string::npos) << why;
  // Off by the environment: no map is made at all.
  setenv("H20_ATTENTION_TMA", "0", 1);
  encodes = 0;
  p = pack({view(StructField::TensorMap, offsetof(P, tm_q), 0), valid}, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_EQ(encodes, 0);
  unsetenv("H20_ATTENTION_TMA");
  // A driver without tensor maps.
  api.cuTensorMapEncodeTiled = nullptr;
  p = pack({view(StructField::TensorMap, offsetof(P, tm_q), 0), valid}, &why);
  EXPECT_EQ(p.tma, 0);
  EXPECT_NE(why.find("no cuTensorMapEncodeTiled"), std::string::npos) << why;
}
