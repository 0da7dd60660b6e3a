// Sixteen-lane versions of numeric/float_formats.hpp for the AVX-512
// kernels, with the same bits (but for an fp16 signaling NaN, which the
// decode quiets): bf16/fp16 decode and encode (round to
// nearest even, overflow to Inf, subnormals kept, NaN quieted keeping the
// top payload bits), the HF32 and fp16 operand roundings, partial loads and
// stores that touch nothing past their elements, and the 16x16 register
// transpose. Written with what SIMDe 0.7.4 also provides (simd.hpp): it has
// no 512-bit fp16 conversions and no masked loads or stores, so those go
// through two 256-bit halves (F16C), simd.hpp's masked loads (a stack copy
// there) or piecewise stores. Compiled only into
// src/kernels/avx512/ sources, inside their tier's namespace.
#pragma once

#include "kernels/avx512/simd.hpp"

#include <cstdint>
#include <cstring>

#include "convbwd/convbwd.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {

inline __m512 join(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }
inline __m256 low_half(__m512 v) { return _mm512_castps512_ps256(v); }
inline __m256 high_half(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

// The sixteen 16-bit values of h zero-extended to 32 bits.
inline __m512i widen16(__m256i h) {
  const __m256i lo = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(h));
  const __m256i hi = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// F16C's decode, two halves (SIMDe has no 512-bit fp16 conversion). Like the
// AVX2 tier's it quiets a signaling NaN, which no result can show (see
// f16x8_to_float in kernels/avx2/float_formats_avx2.hpp).
inline __m512 f16x16_to_float(__m256i h) {
  return join(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)));
}

inline __m512 bf16x16_to_float(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(widen16(h), 16)); }

inline __m256i float_to_f16x16(__m512 v) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return _mm256_set_m128i(_mm256_cvtps_ph(high_half(v), kNearest), _mm256_cvtps_ph(low_half(v), kNearest));
}

inline __m256i float_to_bf16x16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7f800000));
  // Half to even: add 0x7fff plus the kept LSB; a carry is the right overflow.
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __m512i r = _mm512_mask_blend_epi32(nan, rounded, quiet);
  // Every lane is below 2^16, so the saturating pack is exact; it packs per
  // 128-bit lane (four values, then the same four again), and the qword
  // permute gathers the first copy of each.
  const __m512i packed = _mm512_packus_epi32(r, r);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), packed));
}

// float_to_bf16x16's bits through vcvtneps2bf16 (simd.hpp; the avx512_bf16
// tier only): one instruction for the twelve above. The instruction reads a
// denormal as zero, so the lanes holding one (in most vectors none) take
// float_to_bf16x16's result, which keeps them.
inline __m256i float_to_bf16x16_cvtne(__m512 v) {
  const __m512i mag = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  const __mmask16 below_normal = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(0x00800000), mag);
  const __mmask16 denormal = _mm512_mask_test_epi32_mask(below_normal, mag, mag);
  const __m256i h = cvtne_bf16x16(v);
  return denormal == 0 ? h : _mm256_mask_blend_epi16(denormal, h, float_to_bf16x16(v));
}

// round_to_hf32: magnitude + half quantum, low 12 bits dropped (half away
// from zero); NaN kept NaN by setting the quiet bit.
inline __m512 round_to_hf32x16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7f800000));
  const __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_set1_epi32(0x800)),
                                     _mm512_set1_epi32(static_cast<int>(0xfffff000u)));
  const __m512i q = _mm512_or_si512(u, _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, r, q));
}

// (The encoded NaNs are quiet: the decode gives f16_to_float's bits.)
inline __m512 round_to_fp16x16(__m512 v) { return f16x16_to_float(float_to_f16x16(v)); }

template <OperandRounding R>
inline __m512 round16(__m512 v) {
  if constexpr (R == OperandRounding::hf32)
    return round_to_hf32x16(v);
  else if constexpr (R == OperandRounding::fp16)
    return round_to_fp16x16(v);
  else
    return v;
}

