// AVX2+FMA 6x16 microkernels (see impl/gemm/microkernel.hpp). Compiled with
// -mavx2 -mfma; called only after runtime detection chose AVX2 at plan time.
#include <immintrin.h>

#include "impl/gemm/microkernel.hpp"

namespace convbwd::detail {
namespace {

// One reduction step: two B vectors against six broadcast A values.
#define CONVBWD_STEP(A0, A1, A2, A3, A4, A5, B)      \
  do {                                               \
    const __m256 b0 = _mm256_loadu_ps(B);            \
    const __m256 b1 = _mm256_loadu_ps((B) + 8);      \
    __m256 av = _mm256_broadcast_ss(A0);             \
    c00 = _mm256_fmadd_ps(av, b0, c00);              \
    c01 = _mm256_fmadd_ps(av, b1, c01);              \
    av = _mm256_broadcast_ss(A1);                    \
    c10 = _mm256_fmadd_ps(av, b0, c10);              \
    c11 = _mm256_fmadd_ps(av, b1, c11);              \
    av = _mm256_broadcast_ss(A2);                    \
    c20 = _mm256_fmadd_ps(av, b0, c20);              \
    c21 = _mm256_fmadd_ps(av, b1, c21);              \
    av = _mm256_broadcast_ss(A3);                    \
    c30 = _mm256_fmadd_ps(av, b0, c30);              \
    c31 = _mm256_fmadd_ps(av, b1, c31);              \
    av = _mm256_broadcast_ss(A4);                    \
    c40 = _mm256_fmadd_ps(av, b0, c40);              \
    c41 = _mm256_fmadd_ps(av, b1, c41);              \
    av = _mm256_broadcast_ss(A5);                    \
    c50 = _mm256_fmadd_ps(av, b0, c50);              \
    c51 = _mm256_fmadd_ps(av, b1, c51);              \
  } while (0)

template <bool Gather>
void kernel(const MicroArgs& p) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  float* const acc = p.acc;
  if (p.accumulate) {
    c00 = _mm256_loadu_ps(acc + 0), c01 = _mm256_loadu_ps(acc + 8);
    c10 = _mm256_loadu_ps(acc + 16), c11 = _mm256_loadu_ps(acc + 24);
    c20 = _mm256_loadu_ps(acc + 32), c21 = _mm256_loadu_ps(acc + 40);
    c30 = _mm256_loadu_ps(acc + 48), c31 = _mm256_loadu_ps(acc + 56);
    c40 = _mm256_loadu_ps(acc + 64), c41 = _mm256_loadu_ps(acc + 72);
    c50 = _mm256_loadu_ps(acc + 80), c51 = _mm256_loadu_ps(acc + 88);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  }
  const int64_t bs = p.bs;
  for (int64_t r = 0; r < p.runs; ++r) {
    const float* b = p.b + p.b_off[r];
    const int64_t len = p.len[r];
    if (Gather) {
      const int64_t o = p.a_off[r];
      const float* a0 = p.a[0] + o;
      const float* a1 = p.a[1] + o;
      const float* a2 = p.a[2] + o;
      const float* a3 = p.a[3] + o;
      const float* a4 = p.a[4] + o;
      const float* a5 = p.a[5] + o;
      int64_t t = 0;
      for (; t + 2 <= len; t += 2, b += 2 * bs) {
        CONVBWD_STEP(a0 + t, a1 + t, a2 + t, a3 + t, a4 + t, a5 + t, b);
        CONVBWD_STEP(a0 + t + 1, a1 + t + 1, a2 + t + 1, a3 + t + 1, a4 + t + 1, a5 + t + 1, b + bs);
      }
      if (t < len) CONVBWD_STEP(a0 + t, a1 + t, a2 + t, a3 + t, a4 + t, a5 + t, b);
    } else {
      const float* a = p.a[0] + p.a_off[r];
      const int64_t as = p.as;
      for (int64_t t = 0; t < len; ++t, a += as, b += bs) CONVBWD_STEP(a, a + 1, a + 2, a + 3, a + 4, a + 5, b);
    }
  }
  _mm256_storeu_ps(acc + 0, c00), _mm256_storeu_ps(acc + 8, c01);
  _mm256_storeu_ps(acc + 16, c10), _mm256_storeu_ps(acc + 24, c11);
  _mm256_storeu_ps(acc + 32, c20), _mm256_storeu_ps(acc + 40, c21);
  _mm256_storeu_ps(acc + 48, c30), _mm256_storeu_ps(acc + 56, c31);
  _mm256_storeu_ps(acc + 64, c40), _mm256_storeu_ps(acc + 72, c41);
  _mm256_storeu_ps(acc + 80, c50), _mm256_storeu_ps(acc + 88, c51);
}

#undef CONVBWD_STEP

}  // namespace

void f32_gemm_6x16_gather_avx2(const MicroArgs& p) { kernel<true>(p); }
void f32_gemm_6x16_strided_avx2(const MicroArgs& p) { kernel<false>(p); }

}  // namespace convbwd::detail
