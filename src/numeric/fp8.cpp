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
// Encoding is one rounding from fp64, done on the integer significand: a
// value 1.f * 2^e keeps the mantissa bits of its binade [2^e, 2^(e+1)) and
// rounds on the bits it drops. A carry out of the binade lands on 2^(e+1),
// which both formats represent (with a zero mantissa) or which saturates.
#include "numeric/fp8.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

namespace convbwd::detail {
namespace {

// ---- FLOAT8_E4M3FN ---------------------------------------------------------

constexpr int kE4m3Bias = 7;
constexpr int kE4m3MinExp = 1 - kE4m3Bias;  // -6, the smallest normal exponent
constexpr double kE4m3Max = 448.0;
constexpr uint8_t kE4m3MaxCode = 0x7e;
constexpr uint8_t kE4m3NanCode = 0x7f;

constexpr uint64_t kSigOne = uint64_t{1} << 52;  // fp64's implicit significand bit

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
constexpr int hif8_width(int e) { return std::bit_width(static_cast<unsigned>(e < 0 ? -e : e)); }

// Per binade [2^e, 2^(e+1)), e = -22..15: its mantissa bits and its code with
// a zero mantissa (dot, exponent sign, exponent magnitude sans its leading 1;
// for a denormal binade dot 0000 and M = e + 23).
struct Binade {
  int mantissa_bits;
  uint8_t code;
};
constexpr Binade hif8_binade(int e) {
  if (e < kHif8MinNormalExp) return {0, static_cast<uint8_t>(e + kHif8DenormalBias)};
  const int d = hif8_width(e);
  const DotRow& row = kDot[d];
  unsigned exp_field = 0;
  if (d > 0) {
    const auto mag = static_cast<unsigned>(e < 0 ? -e : e);
    exp_field = ((e < 0 ? 1u : 0u) << (d - 1)) | (mag - (1u << (d - 1)));
  }
  return {row.mantissa_bits, static_cast<uint8_t>(row.prefix | (exp_field << row.mantissa_bits))};
}
constexpr std::array<Binade, 38> kHif8Binades = [] {
  std::array<Binade, 38> t{};
  for (int e = kHif8MinDenormalExp; e <= 15; ++e) t[static_cast<size_t>(e - kHif8MinDenormalExp)] = hif8_binade(e);
  return t;
}();
static_assert(kHif8Binades[15 - kHif8MinDenormalExp].code == kHif8MaxCode);

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
static_assert(kE4m3Table[0x7e] == kE4m3Max && kE4m3Table[0x01] == pow2f(-9) && kE4m3Table[0x38] == 1.0f);
static_assert(kHif8Table[0x6e] == kHif8Max && kHif8Table[0x01] == pow2f(-22) && kHif8Table[0x08] == 1.0f);

}  // namespace

float e4m3fn_to_float(uint8_t code) { return kE4m3Table[code]; }

uint8_t double_to_e4m3fn(double v) {
  const auto bits = std::bit_cast<uint64_t>(v);
  const auto sign = static_cast<uint8_t>((bits >> 63) << 7);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t frac = bits & (kSigOne - 1);
  // No Inf in E4M3FN: infinities saturate like any other overflow, so that a
  // result keeps its sign and stays a number (the OCP "saturating" mode).
  if (biased == 0x7ff) return static_cast<uint8_t>(sign | (frac != 0 ? kE4m3NanCode : kE4m3MaxCode));
  const int e = biased - 1023;  // fp64 zeros and subnormals land far below
  // Below 2^-10, half the smallest subnormal, everything rounds to (signed) zero.
  if (e < kE4m3MinExp - 4) return sign;
  if (e > 8) return static_cast<uint8_t>(sign | kE4m3MaxCode);
  // q counts grid steps: 2^(e-3) in a normal binade, 2^-9 below 2^-6.
  const int shift = 49 + std::max(kE4m3MinExp - e, 0);  // 49..53
  const uint64_t sig = kSigOne | frac;
  uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1) != 0)) ++q;  // ties to even
  if (e < kE4m3MinExp) return static_cast<uint8_t>(sign | q);  // subnormal; q = 8 is the code of 2^-6
  int re = e;
  if (q == 16) {  // carried into the next binade
    q = 8;
    ++re;
  }
  // 1.111 * 2^8 = 480 is the NaN code: saturate at 448.
  if (re > 8 || (re == 8 && q > 14)) return static_cast<uint8_t>(sign | kE4m3MaxCode);
  return static_cast<uint8_t>(sign | (static_cast<unsigned>(re + kE4m3Bias) << 3) | (q - 8));
}

float hif8_to_float(uint8_t code) { return kHif8Table[code]; }

uint8_t double_to_hif8(double v) {
  const auto bits = std::bit_cast<uint64_t>(v);
  const auto sign = static_cast<uint8_t>((bits >> 63) << 7);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t frac = bits & (kSigOne - 1);
  // HiFloat8 has infinities: an infinite input (which an fp64 sum of 8-bit
  // products only reaches from an infinite operand) stays infinite.
  if (biased == 0x7ff) return frac != 0 ? kHif8NanCode : static_cast<uint8_t>(sign | kHif8InfCode);
  const int e = biased - 1023;  // fp64 zeros and subnormals land far below
  // Everything from the largest finite value 2^15 up saturates to it, as the
  // operator's contract asks (the paper's non-saturating mode would round
  // values from 1.25 * 2^15 up to Inf instead).
  if (e >= 15) return static_cast<uint8_t>(sign | kHif8MaxCode);
  // Below 2^-22 the neighbours are 0 and 2^-22, with the tie at 2^-23. There
  // is one zero only (0x80 is NaN), so negative values that round to zero
  // give +0.
  if (e < kHif8MinDenormalExp - 1) return 0x00;
  if (e == kHif8MinDenormalExp - 1) return static_cast<uint8_t>(sign | 0x01);
  const Binade& b = kHif8Binades[static_cast<size_t>(e - kHif8MinDenormalExp)];
  const int shift = 52 - b.mantissa_bits;
  // Adding half a step before truncating rounds half away from zero on the
  // magnitude: the paper's TA rounding.
  const uint64_t q = ((kSigOne | frac) + (uint64_t{1} << (shift - 1))) >> shift;
  if (q >> (b.mantissa_bits + 1) != 0)  // carried to 2^(e+1): a zero mantissa in the next binade
    return static_cast<uint8_t>(sign | kHif8Binades[static_cast<size_t>(e + 1 - kHif8MinDenormalExp)].code);
  return static_cast<uint8_t>(sign | b.code | (q - (uint64_t{1} << b.mantissa_bits)));
}

}  // namespace convbwd::detail
