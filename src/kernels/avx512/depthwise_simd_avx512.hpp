// The 16-lane vector type the depthwise kernel templates (DwKernel,
// DwClKernel) and the bias one (BiasKernel) are instantiated with on AVX-512:
// what they ask of V.
// Only included by files under src/kernels/avx512/, in an unnamed namespace
// of the tier's own: no inline function compiled with AVX-512 flags can be
// merged by the linker into code that runs on a lesser CPU.
#pragma once

#include "kernels/avx512/simd.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/avx512/float_formats_avx512.hpp"
#include "kernels/depthwise/depthwise_plan.hpp"
#include "kernels/depthwise/depthwise_view_rows.hpp"
#include "kernels/store_row.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

struct VecAvx512 {
  using R = __m512;
  static constexpr int64_t W = 16;

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  static bool any_nonfinite(const float* p, int64_t n) { return CONVBWD_AVX512_NS::any_nonfinite(p, n); }
  static R zero() { return _mm512_setzero_ps(); }
  // |v|'s bits, as unsigned integers, are 0x7f800000 or more exactly for
  // NaN and +-Inf; the larger of those and acc's lane by lane.
  static R max_magnitude(R acc, R v) {
    const __m512i m = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    return _mm512_castsi512_ps(_mm512_max_epu32(_mm512_castps_si512(acc), m));
  }
  static bool beyond_finite(R mag) {
    return _mm512_cmpge_epu32_mask(_mm512_castps_si512(mag), _mm512_set1_epi32(0x7f800000)) != 0;
  }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R bcast(const float* p) { return _mm512_set1_ps(*p); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  // Lanes n.. set to +0 (so that an Inf or NaN beyond a row's end never
  // reaches a sum).
  static R keep_first(R v, int64_t n) {
    const auto m = static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u);
    return _mm512_maskz_mov_ps(m, v);
  }
  // Fixed pairwise order, halves first (lanes 0-7 as VecAvx2::hsum adds
  // its eight, plus lanes 8-15 alike).
  static float hsum(R v) {
    alignas(64) float l[16];
    _mm512_store_ps(l, v);
    const auto s8 = [](const float* x) { return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7])); };
    return s8(l) + s8(l + 8);
  }

  // out[2i] = a[i], out[2i+1] = b[i] for i < pairs rounded up to 16 (the
  // buffers have that slack).
  static void interleave2(const float* a, const float* b, int64_t pairs, float* out) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int64_t i = 0; i < pairs; i += W) {
      const R x = load(a + i), y = load(b + i);
      store(out + 2 * i, _mm512_permutex2var_ps(x, lo, y));
      store(out + 2 * i + W, _mm512_permutex2var_ps(x, hi, y));
    }
  }

  // a[i] = in[2i], b[i] = in[2i+1] for i < n; writes nothing past a[n), b[n).
  static void deinterleave2(const float* in, int64_t n, float* a, float* b) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const R v0 = load(in + 2 * i), v1 = load(in + 2 * i + W);
      store(a + i, _mm512_permutex2var_ps(v0, ev, v1));
      store(b + i, _mm512_permutex2var_ps(v0, od, v1));
    }
    for (; i < n; ++i) {
      a[i] = in[2 * i];
      b[i] = in[2 * i + 1];
    }
  }

  // Always inlined, as transpose16x16 is: out of line, the caller's 16
  // registers go through memory both ways.
  [[gnu::always_inline]] static void transpose(R* r) { transpose16x16(r); }
  static void stream(float* p, R v) { stream16(p, v); }
  static void transpose_block(const float* in, int64_t is, float* out, int64_t os) {
    dw_vector_transpose_block<VecAvx512>(in, is, out, os);
  }
  static bool load_rows_transposed(const void* base, DataType dt, const int64_t* rows, int64_t nv, int64_t n,
                                   OperandRounding rnd, float* out, bool check) {
    return dw_vector_load_rows_transposed<VecAvx512>(base, dt, rows, nv, n, rnd, out, check);
  }
  static void stream_row(const float* in, int64_t n, float* out) { dw_vector_stream_row<VecAvx512>(in, n, out); }
  // Orders the non-temporal stores before the task's completion is published.
  static void store_fence() { _mm_sfence(); }

  static R from(const void* base, DataType dt, int64_t i) {
    switch (dt) {
      case DataType::f16: return load16<DataType::f16>(base, i);
      case DataType::bf16: return load16<DataType::bf16>(base, i);
      default: return load16<DataType::f32>(base, i);
    }
  }

  // The first n (< 16) elements at base[i..], the other lanes +0; never
  // touches memory past element i + n - 1.
  static R from_partial(const void* base, DataType dt, int64_t i, int64_t n) {
    switch (dt) {
      case DataType::f16: return load_partial16<DataType::f16>(base, i, n);
      case DataType::bf16: return load_partial16<DataType::bf16>(base, i, n);
      default: return load_partial16<DataType::f32>(base, i, n);
    }
  }

  static R round(R v, OperandRounding r) { return round16(v, r); }
  // The first n (< 16) lanes of v at p, nothing past them.
  static void store_partial(float* p, R v, int64_t n) { store_partial16(p, v, n); }

  static void load_row(const void* base, DataType dt, int64_t off, int64_t n, OperandRounding rnd, float* out) {
    dw_vector_load_row<VecAvx512>(base, dt, off, n, rnd, out);
  }

  // Rounds n fp32 values once into dt, stored contiguously at base[off..).
  static void store_row(const float* in, int64_t n, void* base, DataType dt, int64_t off) {
    if (dt == DataType::f32)
      store_row_f32(in, n, static_cast<float*>(base) + off, 1);
    else
      CONVBWD_AVX512_NS::store_row(in, n, base, dt, off, 1);
  }
};

}  // namespace
}  // namespace convbwd::detail::CONVBWD_AVX512_NS
