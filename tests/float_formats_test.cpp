// The narrow float formats against computations from their definitions:
// decoding from the sign/exponent/mantissa fields, encoding by searching the
// table of representable values for the nearest one (ties to the even code),
// HF32 by rounding the magnitude half away from zero on its quantum, and
// round_double against the hardware's double -> float conversion.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "numeric/float_formats.hpp"

namespace convbwd::test {
namespace {

using detail::bf16_to_float;
using detail::f16_to_float;
using detail::float_to_bf16;
using detail::float_to_f16;
using detail::round_double;
using detail::round_to_hf32;

// A binary16-like format: `ebits` exponent bits, `mbits` stored mantissa bits.
struct Format {
  int ebits, mbits;
  int bias() const { return (1 << (ebits - 1)) - 1; }
  uint32_t inf_code() const { return ((1u << ebits) - 1) << mbits; }
};
constexpr Format kF16{5, 10}, kBf16{8, 7};

// Value of a code from its fields (NaN for NaN codes).
double decode(Format f, uint32_t code) {
  const bool neg = (code >> (f.ebits + f.mbits)) & 1;
  const uint32_t e = (code >> f.mbits) & ((1u << f.ebits) - 1);
  const uint32_t m = code & ((1u << f.mbits) - 1);
  double mag;
  if (e == (1u << f.ebits) - 1)
    mag = m == 0 ? HUGE_VAL : std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    mag = std::ldexp(static_cast<double>(m), 1 - f.bias() - f.mbits);  // subnormal: no implicit bit
  else
    mag = std::ldexp(static_cast<double>(m + (1u << f.mbits)), static_cast<int>(e) - f.bias() - f.mbits);
  return neg ? -mag : mag;
}

// Positive values of codes 0 .. inf_code, with inf_code standing for the
// first value of the next binade (2^(emax+1)): rounding with an unbounded
// exponent and then overflowing is IEEE's rule.
std::vector<double> positive_table(Format f) {
  std::vector<double> t(f.inf_code() + 1);
  for (uint32_t c = 0; c < f.inf_code(); ++c) t[c] = decode(f, c);
  t[f.inf_code()] = std::ldexp(1.0, f.bias() + 1);
  return t;
}

// The code nearest to x, ties to the even code; beyond the table: Inf.
// Searches from a cursor, so that the sweeps below, whose magnitudes mostly
// increase, cost O(1) per query.
class Nearest {
 public:
  Nearest(Format f) : f_(f), table_(positive_table(f)) {}  // NOLINT(google-explicit-constructor)
  uint32_t operator()(double x) {
    const uint32_t sign = std::signbit(x) ? 1u << (f_.ebits + f_.mbits) : 0;
    const double a = std::fabs(x);
    if (a >= table_.back()) return sign | f_.inf_code();
    // The largest code with value <= a.
    if (table_[at_] > a || (at_ + 64 < table_.size() && table_[at_ + 64] <= a))
      at_ = static_cast<uint32_t>(std::upper_bound(table_.begin(), table_.end(), a) - table_.begin()) - 1;
    while (table_[at_ + 1] <= a) ++at_;
    const double below = a - table_[at_], above = table_[at_ + 1] - a;
    uint32_t c = at_;
    if (above < below || (above == below && (at_ & 1))) c = at_ + 1;
    return sign | c;
  }

 private:
  Format f_;
  std::vector<double> table_;
  uint32_t at_ = 0;
};

bool same_float(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// --- decoding: exhaustive ----------------------------------------------------

TEST(FloatFormats, F16DecodeAllCodes) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const double want = decode(kF16, c);
    const float got = f16_to_float(static_cast<uint16_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << c;
      EXPECT_EQ(std::signbit(got), (c & 0x8000) != 0) << std::hex << c;
    } else {
      ASSERT_TRUE(same_float(got, static_cast<float>(want))) << std::hex << c << " got " << got << " want " << want;
    }
  }
}

TEST(FloatFormats, Bf16DecodeAllCodes) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const double want = decode(kBf16, c);
    const float got = bf16_to_float(static_cast<uint16_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << c;
      EXPECT_EQ(std::signbit(got), (c & 0x8000) != 0) << std::hex << c;
    } else {
      ASSERT_TRUE(same_float(got, static_cast<float>(want))) << std::hex << c << " got " << got << " want " << want;
    }
  }
}

