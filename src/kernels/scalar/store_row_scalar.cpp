// Portable fp32 -> output dtype row store (see kernels/store_row.hpp).
#include "kernels/tier_kernels.hpp"
#include "kernels/store_row.hpp"
#include "numeric/float_formats.hpp"

namespace convbwd::detail {

void scalar::store_row(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride) {
  switch (dt) {
    case DataType::f32: store_row_f32(src, n, static_cast<float*>(base) + index, stride); return;
    case DataType::bf16: {
      auto* p = static_cast<uint16_t*>(base) + index;
      for (int64_t j = 0; j < n; ++j) p[j * stride] = float_to_bf16(src[j]);
      return;
    }
    case DataType::f16: {
      auto* p = static_cast<uint16_t*>(base) + index;
      for (int64_t j = 0; j < n; ++j) p[j * stride] = float_to_f16(src[j]);
      return;
    }
    default:  // the 8-bit formats (no kernel writes them today)
      for (int64_t j = 0; j < n; ++j) store_from_float(base, index + j * stride, dt, src[j]);
      return;
  }
}

void scalar::store_rows(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt,
                        int64_t index, int64_t row_stride) {
  for (int64_t i = 0; i < rows; ++i) scalar::store_row(src + i * src_pitch, n, base, dt, index + i * row_stride, 1);
}

void scalar::store_columns(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base, DataType dt,
                           int64_t index, int64_t col_stride, int64_t pixel_step) {
  // Pixel by pixel: each pixel's channels are contiguous in src and
  // col_stride apart in the output.
  for (int64_t w = 0; w < n; ++w)
    scalar::store_row(src + w * src_pitch, cols, base, dt, index + w * pixel_step, col_stride);
}

}  // namespace convbwd::detail
