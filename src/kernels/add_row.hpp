// dst[i] += src[i] for n floats: how the small-channel data gradient adds
// the columns of its GEMM into the image (src/impl/small_channels/). One
// body, compiled with each tier's flags (src/kernels/<isa>/add_row_*), so
// the compiler vectorizes it for that tier's registers: built with the
// library's portable flags it ran 4 floats at a time, half of the task time
// outside the GEMM in the stem's bf16 data gradient. Each sum is one IEEE
// addition whatever the width, so every tier gives the same bits.
#pragma once

#include <cstdint>

namespace convbwd::detail {

using AddRow = void (*)(float* dst, const float* src, int64_t n);

namespace {  // compiled with every tier's flags: one copy per file
inline void add_row_body(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}
}  // namespace

}  // namespace convbwd::detail