// Encode then decode returns every non-NaN code unchanged.
TEST(FloatFormats, RoundTripAllCodes) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto h = static_cast<uint16_t>(c);
    if (!std::isnan(f16_to_float(h))) {
      ASSERT_EQ(float_to_f16(f16_to_float(h)), h) << std::hex << c;
    } else {
      ASSERT_TRUE(std::isnan(f16_to_float(float_to_f16(f16_to_float(h))))) << std::hex << c;
    }
    if (!std::isnan(bf16_to_float(h))) {
      ASSERT_EQ(float_to_bf16(bf16_to_float(h)), h) << std::hex << c;
    } else {
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bf16_to_float(h))))) << std::hex << c;
    }
  }
}

// --- encoding: a sweep of fp32 patterns ---------------------------------------

// Every 97th of the 2^32 fp32 patterns (97 is prime, so the sweep visits
// every exponent and every low-bit residue), plus every pattern whose low 16
// bits sit at or next to a rounding tie of either format.
template <class F>
void sweep_fp32(F&& check) {
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 97) check(static_cast<uint32_t>(u));
  for (uint32_t hi = 0; hi < 65536; hi += 3)
    for (uint32_t lo : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      check((hi << 16) | lo);
}

TEST(FloatFormats, F16EncodeSweep) {
  Nearest nearest(kF16);
  sweep_fp32([&](uint32_t u) {
    const float f = std::bit_cast<float>(u);
    const uint16_t got = float_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_float(got))) << std::hex << u;
      ASSERT_EQ(got >> 15, u >> 31) << std::hex << u;
      return;
    }
    ASSERT_EQ(got, nearest(f)) << std::hex << "pattern 0x" << u << " value " << f;
  });
}

TEST(FloatFormats, Bf16EncodeSweep) {
  Nearest nearest(kBf16);
  sweep_fp32([&](uint32_t u) {
    const float f = std::bit_cast<float>(u);
    const uint16_t got = float_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(got))) << std::hex << u;
      ASSERT_EQ(got >> 15, u >> 31) << std::hex << u;
      return;
    }
    ASSERT_EQ(got, nearest(f)) << std::hex << "pattern 0x" << u << " value " << f;
  });
}

// Boundaries worked out by hand from the binary16 definition.
TEST(FloatFormats, F16EncodeBoundaries) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);             // max finite
  EXPECT_EQ(float_to_f16(65519.996f), 0x7bff);           // just below the overflow threshold
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);             // the tie with 2^16 goes to the even code: Inf
  EXPECT_EQ(float_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_f16(HUGE_VALF), 0x7c00);
  EXPECT_EQ(float_to_f16(-HUGE_VALF), 0xfc00);
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(0x1p-14f), 0x0400);             // min normal
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);             // min subnormal
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);             // half of it: tie to even (0)
  EXPECT_EQ(float_to_f16(0x1.000002p-25f), 0x0001);      // just above the tie
  EXPECT_EQ(float_to_f16(0x3p-25f), 0x0002);             // 1.5 quanta: tie to even (2)
  EXPECT_EQ(float_to_f16(-0x5p-25f), 0x8002);            // 2.5 quanta: tie to even (2)
  EXPECT_EQ(float_to_f16(0x1.ff8p-15f), 0x03ff);         // max subnormal, 1023 * 2^-24
  EXPECT_EQ(float_to_f16(0x1.ffap-15f), 0x03ff);         // 1023.25 quanta
  EXPECT_EQ(float_to_f16(0x1.ffcp-15f), 0x0400);         // 1023.5 quanta: tie, odd goes up into the normals
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3c00);      // tie, even stays
  EXPECT_EQ(float_to_f16(1.0f + 0x3p-11f), 0x3c02);      // tie, odd goes up
  EXPECT_EQ(float_to_f16(2047.0f), 0x67ff);
  EXPECT_EQ(float_to_f16(2049.0f), 0x6800);              // tie between 2048 and 2050: 2048
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(std::bit_cast<float>(0x7f800001u)))));  // sNaN stays NaN
}

