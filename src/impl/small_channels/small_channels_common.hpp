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
#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>

#include "impl/gemm/common.hpp"
#include "kernels/gemm.hpp"
#include "impl/implementation.hpp"
#include "impl/operand_access.hpp"
#include "numeric/float_formats.hpp"
#include "problem/checked.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail::small_channels {

// Most image-side channels per group this path takes. At C = 4 a 3x3 kernel
// still gives 36 columns (3 blocks, 75% useful) where the GEMM paths use 4
// of 16 lanes; beyond it the GEMM paths' lane waste falls quickly.
constexpr int64_t kMaxChannels = 4;


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

// Storage type of a dtype's elements.
template <DataType T>
struct Elem {
  using type = std::conditional_t<T == DataType::f32, float, uint16_t>;
};

// An operand value as the kernels see it: rounded, and with NaN and +-Inf
// read as 0 when OpArgs::zero_nonfinite asks (src/impl/nonfinite/).
template <OperandRounding R>
inline float operand_value(float v, bool zero_nonfinite) {
  const float r = round_operand<R>(v);
  return zero_nonfinite && !std::isfinite(r) ? 0.0f : r;
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


// Rows [2t, 2t + 1] of src ([len][width] fp32, exact widenings of bf16: the
// bf16 bits are the high halves) as the bf16 pairs dst[t][width], low half
// from row 2t; after an odd len the last pair's high half is zero. Both
// paths make their bf16 operands in fp32 first (the layouts' index walks
// and the NaN/Inf handling are fp32's) and then repack them for the pair
// kernels (kernels/gemm.hpp).
inline void pack_row_pairs(const float* src, int64_t len, int64_t width, uint32_t* dst) {
  const int64_t full = len / 2;
  for (int64_t t = 0; t < full; ++t)
    for (int64_t j = 0; j < width; ++j)
      dst[t * width + j] = std::bit_cast<uint32_t>(src[2 * t * width + j]) >> 16 |
                           (std::bit_cast<uint32_t>(src[(2 * t + 1) * width + j]) & 0xffff0000u);
  if (len % 2)
    for (int64_t j = 0; j < width; ++j) dst[full * width + j] = std::bit_cast<uint32_t>(src[2 * full * width + j]) >> 16;
}

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
  // The output's pixels too: a padding of 2^62 on a one-pixel image makes
  // 2^63 - 1 of them, and rounding that count up to a tile overflowed (a
  // fuzz finding).
  Checked taps(1), image(g.c), out(1);
  for (int d = 0; d < g.spatial; ++d) {
    taps = taps * g.ksize[d];
    image = image * (Checked(g.xsize[d]) + g.stride[d]);
    out = out * g.ysize[d];
  }
  if (!taps.ok() || taps.value() > 1024 || !image.ok() || image.value() > (int64_t{1} << 36) ||
      !out.at_most(int64_t{1} << 36)) {
    *why = "kernel taps beyond 1024, or an image or output beyond 2^36 elements";
    return false;
  }
  // Paddings and dilations near 2^63 that cancel leave every size small,
  // but the tap positions r*d - p and the bounds x - (r*d - p) the column
  // builders form overflowed int64 (a fuzz finding): the shared index bound.
  return tap_indices_fit(g, why);
}

}  // namespace convbwd::detail::small_channels
