// fp32 FMA and bf16 dot-product peaks with 512-bit vectors (compiled with the
// AVX-512 F/BF16 flags; called only when the CPU and the OS support them).
#include <immintrin.h>

#include "chain.hpp"

namespace convbwd::bench {
namespace {

struct Avx512Fma {
  using acc = __m512;
  static acc init(int j) { return _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(j)); }
  static __m512 a() { return _mm512_set1_ps(0.999f); }
  static __m512 b() { return _mm512_set1_ps(0.001f); }
  static acc step(acc c, __m512 x, __m512 y) { return _mm512_fmadd_ps(c, x, y); }
  static acc add(acc x, acc y) { return _mm512_add_ps(x, y); }
  static float first(acc x) { return _mm512_cvtss_f32(x); }
};

// vdpbf16ps: acc += a[2i] * b[2i] + a[2i+1] * b[2i+1] per fp32 lane, 32 bf16
// pairs per instruction. With a * b = 2^-20 the accumulators grow by 2^-19
// per step and stay far from overflow for any run length used here.
struct Avx512Dpbf16 {
  using acc = __m512;
  static acc init(int j) { return _mm512_set1_ps(static_cast<float>(j)); }
  static __m512bh a() { return _mm512_cvtne2ps_pbh(_mm512_set1_ps(0x1p-10f), _mm512_set1_ps(0x1p-10f)); }
  static __m512bh b() { return a(); }
  static acc step(acc c, __m512bh x, __m512bh y) { return _mm512_dpbf16_ps(c, x, y); }
  static acc add(acc x, acc y) { return _mm512_add_ps(x, y); }
  static float first(acc x) { return _mm512_cvtss_f32(x); }
};

bool fma_available() { return cpu_has_avx512f(); }
float fma_run(int64_t iterations) { return run_chains<Avx512Fma>(iterations); }
bool dp_available() { return cpu_has_avx512bf16(); }
float dp_run(int64_t iterations) { return run_chains<Avx512Dpbf16>(iterations); }

}  // namespace

const PeakKernel& fma_avx512_kernel() {
  static const PeakKernel k{"fp32_fma_avx512", kChains * 16.0 * 2.0, fma_available, fma_run};
  return k;
}

const PeakKernel& dpbf16_avx512_kernel() {
  static const PeakKernel k{"bf16_dot_avx512", kChains * 32.0 * 2.0, dp_available, dp_run};
  return k;
}

}  // namespace convbwd::bench
