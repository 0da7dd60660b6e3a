// What every AVX-512 kernel source includes first. Natively it is
// <immintrin.h> and the kernels go into namespace convbwd::detail::avx512.
// The test build compiles the same sources a second time with
// CONVBWD_EMULATE_AVX512 (tests/emulated/): the intrinsics then come from
// SIMDe (Debian's libsimde-dev, native aliases, built for AVX2), and the
// kernels go into convbwd::detail::avx512_emu, so both copies link into one
// test binary and the emulated one runs on a CPU without AVX-512.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef CONVBWD_EMULATE_AVX512
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include "kernels/denormals.hpp"
#define CONVBWD_AVX512_NS avx512_emu
#else
// GCC 12's AVX-512 intrinsics give their builtins a self-initialized
// _mm512_undefined_*() as the unused merge source, which
// -Wmaybe-uninitialized flags once enough of them are inlined into one
// function (a false positive GCC 13 no longer reports; inlined into some
// loops it is reported as -Wuninitialized): the value is never read, so the
// warnings are off for these headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define CONVBWD_AVX512_NS avx512
#endif

namespace convbwd::detail::CONVBWD_AVX512_NS {

// The first n (0 to 15) floats or 16-bit values at p, the other lanes 0,
// reading nothing at or past p + n. Natively one masked load (masked-off
// elements are never accessed, so they cannot fault): through a copy, the
// partial rows of 7-, 14- and 28-pixel images made the channels-last
// converter up to 10x slower than AVX2's (the 64-byte load after memcpy's
// narrower stores cannot be store-forwarded; it was 39% of the 1x1 data
// gradient's time). SIMDe 0.7.4 has no masked loads,
// so the emulated build keeps the zero-padded copy.
#ifndef CONVBWD_EMULATE_AVX512
inline __m512 load_first_ps(const float* p, int64_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
}
inline __m256i load_first_epi16(const uint16_t* p, int64_t n) {
  return _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1u), p);
}
#else
inline __m512 load_first_ps(const float* p, int64_t n) {
  alignas(64) float buf[16] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
  return _mm512_load_ps(buf);
}
inline __m256i load_first_epi16(const uint16_t* p, int64_t n) {
  alignas(32) uint16_t buf[16] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
}
#endif

// A non-temporal store of 16 floats at p (64-byte aligned). SIMDe 0.7.4 has
// no _mm512_stream_ps; the emulated build stores them as usual (the same
// values, only the cache hint differs).
#ifndef CONVBWD_EMULATE_AVX512
inline void stream16(float* p, __m512 v) { _mm512_stream_ps(p, v); }
#else
inline void stream16(float* p, __m512 v) { _mm512_store_ps(p, v); }
#endif

// acc + the dot products of the bf16 pairs of a and b, lane by lane: one
// vdpbf16ps. Natively the instruction itself.
#ifndef CONVBWD_EMULATE_AVX512
inline __m512 dpbf16(__m512 acc, __m512i a, __m512i b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
#else
// SIMDe 0.7.4's _mm512_dpbf16_ps neither reads denormals as zero nor flushes
// them, and its sum order is the compiler's; this follows the ISA manual's
// definition instead, per lane: acc += a.hi * b.hi, then acc += a.lo * b.lo,
// each a fused multiply-add (the bf16 products are exact in fp32) rounded to
// nearest even, with denormal inputs read as zero and denormal results
// flushed to zero (sign kept).
inline __m512 dpbf16(__m512 acc, __m512i a, __m512i b) {
  alignas(64) float c[16];
  alignas(64) uint32_t x[16], y[16];
  _mm512_store_ps(c, acc);
  _mm512_store_si512(x, a);
  _mm512_store_si512(y, b);
  for (int i = 0; i < 16; ++i) {
    float s = ftz(c[i]);
    s = ftz(std::fma(daz(x[i] & 0xffff0000u), daz(y[i] & 0xffff0000u), s));
    s = ftz(std::fma(daz(x[i] << 16), daz(y[i] << 16), s));
    c[i] = s;
  }
  return _mm512_load_ps(c);
}
#endif

// fp32 to bf16 as vcvtneps2bf16 converts (the ISA manual's
// convert_fp32_to_bfloat16), sixteen lanes: round to nearest even (overflow
// to Inf), NaN quieted (the high half with bit 6 set), and a denormal read
// as zero, sign kept. Natively the instruction (the avx512_bf16 tier only);
// SIMDe 0.7.4 has none, so the emulated build follows that definition lane
// by lane, denormals included, and the callers' handling of them (see
// float_to_bf16x16_cvtne) is tested on every machine.
#ifndef CONVBWD_EMULATE_AVX512
inline __m256i cvtne_bf16x16(__m512 v) { return (__m256i)_mm512_cvtneps_pbh(v); }
#else
inline __m256i cvtne_bf16x16(__m512 v) {
  alignas(64) uint32_t x[16];
  alignas(32) uint16_t h[16];
  _mm512_store_si512(x, _mm512_castps_si512(v));
  for (int i = 0; i < 16; ++i) {
    const uint32_t u = x[i];
    if ((u & 0x7f800000u) == 0)
      h[i] = static_cast<uint16_t>((u >> 16) & 0x8000u);
    else if ((u & 0x7fffffffu) > 0x7f800000u)
      h[i] = static_cast<uint16_t>((u >> 16) | 0x40u);
    else
      h[i] = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(h));
}
#endif

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
