// AVX-512 channels-last conversion (see kernels/gemm.hpp): 16 channels x
// 16 pixels per register transpose, converting bf16/fp16 and rounding
// (HF32, fp16) in registers with the same bits as numeric/float_formats.hpp.
// Other strides go to the portable version.
#include "kernels/avx512/simd.hpp"

#include <algorithm>

#include "kernels/tier_kernels.hpp"
#include "kernels/gemm.hpp"
#include "kernels/avx512/float_formats_avx512.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

template <DataType T, OperandRounding R>
void convert(const void* src, int64_t s0, int64_t cs, int64_t ws, int64_t nc, int64_t nw, float* dst, int64_t pitch) {
  if (ws == 1) {
    // Groups of up to 16 channels x 16 pixels; a partial group (the 6-channel
    // blocks of the weight gradient's dy copy, or a channel tail) loads only
    // its own rows and stores only its own lanes, and a row's last 1 to 15
    // pixels load as a partial vector and store only their own pixels.
    for (int64_t c0 = 0; c0 < nc; c0 += 16) {
      const int64_t cn = std::min<int64_t>(16, nc - c0);
      const int64_t s = s0 + c0 * cs;
      for (int64_t w0 = 0; w0 < nw; w0 += 16) {
        const int64_t wn = std::min<int64_t>(16, nw - w0);
        __m512 r[16];
        for (int c = 0; c < 16; ++c) {
          if (c >= cn)
            r[c] = _mm512_setzero_ps();
          else if (wn == 16)
            r[c] = round16<R>(load16<T>(src, s + c * cs + w0));
          else
            r[c] = round16<R>(load_partial16<T>(src, s + c * cs + w0, wn));
        }
        transpose16x16(r);  // r[w] lane c: pixel w's channels
        float* o = dst + w0 * pitch + c0;
        if (cn == 16)
          for (int w = 0; w < wn; ++w) _mm512_storeu_ps(o + w * pitch, r[w]);
        else
          for (int w = 0; w < wn; ++w) store_partial16(o + w * pitch, r[w], cn);
      }
    }
    return;
  }
  if (cs == 1) {
    // Rows of nc contiguous elements, a tail of 1 to 15 partial.
    const int64_t nc16 = nc / 16 * 16;
    for (int64_t w = 0; w < nw; ++w) {
      for (int64_t c0 = 0; c0 < nc16; c0 += 16)
        _mm512_storeu_ps(dst + w * pitch + c0, round16<R>(load16<T>(src, s0 + w * ws + c0)));
      if (nc16 < nc)
        store_partial16(dst + w * pitch + nc16, round16<R>(load_partial16<T>(src, s0 + w * ws + nc16, nc - nc16)),
                        nc - nc16);
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

void to_channels_last(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t ws, int64_t nc,
                      int64_t nw, float* dst, int64_t pitch) {
  switch (dt) {
    case DataType::f32: with_rounding<DataType::f32>(r, src, s0, cs, ws, nc, nw, dst, pitch); return;
    case DataType::bf16: with_rounding<DataType::bf16>(r, src, s0, cs, ws, nc, nw, dst, pitch); return;
    case DataType::f16: with_rounding<DataType::f16>(r, src, s0, cs, ws, nc, nw, dst, pitch); return;
    default: return;  // 8-bit formats are declined at plan time
  }
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
