// Shared pieces of the small-channel paths (src/impl/small_channels/): the
// "column" view of a convolution with very few image-side channels per group.
//
// Why a separate path: the GEMM paths put image-side channels on the 16 lanes
// of a vector, so C = 1 or 3 (a network's stem, an audio front end) wastes 13
// to 15 of 16 lanes. Here the lanes carry the columns (c, tap) of an im2col
// instead: C * taps = 147 for a 7x7 RGB stem (10 blocks of 16, 92% useful),
// 10 for a k10 mono front end. The other GEMM side is the many result-side
// channels K, as in any GEMM.
//
// Column order: col = c * taps + tap, tap = (r0 * k1 + r1) * k2 + r2, which
// is the order of a weight's [C, k0, k1, k2] dims.
#pragma once

#include <cmath>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "impl/gemm/microkernel.hpp"
#include "impl/implementation.hpp"
#include "numeric/float_formats.hpp"
#include "problem/checked.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail::small_channels {

// Most image-side channels per group this path takes. At C = 4 a 3x3 kernel
// still gives 36 columns (3 blocks, 75% useful) where the GEMM paths use 4
// of 16 lanes; beyond it the GEMM paths' lane waste falls quickly.
constexpr int64_t kMaxChannels = 4;
constexpr int64_t kLanes = kNr;  // columns per block: one 6x16 microkernel tile width

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t v, int64_t m) { return ceil_div(v, m) * m; }

// Strides of a [N or rows, channels, spatial...] view, spatial three deep
// (0 for a missing leading dim).
struct Strides {
  int64_t offset = 0, n = 0, ch = 0;
  std::array<int64_t, 3> sp{0, 0, 0};
};
inline Strides strides_of(const View& v, int spatial) {
  Strides s;
  s.offset = v.offset;
  s.n = v.strides[0];
  s.ch = v.strides[1];
  for (int i = 0; i < spatial; ++i) s.sp[3 - spatial + i] = v.strides[2 + i];
  return s;
}

// True when the spatial dims of v flatten to one unit-stride index (NCHW
// contiguous within each channel plane), so pixel p of a plane is at +p.
inline bool spatial_flat(const View& v) {
  int64_t expect = 1;
  for (int i = v.rank - 1; i >= 2; --i) {
    if (v.dims[i] != 1 && v.strides[i] != expect) return false;
    expect *= v.dims[i];
  }
  return true;
}

template <DataType T>
inline float load(const void* base, int64_t i) {
  if constexpr (T == DataType::f32) return static_cast<const float*>(base)[i];
  if constexpr (T == DataType::bf16) return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
  if constexpr (T == DataType::f16) return f16_to_float(static_cast<const uint16_t*>(base)[i]);
  return 0.0f;
}

// Storage type of a dtype's elements.
template <DataType T>
struct Elem {
  using type = std::conditional_t<T == DataType::f32, float, uint16_t>;
};

template <OperandRounding R>
inline float round_operand(float v) {
  if constexpr (R == OperandRounding::hf32) return round_to_hf32(v);
  if constexpr (R == OperandRounding::fp16) return round_to_fp16(v);
  return v;
}

// An operand value as the kernels see it: rounded, and with NaN and +-Inf
// read as 0 when OpArgs::zero_nonfinite asks (src/impl/nonfinite/).
template <OperandRounding R>
inline float operand_value(float v, bool zero_nonfinite) {
  const float r = round_operand<R>(v);
  return zero_nonfinite && !std::isfinite(r) ? 0.0f : r;
}

// Calls f.template operator()<T, R>() with dtype and rounding as compile-time
// constants, so the conversion loops carry no switches.
template <class F>
void dispatch(DataType t, OperandRounding r, F&& f) {
  auto with_r = [&]<DataType T>() {
    switch (r) {
      case OperandRounding::none: f.template operator()<T, OperandRounding::none>(); return;
      case OperandRounding::hf32: f.template operator()<T, OperandRounding::hf32>(); return;
      case OperandRounding::fp16: f.template operator()<T, OperandRounding::fp16>(); return;
    }
  };
  switch (t) {
    case DataType::f32: with_r.template operator()<DataType::f32>(); return;
    case DataType::bf16: with_r.template operator()<DataType::bf16>(); return;
    case DataType::f16: with_r.template operator()<DataType::f16>(); return;
    default: return;  // declined at plan time
  }
}

// Stores one fp32 value into an output element, rounded once.
inline void store_one(void* base, DataType dt, int64_t i, float v) {
  switch (dt) {
    case DataType::f32: static_cast<float*>(base)[i] = v; return;
    case DataType::bf16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); return;
    case DataType::f16: static_cast<uint16_t*>(base)[i] = float_to_f16(v); return;
    default: return;  // declined at plan time
  }
}

inline bool is_narrow_float(DataType t) { return t == DataType::f32 || t == DataType::bf16 || t == DataType::f16; }

// The checks both operations share. Sizes are bounded so that planning
// arithmetic cannot overflow on hostile shapes.
inline bool supported(const OpSpec& op, Op want, std::string* why) {
  const Geometry& g = op.geo;
  if (op.op != want) {
    *why = "not this operation";
    return false;
  }
  if (!is_narrow_float(op.a.dtype) || !is_narrow_float(op.b.dtype) || !is_narrow_float(op.dst.dtype)) {
    *why = "8-bit operands or outputs are not handled (fp32/bf16/fp16 only)";
    return false;
  }
  if (g.c > kMaxChannels) {
    *why = "image-side channels per group " + std::to_string(g.c) + " exceed " + std::to_string(kMaxChannels) +
           "; the GEMM paths fill their vectors with channels";
    return false;
  }
  if (reduction_length(op) == 0 || op.a.empty() || op.b.empty() || op.dst.empty() || g.spatial < 1 ||
      g.spatial > 3) {
    *why = "empty extents are left to the zeros and reference paths";
    return false;
  }
  Checked taps(1), image(g.c);
  for (int d = 0; d < g.spatial; ++d) {
    taps = taps * g.ksize[d];
    image = image * (Checked(g.xsize[d]) + g.stride[d]);
  }
  if (!taps.ok() || taps.value() > 1024 || !image.ok() || image.value() > (int64_t{1} << 36)) {
    *why = "kernel taps beyond 1024 or an image beyond 2^36 elements";
    return false;
  }
  return true;
}

// Workspace allowed: the largest input tensor, or 64 MiB, whichever is larger.
inline int64_t workspace_budget(const OpSpec& op) {
  const int64_t a = op.a.elements() * static_cast<int64_t>(size_of(op.a.dtype));
  const int64_t b = op.b.elements() * static_cast<int64_t>(size_of(op.b.dtype));
  return std::max<int64_t>({int64_t{64} << 20, a, b});
}

inline MicroKernel gather_kernel(Isa isa) {
  return isa >= Isa::avx2 ? f32_gemm_6x16_gather_avx2 : f32_gemm_6x16_gather_scalar;
}
inline MicroKernel strided_kernel(Isa isa) {
  return isa >= Isa::avx2 ? f32_gemm_6x16_strided_avx2 : f32_gemm_6x16_strided_scalar;
}

}  // namespace convbwd::detail::small_channels
