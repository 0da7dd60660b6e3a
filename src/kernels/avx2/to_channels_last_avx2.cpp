// AVX2 channels-last conversion (kernels/to_channels_last_kernel.hpp): 8
// channels x 8 pixels per register transpose, converting bf16/fp16 and
// rounding (HF32, fp16) in vector registers with the same bits as
// numeric/float_formats.hpp. Other strides go to the portable version.
#include <immintrin.h>

#include "kernels/avx2/float_formats_avx2.hpp"
#include "kernels/avx2/transpose8_avx2.hpp"
#include "kernels/to_channels_last_kernel.hpp"

namespace convbwd::detail {
namespace {

struct Avx2Lanes {
  using R = __m256;
  static constexpr int64_t W = 8;
  static R zero() { return _mm256_setzero_ps(); }
  template <DataType T>
  static R load(const void* base, int64_t i) { return avx2::load8<T>(base, i); }
  template <DataType T>
  static R load_partial(const void* base, int64_t i, int64_t n) { return avx2::load_partial<T>(base, i, n); }
  template <OperandRounding Rn>
  static R round(R v) { return avx2::round8<Rn>(v); }
  static void transpose(R* r) { avx2::transpose8x8(r); }
  static R even(R a, R b) {
    const __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  // Not vmaskmovps, which AMD cores take slowly: this runs once per 6 pixels
  // of the small-channel band copy.
  static void store_partial(float* p, R v, int64_t n) { avx2::store_partial(p, v, n); }
};

}  // namespace

void avx2::to_channels_last(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t ws,
                           int64_t nc, int64_t nw, float* dst, int64_t pitch) {
  ChannelsLastKernel<Avx2Lanes>::run(src, dt, r, s0, cs, ws, nc, nw, dst, pitch);
}

void avx2::to_channels_last_split(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t nc,
                                  int64_t nw, float* even, float* odd, int64_t pitch) {
  ChannelsLastKernel<Avx2Lanes>::run_split(src, dt, r, s0, cs, nc, nw, even, odd, pitch);
}

}  // namespace convbwd::detail
