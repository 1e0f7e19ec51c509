//===- Prompt.cpp - a run's inputs and its next token ----------------------===//
#include "h20/Runtime/Prompt.h"

#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Npy.h"

#include <algorithm>
#include <cstring>

namespace h20::runtime {

bool takesTokenIds(const Manifest &m, std::string &error) {
  if (m.inputs.size() != 1) {
    error = "--ids feeds one input (token ids); this model has " +
            std::to_string(m.inputs.size()) + ": use --input";
    return false;
  }
  const TensorSpec &in = m.inputs[0];
  if (in.shape.size() != 2 || (in.shape[0] != 1 && in.shape[0] != -1) ||
      (in.dtype != "int64" && in.dtype != "int32")) {
    error = "the model's input '" + in.name +
            "' is not token ids [1, S] of int64/int32: use --input";
    return false;
  }
  return true;
}

bool promptFromIds(const Manifest &m, const std::vector<int64_t> &ids, HostTensor &out,
                   std::string &error) {
  if (!takesTokenIds(m, error))
    return false;
  const int64_t S = static_cast<int64_t>(ids.size());
  for (int64_t i = 0; i < S; ++i)
    if (ids[i] < 0 || (m.vocabSize && ids[i] >= *m.vocabSize)) {
      error = "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
              " is outside the vocabulary [0, " +
              (m.vocabSize ? std::to_string(*m.vocabSize) : "?") + ")";
      return false;
    }
  if (m.maxPositions && S > *m.maxPositions) {
    error = "prompt of " + std::to_string(S) + " tokens exceeds the model's maximum of " +
            std::to_string(*m.maxPositions) + " positions: compile the model with h20-opt " +
            "--max-positions=" + std::to_string(S) + " (or more)";
    return false;
  }
  const TensorSpec &in = m.inputs[0];
  if (in.shape[1] != -1 && in.shape[1] != S) {
    error = "the model takes exactly " + std::to_string(in.shape[1]) + " tokens; got " +
            std::to_string(S);
    return false;
  }
  out.name = in.name;
  out.dtype = in.dtype;
  out.shape = {1, S};
  out.data.resize(S * dtypeSize(in.dtype));
  for (int64_t i = 0; i < S; ++i) {
    if (in.dtype == "int64") {
      std::memcpy(out.data.data() + 8 * i, &ids[i], 8);
    } else {
      int32_t v = static_cast<int32_t>(ids[i]);
      std::memcpy(out.data.data() + 4 * i, &v, 4);
    }
  }
  return true;
}

namespace {
std::string shapeString(const std::vector<int64_t> &v) {
  std::string r = "[";
  for (size_t k = 0; k < v.size(); ++k)
    r += (k ? ", " : "") + (v[k] < 0 ? std::string("?") : std::to_string(v[k]));
  return r + "]";
}
} // namespace

bool readNamedInputs(const Manifest &m,
                     const std::vector<std::pair<std::string, std::string>> &bindings,
                     const std::string &inputsFrom, std::vector<HostTensor> &out,
                     std::string &error) {
  for (const auto &binding : bindings)
    if (std::none_of(m.inputs.begin(), m.inputs.end(),
                     [&](const TensorSpec &t) { return t.name == binding.first; })) {
      error = "--input '" + binding.first + "': the model has no input of that name";
      return false;
    }
  out.assign(m.inputs.size(), HostTensor{});
  for (size_t j = 0; j < m.inputs.size(); ++j) {
    const TensorSpec &spec = m.inputs[j];
    std::string path;
    for (const auto &[name, p] : bindings)
      if (name == spec.name)
        path = p;
    if (path.empty() && !inputsFrom.empty())
      path = backendTestFile(inputsFrom, "input", j);
    if (path.empty()) {
      error = "no value for input '" + spec.name + "' (give --input " + spec.name +
              "=PATH or --inputs-from DIR)";
      return false;
    }
    HostTensor &t = out[j];
    if (!readTensorFile(path, t, error)) {
      error = "input '" + spec.name + "': " + error;
      return false;
    }
    bool shapeOk = t.shape.size() == spec.shape.size();
    for (size_t k = 0; shapeOk && k < t.shape.size(); ++k)
      shapeOk = spec.shape[k] < 0 || spec.shape[k] == t.shape[k];
    if (t.dtype != spec.dtype || !shapeOk) {
      error = "input '" + spec.name + "' from '" + path + "' is " + t.dtype +
              shapeString(t.shape) + " but the model takes " + spec.dtype +
              shapeString(spec.shape);
      return false;
    }
  }
  return true;
}

bool readRunInputs(const Manifest &m, const std::string &ids,
                   const std::vector<std::pair<std::string, std::string>> &bindings,
                   const std::string &inputsFrom, std::vector<HostTensor> &inputs,
                   int64_t &tokens, std::string &error) {
  tokens = 0;
  if (!ids.empty()) {
    std::vector<int64_t> tokenIds;
    HostTensor prompt;
    if (!takesTokenIds(m, error) || !readTokenIds(ids, tokenIds, error) ||
        !promptFromIds(m, tokenIds, prompt, error))
      return false;
    inputs = {prompt};
    tokens = static_cast<int64_t>(tokenIds.size());
  } else if (!readNamedInputs(m, bindings, inputsFrom, inputs, error)) {
    return false;
  }
  std::vector<std::vector<int64_t>> shapes;
  for (const HostTensor &t : inputs)
    shapes.push_back(t.shape);
  return checkDimParams(m.inputs, shapes, error) && checkValueRanges(m.inputs, inputs, error);
}

std::vector<float> logitsAsFloat32(const std::string &dtype, const void *data, size_t count) {
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16")
    return {};
  std::vector<float> out(count);
  convertElements(dtype, data, "float32", out.data(), count);
  return out;
}

bool nextToken(const HostTensor &logits, int64_t &next, std::vector<float> &wide,
               std::string &error) {
  if (logits.shape.empty()) {
    error = "output 0 is not logits [..., vocab]";
    return false;
  }
  if (logits.shape.back() <= 0) {
    error = "output 0 (logits) has no vocabulary dim";
    return false;
  }
  int64_t vocab = logits.shape.back(), count = 1;
  for (int64_t d : logits.shape)
    count *= d;
  wide = logitsAsFloat32(logits.dtype, logits.data.data(), static_cast<size_t>(count));
  if (wide.empty() && count > 0) {
    error = "output 0 is " + logits.dtype + ", not float32/float16/bfloat16 logits";
    return false;
  }
  int64_t rows = count / vocab;
  if (rows < 1) {
    error = "output 0 (logits) is empty";
    return false;
  }
  const float *last = wide.data() + (rows - 1) * vocab;
  next = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (last[v] > last[next])
      next = v;
  return true;
}

} // namespace h20::runtime
