//===- PromptTest.cpp - a run's inputs and next token, and output paths ---===//
//
// The checks h20-run makes before any work (Prompt.h, FileUtil.h's
// checkOutputFiles): every refusal names the culprit, and the accepted
// prompt is laid out as the model's ids input.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Prompt.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace h20::runtime;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

Manifest idsModel(const std::string &dtype = "int64", int64_t len = -1) {
  Manifest m;
  TensorSpec in;
  in.name = "input_ids";
  in.dtype = dtype;
  in.shape = {1, len};
  m.inputs.push_back(in);
  m.vocabSize = 100;
  m.maxPositions = 16;
  return m;
}

TEST(Prompt, IdsBecomeTheIdsTensor) {
  HostTensor t;
  std::string error;
  ASSERT_TRUE(promptFromIds(idsModel(), {3, 99, 0}, t, error)) << error;
  EXPECT_EQ(t.name, "input_ids");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{1, 3}));
  ASSERT_EQ(t.data.size(), 24u);
  int64_t v = 0;
  std::memcpy(&v, t.data.data() + 8, 8);
  EXPECT_EQ(v, 99);
  ASSERT_TRUE(promptFromIds(idsModel("int32"), {7, 8}, t, error)) << error;
  ASSERT_EQ(t.data.size(), 8u);
  int32_t w = 0;
  std::memcpy(&w, t.data.data() + 4, 4);
  EXPECT_EQ(w, 8);
}

TEST(Prompt, RefusesBadIds) {
  HostTensor t;
  std::string error;
  EXPECT_FALSE(promptFromIds(idsModel(), {1, 100}, t, error));
  EXPECT_TRUE(contains(error, "token id 100 at position 1 is outside the vocabulary [0, 100)"))
      << error;
  EXPECT_FALSE(promptFromIds(idsModel(), {-1}, t, error));
  EXPECT_TRUE(contains(error, "token id -1 at position 0")) << error;
  EXPECT_FALSE(promptFromIds(idsModel(), std::vector<int64_t>(17, 1), t, error));
  EXPECT_TRUE(contains(error, "prompt of 17 tokens exceeds the model's maximum of 16")) << error;
  EXPECT_FALSE(promptFromIds(idsModel("int64", 4), {1, 2}, t, error));
  EXPECT_TRUE(contains(error, "takes exactly 4 tokens; got 2")) << error;
  EXPECT_FALSE(promptFromIds(idsModel("float32"), {1}, t, error));
  EXPECT_TRUE(contains(error, "'input_ids' is not token ids")) << error;
  Manifest two = idsModel();
  two.inputs.push_back(two.inputs[0]);
  EXPECT_FALSE(promptFromIds(two, {1}, t, error));
  EXPECT_TRUE(contains(error, "this model has 2: use --input")) << error;
  Manifest none = idsModel();
  none.inputs.clear();
  EXPECT_FALSE(promptFromIds(none, {1}, t, error));
}

TEST(Prompt, NamedInputsAreCheckedAgainstTheManifest) {
  Manifest m;
  TensorSpec x;
  x.name = "x";
  x.dtype = "float32";
  x.shape = {2, -1};
  m.inputs.push_back(x);
  char dir[] = "/tmp/h20-prompt-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/x.npy";
  std::vector<float> data(6, 1.0f);
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, encodeNpyF32({2, 3}, data.data()), error)) << error;
  std::vector<HostTensor> out;
  ASSERT_TRUE(readNamedInputs(m, {{"x", path}}, "", out, error)) << error;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(readNamedInputs(m, {{"y", path}}, "", out, error));
  EXPECT_TRUE(contains(error, "--input 'y': the model has no input of that name")) << error;
  EXPECT_FALSE(readNamedInputs(m, {}, "", out, error));
  EXPECT_TRUE(contains(error, "no value for input 'x'")) << error;
  m.inputs[0].shape = {3, -1};
  EXPECT_FALSE(readNamedInputs(m, {{"x", path}}, "", out, error));
  EXPECT_TRUE(contains(error, "is float32[2, 3] but the model takes float32[3, ?]")) << error;
  std::remove(path.c_str());
  rmdir(dir);
}

TEST(Prompt, NextTokenIsTheLastRowsArgmax) {
  HostTensor logits;
  logits.dtype = "float32";
  logits.shape = {1, 2, 3};
  std::vector<float> v{9, 0, 0, 1, 5, 5}; // row 0's max is ignored; first of equal maxima
  logits.data.resize(v.size() * 4);
  std::memcpy(logits.data.data(), v.data(), logits.data.size());
  int64_t next = -1;
  std::vector<float> wide;
  std::string error;
  ASSERT_TRUE(nextToken(logits, next, wide, error)) << error;
  EXPECT_EQ(next, 1);
  EXPECT_EQ(wide.size(), 6u);
  logits.dtype = "int64";
  EXPECT_FALSE(nextToken(logits, next, wide, error));
  EXPECT_TRUE(contains(error, "output 0 is int64, not float32/float16/bfloat16 logits")) << error;
  logits.dtype = "float32";
  logits.shape = {0, 3};
  EXPECT_FALSE(nextToken(logits, next, wide, error));
  logits.shape = {};
  EXPECT_FALSE(nextToken(logits, next, wide, error));
}

TEST(OutputFiles, RefuseInputsAndRepeats) {
  std::string error;
  EXPECT_TRUE(checkOutputFiles({"/tmp/h20-a.json", "/tmp/h20-b.npy"}, {"/tmp/in.npy"}, error))
      << error;
  EXPECT_FALSE(checkOutputFiles({"/tmp/in.npy"}, {"/tmp/in.npy"}, error));
  EXPECT_TRUE(contains(error, "is an input file; refusing to overwrite it")) << error;
  EXPECT_FALSE(checkOutputFiles({"/tmp/h20-a.json", "/tmp/h20-a.json"}, {}, error));
  EXPECT_TRUE(contains(error, "'/tmp/h20-a.json' is named twice")) << error;
  EXPECT_TRUE(checkOutputFiles({"/dev/null", "/dev/null"}, {}, error)) << error;
  EXPECT_FALSE(checkOutputFiles({"/nonexistent-dir/x.json"}, {}, error));
}

} // namespace

// allocHost's check before pinning host tables: /proc/meminfo's
// MemAvailable in bytes, -1 when missing or malformed.
TEST(FileUtil, MemAvailableFromMeminfo) {
  EXPECT_EQ(memAvailableBytes("MemTotal:       131891012 kB\nMemFree:        12345 kB\n"
                              "MemAvailable:   120000000 kB\nBuffers:  1 kB\n"),
            int64_t(120000000) * 1024);
  EXPECT_EQ(memAvailableBytes("MemAvailable: 0 kB\n"), 0);
  EXPECT_EQ(memAvailableBytes("MemTotal: 5 kB\n"), -1);             // no such line
  EXPECT_EQ(memAvailableBytes("XMemAvailable: 5 kB\n"), -1);        // not at a line start
  EXPECT_EQ(memAvailableBytes("MemAvailable:  kB\n"), -1);          // no digits
  EXPECT_EQ(memAvailableBytes("MemAvailable: 5 MB\n"), -1);         // another unit
  EXPECT_EQ(memAvailableBytes("MemAvailable: 99999999999999999999 kB\n"), -1); // overflow
  // This machine's (procfs reports size 0: read as a stream).
  if (std::ifstream("/proc/meminfo"))
    EXPECT_GT(hostMemAvailableBytes(), 0);
}
