// AVX-512 fp32 microkernels (see kernels/gemm.hpp), written with intrinsics
// so that the test build can compile them against SIMDe (simd.hpp).
//
// Why 8x32: 8 rows x 2 zmm columns = 16 accumulators, 2 B vectors and one
// broadcast at a time, 19 of the 32 zmm registers; each step issues 16 FMAs
// against 2 vector loads and 8 broadcasts. Measured on one core of an AMD
// Zen 5 (thread CPU time, operands in L1, bench/micro/microkernel_cache and
// a standalone sweep of the same loop): 6x16 190, 12x16 215, 14x16 217,
// 6x32 247, 8x32 255, 12x32 256, 14x32 256, 8x48 249, 6x64 74 GFLOP/s (the
// last spills). One zmm of columns (x16) leaves the loads per FMA above one
// and loses ~15%; past 8 rows of two vectors nothing is gained, while every
// extra row is a wasted tail on 7x7 images and on channel counts that are
// multiples of 8, and the gather kernel's row pointers outgrow the 16
// general registers (12 rows spilled them).
//
// The products and their order are those of the scalar kernels: each
// accumulator adds its products run by run, step by step, one fused
// multiply-add each. (The scalar kernels round the product and the sum
// apart, so the tiers agree within the tolerance, not bit for bit.)
#include "kernels/avx512/simd.hpp"

#include <cassert>
#include <cstdint>

#include "kernels/gemm.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

template <int MR, int NV, bool Gather>
void kernel(const MicroArgs& p) {
  static_assert(MR <= kMaxMr && NV * 16 <= kMaxNr);
  constexpr int NR = NV * 16;
  __m512 c[MR][NV];
  float* const acc = p.acc;
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) c[i][j] = p.accumulate ? _mm512_loadu_ps(acc + i * NR + j * 16) : _mm512_setzero_ps();
  for (int64_t r = 0; r < p.runs; ++r) {
    const int64_t len = p.len[r];
    if (len <= 0) continue;
    const float* b = p.b + p.b_off[r];
    if constexpr (Gather) {
      // The gather B panel is dense (bs == nr).
      assert(p.bs == NR);
      const int64_t o = p.a_off[r];
      const float* a[MR];
      for (int i = 0; i < MR; ++i) a[i] = p.a[i] + o;
      for (int64_t t = 0; t < len; ++t, b += NR) {
        __m512 bv[NV];
        for (int j = 0; j < NV; ++j) bv[j] = _mm512_loadu_ps(b + j * 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const __m512 av = _mm512_set1_ps(a[i][t]);
          for (int j = 0; j < NV; ++j) c[i][j] = _mm512_fmadd_ps(av, bv[j], c[i][j]);
        }
      }
    } else {
      const float* a = p.a[0] + p.a_off[r];
      const int64_t as = p.as, bs = p.bs;
      for (int64_t t = 0; t < len; ++t, b += bs, a += as) {
        __m512 bv[NV];
        for (int j = 0; j < NV; ++j) bv[j] = _mm512_loadu_ps(b + j * 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const __m512 av = _mm512_set1_ps(a[i]);
          for (int j = 0; j < NV; ++j) c[i][j] = _mm512_fmadd_ps(av, bv[j], c[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(acc + i * NR + j * 16, c[i][j]);
}

}  // namespace

void f32_gemm_8x32_gather(const MicroArgs& p) { kernel<8, 2, true>(p); }
void f32_gemm_8x32_strided(const MicroArgs& p) { kernel<8, 2, false>(p); }
// The narrow family (KernelConfig::gemm_narrow), for groups of at most 16
// columns: 14 rows, the fastest one-vector shape in the table above, and a
// divisor of the 14-, 28- and 56-pixel rows of the usual CNN stages.
void f32_gemm_14x16_gather(const MicroArgs& p) { kernel<14, 1, true>(p); }
void f32_gemm_14x16_strided(const MicroArgs& p) { kernel<14, 1, false>(p); }

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
