// RUN: h20-opt %s --split-input-file --h20-merge-all-reduces | FileCheck %s
// all_reduce(a) + all_reduce(b) = all_reduce(a + b) where the Add is the
// only reader of both and nothing broadcasts.

// CHECK-LABEL: func.func @merged
// CHECK: %[[P:.*]] = onnx.Add(%arg0, %arg1)
// CHECK: %[[S:.*]] = attn.all_reduce %[[P]]
// CHECK-NOT: attn.all_reduce
// CHECK: return %[[S]]
func.func @merged(%a: tensor<?x8xbf16>, %b: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  %sa = attn.all_reduce %a : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %sb = attn.all_reduce %b : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %y = onnx.Add(%sa, %sb) : (tensor<?x8xbf16>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %y : tensor<?x8xbf16>
}

// -----

// A sum read elsewhere too, or an add that broadcasts, stays as it is.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: attn.all_reduce
// CHECK: onnx.Add
// CHECK: onnx.Add
func.func @kept(%a: tensor<?x8xbf16>, %b: tensor<?x8xbf16>, %c: tensor<1x8xbf16>) -> (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>) {
  %sa = attn.all_reduce %a : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %sb = attn.all_reduce %b : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %sc = attn.all_reduce %c : (tensor<1x8xbf16>) -> tensor<1x8xbf16>
  %sd = attn.all_reduce %b : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %y = onnx.Add(%sa, %sb) : (tensor<?x8xbf16>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %z = onnx.Add(%sd, %sc) : (tensor<?x8xbf16>, tensor<1x8xbf16>) -> tensor<?x8xbf16>
  return %y, %sa, %z : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>
}

// -----

// An add under control flow that some ranks might not take keeps both
// collectives outside it (every rank still runs them).
// CHECK-LABEL: func.func @nested
// CHECK: attn.all_reduce %arg0
// CHECK: attn.all_reduce %arg1
// CHECK: scf.if
// CHECK-NOT: attn.all_reduce
// CHECK: onnx.Add
func.func @nested(%a: tensor<?x8xbf16>, %b: tensor<?x8xbf16>, %p: i1) -> tensor<?x8xbf16> {
  %sa = attn.all_reduce %a : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %sb = attn.all_reduce %b : (tensor<?x8xbf16>) -> tensor<?x8xbf16>
  %r = scf.if %p -> tensor<?x8xbf16> {
    %y = onnx.Add(%sa, %sb) : (tensor<?x8xbf16>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
    scf.yield %y : tensor<?x8xbf16>
  } else {
    scf.yield %a : tensor<?x8xbf16>
  }
  return %r : tensor<?x8xbf16>
}
