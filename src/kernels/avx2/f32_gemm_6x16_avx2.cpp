// AVX2+FMA 6x16 microkernels (see kernels/gemm.hpp). Compiled with
// -mavx2 -mfma; called only after runtime detection chose AVX2 at plan time.
//
// Why the step loops are inline assembly: with intrinsics, g++ 12 rotated the
// 12 accumulators through the B registers (vfmadd132ps plus vmovaps copies)
// and bumped six A pointers per step; the kernel ran at ~70-83% of the FMA
// peak with everything in L1. Here the accumulators stay in 12 fixed ymm
// registers, B takes ymm0-1 and the broadcasts alternate ymm2/ymm3 (16 of 16),
// the six A rows are addressed as base + t*4 from one shared index, and four
// steps share one loop branch: ~92% of peak on the same L1-resident panel
// (measured by thread CPU time on the EPYC of the brief). The products and
// their order are those of the scalar kernel: each accumulator adds its
// products run by run, step by step, one fused multiply-add each.
#include <immintrin.h>

#include <cassert>

#include "kernels/tier_kernels.hpp"
#include "kernels/gemm.hpp"

namespace convbwd::detail {
namespace {

// One reduction step at B offset U*BSTEP bytes: two B vectors against six
// broadcast A values A0..A5 (assembler address expressions).
#define CONVBWD_STEP(BOFF, A0, A1, A2, A3, A4, A5)   \
  "vmovups " BOFF "(%[b]), %%ymm0\n\t"               \
  "vmovups 32+" BOFF "(%[b]), %%ymm1\n\t"            \
  "vbroadcastss " A0 ", %%ymm2\n\t"                  \
  "vfmadd231ps %%ymm0, %%ymm2, %[c00]\n\t"           \
  "vfmadd231ps %%ymm1, %%ymm2, %[c01]\n\t"           \
  "vbroadcastss " A1 ", %%ymm3\n\t"                  \
  "vfmadd231ps %%ymm0, %%ymm3, %[c10]\n\t"           \
  "vfmadd231ps %%ymm1, %%ymm3, %[c11]\n\t"           \
  "vbroadcastss " A2 ", %%ymm2\n\t"                  \
  "vfmadd231ps %%ymm0, %%ymm2, %[c20]\n\t"           \
  "vfmadd231ps %%ymm1, %%ymm2, %[c21]\n\t"           \
  "vbroadcastss " A3 ", %%ymm3\n\t"                  \
  "vfmadd231ps %%ymm0, %%ymm3, %[c30]\n\t"           \
  "vfmadd231ps %%ymm1, %%ymm3, %[c31]\n\t"           \
  "vbroadcastss " A4 ", %%ymm2\n\t"                  \
  "vfmadd231ps %%ymm0, %%ymm2, %[c40]\n\t"           \
  "vfmadd231ps %%ymm1, %%ymm2, %[c41]\n\t"           \
  "vbroadcastss " A5 ", %%ymm3\n\t"                  \
  "vfmadd231ps %%ymm0, %%ymm3, %[c50]\n\t"           \
  "vfmadd231ps %%ymm1, %%ymm3, %[c51]\n\t"

// Gather step U: row i reads a_i[t + U] (a_i in r8..r13, t in rax).
#define CONVBWD_GSTEP(U, BOFF)                                                                           \
  CONVBWD_STEP(BOFF, U "(%%r8,%%rax,4)", U "(%%r9,%%rax,4)", U "(%%r10,%%rax,4)", U "(%%r11,%%rax,4)", \
               U "(%%r12,%%rax,4)", U "(%%r13,%%rax,4)")
// Strided step: rows read a[0..5] (a in rax), then a and b advance.
#define CONVBWD_SSTEP                                                                                      \
  CONVBWD_STEP("0", "(%%rax)", "4(%%rax)", "8(%%rax)", "12(%%rax)", "16(%%rax)", "20(%%rax)") \
  "addq %[as], %%rax\n\t"                                                                                \
  "addq %[bs], %[b]\n\t"

#define CONVBWD_ACC_OPERANDS                                                                                       \
  [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20), [c21] "+x"(c21),        \
      [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51), \
      [b] "+r"(b)

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
  for (int64_t r = 0; r < p.runs; ++r) {
    const float* b = p.b + p.b_off[r];
    const int64_t len = p.len[r];
    if (len <= 0) continue;
    if constexpr (Gather) {
      // The gather B panel is dense (bs == nr): steps are 64 bytes apart.
      assert(p.bs == 16);
      const int64_t o = p.a_off[r];
      const float* const rows[6] = {p.a[0] + o, p.a[1] + o, p.a[2] + o, p.a[3] + o, p.a[4] + o, p.a[5] + o};
      const int64_t len4 = len & ~int64_t{3};
      __asm__ volatile(
          "movq 0(%[rows]), %%r8\n\t"
          "movq 8(%[rows]), %%r9\n\t"
          "movq 16(%[rows]), %%r10\n\t"
          "movq 24(%[rows]), %%r11\n\t"
          "movq 32(%[rows]), %%r12\n\t"
          "movq 40(%[rows]), %%r13\n\t"
          "xorl %%eax, %%eax\n\t"
          "testq %[n4], %[n4]\n\t"
          "jz 2f\n\t"
          ".p2align 5\n\t"
          "1:\n\t"  // four steps per branch
          CONVBWD_GSTEP("0", "0") CONVBWD_GSTEP("4", "64") CONVBWD_GSTEP("8", "128") CONVBWD_GSTEP("12", "192")
          "addq $256, %[b]\n\t"
          "addq $4, %%rax\n\t"
          "cmpq %[n4], %%rax\n\t"
          "jb 1b\n\t"
          "2:\n\t"
          "cmpq %[n], %%rax\n\t"
          "jae 4f\n\t"
          "3:\n\t"  // the last len % 4 steps
          CONVBWD_GSTEP("0", "0")
          "addq $64, %[b]\n\t"
          "addq $1, %%rax\n\t"
          "cmpq %[n], %%rax\n\t"
          "jb 3b\n\t"
          "4:\n\t"
          : CONVBWD_ACC_OPERANDS
          : [rows] "r"(rows), [n4] "r"(len4), [n] "r"(len)
          : "xmm0", "xmm1", "xmm2", "xmm3", "rax", "r8", "r9", "r10", "r11", "r12", "r13", "cc", "memory");
    } else {
      const float* a = p.a[0] + p.a_off[r];
      const int64_t as = p.as * static_cast<int64_t>(sizeof(float));
      const int64_t bs = p.bs * static_cast<int64_t>(sizeof(float));
      // (len rounded down to even is computed inside: GCC allows 30 operands.)
      __asm__ volatile(
          "movq %[a], %%rax\n\t"
          "movq %[n], %%rdx\n\t"
          "andq $-2, %%rdx\n\t"
          "xorl %%ecx, %%ecx\n\t"
          "testq %%rdx, %%rdx\n\t"
          "jz 2f\n\t"
          ".p2align 5\n\t"
          "1:\n\t"  // two steps per branch
          CONVBWD_SSTEP CONVBWD_SSTEP
          "addq $2, %%rcx\n\t"
          "cmpq %%rdx, %%rcx\n\t"
          "jb 1b\n\t"
          "2:\n\t"
          "cmpq %[n], %%rcx\n\t"
          "jae 3f\n\t"
          CONVBWD_SSTEP
          "3:\n\t"
          : CONVBWD_ACC_OPERANDS
          : [a] "r"(a), [as] "r"(as), [bs] "r"(bs), [n] "r"(len)
          : "xmm0", "xmm1", "xmm2", "xmm3", "rax", "rcx", "rdx", "cc", "memory");
    }
  }
  _mm256_storeu_ps(acc + 0, c00), _mm256_storeu_ps(acc + 8, c01);
  _mm256_storeu_ps(acc + 16, c10), _mm256_storeu_ps(acc + 24, c11);
  _mm256_storeu_ps(acc + 32, c20), _mm256_storeu_ps(acc + 40, c21);
  _mm256_storeu_ps(acc + 48, c30), _mm256_storeu_ps(acc + 56, c31);
  _mm256_storeu_ps(acc + 64, c40), _mm256_storeu_ps(acc + 72, c41);
  _mm256_storeu_ps(acc + 80, c50), _mm256_storeu_ps(acc + 88, c51);
}

#undef CONVBWD_ACC_OPERANDS
#undef CONVBWD_SSTEP
#undef CONVBWD_GSTEP
#undef CONVBWD_STEP

}  // namespace

void avx2::f32_gemm_6x16_gather(const MicroArgs& p) { kernel<true>(p); }
void avx2::f32_gemm_6x16_strided(const MicroArgs& p) { kernel<false>(p); }

}  // namespace convbwd::detail
