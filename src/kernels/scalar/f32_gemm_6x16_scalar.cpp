// Portable 6x16 microkernels (see kernels/gemm.hpp): plain loops the
// compiler may vectorize for the baseline ISA. The CPU-independent path of
// CONVBWD_ISA=scalar; same contract and summation order as the AVX2 kernels
// (each accumulator sums its products run by run, step by step).
#include "kernels/tier_kernels.hpp"
#include "kernels/gemm.hpp"

namespace convbwd::detail {
namespace {

constexpr int kMr = 6, kNr = 16;

template <bool Gather>
void kernel(const MicroArgs& p) {
  float acc[kMr][kNr];
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kNr; ++j) acc[i][j] = p.accumulate ? p.acc[i * kNr + j] : 0.0f;
  for (int64_t r = 0; r < p.runs; ++r) {
    const float* b = p.b + p.b_off[r];
    const int64_t len = p.len[r];
    if (Gather) {
      const float* a[kMr];
      for (int i = 0; i < kMr; ++i) a[i] = p.a[i] + p.a_off[r];
      for (int64_t t = 0; t < len; ++t, b += p.bs)
        for (int i = 0; i < kMr; ++i) {
          const float av = a[i][t];
          for (int j = 0; j < kNr; ++j) acc[i][j] += av * b[j];
        }
    } else {
      const float* a = p.a[0] + p.a_off[r];
      for (int64_t t = 0; t < len; ++t, b += p.bs, a += p.as)
        for (int i = 0; i < kMr; ++i) {
          const float av = a[i];
          for (int j = 0; j < kNr; ++j) acc[i][j] += av * b[j];
        }
    }
  }
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kNr; ++j) p.acc[i * kNr + j] = acc[i][j];
}

}  // namespace

void scalar::f32_gemm_6x16_gather(const MicroArgs& p) { kernel<true>(p); }
void scalar::f32_gemm_6x16_strided(const MicroArgs& p) { kernel<false>(p); }

}  // namespace convbwd::detail
