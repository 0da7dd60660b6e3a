// Conversions between fp32/fp64 and the narrow formats, all round to nearest
// even unless named otherwise. Portable scalar code: the reference and the
// packing routines of every ISA share these, so there is one definition of
// each rounding.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "convbwd/convbwd.hpp"

namespace convbwd::detail {

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  // Adding 0x7fff plus the kept LSB rounds half to even; a carry into the
  // exponent is the correct overflow to the next binade or to Inf.
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

// Branch-free, so that the fast paths' element loops inline and vectorize
// it: the branchy version stayed an out-of-line call and cost more than the
// whole small-channel weight gradient it fed (fp16 4.7x slower than fp32).
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  const uint32_t exp = magnitude & 0x7c00u;
  // Normal: exponent rebiased from 15 to 127 (+112). Inf/NaN: exponent 31
  // to 255 (+224), the payload kept in the top mantissa bits.
  const uint32_t rebiased = (magnitude << 13) + (exp == 0x7c00u ? 224u << 23 : 112u << 23);
  // Subnormal or zero: magnitude * 2^-24, exact in fp32.
  const uint32_t tiny = std::bit_cast<uint32_t>(static_cast<float>(magnitude) * 0x1p-24f);
  return std::bit_cast<float>(sign | (exp == 0 ? tiny : rebiased));
}

inline uint16_t float_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (a >= 0x38800000u) {
    // Normal in fp16: rebias the exponent, round the 13 dropped bits.
    const uint32_t r = a - 0x38000000u;
    const uint32_t lsb = (r >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((r + 0xfffu + lsb) >> 13));
  }
  // Subnormal or zero in fp16: quantum 2^-24. Scaling by 2^24 is exact and
  // nearbyint rounds half to even in the default rounding mode.
  const float q = std::nearbyint(std::bit_cast<float>(a) * 0x1p24f);
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
}

// HF32: keep 11 mantissa bits of fp32, rounding half away from zero (CANN's
// hf32). Adding half the dropped quantum to the magnitude bits does exactly
// that, carrying into the exponent (and to Inf) as needed.
inline float round_to_hf32(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::bit_cast<float>(u | 0x00400000u);  // NaN stays NaN
  return std::bit_cast<float>((u + 0x800u) & 0xfffff000u);
}

inline float round_to_fp16(float f) { return f16_to_float(float_to_f16(f)); }

// Rounds a double once into a binary format with `precision` significand bits
// (implicit bit included), minimum normal exponent `emin` and largest finite
// value `max_finite`; overflow goes to Inf. Used by the reference, so that its
// fp64 sums are rounded once and not twice through fp32.
inline double round_double(double x, int precision, int emin, double max_finite) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  (void)std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int exp = (e - 1 < emin) ? emin : e - 1;
  const double quantum = std::ldexp(1.0, exp - (precision - 1));
  const double r = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(r) > max_finite) return std::copysign(HUGE_VAL, x);
  return r;
}

// Decodes one element of a tensor to fp32 (8-bit formats included).
float load_as_float(const void* base, int64_t index, DataType t);
// Rounds an fp64 value once into dtype t and stores it.
void store_from_double(void* base, int64_t index, DataType t, double v);
// Rounds an fp32 value into dtype t and stores it.
void store_from_float(void* base, int64_t index, DataType t, float v);

}  // namespace convbwd::detail
