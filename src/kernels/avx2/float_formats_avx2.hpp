// Eight-lane versions of numeric/float_formats.hpp for the AVX2 kernels,
// with the same bits (but for an fp16 signaling NaN, which the decode
// quiets): bf16/fp16 decode, bf16/fp16 encode (round to nearest
// even, overflow to Inf, subnormals kept, NaN quieted keeping the top
// payload bits), the HF32 and fp16 operand roundings, and whole and partial
// loads and stores. One copy, shared by the channels-last converter, the row
// store and the depthwise kernels.
// Compiled only into src/kernels/avx2/ sources (AVX2 + FMA + F16C flags).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "convbwd/convbwd.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail::avx2 {

// F16C's decode. Unlike f16_to_float it quiets a signaling NaN (sets fp32
// bit 22), which changes no result: every widened value feeds arithmetic, and
// x86 arithmetic returns its first NaN operand quieted, whichever kind it
// was. Keeping the payload as it is cost 6 more instructions per 8 values,
// which made the fp16 gradBias sum 1.7x slower on a Zen 2 (bench/RESULTS.md,
// session 19).
inline __m256 f16x8_to_float(__m128i h) { return _mm256_cvtph_ps(h); }

inline __m256 bf16x8_to_float(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline __m128i float_to_f16x8(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

inline __m128i float_to_bf16x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
  // Half to even: add 0x7fff plus the kept LSB; a carry is the right overflow.
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  // Every lane is below 2^16, so the saturating pack is exact; it works per
  // 128-bit half, which the permute undoes.
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}

// round_to_hf32: magnitude + half quantum, low 12 bits dropped (half away
// from zero); NaN kept NaN by setting the quiet bit.
inline __m256 round_to_hf32x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
  const __m256i r =
      _mm256_and_si256(_mm256_add_epi32(u, _mm256_set1_epi32(0x800)), _mm256_set1_epi32(static_cast<int>(0xfffff000u)));
  const __m256i q = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(r, q, nan));
}

// round_to_fp16 through F16C (the encoded NaNs are quiet, so the decode
// gives f16_to_float's bits).
inline __m256 round_to_fp16x8(__m256 v) { return _mm256_cvtph_ps(float_to_f16x8(v)); }

template <OperandRounding R>
inline __m256 round8(__m256 v) {
  if constexpr (R == OperandRounding::hf32)
    return round_to_hf32x8(v);
  else if constexpr (R == OperandRounding::fp16)
    return round_to_fp16x8(v);
  else
    return v;
}

// Eight elements of dtype T (f32, bf16, f16) at base[i..] as fp32.
template <DataType T>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (T == DataType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
    if constexpr (T == DataType::bf16)
      return bf16x8_to_float(h);
    else
      return f16x8_to_float(h);
  }
}

// The first n (< 8) elements of dtype T (f32, bf16, f16) at base[i..] as
// fp32, the other lanes +0; never touches memory past element i + n - 1.
template <DataType T>
inline __m256 load_partial(const void* base, int64_t i, int64_t n) {
  if constexpr (T == DataType::f32) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(static_cast<const float*>(base) + i, m);
  } else {
    // 16-bit: whole pairs through a masked 32-bit load, an odd last one alone.
    const auto* h = static_cast<const uint16_t*>(base) + i;
    const __m128i m = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(n / 2)), _mm_setr_epi32(0, 1, 2, 3));
    __m128i v = _mm_maskload_epi32(reinterpret_cast<const int*>(h), m);
    if (n & 1) {
      alignas(16) uint16_t t[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(t), v);
      t[n - 1] = h[n - 1];
      v = _mm_load_si128(reinterpret_cast<const __m128i*>(t));
    }
    if constexpr (T == DataType::f16)
      return f16x8_to_float(v);
    else
      return bf16x8_to_float(v);
  }
}

// Stores the first n (0 to 7) lanes of v at p, 4, 2 and 1 at a time: nothing
// past them is touched, and no vmaskmovps, which AMD cores take slowly.
inline void store_partial(float* p, __m256 v, int64_t n) {
  __m128 h = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, h);
    h = _mm256_extractf128_ps(v, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), h);
    h = _mm_movehl_ps(h, h);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, h);
}

}  // namespace convbwd::detail::avx2
