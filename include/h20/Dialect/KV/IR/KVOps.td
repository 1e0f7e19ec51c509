//===- KVOps.td - KV-cache ops -----------------------------*- tablegen -*-===//
#ifndef H20_KV_OPS
#define H20_KV_OPS

include "h20/Dialect/KV/IR/KVDialect.td"

def KV_AllocOp : KV_Op<"alloc", [Pure]> {
  let summary = "Allocate a KV cache";
  let description = [{
    Creates an uninitialised cache. `dynamic_sizes` gives one index per `?` of
    the result type (the sequence capacity in tokens).
    Example: `%c = kv.alloc(%cap) : !kv.cache<2x2x4x?x32xf32, #kv.layout<...>>`
    Errors: the number of sizes differs from the number of dynamic dims.
  }];
  let arguments = (ins Variadic<Index>:$dynamic_sizes);
  let results = (outs KV_CacheType:$cache);
  let assemblyFormat = "`(` $dynamic_sizes `)` attr-dict `:` qualified(type($cache))";
  let hasVerifier = 1;
}

def KV_WriteOp : KV_Op<"write", [Pure, AllTypesMatch<["cache", "result"]>]> {
  let summary = "Write keys or values of one layer at a sequence offset";
  let description = [{
    Returns `cache` with `value[0, h, s, d]` stored at logical
    [layer, kind, h, offset + s, d] (kind 0 = key, 1 = value), for a value of
    shape [1, kv_heads, S_new, head_dim] of the cache's element type.
    `offset` is in tokens (index). Errors: layer out of range, kind not 0/1,
    heads or head_dim differ from the cache, element type differs.
  }];
  let arguments = (ins KV_CacheType:$cache, AnyRankedTensor:$value,
                   Index:$offset, I64Attr:$layer, I64Attr:$kind);
  let results = (outs KV_CacheType:$result);
  let assemblyFormat = [{
    $value `into` $cache `[` `layer` `=` $layer `,` `kind` `=` $kind `]`
    `at` $offset attr-dict `:` type($value) `->` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def KV_ViewOp : KV_Op<"view", [Pure]> {
  let summary = "View `length` tokens of one layer's keys or values";
  let description = [{
    Returns tensor [1, kv_heads, length, head_dim] holding logical
    [layer, kind, :, offset:offset + length, :] of `cache` (offset 0 when
    absent: the first `length` tokens). `offset` and `length` are in tokens
    (index); offset + length must not exceed the cache capacity at run time.
    Errors: as for kv.write; the result's static dims must match the cache.
  }];
  let arguments = (ins KV_CacheType:$cache, Index:$length, Optional<Index>:$offset,
                   I64Attr:$layer, I64Attr:$kind);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $cache `[` `layer` `=` $layer `,` `kind` `=` $kind `]` (`from` $offset^)? `length` $length
    attr-dict `:` qualified(type($cache)) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // H20_KV_OPS