inline __m512 round16(__m512 v, OperandRounding r) {
  switch (r) {
    case OperandRounding::hf32: return round_to_hf32x16(v);
    case OperandRounding::fp16: return round_to_fp16x16(v);
    default: return v;
  }
}

// Sixteen elements of dtype T (f32, bf16, f16) at base[i..] as fp32.
template <DataType T>
inline __m512 load16(const void* base, int64_t i) {
  if constexpr (T == DataType::f32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + i);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + i));
    if constexpr (T == DataType::bf16)
      return bf16x16_to_float(h);
    else
      return f16x16_to_float(h);
  }
}

// The first n (< 16) elements at base[i..] as fp32, the other lanes +0;
// never touches memory past element i + n - 1 (simd.hpp's masked loads).
template <DataType T>
inline __m512 load_partial16(const void* base, int64_t i, int64_t n) {
  if constexpr (T == DataType::f32) {
    return load_first_ps(static_cast<const float*>(base) + i, n);
  } else {
    const __m256i h = load_first_epi16(static_cast<const uint16_t*>(base) + i, n);
    if constexpr (T == DataType::bf16)
      return bf16x16_to_float(h);
    else
      return f16x16_to_float(h);
  }
}

// Stores the first n (0 to 15) lanes of v at p, 8, 4, 2 and 1 at a time:
// nothing past them is touched.
inline void store_partial16(float* p, __m512 v, int64_t n) {
  __m256 h = low_half(v);
  if (n & 8) {
    _mm256_storeu_ps(p, h);
    h = high_half(v);
    p += 8;
  }
  __m128 q = _mm256_castps256_ps128(h);
  if (n & 4) {
    _mm_storeu_ps(p, q);
    q = _mm256_extractf128_ps(h, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), q);
    q = _mm_movehl_ps(q, q);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, q);
}

// r[i] lane j becomes r[j] lane i, in place: 4x4 transposes within each
// 128-bit lane (unpack, shuffle), then the 4x4 grid of 128-bit blocks
// transposed by two rounds of block shuffles (64 shuffles per 256 floats).
// Always inlined, and so are the tiers' wrappers of it (VecAvx512 and the
// Avx512Lanes of the converter and the row store): called out of line, the
// 16 registers go through memory both ways. GCC had stopped inlining the
// depthwise wrapper into the unrolled loader (dw_load_w_rows), whose bf16
// weight gradient (dw s2 192@28, 1 thread of a Zen 4) then ran 0.94x.
[[gnu::always_inline]] inline void transpose16x16(__m512* r) {
  __m512 a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // b[4i + j], 128-bit lane k: column 4k + j of rows 4i .. 4i+3.
  for (int i = 0; i < 4; ++i) {
    b[4 * i + 0] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], 0x44);
    b[4 * i + 1] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], 0xEE);
    b[4 * i + 2] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0x44);
    b[4 * i + 3] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], 0xEE);
  }
  // Blocks: shuffle(x, y, 0x88) = x.0 x.2 y.0 y.2; 0xDD = x.1 x.3 y.1 y.3.
  auto blocks = [](__m512 x, __m512 y, int imm) {
    const __m512i xi = _mm512_castps_si512(x), yi = _mm512_castps_si512(y);
    return _mm512_castsi512_ps(imm == 0x88 ? _mm512_shuffle_i32x4(xi, yi, 0x88) : _mm512_shuffle_i32x4(xi, yi, 0xDD));
  };
  for (int j = 0; j < 4; ++j) {
    const __m512 c0 = blocks(b[j], b[4 + j], 0x88), c1 = blocks(b[j], b[4 + j], 0xDD);
    const __m512 c2 = blocks(b[8 + j], b[12 + j], 0x88), c3 = blocks(b[8 + j], b[12 + j], 0xDD);
    r[j] = blocks(c0, c2, 0x88);
    r[8 + j] = blocks(c0, c2, 0xDD);
    r[4 + j] = blocks(c1, c3, 0x88);
    r[12 + j] = blocks(c1, c3, 0xDD);
  }
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
