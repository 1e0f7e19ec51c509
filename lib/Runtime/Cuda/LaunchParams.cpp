//===- LaunchParams.cpp - the parameter bytes of a kernel launch ----------===//
//
// See LaunchParams.h.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/LaunchParams.h"

#include "h20/Runtime/Cuda/AttentionTma.h"
#include "h20/Runtime/Cuda/TensorMap.h"

#include <algorithm>
#include <cstring>

namespace h20::runtime {

void KernelParams::clear() {
  offsets.clear();
  sizes.clear();
  used = 0;
}

unsigned char *KernelParams::append(size_t bytes, size_t align) {
  size_t at = (used + align - 1) / align * align;
  size_t end = at + bytes;
  size_t blocks = (end + sizeof(Block) - 1) / sizeof(Block);
  if (storage.size() < blocks)
    storage.resize(blocks);
  unsigned char *base = storage.data()->b;
  std::memset(base + used, 0, end - used); // the padding too
  offsets.push_back(at);
  sizes.push_back(bytes);
  used = end;
  return base + at;
}

void **KernelParams::pointers() {
  ptrs.resize(offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i)
    ptrs[i] = storage.data()->b + offsets[i];
  return ptrs.empty() ? nullptr : ptrs.data();
}

bool KernelParams::operator==(const KernelParams &o) const {
  return offsets == o.offsets && sizes == o.sizes && used == o.used &&
         (used == 0 || std::memcmp(storage.data(), o.storage.data(), used) == 0);
}

namespace {

template <class T> void put(unsigned char *at, T v) { std::memcpy(at, &v, sizeof v); }

/// The device address of a view's first element. Unsigned arithmetic: the
/// offset of an empty view is not bounded by resolveStep, and no kernel
/// reads through it.
uint64_t viewAddress(const GpuProgram &p, int buffer, const std::string &dtype,
                     const ResolvedMemRef &v, const std::function<uint64_t(int)> &address) {
  return address(buffer) + static_cast<uint64_t>(v.offset) *
                               static_cast<uint64_t>(viewElementBytes(p, buffer, dtype));
}

/// Writes the fields of struct argument `a` (resolved as `ra`) into `bytes`.
void packStruct(const GpuProgram &p, const LaunchArg &a, const ResolvedLaunchArg &ra,
                unsigned char *bytes, const std::function<uint64_t(int)> &address,
                const CudaApi &api, std::string *why) {
  const bool hasMaps = std::any_of(a.fields.begin(), a.fields.end(), [](const StructField &f) {
    return f.kind == StructField::TensorMap;
  });
  // The environment is read only for structs with maps (on every launch).
  bool mapsOk = !hasMaps || !tensorMapsDisabled();
  if (!mapsOk && why)
    *why = "H20_ATTENTION_TMA=0";
  for (size_t i = 0; i < a.fields.size(); ++i) {
    const StructField &f = a.fields[i];
    const ResolvedStructField &rf = ra.fields[i];
    unsigned char *at = bytes + f.at;
    switch (f.kind) {
    case StructField::I64:
      put<int64_t>(at, rf.value);
      break;
    case StructField::I32:
      put<int32_t>(at, static_cast<int32_t>(rf.value));
      break;
    case StructField::F32:
      put<float>(at, f.f32);
      break;
    case StructField::Pointer:
      put<uint64_t>(at, viewAddress(p, f.buffer, f.dtype, rf.view, address));
      break;
    case StructField::TensorMap: {
      if (!mapsOk)
        break;
      const uint64_t base = viewAddress(p, f.buffer, f.dtype, rf.view, address);
      std::string reason;
      mapsOk = encodeTensorMap(api, at, reinterpret_cast<const void *>(base),
                               viewElementBytes(p, f.buffer, f.dtype),
                               static_cast<int>(rf.view.sizes.size()), rf.view.sizes.data(),
                               rf.view.strides.data(), f.box.data(), f.swizzle, &reason);
      if (!mapsOk && why)
        *why = "args field " + std::to_string(i) + ": " + reason;
      break;
    }
    case StructField::TensorMapsValid:
      break; // below, once every map is known
    }
  }
  for (const StructField &f : a.fields) {
    if (f.kind == StructField::TensorMap && !mapsOk)
      std::memset(bytes + f.at, 0, 128);
    if (f.kind == StructField::TensorMapsValid)
      put<int32_t>(bytes + f.at, mapsOk ? 1 : 0);
  }
}

} // namespace

void packLaunchParams(const GpuProgram &program, const LaunchStep &step, const ResolvedLaunch &r,
                      const std::function<uint64_t(int)> &address, const CudaApi &api,
                      KernelParams &out, std::string *why) {
  out.clear();
  auto slot = [&] { return out.append(8, 8); };
  for (size_t i = 0; i < r.args.size(); ++i) {
    const ResolvedLaunchArg &a = r.args[i];
    switch (a.kind) {
    case LaunchArg::I64:
      put<int64_t>(slot(), a.value);
      break;
    case LaunchArg::I32:
      put<int32_t>(slot(), static_cast<int32_t>(a.value));
      break;
    case LaunchArg::F32:
      put<float>(slot(), a.f32);
      break;
    case LaunchArg::F64:
      put<double>(slot(), a.f64);
      break;
    case LaunchArg::F16:
    case LaunchArg::BF16:
      put<uint16_t>(slot(), a.half);
      break;
    case LaunchArg::MemRef: {
      const uint64_t base = address(a.memref.buffer);
      put<uint64_t>(slot(), base); // allocated
      put<uint64_t>(slot(), base); // aligned
      put<int64_t>(slot(), a.memref.offset);
      for (int64_t s : a.memref.sizes)
        put<int64_t>(slot(), s);
      for (int64_t s : a.memref.strides)
        put<int64_t>(slot(), s);
      break;
    }
    case LaunchArg::Struct: {
      const LaunchArg &la = step.args[i];
      unsigned char *bytes =
          out.append(static_cast<size_t>(la.structBytes), static_cast<size_t>(la.structAlign));
      packStruct(program, la, a, bytes, address, api, why);
      break;
    }
    }
  }
}

} // namespace h20::runtime
