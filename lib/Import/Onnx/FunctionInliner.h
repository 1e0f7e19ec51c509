//===- FunctionInliner.h - expand calls of model-local functions -*- C++ -*-===//
#ifndef H20_LIB_IMPORT_ONNX_FUNCTIONINLINER_H
#define H20_LIB_IMPORT_ONNX_FUNCTIONINLINER_H

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace h20::onnx_import {

/// Replaces every node of `model`'s graph whose (domain, op_type) names a
/// model-local function (ModelProto.functions) by that function's body,
/// calls inside bodies included, so the graph holds only operators the
/// importer maps to ops. Returns false with `error` naming the call node
/// and function when a call cannot be expanded faithfully. A model without
/// local functions is left exactly as it was. A call h20 has an op for
/// stays a call, unless its op type is in `expandAnyway`.
bool inlineLocalFunctions(::onnx::ModelProto &model, std::string &error,
                          const std::vector<std::string> &expandAnyway = {});

} // namespace h20::onnx_import

#endif // H20_LIB_IMPORT_ONNX_FUNCTIONINLINER_H
