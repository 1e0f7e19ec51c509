//===- RuntimeInputTest.cpp - the runtime's readers on hostile input -----===//
//
// Regression tests for what the fuzz targets (test/Fuzz) guard: every reader
// of a file h20-run is given refuses malformed sizes before allocating or
// indexing with them, and the CPU ABI check never reads past its table.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Cpu/CpuExecutor.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace h20::runtime;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

const char *kManifest = R"({"format": "h20-artifact", "target": "cpu",
  "entry": {"symbol": "h20_entry"},
  "inputs": [{"name": "ids", "dtype": "int64", "shape": [1, -1]}],
  "outputs": [{"name": "logits", "dtype": "float32", "shape": [1, -1, 8],
               "dims_from": [null, {"input": 0, "dim": 1}, null]}],
  "weights": [{"name": "w", "file": "m.onnx", "dtype": "float32", "shape": [8, 4],
               "offset": 0, "length": 128}],
  "blobs": [{"name": "model.so", "kind": "shared_object", "offset": 0, "size": 16}]})";

std::string manifestWith(const std::string &from, const std::string &to) {
  std::string m = kManifest;
  size_t at = m.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return m.replace(at, from.size(), to);
}

} // namespace

TEST(RuntimeInput, ManifestNumbersAreCheckedIntegers) {
  Manifest m;
  std::string error;
  ASSERT_TRUE(parseManifest(kManifest, m, error)) << error;
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {"\"dim\": 1}", "\"dim\": -1}", "output 0 dims_from dim is -1"},
      {"\"dim\": 1}", "\"dim\": 1e300}", "output 0 dims_from dim must be an integer"},
      {"\"dim\": 1}", "\"dim\": 2}", "names input 0 dim 2, which does not exist"},
      {"\"input\": 0", "\"input\": 3", "names input 3 dim 1, which does not exist"},
      {"\"shape\": [8, 4]", "\"shape\": [8, -1]", "weight 0 shape dim is -1"},
      {"\"shape\": [8, 4]", "\"shape\": [4294967296, 4294967296]", "weight 0 shape has more than 2^50"},
      {"\"shape\": [1, -1]", "\"shape\": [1, -2]", "input 0 shape dim is -2"},
      {"\"dtype\": \"float32\", \"shape\": [1, -1, 8]", "\"dtype\": \"uint7\", \"shape\": [1, -1, 8]",
       "output 0 dtype 'uint7' is not a dtype this runtime supports"},
      {"\"offset\": 0, \"length\"", "\"offset\": -5, \"length\"", "weight 0 offset is -5"},
      {"\"size\": 16", "\"size\": 18446744073709551615", "blob 0 size is out of range"},
      {"\"target\": \"cpu\"", "\"target\": 7", "target must be a string"},
  };
  for (const Case &c : cases) {
    Manifest bad;
    EXPECT_FALSE(parseManifest(manifestWith(c.from, c.to), bad, error)) << c.to;
    EXPECT_TRUE(contains(error, c.message)) << c.to << ": " << error;
  }
  EXPECT_FALSE(parseManifest("[1, 2]", m, error));
  EXPECT_FALSE(parseManifest("{\"format\": \"h20-artifact\"", m, error));
}

TEST(RuntimeInput, OutputShapesAreBounded) {
  TensorSpec o;
  o.name = "y";
  o.shape = {-1, -1};
  o.dimsFrom = {std::make_pair(0, 0), std::make_pair(0, 1)};
  std::vector<int64_t> shape;
  std::string error;
  EXPECT_TRUE(resolveOutputShape(o, {{3, 5}}, shape, error)) << error;
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 5}));
  EXPECT_FALSE(resolveOutputShape(o, {{int64_t(1) << 40, int64_t(1) << 40}}, shape, error));
  EXPECT_TRUE(contains(error, "more than 2^50 elements")) << error;
  o.dimsFrom[1] = std::make_pair(0, -1);
  EXPECT_FALSE(resolveOutputShape(o, {{3, 5}}, shape, error));
  EXPECT_TRUE(contains(error, "cannot be sized from the inputs")) << error;
}

// An output dim that is a sum of input dims (a present KV cache: S_past +
// S_new) is sized from them; a negative or overflowing sum is refused.
TEST(RuntimeInput, OutputDimSums) {
  TensorSpec o;
  o.name = "present";
  o.shape = {1, -1};
  o.dimsFrom = {std::nullopt, std::nullopt};
  DimSum sum;
  sum.constant = 1;
  sum.terms = {{0, 1, 1}, {1, 0, 2}};
  o.dimSums = {std::nullopt, sum};
  std::vector<int64_t> shape;
  std::string error;
  EXPECT_TRUE(resolveOutputShape(o, {{1, 4}, {3}}, shape, error)) << error;
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 11}));
  o.dimSums[1]->constant = -20;
  EXPECT_FALSE(resolveOutputShape(o, {{1, 4}, {3}}, shape, error));
  EXPECT_TRUE(contains(error, "would be -10")) << error;
  o.dimSums[1]->terms[1].input = 5;
  EXPECT_FALSE(resolveOutputShape(o, {{1, 4}, {3}}, shape, error));
  EXPECT_TRUE(contains(error, "cannot be sized from the inputs")) << error;
}

