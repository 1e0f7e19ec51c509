//===- ModelLoader.cpp - read and check an ONNX model file ---------------===//
#include "ModelLoader.h"
#include "OnnxTypes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/defs/parser.h>

#include <limits>

using namespace llvm;

namespace h20::onnx_import {
namespace {

/// Minimal protobuf wire-format reader, used only to find the file offsets of
/// initializers' raw_data (the generated parser does not expose them).
/// Encoding: https://protobuf.dev/programming-guides/encoding/
class WireReader {
public:
  WireReader(const uint8_t *data, uint64_t size, uint64_t base)
      : p(data), end(data + size), base(base), start(data) {}

  bool atEnd() const { return p >= end; }
  uint64_t fileOffset() const { return base + (p - start); }

  bool varint(uint64_t &v) {
    v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t byte = *p++;
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
    return false;
  }

  /// Reads a tag; for a length-delimited field also its payload span.
  bool field(uint32_t &number, uint32_t &wire, const uint8_t *&payload,
             uint64_t &len) {
    uint64_t tag;
    if (!varint(tag))
      return false;
    number = static_cast<uint32_t>(tag >> 3);
    wire = tag & 7;
    switch (wire) {
    case 0: {
      uint64_t ignored;
      return varint(ignored);
    }
    case 1: return skip(8);
    case 5: return skip(4);
    case 2:
      if (!varint(len) || len > static_cast<uint64_t>(end - p))
        return false;
      payload = p;
      p += len;
      return true;
    default: // groups (3, 4) are not used by onnx.proto
      return false;
    }
  }

private:
  bool skip(uint64_t n) {
    if (n > static_cast<uint64_t>(end - p))
      return false;
    p += n;
    return true;
  }
  const uint8_t *p, *end;
  uint64_t base;
  const uint8_t *start;
};

// Field numbers from onnx/onnx.proto.
constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5, kTensorName = 8,
                   kTensorRawData = 9;

/// Records (name -> offset, length) of every top-level initializer's raw_data.
void scanRawDataOffsets(StringRef bytes, const std::string &path,
                        StringMap<DataLocation> &out) {
  auto *data = reinterpret_cast<const uint8_t *>(bytes.data());
  WireReader model(data, bytes.size(), 0);
  uint32_t num, wire;
  const uint8_t *payload = nullptr;
  uint64_t len = 0;
  while (!model.atEnd() && model.field(num, wire, payload, len)) {
    if (num != kModelGraph || wire != 2)
      continue;
    WireReader graph(payload, len, payload - data);
    while (!graph.atEnd() && graph.field(num, wire, payload, len)) {
      if (num != kGraphInitializer || wire != 2)
        continue;
      WireReader tensor(payload, len, payload - data);
      std::string name;
      DataLocation loc;
      bool hasRaw = false;
      while (!tensor.atEnd() && tensor.field(num, wire, payload, len)) {
        if (num == kTensorName && wire == 2)
          name.assign(reinterpret_cast<const char *>(payload), len);
        if (num == kTensorRawData && wire == 2) {
          loc.offset = payload - data;
          loc.length = len;
          hasRaw = true;
        }
      }
      if (hasRaw && !name.empty()) {
        loc.file = llvm::sys::path::filename(path).str();
        out[name] = loc;
      }
    }
  }
}

/// Checks an external-data reference; the file is stat'ed, never read.
bool checkExternal(const ::onnx::TensorProto &t, LoadedModel &model,
                   std::string &error) {
  DataLocation loc;
  loc.external = true;
  bool haveLength = false;
  for (const auto &kv : t.external_data()) {
    const std::string &k = kv.key(), &v = kv.value();
    if (k == "location") {
      loc.file = v;
      continue;
    }
    if (k != "offset" && k != "length")
      continue;
    long long n;
    if (StringRef(v).getAsInteger(10, n) || n < 0) {
      error = "initializer '" + t.name() + "': external_data " + k + " '" + v +
              "' is not a non-negative integer";
      return false;
    }
    (k == "offset" ? loc.offset : loc.length) = n;
    haveLength |= k == "length";
  }
  if (loc.file.empty()) {
    error = "initializer '" + t.name() + "': external data has no location";
    return false;
  }
  if (sys::path::is_absolute(loc.file) ||
      StringRef(loc.file).contains("..")) {
    error = "initializer '" + t.name() + "': external data location '" +
            loc.file + "' must be a relative path inside the model directory";
    return false;
  }
  auto n = elementCount(llvm::ArrayRef<int64_t>(t.dims().data(), t.dims().size()));
  if (!n) {
    error = "initializer '" + t.name() + "' has a negative dimension or too many elements";
    return false;
  }
  auto width = byteWidth(t.data_type());
  int64_t needed = width ? *n * *width : -1;
  if (haveLength && needed >= 0 && loc.length != needed) {
    error = "initializer '" + t.name() + "': external_data length " +
            std::to_string(loc.length) + " differs from the " +
            std::to_string(needed) + " bytes its shape needs";
    return false;
  }
  if (!haveLength)
    loc.length = needed;
  SmallString<256> full(model.directory);
  sys::path::append(full, loc.file);
  sys::fs::file_status st;
  if (sys::fs::status(full, st) || !sys::fs::is_regular_file(st)) {
    error = "initializer '" + t.name() + "': external data file '" +
            std::string(full) + "' does not exist";
    return false;
  }
  uint64_t size = st.getSize();
  if (static_cast<uint64_t>(loc.offset) > size ||
      static_cast<uint64_t>(loc.length) > size - static_cast<uint64_t>(loc.offset)) {
    error = "initializer '" + t.name() + "': external data file '" +
            std::string(full) + "' has " + std::to_string(size) +
            " bytes, but the tensor needs bytes [" + std::to_string(loc.offset) +
            ", " + std::to_string(static_cast<uint64_t>(loc.offset) + static_cast<uint64_t>(loc.length)) + ")";
    return false;
  }
  model.locations[t.name()] = loc;
  return true;
}

} // namespace

bool loadModel(StringRef path, LoadedModel &model, std::string &error) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/true);
  if (!buffer) {
    model.path = path.str();
    error = "cannot read model file: " + buffer.getError().message();
    return false;
  }
  return loadModelFromBytes((*buffer)->getBuffer(), path, model, error);
}

