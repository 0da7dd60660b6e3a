// AVX-512 channels-last conversion (kernels/to_channels_last_kernel.hpp): 16
// channels x 16 pixels per register transpose, converting bf16/fp16 and
// rounding (HF32, fp16) in registers with the same bits as
// numeric/float_formats.hpp. Other strides go to the portable version.
#include "kernels/avx512/simd.hpp"

#include "kernels/avx512/float_formats_avx512.hpp"
#include "kernels/to_channels_last_kernel.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

struct Avx512Lanes {
  using R = __m512;
  static constexpr int64_t W = 16;
  static R zero() { return _mm512_setzero_ps(); }
  template <DataType T>
  static R load(const void* base, int64_t i) { return load16<T>(base, i); }
  template <DataType T>
  static R load_partial(const void* base, int64_t i, int64_t n) { return load_partial16<T>(base, i, n); }
  template <OperandRounding Rn>
  static R round(R v) { return round16<Rn>(v); }
  [[gnu::always_inline]] static void transpose(R* r) { transpose16x16(r); }  // as in VecAvx512
  static R even(R a, R b) {
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(a, idx, b);
  }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static void store_partial(float* p, R v, int64_t n) { store_partial16(p, v, n); }
};

}  // namespace

void to_channels_last(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t ws, int64_t nc,
                      int64_t nw, float* dst, int64_t pitch) {
  ChannelsLastKernel<Avx512Lanes>::run(src, dt, r, s0, cs, ws, nc, nw, dst, pitch);
}

void to_channels_last_split(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t nc,
                            int64_t nw, float* even, float* odd, int64_t pitch) {
  ChannelsLastKernel<Avx512Lanes>::run_split(src, dt, r, s0, cs, nc, nw, even, odd, pitch);
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
