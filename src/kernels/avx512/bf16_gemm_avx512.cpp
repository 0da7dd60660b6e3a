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

#include "kernels/avx512/gemm_kernel_avx512.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

// A bf16 pair is one 32-bit word: the addressing is the fp32 kernel's.
struct Bf16PairOps {
  using Vb = __m512i;
  static Vb load_b(const float* p) { return _mm512_loadu_si512(p); }
  static Vb bcast(const float* p) {
    int32_t pair;
    __builtin_memcpy(&pair, p, sizeof pair);
    return _mm512_set1_epi32(pair);
  }
  static __m512 madd(__m512 c, Vb a, Vb b) { return dpbf16(c, a, b); }
};

}  // namespace

void bf16_gemm_8x32_gather(const MicroArgs& p) { gemm_kernel<Bf16PairOps, 8, 2, true>(p); }
void bf16_gemm_8x32_strided(const MicroArgs& p) { gemm_kernel<Bf16PairOps, 8, 2, false>(p); }
static_assert(kMaxStridedRows<2> == kAvx512StridedRowsMax);
MicroKernel bf16_gemm_x32_strided_of_rows(int rows) { return strided_kernel_of_rows<Bf16PairOps, 2>(rows); }
void bf16_gemm_8x16_strided(const MicroArgs& p) { gemm_kernel<Bf16PairOps, 8, 1, false>(p); }
// The narrow family (KernelConfig::bf16_narrow), for groups of at most 16
// columns, where 8x32 computes half its lanes on padding: 16x16, as the fp32
// narrow family (f32_gemm_avx512.cpp) and for the same reasons (the weight
// gradient's rows are a 16-channel group's output channels; the gather
// kernel's 12 row pointers fit the general registers: 1.10x on the g8 data
// gradient against 16 rows).
void bf16_gemm_12x16_gather(const MicroArgs& p) { gemm_kernel<Bf16PairOps, 12, 1, true>(p); }
void bf16_gemm_16x16_strided(const MicroArgs& p) { gemm_kernel<Bf16PairOps, 16, 1, false>(p); }

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
