//===- Prompt.h - a run's inputs from the command line, its next token -*- C++ -*-===//
//
// The two ends of a prefill that do not depend on where it runs: the model's
// inputs (token ids into the [1, S] ids tensor, or named tensors read from
// files) checked against the manifest, and the next token read back from
// the logits. h20-run calls these for CPU and GPU artifacts alike; pure but
// for reading the input files, so PromptTest checks every refusal.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_PROMPT_H
#define H20_RUNTIME_PROMPT_H

#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace h20::runtime {

/// Whether the model takes token ids: exactly one input, [1, S] (or
/// [?, S]) of int64 or int32. False with `error` saying to use --input
/// otherwise. Checked before the ids file is read.
bool takesTokenIds(const Manifest &m, std::string &error);

/// The token-id input of a model with one input, the ids [1, S] as int64 or
/// int32 (-1 dims are the symbolic prompt length). False with `error` when
/// the model has another input signature, an id is outside [0, vocab), or
/// S exceeds the manifest's max_positions or a static length; the message
/// names the id and its position, or the input.
bool promptFromIds(const Manifest &m, const std::vector<int64_t> &ids, HostTensor &out,
                   std::string &error);

/// The inputs of a generic graph in manifest order: each from its
/// `bindings` entry (NAME=PATH: .npy or TensorProto .pb), else from
/// `inputsFrom`/input_J.pb when that folder is given. False with `error`
/// on an unknown binding name, a missing value, an unreadable file, or a
/// dtype or static dim that differs from the manifest's (both spelt out).
bool readNamedInputs(const Manifest &m,
                     const std::vector<std::pair<std::string, std::string>> &bindings,
                     const std::string &inputsFrom, std::vector<HostTensor> &out,
                     std::string &error);

/// A run's inputs: with `ids` (a token-id file, readTokenIds) the [1, S]
/// prompt (takesTokenIds, promptFromIds) and `tokens` = S; else the named
/// inputs (readNamedInputs) and `tokens` = 0. Then checks what the compiled
/// code assumes of them: dims that share an ONNX dim_param agree
/// (checkDimParams) and index inputs lie in their recorded ranges
/// (checkValueRanges; ONNX: an out-of-range index is an error). False with
/// `error` from the first check that fails.
bool readRunInputs(const Manifest &m, const std::string &ids,
                   const std::vector<std::pair<std::string, std::string>> &bindings,
                   const std::string &inputsFrom, std::vector<HostTensor> &inputs,
                   int64_t &tokens, std::string &error);

/// Logits of `count` elements as float32 (float16 and bfloat16, what a
/// 16-bit export's LM head returns, widened exactly); empty for a dtype
/// that is not float32, float16 or bfloat16.
std::vector<float> logitsAsFloat32(const std::string &dtype, const void *data, size_t count);

/// The next token: the argmax (first of equal maxima) of the last row of
/// `logits` ([..., vocab], float32/float16/bfloat16). `wide` receives all
/// rows as float32 (for --dump-logits). False with `error` when output 0
/// is not float logits or holds no row.
bool nextToken(const HostTensor &logits, int64_t &next, std::vector<float> &wide,
               std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_PROMPT_H
