//===- KVDialect.td - KV-cache dialect ---------------------*- tablegen -*-===//
#ifndef H20_KV_DIALECT
#define H20_KV_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def KV_Dialect : Dialect {
  let name = "kv";
  let cppNamespace = "::h20::kv";
  let summary = "KV caches as values with a planned layout";
  let description = [{
    Holds the keys and values of attention layers as one value of type
    `!kv.cache`, whose logical shape is [layers, 2 (key, value), kv_heads,
    sequence, head_dim] and whose physical order is the `#kv.layout`
    attribute. h20-fuse-kv-caches plans all layers into one such cache.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

def KV_LayoutAttr : AttrDef<KV_Dialect, "Layout"> {
  let mnemonic = "layout";
  let summary = "Physical order and alignment of a KV cache";
  let description = [{
    `order` lists the logical dimensions [0 layer, 1 kind, 2 head, 3 seq,
    4 dim] from outermost to innermost in memory (a permutation of 0..4).
    `align` is the byte alignment of every innermost row (a power of two;
    >= 128 where TMA and 16-byte vector loads read the cache): rows are padded
    to a multiple of it. `page` (tokens, 0 = none) groups positions into
    pages. Byte strides and offsets are derived from this attribute by
    kv::planLayout (KVLayout.h) and nowhere else.
    Example: `#kv.layout<order = [0, 1, 2, 3, 4], align = 128>` is
    [layer][K|V][kv_head][position][head_dim], positions contiguous per head.
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$order, "int64_t":$align,
                        DefaultValuedParameter<"int64_t", "0">:$page);
  let assemblyFormat = [{
    `<` `order` `=` `[` $order `]` `,` `align` `=` $align (`,` `page` `=` $page^)? `>`
  }];
  let genVerifyDecl = 1;
}

def KV_CacheType : TypeDef<KV_Dialect, "Cache"> {
  let mnemonic = "cache";
  let summary = "A KV cache of all (or some) layers";
  let description = [{
    Logical shape [layers, kinds, kv_heads, seq, head_dim]; only `seq` may
    be dynamic (`?`). kinds is 2 (key, value) for attention's K and V, or 1
    for a cache of rows that has no value half (DeepSeek-V4.1's latents,
    compressed entries, indexer keys and token ids, whose K = V or which
    are read as one tensor). Element type f16, bf16, f32 or f8E4M3FN; or i32 / i64
    for a cache of token values (DeepSeek-V4.1's Engram reads the token ids
    of earlier positions through one).
    Example: `!kv.cache<8x2x32x?x128xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>`
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "::mlir::Type":$elementType,
                        "::h20::kv::LayoutAttr":$layout);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t numLayers() const { return getShape()[0]; }
    int64_t numHeads() const { return getShape()[2]; }
    int64_t seqLen() const { return getShape()[3]; }
    int64_t headDim() const { return getShape()[4]; }
  }];
}

class KV_Op<string mnemonic, list<Trait> traits = []>
    : Op<KV_Dialect, mnemonic, traits>;

#endif // H20_KV_DIALECT
