// The row loads, stores and prefetches both depthwise kernel families
// (depthwise_kernel.hpp, depthwise_cl_kernel.hpp) make through a DwView, over
// the tier's vector type V: contiguous rows (and single elements) through V's
// vector loaders, strided ones through the portable helpers; and the
// contiguous row load of the vector types themselves. Include only from those
// headers and the tiers' vector types (depthwise_simd_<isa>.hpp); in an
// unnamed namespace, as they are (compiled with every tier's flags).
#pragma once

#include <cstdint>

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
