// The AVX-512 GEMM microkernel (kernels/gemm.hpp), written once over the
// operand kind Op and instantiated by f32_gemm_avx512.cpp (fp32: one value
// per reduction index, vfmadd231ps) and bf16_gemm_avx512.cpp (bf16 pairs in
// 32-bit words, vdpbf16ps). Both address A and B as 32-bit words, so the
// loops, the MR x NV*16 tile and the accumulators are the same.
//
// What Op provides: the B vector type Vb and load_b(p) of 16 words at p;
// bcast(p), the word at p in every lane; madd(c, a, b), c plus the products
// of a and b lane by lane (in the family's order and rounding).
//
// Each accumulator adds its products run by run, step by step, one Op::madd
// each: the order of the scalar kernels.
#pragma once

#include "kernels/avx512/simd.hpp"

#include <cassert>
#include <cstdint>

#include "kernels/gemm.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

template <class Op, int MR, int NV, bool Gather>
void gemm_kernel(const MicroArgs& p) {
  static_assert(MR <= kMaxMr && NV * 16 <= kMaxNr);
  using Vb = typename Op::Vb;
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
        Vb bv[NV];
        for (int j = 0; j < NV; ++j) bv[j] = Op::load_b(b + j * 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const Vb av = Op::bcast(a[i] + t);
          for (int j = 0; j < NV; ++j) c[i][j] = Op::madd(c[i][j], av, bv[j]);
        }
      }
    } else {
      const float* a = p.a[0] + p.a_off[r];
      const int64_t as = p.as, bs = p.bs;
      for (int64_t t = 0; t < len; ++t, b += bs, a += as) {
        Vb bv[NV];
        for (int j = 0; j < NV; ++j) bv[j] = Op::load_b(b + j * 16);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const Vb av = Op::bcast(a + i);
          for (int j = 0; j < NV; ++j) c[i][j] = Op::madd(c[i][j], av, bv[j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(acc + i * NR + j * 16, c[i][j]);
}

// The strided kernel of `rows` rows (GemmKernels::strided_of_rows), for
// rows in [R, kMaxStridedRows<NV>] (null past it).
// MR x NV accumulators, NV B vectors and a broadcast fit 32 zmm registers.
template <int NV>
constexpr int kMaxStridedRows = (31 - NV) / NV < kMaxMr ? (31 - NV) / NV : kMaxMr;
template <class Op, int NV, int R = 1>
MicroKernel strided_kernel_of_rows(int rows) {
  if constexpr (R > kMaxStridedRows<NV>)
    return nullptr;
  else
    return rows == R ? &gemm_kernel<Op, R, NV, false> : strided_kernel_of_rows<Op, NV, R + 1>(rows);
}

}  // namespace
}  // namespace convbwd::detail::CONVBWD_AVX512_NS
