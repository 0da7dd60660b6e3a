// The vector tiers' output row store (StoreRow, kernels/store_row.hpp) for
// the 16-bit output formats, written once over a tier's traits V and
// instantiated by src/kernels/<isa>/store_row_<isa>.cpp; fp32 and the 8-bit
// formats go to the portable store. Include only from those files (unnamed
// namespace: no copy compiled with one tier's flags reaches another's caller).
//
// What V provides: W lanes of fp32 in an R and their W 16-bit results in an
// H; zero(); load(p) and load_partial(p, n) (the first n < W floats, the other lanes
// +0, nothing read past them); transpose(r): r[i] lane j becomes r[j] lane i
// for a W x W block in registers; narrow<T>(v), fp32 to bf16 or fp16 with
// numeric/float_formats.hpp's bits; store(p, h) of W results, and
// store_partial(p, h, n) of the first n (< W), nothing written past them;
// kStoreEveryOther and store_every_other(p, h, n): the first n results at
// p[0], p[2], .., nothing else written (a tier without such a store says
// false, and the kernel stores them element by element).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/store_row.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail {
namespace {

template <class V>
struct StoreRowKernel {
  static constexpr int64_t W = V::W;

  // The first n (<= W) results of h at p[0], p[stride], ..., nothing else
  // written: one store at stride 1, one masked store at stride 2 where the
  // tier has it, else element by element.
  static void store_spaced(uint16_t* p, typename V::H h, int64_t n, int64_t stride) {
    if (stride == 1) {
      if (n == W) V::store(p, h);
      else V::store_partial(p, h, n);
    } else if (stride == 2 && V::kStoreEveryOther) {
      V::store_every_other(p, h, n);
    } else {
      alignas(64) uint16_t lanes[W];
      V::store(lanes, h);
      for (int64_t i = 0; i < n; ++i) p[i * stride] = lanes[i];
    }
  }

  template <DataType T>
  static void narrow_row(const float* src, int64_t n, uint16_t* p, int64_t stride) {
    int64_t j = 0;
    for (; j + W <= n; j += W) store_spaced(p + j * stride, V::template narrow<T>(V::load(src + j)), W, stride);
    if (j == n) return;
    // The tail converted as one vector too (the scalar float_to_f16 per
    // element was 15% of a 28-wide depthwise row's time).
    const int64_t rest = n - j;
    store_spaced(p + j * stride, V::template narrow<T>(V::load_partial(src + j, rest)), rest, stride);
  }

  static void run(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride) {
    switch (dt) {
      case DataType::bf16: narrow_row<DataType::bf16>(src, n, static_cast<uint16_t*>(base) + index, stride); return;
      case DataType::f16: narrow_row<DataType::f16>(src, n, static_cast<uint16_t*>(base) + index, stride); return;
      default: scalar::store_row(src, n, base, dt, index, stride); return;
    }
  }

  // StoreRows: run row by row, in the same call (the call per row was the cost).
  static void run_rows(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt,
                       int64_t index, int64_t row_stride) {
    for (int64_t i = 0; i < rows; ++i) run(src + i * src_pitch, n, base, dt, index + i * row_stride, 1);
  }

  // StoreColumns: W pixels x W channels per register transpose; a partial
  // block loads only its own channels and stores only its own pixels. A
  // stride-2 data gradient's phases store every other pixel: one masked
  // store per channel where the tier has it (pixel by pixel, each pixel's
  // channels through the row store at the channel stride, were 21% of the
  // bf16 3x3 s2 128@56 data gradient).
  template <DataType T>
  static void narrow_columns(const float* src, int64_t src_pitch, int64_t n, int64_t cols, uint16_t* p,
                             int64_t col_stride, int64_t pixel_step) {
    for (int64_t c0 = 0; c0 < cols; c0 += W) {
      const int64_t cn = std::min<int64_t>(W, cols - c0);
      for (int64_t w0 = 0; w0 < n; w0 += W) {
        const int64_t wn = std::min<int64_t>(W, n - w0);
        typename V::R r[W];
        for (int64_t w = 0; w < W; ++w) {
          const float* const row = src + (w0 + w) * src_pitch + c0;
          r[w] = w >= wn ? V::zero() : cn == W ? V::load(row) : V::load_partial(row, cn);
        }
        V::transpose(r);  // r[c] lane w: channel c's pixels
        for (int64_t c = 0; c < cn; ++c)
          store_spaced(p + (c0 + c) * col_stride + w0 * pixel_step, V::template narrow<T>(r[c]), wn, pixel_step);
      }
    }
  }

  static void run_columns(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base, DataType dt,
                          int64_t index, int64_t col_stride, int64_t pixel_step) {
    uint16_t* const p = static_cast<uint16_t*>(base) + index;
    switch (dt) {
      case DataType::bf16: narrow_columns<DataType::bf16>(src, src_pitch, n, cols, p, col_stride, pixel_step); return;
      case DataType::f16: narrow_columns<DataType::f16>(src, src_pitch, n, cols, p, col_stride, pixel_step); return;
      default: scalar::store_columns(src, src_pitch, n, cols, base, dt, index, col_stride, pixel_step); return;
    }
  }
};

}  // namespace
}  // namespace convbwd::detail
