// The 8-lane vector type the depthwise/grouped and bias kernel templates are
// instantiated with on AVX2+FMA+F16C. Only included by files under
// src/kernels/avx2/ (compiled with those flags, called after CPU detection).
// Everything is in an unnamed namespace: no inline function compiled with AVX2
// flags can be merged by the linker into code that runs on a lesser CPU.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/depthwise/depthwise_plan.hpp"
#include "kernels/depthwise/depthwise_view_rows.hpp"
#include "kernels/any_nonfinite.hpp"
#include "kernels/avx2/float_formats_avx2.hpp"
#include "kernels/avx2/transpose8_avx2.hpp"
#include "kernels/store_row.hpp"

namespace convbwd::detail {
namespace {

struct VecAvx2 {
  using R = __m256;
  static constexpr int64_t W = 8;

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  static bool any_nonfinite(const float* p, int64_t n) { return avx2::any_nonfinite(p, n); }
  static R zero() { return _mm256_setzero_ps(); }
  // As VecAvx512's: |v|'s bits are at least 0x7f800000 exactly for NaN and
  // +-Inf. Magnitudes are below 2^31, so the signed compares order them.
  static R max_magnitude(R acc, R v) {
    const __m256i m = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
    return _mm256_castsi256_ps(_mm256_max_epi32(_mm256_castps_si256(acc), m));
  }
  static bool beyond_finite(R mag) {
    const __m256i big = _mm256_cmpgt_epi32(_mm256_castps_si256(mag), _mm256_set1_epi32(0x7f7fffff));
    return _mm256_movemask_ps(_mm256_castsi256_ps(big)) != 0;
  }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  // Lanes n.. set to +0 (so that an Inf or NaN beyond a row's end never
  // reaches a sum).
  static R keep_first(R v, int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
    return _mm256_and_ps(v, _mm256_castsi256_ps(m));
  }
  // Fixed pairwise order; VecScalar::hsum uses the same one.
  static float hsum(R v) {
    alignas(32) float l[8];
    _mm256_store_ps(l, v);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  }

  // out[2i] = a[i], out[2i+1] = b[i] for i < pairs rounded up to 8 (the
  // buffers have that slack).
  static void interleave2(const float* a, const float* b, int64_t pairs, float* out) {
    for (int64_t i = 0; i < pairs; i += W) {
      const R x = load(a + i), y = load(b + i);
      const R lo = _mm256_unpacklo_ps(x, y), hi = _mm256_unpackhi_ps(x, y);
      store(out + 2 * i, _mm256_permute2f128_ps(lo, hi, 0x20));
      store(out + 2 * i + W, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
  }

  // a[i] = in[2i], b[i] = in[2i+1] for i < n; writes nothing past a[n), b[n).
  static void deinterleave2(const float* in, int64_t n, float* a, float* b) {
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const R v0 = load(in + 2 * i), v1 = load(in + 2 * i + W);
      // shuffle_ps works per 128-bit half; the 64-bit permute restores order.
      const R ev = _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0));
      const R od = _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1));
      store(a + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), _MM_SHUFFLE(3, 1, 2, 0))));
      store(b + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), _MM_SHUFFLE(3, 1, 2, 0))));
    }
    for (; i < n; ++i) {
      a[i] = in[2 * i];
      b[i] = in[2 * i + 1];
    }
  }

  static void transpose(R* r) { avx2::transpose8x8(r); }
  static void stream(float* p, R v) { _mm256_stream_ps(p, v); }
  static void transpose_block(const float* in, int64_t is, float* out, int64_t os) {
    dw_vector_transpose_block<VecAvx2>(in, is, out, os);
  }
  static bool load_rows_transposed(const void* base, DataType dt, const int64_t* rows, int64_t nv, int64_t n,
                                   OperandRounding rnd, float* out, bool check) {
    return dw_vector_load_rows_transposed<VecAvx2>(base, dt, rows, nv, n, rnd, out, check);
  }
  static void stream_row(const float* in, int64_t n, float* out) { dw_vector_stream_row<VecAvx2>(in, n, out); }
  // Orders the non-temporal stores before the task's completion is published.
  static void store_fence() { _mm_sfence(); }

  static R from(const void* base, DataType dt, int64_t i) {
    switch (dt) {
      case DataType::f16: return avx2::load8<DataType::f16>(base, i);
      case DataType::bf16: return avx2::load8<DataType::bf16>(base, i);
      default: return avx2::load8<DataType::f32>(base, i);
    }
  }

  // The first n (< 8) elements at base[i..], the other lanes +0; never
  // touches memory past element i + n - 1.
  static R from_partial(const void* base, DataType dt, int64_t i, int64_t n) {
    switch (dt) {
      case DataType::f16: return avx2::load_partial<DataType::f16>(base, i, n);
      case DataType::bf16: return avx2::load_partial<DataType::bf16>(base, i, n);
      default: return avx2::load_partial<DataType::f32>(base, i, n);
    }
  }

  static R round(R v, OperandRounding r) {
    switch (r) {
      case OperandRounding::hf32: return avx2::round8<OperandRounding::hf32>(v);
      case OperandRounding::fp16: return avx2::round8<OperandRounding::fp16>(v);
      default: return v;
    }
  }

  // The first n (< 8) lanes of v at p, nothing past them.
  static void store_partial(float* p, R v, int64_t n) { avx2::store_partial(p, v, n); }

  static void load_row(const void* base, DataType dt, int64_t off, int64_t n, OperandRounding rnd, float* out) {
    dw_vector_load_row<VecAvx2>(base, dt, off, n, rnd, out);
  }

  // Rounds n fp32 values once into dt, stored contiguously at base[off..).
  static void store_row(const float* in, int64_t n, void* base, DataType dt, int64_t off) {
    if (dt == DataType::f32)
      store_row_f32(in, n, static_cast<float*>(base) + off, 1);
    else
      avx2::store_row(in, n, base, dt, off, 1);
  }
};

}  // namespace
}  // namespace convbwd::detail
