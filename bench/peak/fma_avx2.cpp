// fp32 FMA peak with 256-bit vectors (compiled with -mavx2 -mfma; called only
// when cpu_has_avx2_fma()).
#include <immintrin.h>

#include "chain.hpp"

namespace convbwd::bench {
namespace {

// acc = acc * a + b with a just below 1 converges to b / (1 - a): no overflow
// and no subnormals, which would slow some cores down.
struct Avx2Fma {
  using acc = __m256;
  static acc init(int j) { return _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(j)); }
  static __m256 a() { return _mm256_set1_ps(0.999f); }
  static __m256 b() { return _mm256_set1_ps(0.001f); }
  static acc step(acc c, __m256 x, __m256 y) { return _mm256_fmadd_ps(c, x, y); }
  static acc add(acc x, acc y) { return _mm256_add_ps(x, y); }
  static float first(acc x) { return _mm256_cvtss_f32(x); }
};

bool available() { return cpu_has_avx2_fma(); }
float run(int64_t iterations) { return run_chains<Avx2Fma>(iterations); }

}  // namespace

const PeakKernel& fma_avx2_kernel() {
  static const PeakKernel k{"fp32_fma_avx2", kChains * 8.0 * 2.0, available, run};
  return k;
}

}  // namespace convbwd::bench
