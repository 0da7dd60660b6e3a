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
// The products and their order are those of the scalar kernels (one fused
// multiply-add each, where the scalar kernels round the product and the sum
// apart, so the tiers agree within the tolerance, not bit for bit).
#include "kernels/avx512/simd.hpp"

#include "kernels/avx512/gemm_kernel_avx512.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

struct F32Ops {
  using Vb = __m512;
  static Vb load_b(const float* p) { return _mm512_loadu_ps(p); }
  static Vb bcast(const float* p) { return _mm512_set1_ps(*p); }
  static __m512 madd(__m512 c, Vb a, Vb b) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace

void f32_gemm_8x32_gather(const MicroArgs& p) { gemm_kernel<F32Ops, 8, 2, true>(p); }
void f32_gemm_8x32_strided(const MicroArgs& p) { gemm_kernel<F32Ops, 8, 2, false>(p); }
static_assert(kMaxStridedRows<2> == kAvx512StridedRowsMax);
MicroKernel f32_gemm_x32_strided_of_rows(int rows) { return strided_kernel_of_rows<F32Ops, 2>(rows); }
// GemmKernels::strided_half: 8 rows of one zmm, 8 accumulators (as many as
// the FMA latency times two ports asks for).
void f32_gemm_8x16_strided(const MicroArgs& p) { gemm_kernel<F32Ops, 8, 1, false>(p); }
// The narrow family (KernelConfig::gemm_narrow), for groups of at most 16
// columns. 16 rows, because the weight gradient's rows are output channels
// and 16-channel groups fill them exactly: side by side against 14x16 (the
// fastest one-vector shape in the table above), g8 128@28 3x3 on 2 threads,
// the weight gradient ran 1.5x faster than on 8x32, where 14x16 would pad 16
// rows to 28. The gather kernel (the data gradient: rows are pixels) has 12
// rows (GemmKernels::gather_mr), whose pointers fit the general registers:
// at 16 it spilled seven of them, and 12 rows ran that gradient 1.08x as
// fast (g8 128@28 3x3, 2 threads, min of medians over 3 alternations).
void f32_gemm_12x16_gather(const MicroArgs& p) { gemm_kernel<F32Ops, 12, 1, true>(p); }
void f32_gemm_16x16_strided(const MicroArgs& p) { gemm_kernel<F32Ops, 16, 1, false>(p); }

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
