//===- ModelLoader.h - read and check an ONNX model file --------*- C++ -*-===//
#ifndef H20_LIB_IMPORT_ONNX_MODELLOADER_H
#define H20_LIB_IMPORT_ONNX_MODELLOADER_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace h20::onnx_import {

/// Where an initializer's bytes live: `length` bytes at `offset` of `file`
/// (relative to the model directory for external data, else the model path).
struct DataLocation {
  std::string file;
  int64_t offset = 0;
  int64_t length = 0;
  bool external = false;
};

/// A parsed model and the byte locations of its initializers' raw data.
struct LoadedModel {
  ::onnx::ModelProto proto;
  std::string path;      ///< the model file as given
  std::string directory; ///< directory that external data paths start from
  /// Initializer name -> location of its raw bytes (inline raw_data found by
  /// scanning the protobuf wire format, or external_data entries).
  llvm::StringMap<DataLocation> locations;
};

/// Reads `path` (binary protobuf, or ONNX text syntax for `.onnxtext`),
/// parses it and checks every initializer's data: raw_data length against
/// its shape, external files present and long enough (by size only; their
/// bytes are not read). Returns false with `error` naming the file and the
/// tensor at fault.
bool loadModel(llvm::StringRef path, LoadedModel &model, std::string &error);

/// loadModel for the bytes of a file already read: `path` names it in
/// messages, decides the syntax (`.onnxtext`) and the directory external data
/// is looked up in.
bool loadModelFromBytes(llvm::StringRef bytes, llvm::StringRef path, LoadedModel &model,
                        std::string &error);

} // namespace h20::onnx_import

#endif // H20_LIB_IMPORT_ONNX_MODELLOADER_H
