//===- H20Dialect.td - target-level attributes of h20 ------*- tablegen -*-===//
#ifndef H20_H20_DIALECT
#define H20_H20_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def H20_Dialect : Dialect {
  let name = "h20";
  let cppNamespace = "::h20::hw";
  let summary = "Target-level choices: tiles per op, chosen per GPU";
  let description = [{
    Holds what h20-select-tiles chooses for a target (tile shapes, pipeline
    depth, warpgroups, persistence) with the cost model's estimate, so a lit
    test can check a choice without a GPU and codegen reads it.
  }];
  let useDefaultAttributePrinterParser = 1;
}

def H20_TilesAttr : AttrDef<H20_Dialect, "Tiles"> {
  let mnemonic = "tiles";
  let summary = "Tile choice for one op on one target, with its estimate";
  let description = [{
    kind: "attention" (flash-attention forward: block_m query rows x
    block_n keys per step), "gemm" (block_m x block_n output tile, K in
    steps of block_k) or "rows" (memory-bound: block_m rows per CTA).
    stages: TMA pipeline depth; warpgroups: consumer warpgroups (attention,
    gemm); persistent: one CTA per SM walking a (causal-aware) tile queue.
    smem_bytes: shared memory per CTA; est_us: the cost model's time for the
    op at the planning shape; target: the description it was chosen for.
    Example: `#h20.tiles<kind = "attention", target = "h200", block_m = 128,
    block_n = 128, block_k = 0, stages = 2, warpgroups = 2,
    persistent = true, smem_bytes = 98304, est_us = 1.2e+03>`
  }];
  let parameters = (ins "::mlir::StringAttr":$kind, "::mlir::StringAttr":$target,
                        "int64_t":$block_m, "int64_t":$block_n, "int64_t":$block_k,
                        "int64_t":$stages, "int64_t":$warpgroups,
                        "::mlir::BoolAttr":$persistent, "int64_t":$smem_bytes,
                        "::mlir::FloatAttr":$est_us);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif // H20_H20_DIALECT
