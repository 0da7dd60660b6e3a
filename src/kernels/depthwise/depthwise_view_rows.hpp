// The row loads, stores and prefetches both depthwise kernel families
// (depthwise_kernel.hpp, depthwise_cl_kernel.hpp) make through a DwView, over
// the tier's vector type V: contiguous rows (and single elements) through V's
// vector loaders, strided ones through the portable helpers; and the
// contiguous row load of the vector types themselves. Include only from those
// headers and the tiers' vector types (depthwise_simd_<isa>.hpp); in an
// unnamed namespace, as they are (compiled with every tier's flags).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/any_nonfinite.hpp"
#include "kernels/depthwise/depthwise_plan.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail {
namespace {

// n contiguous elements base[off..off+n) of dtype dt as fp32, rounded: the
// load_row of the vector types (VecAvx2, VecAvx512). Whole vectors, then the
// tail as one partial vector (V::from_partial and V::store_partial touch
// nothing past the row); 8-bit dtypes through the portable helper.
template <class V>
inline void dw_vector_load_row(const void* base, DataType dt, int64_t off, int64_t n, OperandRounding rnd,
                               float* out) {
  if (dt != DataType::f32 && dt != DataType::f16 && dt != DataType::bf16) {
    dw_load_row_generic(base, dt, off, 1, n, rnd, out);
    return;
  }
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(out + i, V::round(V::from(base, dt, off + i), rnd));
  if (i < n) V::store_partial(out + i, V::round(V::from_partial(base, dt, off + i, n - i), rnd), n - i);
}

// The channel-blocked kernels' row helpers of the vector types, written once
// over V (VecAvx2, VecAvx512: W lanes, zero(), store(), load(),
// from(base, dt, i), from_partial(base, dt, i, n), round(v, rnd),
// transpose(r) of a W x W block in registers, stream(p, v), a
// non-temporal store of W floats at a W*4-byte-aligned p, any_nonfinite(p,
// n), max_magnitude(acc, v), the lane-wise larger of acc and |v| compared
// as unsigned bit patterns, and beyond_finite(acc), whether such a
// magnitude is NaN or +-Inf in any lane).

// Whether the channels-last block a row loader wrote (n pixels rounded up
// to W, of W lanes) holds a NaN or +-Inf, if `check` asks: the answer of
// the loaders that do not test their registers (dw_load_w_rows does).
template <class V>
inline bool dw_rows_block_nonfinite(const float* out, int64_t n, bool check) {
  return check && V::any_nonfinite(out, dw_round_up(n, V::W) * V::W);
}

// Elements [0, n) of up to W contiguous rows (row c at element rows[c] of
// base, c < nv), channels last: out[j*W + c] for j < n rounded up to W,
// rounded as rnd asks; rows c >= nv and elements past n are +0. Straight
// from the rows into registers: through a row copy and a transpose of the
// copy, packing a short row took about 4 times the instructions.
//
// W rows (a full block of channels) go through dw_load_w_rows. Why:
// in the one loop below, with a branch per row (a missing row, a pixel
// tail) and the rounding chosen per vector, GCC kept the W vectors in
// memory and left the loop rolled. Unrolled, with the rounding a constant,
// 1 thread of a Zen 3, alternated: the fp16 depthwise 96@56 N4 gradInput
// took 1/1.32 of the time, the fp32 one 1/1.06; with the pixel tail
// unrolled too, dw s2 192@28's gradInput (rows of 14 and 28 pixels) a
// further 1/1.27 (fp32) and 1/1.12 (fp16).
//
// Returns whether a value it wrote is NaN or +-Inf, if `check` asks. The
// full blocks test the registers they load (the largest magnitude so far,
// V::max_magnitude), which costs two operations a vector where a scan of
// the written plane afterwards (V::any_nonfinite) read it all again: that
// scan was 8-10% of a depthwise layer on one thread. The other rows scan
// what they wrote.
template <class V, DataType T, OperandRounding R>
inline bool dw_load_w_rows(const void* base, const int64_t* rows, int64_t n, float* out) {
  constexpr int64_t W = V::W;
  typename V::R mag = V::zero();
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    typename V::R r[W];
    _Pragma("GCC unroll 16") for (int c = 0; c < W; ++c) {
      r[c] = V::round(V::from(base, T, rows[c] + j), R);
      mag = V::max_magnitude(mag, r[c]);
    }
    V::transpose(r);
    _Pragma("GCC unroll 16") for (int i = 0; i < W; ++i) V::store(out + (j + i) * W, r[i]);
  }
  if (j < n) {  // the pixel tail: partial loads, +0 past it
    const int64_t cnt = n - j;
    typename V::R r[W];
    _Pragma("GCC unroll 16") for (int c = 0; c < W; ++c) {
      r[c] = V::round(V::from_partial(base, T, rows[c] + j, cnt), R);
      mag = V::max_magnitude(mag, r[c]);
    }
    V::transpose(r);
    _Pragma("GCC unroll 16") for (int i = 0; i < W; ++i) V::store(out + (j + i) * W, r[i]);
  }
  return V::beyond_finite(mag);
}

