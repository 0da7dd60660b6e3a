// The two 8-bit float formats of transposed gradInput.
//
// FLOAT8_E4M3FN (OCP 8-bit floating point specification, "E4M3"):
//   S.EEEE.MMM, bias 7. E = 0 is subnormal (M * 2^-9). No infinities;
//   S.1111.111 is the only NaN, so the largest finite value is
//   S.1111.110 = 1.75 * 2^8 = 448. Both zeros exist.
//
// HiFloat8 (Luo et al., "Ascend HiFloat8 Format for Deep Learning",
// arXiv 2409.16626): S | dot | exponent | mantissa, where the dot field is a
// prefix code that gives the width D of the exponent field:
//   dot 11 -> D = 4, 1 mantissa bit      exponents +-8..15
//   dot 10 -> D = 3, 2 mantissa bits     exponents +-4..7
//   dot 01 -> D = 2, 3 mantissa bits     exponents +-2..3
//   dot 001 -> D = 1, 3 mantissa bits    exponents +-1
//   dot 0001 -> D = 0, 3 mantissa bits   exponent 0
//   dot 0000 -> denormal: the 3 remaining bits M give 2^(M - 23), M = 1..7
// The exponent is sign-magnitude: its first stored bit is the exponent's
// sign (1 = negative), and the magnitude's leading 1 is implicit (not
// stored), so D stored bits cover magnitudes 2^(D-1) .. 2^D - 1. A normal
// value is (-1)^S * 2^E * 1.M. Special values: 0x00 is the only zero, 0x80
// (a "negative zero") is the only NaN, and S.11.0111.1 (0x6F, 0xEF), the code
// that would be 1.5 * 2^15, is +-Inf. The largest finite value is therefore
// 2^15 = 32768 (0x6E), the smallest normal 2^-15 (0x7E) and the smallest
// denormal 2^-22 (0x01).
//
// Encoding is one rounding from fp64. Every fp64 value lies in some binade
// [2^e, 2^(e+1)) whose grid spacing is 2^(e - mantissa bits of that binade),
// so rounding to that quantum and re-encoding is exact: a carry out of the
// binade lands on 2^(e+1), which every format here can represent (or which
// saturates). Both multiplications by powers of two are exact in fp64.
#include "numeric/fp8.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace convbwd::detail {
namespace {

// Rounds a non-negative x (< 2^53) to an integer, half to even, independent
// of the floating-point environment's rounding mode.
double round_half_even(double x) {
  const double f = std::floor(x);
  const double d = x - f;  // exact: f and x share the binade or f = 0
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

// ---- FLOAT8_E4M3FN ---------------------------------------------------------

constexpr int kE4m3Bias = 7;
constexpr int kE4m3MinExp = 1 - kE4m3Bias;  // -6, the smallest normal exponent
constexpr double kE4m3Max = 448.0;
constexpr uint8_t kE4m3MaxCode = 0x7e;
constexpr uint8_t kE4m3NanCode = 0x7f;

// ---- HiFloat8 --------------------------------------------------------------

constexpr uint8_t kHif8NanCode = 0x80;
constexpr uint8_t kHif8InfCode = 0x6f;
constexpr uint8_t kHif8MaxCode = 0x6e;
constexpr double kHif8Max = 32768.0;  // 2^15
constexpr int kHif8MinNormalExp = -15;
constexpr int kHif8MinDenormalExp = -22;
constexpr int kHif8DenormalBias = 23;  // denormal value 2^(M - 23)

// One row per exponent width D (index): the dot prefix already placed in
// bits 6..3 of the code, and the mantissa width that D leaves.
struct DotRow {
  uint8_t prefix;
  int mantissa_bits;
};
constexpr DotRow kDot[5] = {
    {0x08, 3},  // D = 0: dot 0001
    {0x10, 3},  // D = 1: dot 001
    {0x20, 3},  // D = 2: dot 01
    {0x40, 2},  // D = 3: dot 10
    {0x60, 1},  // D = 4: dot 11
};

// The exponent width D that a normal exponent needs: the bit width of |e|
// (the leading magnitude bit is implicit, the sign takes its place).
int hif8_width(int e) { return std::bit_width(static_cast<unsigned>(e < 0 ? -e : e)); }

// Mantissa bits of the binade [2^e, 2^(e+1)); denormal binades have none.
int hif8_mantissa_bits(int e) { return e < kHif8MinNormalExp ? 0 : kDot[hif8_width(e)].mantissa_bits; }

// Code of a positive value r that HiFloat8 represents exactly (r <= 2^15).
uint8_t hif8_encode_exact(double r) {
  const int e = std::ilogb(r);
  if (e < kHif8MinNormalExp) return static_cast<uint8_t>(e + kHif8DenormalBias);  // dot 0000, M = e + 23
  const int d = hif8_width(e);
  const DotRow& row = kDot[d];
  const auto mant = static_cast<unsigned>(std::ldexp(r, row.mantissa_bits - e)) - (1u << row.mantissa_bits);
  unsigned exp_field = 0;
  if (d > 0) {
    const unsigned mag = static_cast<unsigned>(e < 0 ? -e : e);
    exp_field = ((e < 0 ? 1u : 0u) << (d - 1)) | (mag - (1u << (d - 1)));  // sign, then magnitude sans its leading 1
  }
  return static_cast<uint8_t>(row.prefix | (exp_field << row.mantissa_bits) | mant);
}

// ---- decoding: 256-entry tables built at compile time ---------------------------
// The reference and the packing routines decode once per element read, so a
// decode is one load. std::ldexp is not constexpr in C++20; products of exact
// powers of two are.

constexpr float pow2f(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr float kPosNan = std::bit_cast<float>(0x7fc00000u);
constexpr float kNegNan = std::bit_cast<float>(0xffc00000u);

constexpr float e4m3_decode(unsigned code) {
  const bool negative = (code & 0x80u) != 0;
  const int exp_field = static_cast<int>((code >> 3) & 0xfu);
  const int mant = static_cast<int>(code & 0x7u);
  if ((code & 0x7fu) == kE4m3NanCode) return negative ? kNegNan : kPosNan;
  const float mag = exp_field == 0 ? static_cast<float>(mant) * pow2f(kE4m3MinExp - 3)
                                   : static_cast<float>(8 + mant) * pow2f(exp_field - kE4m3Bias - 3);
  return negative ? -mag : mag;
}

constexpr float hif8_decode(unsigned code) {
  const bool negative = (code & 0x80u) != 0;
  const unsigned body = code & 0x7fu;
  if (body == 0) return negative ? kPosNan : 0.0f;
  if (body == kHif8InfCode) return negative ? -kPosInf : kPosInf;
  float mag = 0;
  if (body < 0x08) {  // dot 0000: denormal 2^(M - 23)
    mag = pow2f(static_cast<int>(body) - kHif8DenormalBias);
  } else {
    // Read the dot prefix code from bit 6 down: 1x -> D = 3 + x; 01 -> 2;
    // 001 -> 1; 0001 -> 0.
    const int d = body >= 0x20 ? static_cast<int>(body >> 5) + 1 : body >= 0x10 ? 1 : 0;
    const DotRow& row = kDot[d];
    const unsigned mant = body & ((1u << row.mantissa_bits) - 1);
    int e = 0;
    if (d > 0) {
      const unsigned exp_field = (body >> row.mantissa_bits) & ((1u << d) - 1);
      const int mag_e = static_cast<int>((1u << (d - 1)) | (exp_field & ((1u << (d - 1)) - 1)));
      e = (exp_field >> (d - 1)) != 0 ? -mag_e : mag_e;
    }
    mag = static_cast<float>((1u << row.mantissa_bits) | mant) * pow2f(e - row.mantissa_bits);
  }
  return negative ? -mag : mag;
}

template <class Decode>
constexpr std::array<float, 256> table_of(Decode decode) {
  std::array<float, 256> t{};
  for (unsigned c = 0; c < 256; ++c) t[c] = decode(c);
  return t;
}

constexpr std::array<float, 256> kE4m3Table = table_of(e4m3_decode);
constexpr std::array<float, 256> kHif8Table = table_of(hif8_decode);
static_assert(kE4m3Table[0x7e] == 448.0f && kE4m3Table[0x01] == pow2f(-9) && kE4m3Table[0x38] == 1.0f);
static_assert(kHif8Table[0x6e] == 32768.0f && kHif8Table[0x01] == pow2f(-22) && kHif8Table[0x08] == 1.0f);

}  // namespace

float e4m3fn_to_float(uint8_t code) { return kE4m3Table[code]; }

uint8_t double_to_e4m3fn(double v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  if (std::isnan(v)) return static_cast<uint8_t>(sign | kE4m3NanCode);
  // No Inf in E4M3FN: infinities saturate like any other overflow, so that a
  // result keeps its sign and stays a number (the OCP "saturating" mode).
  if (std::isinf(v)) return static_cast<uint8_t>(sign | kE4m3MaxCode);
  const double a = std::fabs(v);
  if (a == 0) return sign;  // E4M3FN keeps the sign of zero
  const int e = std::max(std::ilogb(a), kE4m3MinExp);  // subnormals share the quantum of the lowest binade
  const int quantum_exp = e - 3;
  const double r = std::ldexp(round_half_even(std::ldexp(a, -quantum_exp)), quantum_exp);
  if (r > kE4m3Max) return static_cast<uint8_t>(sign | kE4m3MaxCode);  // saturate (480 would be the NaN code)
  if (r == 0) return sign;
  const int re = std::ilogb(r);
  if (re < kE4m3MinExp) return static_cast<uint8_t>(sign | static_cast<unsigned>(std::ldexp(r, 3 - kE4m3MinExp)));
  const auto mant = static_cast<unsigned>(std::ldexp(r, 3 - re)) - 8u;
  return static_cast<uint8_t>(sign | (static_cast<unsigned>(re + kE4m3Bias) << 3) | mant);
}

float hif8_to_float(uint8_t code) { return kHif8Table[code]; }

uint8_t double_to_hif8(double v) {
  if (std::isnan(v)) return kHif8NanCode;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  // HiFloat8 has infinities: an infinite input (which an fp64 sum of 8-bit
  // products only reaches from an infinite operand) stays infinite. Finite
  // overflow saturates below.
  if (std::isinf(v)) return static_cast<uint8_t>(sign | kHif8InfCode);
  const double a = std::fabs(v);
  // Everything from the largest finite value up saturates to it, as the
  // operator's contract asks (in the paper's non-saturating mode values from
  // 1.25 * 2^15 up would round to Inf instead).
  if (a >= kHif8Max) return static_cast<uint8_t>(sign | kHif8MaxCode);
  // Below 2^-22 the only neighbours are 0 and 2^-22: the quantum of the lowest
  // denormal binade, which has no mantissa bits.
  const int e = std::max(std::ilogb(a), kHif8MinDenormalExp);  // a == 0 gives a huge negative ilogb
  const int quantum_exp = e - hif8_mantissa_bits(e);
  // std::round rounds half away from zero whatever the rounding mode: the
  // paper's TA rounding.
  const double r = std::ldexp(std::round(std::ldexp(a, -quantum_exp)), quantum_exp);
  // One zero only (0x80 is NaN), so a negative value that rounds to zero is +0.
  if (r == 0) return 0x00;
  if (r >= kHif8Max) return static_cast<uint8_t>(sign | kHif8MaxCode);
  return static_cast<uint8_t>(sign | hif8_encode_exact(r));
}

}  // namespace convbwd::detail