// Dims sharing an ONNX dim_param must agree across inputs; static dims and
// dims without a name are not compared.
TEST(RuntimeInput, DimParamsAgree) {
  TensorSpec q, k;
  q.name = "q", q.shape = {-1, 4, -1}, q.dimParams = {"B", "", "S"};
  k.name = "k", k.shape = {-1, -1}, k.dimParams = {"B", ""};
  std::string error;
  EXPECT_TRUE(checkDimParams({q, k}, {{2, 4, 7}, {2, 9}}, error)) << error;
  EXPECT_FALSE(checkDimParams({q, k}, {{2, 4, 7}, {3, 9}}, error));
  EXPECT_TRUE(contains(error, "input 'k' dim 0 is 3 but input 'q' dim 0 is 2")) << error;
  EXPECT_TRUE(contains(error, "'B'")) << error;
  Manifest m;
  std::string text = kManifest;
  text.replace(text.find(R"("shape": [1, -1]})"), 17,
               R"("shape": [1, -1], "dim_params": ["S"]})");
  EXPECT_FALSE(parseManifest(text, m, error));
  EXPECT_TRUE(contains(error, "1 dim_params for 2 dims")) << error;
}

TEST(RuntimeInput, CpuAbiCheckStaysInsideItsTable) {
  static char data[64];
  std::vector<MemRefDescriptor> args;
  args.emplace_back(data, std::vector<int64_t>{1, 3});
  args.emplace_back(data, std::vector<int64_t>{8});
  std::string error;
  const long long good[] = {2, 2, 1, -1, 1, 8};
  EXPECT_TRUE(checkCpuAbi(good, 6, args, error)) << error;
  // The same table cut short anywhere is refused, never read past.
  for (size_t words = 0; words < 6; ++words) {
    EXPECT_FALSE(checkCpuAbi(good, words, args, error)) << words;
    EXPECT_TRUE(contains(error, "ABI description ends after")) << words << ": " << error;
  }
  const long long wrongDim[] = {2, 2, 1, -1, 1, 9};
  EXPECT_FALSE(checkCpuAbi(wrongDim, 6, args, error));
  EXPECT_TRUE(contains(error, "argument 1 does not match")) << error;
  const long long wrongCount[] = {3};
  EXPECT_FALSE(checkCpuAbi(wrongCount, 1, args, error));
  EXPECT_TRUE(contains(error, "describes 2 arguments but the code takes 3")) << error;
}

TEST(RuntimeInput, CpuAbiTellsScalarsFromTensors) {
  // A chunked entry: ids [1, n], chunk start and length by value, output.
  static char data[64];
  std::vector<MemRefDescriptor> args;
  args.emplace_back(data, std::vector<int64_t>{1, 5});
  args.push_back(MemRefDescriptor::index(12));
  args.push_back(MemRefDescriptor::index(5));
  args.emplace_back(data, std::vector<int64_t>{1, 5, 8});
  EXPECT_TRUE(args[1].isScalar());
  EXPECT_EQ(*static_cast<int64_t *>(args[1].get()), 12);
  EXPECT_TRUE(args[1].shape().empty());
  std::string error;
  const long long good[] = {4, 2, 1, -1, -1, -1, 3, 1, -1, 8};
  EXPECT_TRUE(checkCpuAbi(good, 10, args, error)) << error;
  // A tensor where the code takes a scalar, and the other way round.
  const long long scalarFirst[] = {4, -1, -1, -1, 3, 1, -1, 8};
  EXPECT_FALSE(checkCpuAbi(scalarFirst, 8, args, error));
  EXPECT_TRUE(contains(error, "argument 0 is a tensor but the code takes an index scalar")) << error;
  const long long tensorSecond[] = {4, 2, 1, -1, 1, 1, -1, 3, 1, -1, 8};
  EXPECT_FALSE(checkCpuAbi(tensorSecond, 11, args, error));
  EXPECT_TRUE(contains(error, "argument 1 is an index scalar but the code takes a tensor")) << error;
}

