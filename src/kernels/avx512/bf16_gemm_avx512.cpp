// AVX512_BF16 pair microkernels (the bf16 family of kernels/gemm.hpp):
// one vdpbf16ps per accumulator and step, i.e. two reduction indices per
// instruction, written with intrinsics so that the test build compiles them
// against SIMDe too (simd.hpp supplies the instruction there).
//
// Why 8x32: the same register budget as the fp32 kernel (16 accumulators, 2
// B vectors, one broadcast pair), and no other shape was faster. Measured on
// one core of an AMD Zen 5 (a standalone copy of this loop, thread CPU time,
// min of 200 runs of 50 calls, 128 pair steps with A and B in L1; a FLOP is
// one multiply or add of the 256 reduction indices): 6x32 467, 8x32 527,
// 12x32 531, 14x32 525, 8x48 527, 6x64 525, 4x64 522 GFLOP/s, against 255
// for the fp32 8x32 kernel. Past 8 rows nothing is gained beyond the noise,
// and keeping the fp32 kernel's tile keeps its tails (7x7 images, multiples
// of 8 channels) and its packing block.
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
    // Pairs are 32-bit words: the addressing is the fp32 kernel's.
    const float* b = p.b + p.b_off[r];
    const int64_t bs = Gather ? NR : p.bs;
    assert(!Gather || p.bs == NR);
    const float* a[MR];
    if constexpr (Gather)
      for (int i = 0; i < MR; ++i) a[i] = p.a[i] + p.a_off[r];
    const float* as_base = p.a[0] + p.a_off[r];
    for (int64_t t = 0; t < len; ++t, b += bs) {
      __m512i bv[NV];
      for (int j = 0; j < NV; ++j) bv[j] = _mm512_loadu_si512(b + j * 16);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const float* ap = Gather ? a[i] + t : as_base + t * p.as + i;
        int32_t pair;
        __builtin_memcpy(&pair, ap, sizeof pair);
        const __m512i av = _mm512_set1_epi32(pair);
        for (int j = 0; j < NV; ++j) c[i][j] = dpbf16(c[i][j], av, bv[j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(acc + i * NR + j * 16, c[i][j]);
}

}  // namespace

void bf16_gemm_8x32_gather(const MicroArgs& p) { kernel<8, 2, true>(p); }
void bf16_gemm_8x32_strided(const MicroArgs& p) { kernel<8, 2, false>(p); }

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
