// RUN: h20-opt %s -split-input-file -verify-diagnostics
// One negative case (at least) for every rule of the kv verifiers.

// expected-error @+1 {{layout order must list 5 dimensions, got 4}}
func.func @layout_rank(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3], align = 256>>)

// -----

// expected-error @+1 {{layout order must be a permutation of 0..4, got [0, 1, 2, 3, 3]}}
func.func @layout_perm(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 3], align = 256>>)

// -----

// expected-error @+1 {{layout align must be a positive power of two, got 48}}
func.func @layout_align(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 48>>)

// -----

// expected-error @+1 {{kv cache must be [layers, 2, kv_heads, seq, head_dim], got rank 4}}
func.func @cache_rank(%c: !kv.cache<2x2x4x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>)

// -----

// expected-error @+1 {{only the seq dimension of a kv cache may be dynamic, but head_dim is}}
func.func @cache_dynamic(%c: !kv.cache<2x2x4x16x?xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>)

// -----

// expected-error @+1 {{kv cache layers must be positive, got 0}}
func.func @cache_zero(%c: !kv.cache<0x2x4x16x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>)

// -----

// expected-error @+1 {{kv cache kind dimension must be 2 (key, value) or 1 (rows: key only), got 3}}
func.func @cache_kind(%c: !kv.cache<2x3x4x16x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>)

// -----

// expected-error @+1 {{kv cache element type must be f16, bf16, f32, f8E4M3FN, i32 or i64, got 'i8'}}
func.func @cache_elem(%c: !kv.cache<2x2x4x16x32xi8, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>)

// -----

func.func @alloc_sizes(%n: index) {
  // expected-error @+1 {{expects 1 dynamic size(s) for '!kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>', got 0}}
  %c = kv.alloc() : !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  return
}

// -----

func.func @write_layer(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>, %k: tensor<1x4x?x32xf32>, %p: index) {
  // expected-error @+1 {{layer 2 is out of range [0, 2)}}
  %w = kv.write %k into %c[layer = 2, kind = 0] at %p : tensor<1x4x?x32xf32> -> !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  return
}

// -----

func.func @write_kind(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>, %k: tensor<1x4x?x32xf32>, %p: index) {
  // expected-error @+1 {{kind must be 0 (key) or 1 (value), got 2}}
  %w = kv.write %k into %c[layer = 0, kind = 2] at %p : tensor<1x4x?x32xf32> -> !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  return
}

// -----

// A cache of rows (kind dimension 1) has no value half.
func.func @write_rows_kind(%c: !kv.cache<2x1x1x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>, %k: tensor<1x1x?x32xf32>, %p: index) {
  // expected-error @+1 {{kind must be 0 (a cache of rows has no value half), got 1}}
  %w = kv.write %k into %c[layer = 0, kind = 1] at %p : tensor<1x1x?x32xf32> -> !kv.cache<2x1x1x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
  return
}

// -----

func.func @write_rank(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>, %k: tensor<4x?x32xf32>, %p: index) {
  // expected-error @+1 {{value must be [1, kv_heads, S, head_dim], got rank 3}}
  %w = kv.write %k into %c[layer = 0, kind = 0] at %p : tensor<4x?x32xf32> -> !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  return
}

// -----

func.func @write_heads(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>, %k: tensor<1x8x?x32xf32>, %p: index) {
  // expected-error @+1 {{value type 'tensor<1x8x?x32xf32>' does not match cache [1, 4, S, 32]}}
  %w = kv.write %k into %c[layer = 0, kind = 0] at %p : tensor<1x8x?x32xf32> -> !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  return
}

// -----

func.func @write_dtype(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>, %k: tensor<1x4x?x32xbf16>, %p: index) {
  // expected-error @+1 {{value element type 'bf16' differs from the cache's 'f32'}}
  %w = kv.write %k into %c[layer = 0, kind = 0] at %p : tensor<1x4x?x32xbf16> -> !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  return
}

// -----

func.func @view_dim(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>, %n: index) {
  // expected-error @+1 {{result type 'tensor<1x4x?x64xf32>' does not match cache [1, 4, S, 32]}}
  %v = kv.view %c[layer = 0, kind = 1] length %n : !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>> -> tensor<1x4x?x64xf32>
  return
}

// -----

func.func @view_past_capacity(%c: !kv.cache<1x1x1x35x40xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>) {
  %at = arith.constant 21 : index
  %n = arith.constant 15 : index
  // expected-error @+1 {{tokens [21, 21 + 15) are outside the cache's capacity 35}}
  %v = kv.view %c[layer = 0, kind = 0] from %at length %n : !kv.cache<1x1x1x35x40xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>> -> tensor<1x1x15x40xbf16>
  return
}

// -----

// expected-error @+1 {{layout page must be >= 0 tokens, got -4}}
func.func @layout_page(%c: !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256, page = -4>>)