TEST(FloatFormats, Bf16EncodeBoundaries) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd goes up
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);  // below the top tie
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7f8000u)), 0x7f80);  // tie with 2^128: Inf
  EXPECT_EQ(float_to_bf16(FLT_MAX), 0x7f80);
  EXPECT_EQ(float_to_bf16(-FLT_MAX), 0xff80);
  EXPECT_EQ(float_to_bf16(HUGE_VALF), 0x7f80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00000001u)), 0x0000);  // tiny subnormal
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);  // tie to even 0
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x007fffffu)), 0x0080);  // max subnormal rounds to min normal
  const uint16_t nan = float_to_bf16(std::bit_cast<float>(0x7f800001u));  // sNaN whose payload is in the low bits
  EXPECT_TRUE(std::isnan(bf16_to_float(nan))) << std::hex << nan;
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(-std::numeric_limits<float>::quiet_NaN()))));
}

// --- HF32 ----------------------------------------------------------------------

// HF32 from its definition: 11 stored mantissa bits, fp32's exponent range
// (subnormals on fp32's grid cut to the same 11-bit quantum), the magnitude
// rounded half away from zero.
float hf32_expected(float f) {
  if (!std::isfinite(f) || f == 0) return f;
  const double a = std::fabs(static_cast<double>(f));
  int e = 0;
  (void)std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int exp = std::max(e - 1, -126);
  const double quantum = std::ldexp(1.0, exp - 11);
  const double r = std::floor(a / quantum + 0.5) * quantum;  // a/quantum < 2^24: exact, +0.5 exact
  const double mag = r >= std::ldexp(1.0, 128) ? HUGE_VAL : r;
  return static_cast<float>(std::signbit(f) ? -mag : mag);
}

TEST(FloatFormats, Hf32Sweep) {
  sweep_fp32([&](uint32_t u) {
    const float f = std::bit_cast<float>(u);
    const float got = round_to_hf32(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << u;
      ASSERT_EQ(std::signbit(got), std::signbit(f)) << std::hex << u;
      return;
    }
    ASSERT_TRUE(same_float(got, hf32_expected(f)))
        << std::hex << "pattern 0x" << u << " got 0x" << std::bit_cast<uint32_t>(got) << " want 0x"
        << std::bit_cast<uint32_t>(hf32_expected(f));
  });
}

TEST(FloatFormats, Hf32TiesAwayFromZeroAndSpecials) {
  auto hf = [](uint32_t u) { return std::bit_cast<uint32_t>(round_to_hf32(std::bit_cast<float>(u))); };
  EXPECT_EQ(hf(0x3f800800u), 0x3f801000u);  // 1 + 2^-12: tie, away from zero (not to even)
  EXPECT_EQ(hf(0xbf800800u), 0xbf801000u);  // and for negatives, away from zero too
  EXPECT_EQ(hf(0x3f801800u), 0x3f802000u);  // odd kept bit: away as well
  EXPECT_EQ(hf(0x3f8007ffu), 0x3f800000u);  // below the tie: down
  EXPECT_EQ(hf(0x3ffff800u), 0x40000000u);  // carries into the exponent
  EXPECT_EQ(hf(0x7f7ff800u), 0x7f800000u);  // carries to Inf
  EXPECT_EQ(hf(0x7f7ff7ffu), 0x7f7ff000u);
  EXPECT_EQ(hf(0x7f800000u), 0x7f800000u);  // Inf stays
  EXPECT_EQ(hf(0xff800000u), 0xff800000u);
  EXPECT_EQ(hf(0x80000000u), 0x80000000u);  // -0 stays
  EXPECT_EQ(hf(0x00000800u), 0x00001000u);  // subnormal tie
  EXPECT_EQ(hf(0x000007ffu), 0x00000000u);
  for (uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xffc00001u, 0x7f800800u, 0x7fbff800u}) {
    const float r = round_to_hf32(std::bit_cast<float>(nan));
    EXPECT_TRUE(std::isnan(r)) << std::hex << nan;  // a NaN whose high bits are clear must not become Inf
    EXPECT_EQ(std::signbit(r), (nan >> 31) != 0) << std::hex << nan;
  }
}

// --- round_double ------------------------------------------------------------------

