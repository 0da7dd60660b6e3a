// The vector tiers' output row store (StoreRow, kernels/store_row.hpp) for
// the 16-bit output formats, written once over a tier's traits V and
// instantiated by src/kernels/<isa>/store_row_<isa>.cpp; fp32 and the 8-bit
// formats go to the portable store. Include only from those files (unnamed
// namespace: no copy compiled with one tier's flags reaches another's caller).
//
// What V provides: W lanes of fp32 in an R and their W 16-bit results in an
// H; load(p) and load_partial(p, n) (the first n < W floats, the other lanes
// +0, nothing read past them); narrow<T>(v), fp32 to bf16 or fp16 with
// numeric/float_formats.hpp's bits; store(p, h) of W results, and
// store_partial(p, h, n) of the first n (< W), nothing written past them.
#pragma once

#include <cstdint>

#include "kernels/store_row.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail {
namespace {

template <class V>
struct StoreRowKernel {
  static constexpr int64_t W = V::W;

  template <DataType T>
  static void narrow_row(const float* src, int64_t n, uint16_t* p, int64_t stride) {
    alignas(64) uint16_t lanes[W];
    int64_t j = 0;
    for (; j + W <= n; j += W) {
      const auto h = V::template narrow<T>(V::load(src + j));
      if (stride == 1) {
        V::store(p + j, h);
      } else {
        V::store(lanes, h);
        for (int64_t i = 0; i < W; ++i) p[(j + i) * stride] = lanes[i];
      }
    }
    if (j == n) return;
    // The tail converted as one vector too (the scalar float_to_f16 per
    // element was 15% of a 28-wide depthwise row's time).
    const int64_t rest = n - j;
    const auto h = V::template narrow<T>(V::load_partial(src + j, rest));
    if (stride == 1) {
      V::store_partial(p + j, h, rest);
      return;
    }
    V::store(lanes, h);
    for (int64_t i = 0; i < rest; ++i) p[(j + i) * stride] = lanes[i];
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
};

}  // namespace
}  // namespace convbwd::detail
