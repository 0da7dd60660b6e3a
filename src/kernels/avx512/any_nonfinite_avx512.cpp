// AVX-512 NaN/Inf check (see kernels/any_nonfinite.hpp): the same test, 16
// floats per step, the tail through a zero-padded copy (zero is finite).
#include "kernels/avx512/simd.hpp"

#include "kernels/tier_kernels.hpp"
#include "kernels/avx512/float_formats_avx512.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

// The exponent of NaN and +-Inf is all ones, and only then does adding one
// to it carry into the sign bit.
inline __m512i carry(__m512 v) {
  return _mm512_add_epi32(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7f800000)),
                          _mm512_set1_epi32(0x00800000));
}

}  // namespace

bool any_nonfinite(const float* p, int64_t n) {
  // Two chains, so that the ORs keep up with two loads per cycle.
  __m512i any0 = _mm512_setzero_si512(), any1 = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    any0 = _mm512_or_si512(any0, carry(_mm512_loadu_ps(p + i)));
    any1 = _mm512_or_si512(any1, carry(_mm512_loadu_ps(p + i + 16)));
  }
  for (; i + 16 <= n; i += 16) any0 = _mm512_or_si512(any0, carry(_mm512_loadu_ps(p + i)));
  if (i < n) any1 = _mm512_or_si512(any1, carry(load_partial16<DataType::f32>(p, i, n - i)));
  const __m512i any = _mm512_or_si512(any0, any1);
  return _mm512_test_epi32_mask(any, _mm512_set1_epi32(static_cast<int>(0x80000000u))) != 0;
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