// Doubles spread over every binade of interest, with random low bits, exact
// ties of the narrow formats, and their neighbours.
std::vector<double> double_samples() {
  std::vector<double> v;
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  for (int e = -160; e <= 130; ++e)
    for (int i = 0; i < 200; ++i) {
      const double x = std::ldexp(mant(rng), e);
      v.push_back(x);
      v.push_back(-x);
    }
  for (int e = -150; e <= 129; ++e)
    for (int bits : {8, 11, 24})
      for (int64_t m = (int64_t{1} << bits); m < (int64_t{1} << bits) + 40; ++m) {
        // m + 1/2 on the quantum of a `bits`-bit significand: a tie.
        const double tie = std::ldexp(static_cast<double>(2 * m + 1), e - bits);
        v.push_back(tie);
        v.push_back(std::nextafter(tie, 0.0));
        v.push_back(std::nextafter(tie, HUGE_VAL));
        v.push_back(-tie);
      }
  for (double x : {0.0, -0.0, 65504.0, 65519.999, 65520.0, 65536.0, 0x1p-24, 0x1p-25, 0x3p-26, 0x1.fep127,
                   0x1.ffp127, 0x1.fffffep127, 0x1.fffffefp127, 0x1.ffffffp127, 0x1p128, 0x1p-149, 0x1p-150,
                   0x1.8p-149, 0x1.0000000001p-150})
    v.push_back(x), v.push_back(-x);
  return v;
}

// fp32: the hardware's double -> float conversion rounds to nearest even with
// gradual underflow and overflow to Inf: an independent implementation.
TEST(FloatFormats, RoundDoubleMatchesHardwareFloat) {
  for (double x : double_samples()) {
    const double got = round_double(x, 24, -126, FLT_MAX);
    const double want = static_cast<double>(static_cast<float>(x));
    ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << std::hexfloat << x;
  }
}

TEST(FloatFormats, RoundDoubleMatchesNearestF16AndBf16) {
  Nearest f16_of(kF16), bf16_of(kBf16);
  for (double x : double_samples()) {
    const double f16 = decode(kF16, f16_of(x));
    const double b16 = decode(kBf16, bf16_of(x));
    ASSERT_EQ(std::bit_cast<uint64_t>(round_double(x, 11, -14, 65504.0)), std::bit_cast<uint64_t>(f16))
        << std::hexfloat << x;
    ASSERT_EQ(std::bit_cast<uint64_t>(round_double(x, 8, -126, 0x1.fep127)), std::bit_cast<uint64_t>(b16))
        << std::hexfloat << x;
  }
}

TEST(FloatFormats, RoundDoubleSpecials) {
  EXPECT_TRUE(std::isnan(round_double(std::numeric_limits<double>::quiet_NaN(), 11, -14, 65504.0)));
  EXPECT_EQ(round_double(HUGE_VAL, 11, -14, 65504.0), HUGE_VAL);
  EXPECT_EQ(round_double(-HUGE_VAL, 8, -126, 0x1.fep127), -HUGE_VAL);
  EXPECT_TRUE(std::signbit(round_double(-0.0, 11, -14, 65504.0)));
  EXPECT_TRUE(std::signbit(round_double(-0x1p-30, 11, -14, 65504.0)));  // underflows to -0
  EXPECT_EQ(round_double(1e300, 24, -126, FLT_MAX), HUGE_VAL);
}

// Storing an fp64 sum into a 16-bit dtype rounds once: 1 + 2^-11 + 2^-40 is
// above the fp16 tie between 1 and 1 + 2^-10, but rounding through fp32
// first would land exactly on the tie and go to 1.
TEST(FloatFormats, StoreFromDoubleRoundsOnce) {
  uint16_t h = 0;
  detail::store_from_double(&h, 0, DataType::f16, 1.0 + 0x1p-11 + 0x1p-40);
  EXPECT_EQ(h, 0x3c01);
  detail::store_from_double(&h, 0, DataType::bf16, 1.0 + 0x1p-8 + 0x1p-40);
  EXPECT_EQ(h, 0x3f81);
  detail::store_from_double(&h, 0, DataType::f16, -1e6);
  EXPECT_EQ(h, 0xfc00);
  detail::store_from_double(&h, 0, DataType::f16, 65519.99);
  EXPECT_EQ(h, 0x7bff);
  Nearest f16_of(kF16), bf16_of(kBf16);
  for (double x : double_samples()) {
    detail::store_from_double(&h, 0, DataType::f16, x);
    ASSERT_EQ(h, f16_of(x)) << std::hexfloat << x;
    detail::store_from_double(&h, 0, DataType::bf16, x);
    ASSERT_EQ(h, bf16_of(x)) << std::hexfloat << x;
    float f = 0;
    detail::store_from_double(&f, 0, DataType::f32, x);
    ASSERT_TRUE(same_float(f, static_cast<float>(x))) << std::hexfloat << x;
    ASSERT_EQ(detail::load_as_float(&f, 0, DataType::f32), f);
  }
}

}  // namespace
}  // namespace convbwd::test
