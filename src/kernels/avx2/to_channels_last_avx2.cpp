// AVX2 channels-last conversion (see kernels/gemm.hpp): 8 channels x
// 8 pixels per register transpose, converting bf16/fp16 and rounding
// (HF32, fp16) in vector registers with the same bits as
// numeric/float_formats.hpp. Tails go to the scalar version.
#include <immintrin.h>

#include <algorithm>

#include "kernels/tier_kernels.hpp"
#include "kernels/gemm.hpp"
#include "kernels/avx2/float_formats_avx2.hpp"
#include "kernels/avx2/transpose8_avx2.hpp"

namespace convbwd::detail {
namespace {

template <DataType T>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (T == DataType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    if constexpr (T == DataType::bf16)
      return avx2::bf16x8_to_float(h);
    else
      return avx2::f16x8_to_float(h);
  }
}

template <OperandRounding R>
inline __m256 round8(__m256 v) {
  if constexpr (R == OperandRounding::hf32)
    return avx2::round_to_hf32x8(v);
  else if constexpr (R == OperandRounding::fp16)
    return avx2::round_to_fp16x8(v);
  else
    return v;
}

template <DataType T, OperandRounding R>
void convert(const void* src, int64_t s0, int64_t cs, int64_t ws, int64_t nc, int64_t nw, float* dst, int64_t pitch) {
  const int64_t nc8 = nc / 8 * 8;
  if (ws == 1) {
    // Groups of up to 8 channels x 8 pixels; a partial group (the 6-channel
    // blocks of the weight gradient's dy copy, or a channel tail) loads only
    // its own rows and stores only its own lanes, and a row's last 1 to 7
    // pixels load as a partial vector and store only their own pixels
    // (rows of 7 pixels, the 7x7 layers, went wholly to the scalar copy).
    for (int64_t c0 = 0; c0 < nc; c0 += 8) {
      const int64_t cn = std::min<int64_t>(8, nc - c0);
      const int64_t s = s0 + c0 * cs;
      for (int64_t w0 = 0; w0 < nw; w0 += 8) {
        const int64_t wn = std::min<int64_t>(8, nw - w0);
        __m256 r[8];
        for (int c = 0; c < 8; ++c) {
          if (c >= cn)
            r[c] = _mm256_setzero_ps();
          else if (wn == 8)
            r[c] = round8<R>(load8<T>(src, s + c * cs + w0));
          else
            r[c] = round8<R>(avx2::load_partial<T>(src, s + c * cs + w0, wn));
        }
        avx2::transpose8x8(r);  // r[w] lane c: pixel w's channels
        float* o = dst + w0 * pitch + c0;
        if (cn == 8)
          for (int w = 0; w < wn; ++w) _mm256_storeu_ps(o + w * pitch, r[w]);
        else
          for (int w = 0; w < wn; ++w) avx2::store_partial(o + w * pitch, r[w], cn);
      }
    }
    return;
  }
  if (cs == 1) {
    // Rows of nc contiguous elements; a tail of 1 to 7 (the 6-pixel rows of
    // the small-channel band copy) through a masked load and a partial store.
    for (int64_t w = 0; w < nw; ++w) {
      for (int64_t c0 = 0; c0 < nc8; c0 += 8)
        _mm256_storeu_ps(dst + w * pitch + c0, round8<R>(load8<T>(src, s0 + w * ws + c0)));
      // store_partial, not vmaskmovps: this row store runs once per 6
      // pixels of the small-channel band copy.
      if (nc8 < nc)
        avx2::store_partial(dst + w * pitch + nc8,
                            round8<R>(avx2::load_partial<T>(src, s0 + w * ws + nc8, nc - nc8)), nc - nc8);
    }
    return;
  }
  scalar::to_channels_last(src, T, R, s0, cs, ws, nc, nw, dst, pitch);
}

template <DataType T>
void with_rounding(OperandRounding r, const void* src, int64_t s0, int64_t cs, int64_t ws, int64_t nc, int64_t nw,
                   float* dst, int64_t pitch) {
  switch (r) {
    case OperandRounding::none: convert<T, OperandRounding::none>(src, s0, cs, ws, nc, nw, dst, pitch); return;
    case OperandRounding::hf32: convert<T, OperandRounding::hf32>(src, s0, cs, ws, nc, nw, dst, pitch); return;
    case OperandRounding::fp16: convert<T, OperandRounding::fp16>(src, s0, cs, ws, nc, nw, dst, pitch); return;
  }
}

}  // namespace

void avx2::to_channels_last(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t ws,
                           int64_t nc, int64_t nw, float* dst, int64_t pitch) {
  switch (dt) {
    case DataType::f32: with_rounding<DataType::f32>(r, src, s0, cs, ws, nc, nw, dst, pitch); return;
    case DataType::bf16: with_rounding<DataType::bf16>(r, src, s0, cs, ws, nc, nw, dst, pitch); return;
    case DataType::f16: with_rounding<DataType::f16>(r, src, s0, cs, ws, nc, nw, dst, pitch); return;
    default: return;  // 8-bit formats are declined at plan time
  }
}

}  // namespace convbwd::detail