template <class V, DataType T>
inline bool dw_vector_load_rows_transposed_t(const void* base, const int64_t* rows, int64_t nv, int64_t n,
                                             OperandRounding rnd, float* out, bool check) {
  constexpr int64_t W = V::W;
  if (nv == W) {
    bool found = false;
    switch (rnd) {
      case OperandRounding::none: found = dw_load_w_rows<V, T, OperandRounding::none>(base, rows, n, out); break;
      case OperandRounding::hf32: found = dw_load_w_rows<V, T, OperandRounding::hf32>(base, rows, n, out); break;
      case OperandRounding::fp16: found = dw_load_w_rows<V, T, OperandRounding::fp16>(base, rows, n, out); break;
    }
    return check && found;
  }
  for (int64_t j = 0; j < n; j += W) {
    const int64_t cnt = std::min<int64_t>(W, n - j);
    typename V::R r[W];
    for (int c = 0; c < W; ++c) {
      if (c >= nv)
        r[c] = V::zero();
      else if (cnt == W)
        r[c] = V::round(V::from(base, T, rows[c] + j), rnd);
      else
        r[c] = V::round(V::from_partial(base, T, rows[c] + j, cnt), rnd);
    }
    V::transpose(r);
    for (int i = 0; i < W; ++i) V::store(out + (j + i) * W, r[i]);
  }
  return dw_rows_block_nonfinite<V>(out, n, check);
}
template <class V>
inline bool dw_vector_load_rows_transposed(const void* base, DataType dt, const int64_t* rows, int64_t nv, int64_t n,
                                           OperandRounding rnd, float* out, bool check) {
  switch (dt) {
    case DataType::f32: return dw_vector_load_rows_transposed_t<V, DataType::f32>(base, rows, nv, n, rnd, out, check);
    case DataType::f16: return dw_vector_load_rows_transposed_t<V, DataType::f16>(base, rows, nv, n, rnd, out, check);
    case DataType::bf16: return dw_vector_load_rows_transposed_t<V, DataType::bf16>(base, rows, nv, n, rnd, out, check);
    default:
      dw_load_rows_transposed_generic(base, dt, rows, 1, nv, n, rnd, V::W, out);
      return dw_rows_block_nonfinite<V>(out, n, check);
  }
}

// out[j*os + i] = in[i*is + j] for i, j < W.
template <class V>
inline void dw_vector_transpose_block(const float* in, int64_t is, float* out, int64_t os) {
  typename V::R r[V::W];
  for (int i = 0; i < V::W; ++i) r[i] = V::load(in + i * is);
  V::transpose(r);
  for (int j = 0; j < V::W; ++j) V::store(out + j * os, r[j]);
}

// out[0..n) = in[0..n), whole 64-byte lines of out with non-temporal stores
// and the partial lines at either end with ordinary ones (a line another
// task also writes is never streamed).
template <class V>
inline void dw_vector_stream_row(const float* in, int64_t n, float* out) {
  const auto addr = reinterpret_cast<uintptr_t>(out);
  if (addr % 4 != 0) {
    std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const int64_t mis = static_cast<int64_t>(addr % 64 / 4);
  const int64_t head = std::min<int64_t>(n, mis ? 16 - mis : 0);
  int64_t i = 0;
  for (; i < head; ++i) out[i] = in[i];
  for (; i + 16 <= n; i += 16)
    for (int64_t k = 0; k < 16; k += V::W) V::stream(out + i + k, V::load(in + i + k));
  for (; i < n; ++i) out[i] = in[i];
}

template <class V>
struct DwViewRows {
  // Elements [0, count) of the row at element off of a view into out as
  // fp32, rounded, NaN and +-Inf stored as 0 if the view asks.
  static void load_row(const void* base, const DwView& v, int64_t off, int64_t count, OperandRounding rnd,
                       float* out) {
    if (count <= 0) return;
    if (v.sw == 1 || count == 1)
      V::load_row(base, v.dtype, off, count, rnd, out);
    else
      dw_load_row_generic(base, v.dtype, off, v.sw, count, rnd, out);
    if (v.zero_nonfinite) zero_nonfinite(out, count);
  }

  // in[0, count) rounded once into the view's dtype, at element off.
  static void store_row(const float* in, int64_t count, void* base, const DwView& v, int64_t off) {
    if (v.sw == 1 || count == 1)
      V::store_row(in, count, base, v.dtype, off);
    else
      scalar::store_row(in, count, base, v.dtype, off, v.sw);
  }

  // Asks for the rows of channels [ch0, ch0+nch) of image n (dd_ x hh rows
  // of ww elements) to be brought into L2 ahead of use: a task's planes are
  // a few KiB per channel, too short for the hardware prefetcher to ramp up
  // (and it does not cross the pause between tasks), so without this every
  // task starts with its loads (and its output's write-allocate misses)
  // waiting on DRAM. Strided rows are left alone.
  static void prefetch(const void* base, const DwView& v, int64_t n, int64_t ch0, int64_t nch, int64_t dd_,
                       int64_t hh, int64_t ww) {
    if (v.sw != 1) return;
    const int64_t es = static_cast<int64_t>(size_of(v.dtype));
    const auto* b = static_cast<const char*>(base);
    for (int64_t c = 0; c < nch; ++c)
      for (int64_t d = 0; d < dd_; ++d)
        for (int64_t h = 0; h < hh; ++h) {
          const char* r = b + (v.off + n * v.sn + (ch0 + c) * v.sc + d * v.sd + h * v.sh) * es;
          for (int64_t i = 0; i < ww * es; i += 64) V::prefetch(r + i);
          V::prefetch(r + ww * es - 1);
        }
  }
};

}  // namespace
}  // namespace convbwd::detail
