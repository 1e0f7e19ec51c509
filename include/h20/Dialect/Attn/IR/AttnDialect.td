//===- AttnDialect.td - the attention-level dialect --------*- tablegen -*-===//
//
// The level at which h20 reasons about attention: ops carry causal / sliding
// window / sink / GQA / scale as attributes, never as materialised masks.
//
//===----------------------------------------------------------------------===//
#ifndef H20_ATTN_DIALECT
#define H20_ATTN_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::h20::attn";
  let summary = "Attention, RoPE and RMSNorm as first-class ops";
  let description = [{
    The `attn` dialect is where h20 reasons about attention. Each op has a
    reference decomposition into linalg that defines its meaning; the CPU
    target runs that decomposition and every test compares against it.
    Tensors use the ONNX 4-D convention [batch, heads, sequence, head_dim].
  }];
  let useDefaultAttributePrinterParser = 1;
}

/// How RoPE frequencies are scaled beyond the trained context.
def Attn_RopeScaling : I32EnumAttr<"RopeScaling", "RoPE frequency scaling", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"linear", 1>,
    I32EnumAttrCase<"dynamic_ntk", 2>,
    I32EnumAttrCase<"yarn", 3>,
    I32EnumAttrCase<"llama3", 4>]> {
  let cppNamespace = "::h20::attn";
  let genSpecializedAttr = 0;
}
def Attn_RopeScalingAttr : EnumAttr<Attn_Dialect, Attn_RopeScaling, "rope_scaling"> {
  let assemblyFormat = "`<` $value `>`";
}

/// Which query position a causal mask is anchored to when S_q != S_kv.
def Attn_CausalAlignment : I32EnumAttr<"CausalAlignment",
    "anchoring of the causal diagonal", [
    I32EnumAttrCase<"top_left", 0>,
    I32EnumAttrCase<"bottom_right", 1>]> {
  let cppNamespace = "::h20::attn";
  let genSpecializedAttr = 0;
}
def Attn_CausalAlignmentAttr : EnumAttr<Attn_Dialect, Attn_CausalAlignment,
                                        "causal_alignment"> {
  let assemblyFormat = "`<` $value `>`";
}

/// Which intermediate of attention an attn.attention_scores returns, in the
/// order attention computes them (ONNX Attention's qk_matmul_output_mode
/// 0..3, as ONNX's own test data defines them).
def Attn_ScoreStage : I32EnumAttr<"ScoreStage",
    "intermediate of the attention score pipeline", [
    I32EnumAttrCase<"scaled", 0>,
    I32EnumAttrCase<"softcapped", 1>,
    I32EnumAttrCase<"masked", 2>,
    I32EnumAttrCase<"probabilities", 3>]> {
  let cppNamespace = "::h20::attn";
  let genSpecializedAttr = 0;
}
def Attn_ScoreStageAttr : EnumAttr<Attn_Dialect, Attn_ScoreStage, "score_stage"> {
  let assemblyFormat = "`<` $value `>`";
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // H20_ATTN_DIALECT
