// RUN: h20-opt %s --h20-print-kv-plan -o /dev/null | FileCheck %s
// RUN: h20-opt %s --h20-print-kv-plan="capacity=100" -o /dev/null | FileCheck %s --check-prefix=PAD

// seed-dense (DESIGN.md section 2): 8 layers x K|V x 32 heads x 524288
// positions x 128 dims in bf16 = 2^36 bytes = 64 GiB exactly; rows are 256 B
// so 128-byte alignment adds nothing. Offsets need 64 bits: layer 4's K
// starts at 32 GiB, and one K slab holds 2^31 elements (4 GiB).
// CHECK: kv plan for !kv.cache<8x2x32x524288x128xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
// CHECK-NEXT: element_bytes 2 row_bytes 256
// CHECK-NEXT: strides_bytes [8589934592, 4294967296, 134217728, 256, 2]
// CHECK: layer 4 K offset 34359738368
// CHECK: layer 7 V offset 64424509440
// CHECK: total_bytes 68719476736 padding_bytes 0
func.func @seed_dense() -> !kv.cache<8x2x32x524288x128xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>> {
  %c = kv.alloc() : !kv.cache<8x2x32x524288x128xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
  return %c : !kv.cache<8x2x32x524288x128xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
}

// Rows of 16 f32 (64 B) pad to 128 B; a dynamic cache sized by --capacity.
// PAD: kv plan for !kv.cache<2x2x2x?x16xf32
// PAD-NEXT: element_bytes 4 row_bytes 128
// PAD-NEXT: strides_bytes [51200, 25600, 12800, 128, 4]
// PAD: total_bytes 102400 padding_bytes 51200
func.func @padded(%n: index) -> !kv.cache<2x2x2x?x16xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>> {
  %c = kv.alloc(%n) : !kv.cache<2x2x2x?x16xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
  return %c : !kv.cache<2x2x2x?x16xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
}