TEST(RuntimeInput, ManifestCpuChunking) {
  Manifest m;
  std::string error;
  const std::string chunked = R"("cpu_chunked": {"chunk": 12, "capacity": 2052, "output": "rows",
      "caches": [{"dtype": "float32", "shape": [8, 1, 1, 2052, 40]},
                 {"dtype": "int64", "shape": [1, 1, 1, 2052, 1]}]},
      "inputs")";
  ASSERT_TRUE(parseManifest(manifestWith("\"inputs\"", chunked), m, error)) << error;
  ASSERT_TRUE(m.cpuChunking.has_value());
  EXPECT_EQ(m.cpuChunking->chunk, 12);
  EXPECT_EQ(m.cpuChunking->capacity, 2052);
  EXPECT_EQ(m.cpuChunking->output, "rows");
  ASSERT_EQ(m.cpuChunking->caches.size(), 2u);
  EXPECT_EQ(m.cpuChunking->caches[1].dtype, "int64");
  EXPECT_EQ(m.cpuChunking->caches[0].shape, (std::vector<int64_t>{8, 1, 1, 2052, 40}));
  ASSERT_TRUE(parseManifest(kManifest, m, error)) << error;
  EXPECT_FALSE(m.cpuChunking.has_value());
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {"\"chunk\": 12", "\"chunk\": 0", "cpu_chunked chunk is 0, outside [1,"},
      {"\"capacity\": 2052", "\"capacity\": 8", "cpu_chunked capacity is 8, outside [12,"},
      {"\"output\": \"rows\"", "\"output\": \"all\"", "output must be \"rows\" or \"last\""},
      {"[8, 1, 1, 2052, 40]", "[8, 1, 1, -1, 40]", "cpu_chunked cache 0 shape dim is -1"},
      {"\"dtype\": \"int64\", \"shape\": [1, 1", "\"dtype\": \"int3\", \"shape\": [1, 1",
       "cpu_chunked cache 1 dtype 'int3'"},
  };
  for (const Case &c : cases) {
    std::string text = manifestWith("\"inputs\"", chunked);
    text.replace(text.find(c.from), c.from.size(), c.to);
    EXPECT_FALSE(parseManifest(text, m, error)) << c.to;
    EXPECT_TRUE(contains(error, c.message)) << c.to << ": " << error;
  }
}

TEST(RuntimeInput, TensorProtoSizesCheckedBeforeAllocating) {
  // dims [2^40] FLOAT, no data: once a 4 TiB resize, then abort.
  std::string pb = {0x08, char(0x80), char(0x80), char(0x80), char(0x80), char(0x80), 0x20, 0x10, 0x01};
  HostTensor t;
  std::string error;
  EXPECT_FALSE(parseTensorBytes(pb, "x.pb", t, error));
  EXPECT_TRUE(contains(error, "holds 0 values but its shape needs 1099511627776")) << error;
  // dims [2^62]: over the element limit.
  std::string huge = {0x08, char(0x80), char(0x80), char(0x80), char(0x80), char(0x80),
                      char(0x80), char(0x80), char(0x80), 0x40, 0x10, 0x01};
  EXPECT_FALSE(parseTensorBytes(huge, "x.pb", t, error));
  EXPECT_TRUE(contains(error, "more than 2^50 elements")) << error;
  // An empty tensor is fine.
  std::string empty = {0x08, 0x00, 0x10, 0x01};
  EXPECT_TRUE(parseTensorBytes(empty, "x.pb", t, error)) << error;
  EXPECT_TRUE(t.data.empty());
}

TEST(RuntimeInput, NpyElementSizeIsBounded) {
  std::string header = "{'descr': '<i9223372036854775807', 'fortran_order': False, 'shape': (2,), }";
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + char(0) + header;
  NpyArray a;
  std::string error;
  EXPECT_FALSE(parseNpy(npy, a, error));
  EXPECT_TRUE(contains(error, "has no element size")) << error;
  std::vector<int64_t> ids;
  EXPECT_FALSE(parseTokenIds(npy, "ids.npy", ids, error));
  EXPECT_TRUE(parseTokenIds("7 8\n9", "ids.txt", ids, error)) << error;
  EXPECT_EQ(ids, (std::vector<int64_t>{7, 8, 9}));
}

TEST(RuntimeInput, ArtifactHeaderSizes) {
  Artifact a;
  std::string error;
  EXPECT_FALSE(parseArtifact("", "e.h20", a, error));
  EXPECT_TRUE(contains(error, "not an h20 artifact")) << error;
  // Sizes whose sum wraps around 2^64 are not taken for the file's size.
  std::string h("H20-ART\n", 8);
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      h += char((v >> (8 * i)) & 0xff);
  };
  put(1, 4);
  put(0, 4);
  put(~uint64_t(0) - 39, 8); // manifest size: 2^64 - 40
  put(1, 8);
  put(0, 4);
  put(0, 4);
  EXPECT_FALSE(parseArtifact(h, "w.h20", a, error));
  EXPECT_TRUE(contains(error, "truncated or corrupt")) << error;
}
