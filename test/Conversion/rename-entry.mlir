// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-rename-entry | FileCheck %s
// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-rename-entry=name=entry | FileCheck %s --check-prefix=NAMED

// The one function is renamed and loses its ONNX names (the manifest has
// them); its body is untouched.
// CHECK-LABEL: func.func @h20_main(%arg0: tensor<1x?xi64>) -> tensor<1x?xi64> {
// CHECK-NEXT: return %arg0
// NAMED-LABEL: func.func @entry(%arg0: tensor<1x?xi64>)
func.func @main(%ids: tensor<1x?xi64> {onnx.name = "input_ids"}) -> (tensor<1x?xi64> {onnx.name = "out"}) {
  return %ids : tensor<1x?xi64>
}

// -----

// expected-error @+1 {{expected exactly one function (the graph), found 2}}
module {
  func.func @a() { return }
  func.func @b() { return }
}
