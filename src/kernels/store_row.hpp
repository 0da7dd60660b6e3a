// The output row store every fast path ends with: n fp32 values rounded once
// into an output's dtype (numeric/float_formats.hpp) at base[index],
// base[index + stride], ... One version per tier, the vector ones from one
// body at their width (store_row_kernel.hpp: eight or sixteen conversions
// per instruction, the same bits); kernel_store_row_test holds them to each
// other.
#pragma once

#include <cstdint>
#include <cstring>

#include "convbwd/convbwd.hpp"

namespace convbwd::detail {

namespace {  // compiled with every tier's flags: one copy per file
// fp32 rows need no rounding: a copy, inline in every caller (a call per
// 16-float row made the planar 1x1 data gradient 1.3x slower).
inline void store_row_f32(const float* src, int64_t n, float* p, int64_t stride) {
  if (stride == 1) {
    std::memcpy(p, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t j = 0; j < n; ++j) p[j * stride] = src[j];
}
}  // namespace

using StoreRow = void (*)(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride);
// `rows` contiguous rows of n values at once: row i of src (at src + i *
// src_pitch) goes to base[index + i * row_stride + j], rounded once. The
// channel runs of a transposed output tile in a planar (NCHW) output: one
// call instead of one StoreRow call per channel, whose overhead made that
// store slower than storing each element apart (gather_conv.cpp).
using StoreRows = void (*)(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt,
                           int64_t index, int64_t row_stride);
// A channels-last block stored planar: element (w, c) of src, at src + w *
// src_pitch + c, goes to base[index + c * col_stride + w * pixel_step],
// rounded once, for pixels w < n and channels c < cols; nothing between them
// is written (with pixel_step 2, another thread may be storing the other
// phase's pixels there). The output tiles of the forward and data-gradient
// GEMM (pixels x channels) into an NCHW output, pixel_step 2 for the phases
// of a stride-2 data gradient. The vector tiers transpose W x W blocks in
// registers and round each channel's W pixels with one conversion; through
// an fp32 transposed copy and then the row store, the two passes were 15% of
// WaveNet's bf16 data gradient.
using StoreColumns = void (*)(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base, DataType dt,
                              int64_t index, int64_t col_stride, int64_t pixel_step);

}  // namespace convbwd::detail