bool loadModelFromBytes(StringRef bytes, StringRef path, LoadedModel &model,
                        std::string &error) {
  model.path = path.str();
  SmallString<256> dir(path);
  sys::path::remove_filename(dir);
  model.directory = dir.empty() ? "." : std::string(dir);

  if (bytes.empty()) {
    error = "model file is empty";
    return false;
  }
  if (path.ends_with_insensitive(".onnxtext")) {
    // The parser reads a NUL-terminated string.
    std::string text = bytes.str();
    auto status = ::onnx::OnnxParser::Parse(model.proto, text.c_str());
    if (!status.IsOK()) {
      error = "not valid ONNX text syntax: " + status.ErrorMessage();
      return false;
    }
  } else {
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
      error = "model file is larger than 2 GiB; store weights as external data";
      return false;
    }
    if (!model.proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      error = "not a valid ONNX protobuf (truncated or corrupt ModelProto)";
      return false;
    }
    scanRawDataOffsets(bytes, model.path, model.locations);
  }
  if (!model.proto.has_graph()) {
    error = "model has no graph (not an ONNX model?)";
    return false;
  }
  if (model.proto.ir_version() < 3 || model.proto.ir_version() > 13) {
    error = "ONNX IR version " + std::to_string(model.proto.ir_version()) +
            " is not supported (h20 reads IR versions 3 to 13)";
    return false;
  }
  for (const auto &t : model.proto.graph().initializer()) {
    if (t.data_location() == ::onnx::TensorProto::EXTERNAL) {
      if (!checkExternal(t, model, error))
        return false;
      continue;
    }
    auto n = elementCount(llvm::ArrayRef<int64_t>(t.dims().data(), t.dims().size()));
    if (!n) {
      error = "initializer '" + t.name() + "' has a negative dimension or too many elements";
      return false;
    }
    if (t.has_raw_data()) {
      auto width = byteWidth(t.data_type());
      if (width && static_cast<int64_t>(t.raw_data().size()) != *n * *width) {
        error = "initializer '" + t.name() + "' (" + dataTypeName(t.data_type()) +
                "): raw_data holds " + std::to_string(t.raw_data().size()) +
                " bytes but its shape needs " + std::to_string(*n * *width);
        return false;
      }
    }
  }
  return true;
}

} // namespace h20::onnx_import
