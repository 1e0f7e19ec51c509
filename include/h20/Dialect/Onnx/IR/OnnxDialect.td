//===- OnnxDialect.td - import-level ONNX dialect ----------*- tablegen -*-===//
#ifndef H20_ONNX_DIALECT
#define H20_ONNX_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Onnx_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::h20::onnx";
  let summary = "The subset of ONNX that h20 imports, one op per ONNX node";
  let description = [{
    The importer maps each ONNX node 1:1 onto an op of this dialect: op name =
    ONNX op_type (com.microsoft ops get the prefix `ms.`), operands = node
    inputs in order (a missing optional input is a `onnx.NoValue`), results =
    node outputs, ONNX attributes = op attributes of the same name (INT: i64,
    FLOAT: f32, INTS: array<i64>, FLOATS: array<f32>, STRING: string,
    TENSOR: dense elements). Semantics are those of the ONNX operator
    specification (https://onnx.ai/onnx/operators/) at the model's opset.
    Weights never appear as data: `onnx.Weight` names an initializer and says
    where its bytes are.
  }];
}

/// A node input: a tensor, or `none` for an omitted optional input.
def Onnx_Input : AnyTypeOf<[AnyTensor, NoneType]>;

class Onnx_Op<string mnemonic, list<Trait> traits = []>
    : Op<Onnx_Dialect, mnemonic, traits>;

/// One ONNX node. `minIn`/`maxIn` and `minOut`/`maxOut` bound the number of
/// inputs and outputs (-1: unbounded); the verifier checks them and then calls
/// verifyNode(op) for op-specific rules (see OnnxVerifiers.h).
class Onnx_NodeOp<string mnemonic, int minIn, int maxIn, int minOut, int maxOut,
                  list<Trait> traits = []>
    : Onnx_Op<mnemonic, !listconcat(traits, [Pure])> {
  let results = (outs Variadic<AnyTensor>:$outputs);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      if (::mlir::failed(::h20::onnx::verifyArity(*this, }] #
      !cast<string>(minIn) # ", " # !cast<string>(maxIn) # ", " #
      !cast<string>(minOut) # ", " # !cast<string>(maxOut) # [{)))
        return ::mlir::failure();
      return ::h20::onnx::verifyNode(*this);
    }
  }];
}

class Onnx_UnaryOp<string mnemonic> : Onnx_NodeOp<mnemonic, 1, 1, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
class Onnx_BinaryOp<string mnemonic> : Onnx_NodeOp<mnemonic, 2, 2, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}
class Onnx_VariadicOp<string mnemonic> : Onnx_NodeOp<mnemonic, 1, -1, 1, 1> {
  let arguments = (ins Variadic<Onnx_Input>:$inputs);
}

#endif // H20_ONNX_DIALECT
