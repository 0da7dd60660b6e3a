// The 8-bit float formats, exhaustively: every one of the 256 codes of each
// format is decoded and compared with a table built here from the formats'
// published field layouts (written as bit patterns, not as the library's
// branches), and encoding is compared with a brute-force nearest-value oracle
// over that table at every midpoint, just beside it, and at random values.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "numeric/fp8.hpp"

namespace {

using convbwd::detail::double_to_e4m3fn;
using convbwd::detail::double_to_hif8;
using convbwd::detail::e4m3fn_to_float;
using convbwd::detail::hif8_to_float;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string hex(unsigned code) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", code);
  return buf;
}

// ---- the test's own tables ------------------------------------------------------

// Extracts the bits of `code` at the positions where `pattern` (8 chars, MSB
// first) has character c, as an unsigned number (MSB first).
unsigned field(const char* pattern, unsigned code, char c) {
  unsigned v = 0;
  for (int i = 0; i < 8; ++i)
    if (pattern[i] == c) v = (v << 1) | ((code >> (7 - i)) & 1u);
  return v;
}
int width(const char* pattern, char c) { return static_cast<int>(std::count(pattern, pattern + 8, c)); }
bool matches(const char* pattern, unsigned code) {
  for (int i = 0; i < 8; ++i) {
    const unsigned bit = (code >> (7 - i)) & 1u;
    if ((pattern[i] == '0' && bit != 0) || (pattern[i] == '1' && bit != 1)) return false;
  }
  return true;
}

// HiFloat8 from the paper's Table of fields. s: sign; 0/1: the dot prefix
// code; x: exponent sign; e: exponent magnitude without its implicit leading
// 1; m: mantissa; d: the denormal exponent code. Special values come first and
// take precedence.
struct HifRow {
  const char* pattern;
  enum Kind { zero, nan, inf, normal, denormal } kind;
};
constexpr HifRow kHifRows[] = {
    {"00000000", HifRow::zero},    {"10000000", HifRow::nan},     {"s1101111", HifRow::inf},
    {"s11xeeem", HifRow::normal},  // D = 4: exponent +-(8..15), 1 mantissa bit
    {"s10xeemm", HifRow::normal},  // D = 3: exponent +-(4..7), 2 mantissa bits
    {"s01xemmm", HifRow::normal},  // D = 2: exponent +-(2..3), 3 mantissa bits
    {"s001xmmm", HifRow::normal},  // D = 1: exponent +-1, 3 mantissa bits
    {"s0001mmm", HifRow::normal},  // D = 0: exponent 0, 3 mantissa bits
    {"s0000ddd", HifRow::denormal},  // 2^(ddd - 23), ddd = 1..7
};

double hif8_table_value(unsigned code, int* row_out = nullptr) {
  for (int r = 0; r < static_cast<int>(std::size(kHifRows)); ++r) {
    const HifRow& row = kHifRows[r];
    if (!matches(row.pattern, code)) continue;
    if (row_out) *row_out = r;
    const double sign = field(row.pattern, code, 's') ? -1.0 : 1.0;
    switch (row.kind) {
      case HifRow::zero: return 0.0;
      case HifRow::nan: return kNaN;
      case HifRow::inf: return sign * kInf;
      case HifRow::denormal: return sign * std::pow(2.0, static_cast<double>(field(row.pattern, code, 'd')) - 23);
      case HifRow::normal: {
        const int d = width(row.pattern, 'x') + width(row.pattern, 'e');  // stored exponent width D
        double exponent = 0;
        if (d > 0) {
          const double magnitude = std::pow(2.0, d - 1) + field(row.pattern, code, 'e');
          exponent = field(row.pattern, code, 'x') ? -magnitude : magnitude;
        }
        const int mb = width(row.pattern, 'm');
        const double significand = 1.0 + field(row.pattern, code, 'm') / std::pow(2.0, mb);
        return sign * significand * std::pow(2.0, exponent);
      }
    }
  }
  ADD_FAILURE() << "no HiFloat8 row matches " << hex(code);
  return kNaN;
}

// FLOAT8_E4M3FN from the OCP specification: S.EEEE.MMM, bias 7, subnormals at
// E = 0, S.1111.111 NaN, no Inf.
double e4m3_table_value(unsigned code) {
  const char* p = "seeeemmm";
  const double sign = field(p, code, 's') ? -1.0 : 1.0;
  const unsigned e = field(p, code, 'e'), m = field(p, code, 'm');
  if (e == 15 && m == 7) return kNaN;
  if (e == 0) return sign * (m / 8.0) * std::pow(2.0, -6);
  return sign * (1.0 + m / 8.0) * std::pow(2.0, static_cast<double>(e) - 7);
}

// ---- the rounding oracle ----------------------------------------------------------

struct Grid {
  std::vector<double> value;  // non-negative finite values, ascending
  std::vector<unsigned> code;
};

Grid grid_of(double (*table)(unsigned)) {
  std::vector<std::pair<double, unsigned>> v;
  for (unsigned c = 0; c < 128; ++c) {
    const double x = table(c);
    if (std::isfinite(x)) v.push_back({x, c});
  }
  std::sort(v.begin(), v.end());
  Grid g;
  for (auto& [x, c] : v) {
    g.value.push_back(x);
    g.code.push_back(c);
  }
  return g;
}
double hif8_table(unsigned c) { return hif8_table_value(c); }
double e4m3_table(unsigned c) { return e4m3_table_value(c); }

enum class Ties { away, even };

// The code nearest to x by absolute distance (ties by the rule), saturating
// at the largest finite value. Sign handling is the caller's.
unsigned nearest_magnitude(const Grid& g, double a, Ties ties) {
  if (a >= g.value.back()) return g.code.back();
  const size_t hi = static_cast<size_t>(std::upper_bound(g.value.begin(), g.value.end(), a) - g.value.begin());
  const size_t lo = hi - 1;  // g.value[0] == 0 <= a
  const double dlo = a - g.value[lo], dhi = g.value[hi] - a;
  if (dlo < dhi) return g.code[lo];
  if (dhi < dlo) return g.code[hi];
  if (ties == Ties::away) return g.code[hi];
  return (g.code[lo] & 1u) == 0 ? g.code[lo] : g.code[hi];
}

unsigned hif8_oracle(const Grid& g, double x) {
  if (std::isnan(x)) return 0x80;
  if (std::isinf(x)) return x > 0 ? 0x6F : 0xEF;
  const unsigned c = nearest_magnitude(g, std::fabs(x), Ties::away);
  if (c == 0) return 0x00;  // one zero; 0x80 is NaN
  return std::signbit(x) ? c | 0x80 : c;
}

unsigned e4m3_oracle(const Grid& g, double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xFF : 0x7F;
  const unsigned c = std::isinf(x) ? g.code.back() : nearest_magnitude(g, std::fabs(x), Ties::even);
  return std::signbit(x) ? c | 0x80 : c;
}

// ---- decode: all 256 codes -----------------------------------------------------

TEST(Hif8Format, EveryCodeMatchesTheTableAndExactlyOneRow) {
  int row_hits[std::size(kHifRows)] = {};
  for (unsigned c = 0; c < 256; ++c) {
    // The prefix code must be complete and unambiguous: each code matches one
    // row, apart from the specials, which shadow a normal or denormal row.
    int matched = 0;
    for (const HifRow& r : kHifRows) matched += matches(r.pattern, c) ? 1 : 0;
    const bool special = c == 0x00 || c == 0x80 || (c & 0x7F) == 0x6F;
    EXPECT_EQ(matched, special ? 2 : 1) << hex(c);
    int row = -1;
    const double want = hif8_table_value(c, &row);
    row_hits[row]++;
    const double got = hif8_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << hex(c);
    } else {
      EXPECT_EQ(got, want) << hex(c);
    }
  }
  // Codes per row: 1 zero, 1 NaN, 2 Inf; D = 4: 2*32 - 2 (Inf); D = 3, 2: 64;
  // D = 1: 32; D = 0: 16; denormal: 2*8 - 2 (zero and NaN).
  const int expect[] = {1, 1, 2, 62, 64, 64, 32, 16, 14};
  for (size_t r = 0; r < std::size(kHifRows); ++r) EXPECT_EQ(row_hits[r], expect[r]) << kHifRows[r].pattern;
}

TEST(Hif8Format, PublishedLandmarks) {
  // Hand-derived from the field layout: S dot exponent mantissa.
  struct {
    unsigned code;
    double value;
  } cases[] = {
      {0x00, 0.0},                     // zero
      {0x08, 1.0},                     // 0 0001 000
      {0x0F, 1.875},                   // 0 0001 111
      {0x10, 2.0},                     // 0 001 0 000: E = +1
      {0x18, 0.5},                     // 0 001 1 000: E = -1
      {0x27, 7.5},                     // 0 01 0 0 111: E = +2, 1.875
      {0x2F, 15.0},                    // 0 01 0 1 111: E = +3, 1.875
      {0x38, 0.125},                   // 0 01 1 1 000: E = -3
      {0x40, 16.0},                    // 0 10 0 00 00: E = +4
      {0x5F, 1.75 / 128},              // 0 10 1 11 11: E = -7, 1.75
      {0x60, 256.0},                   // 0 11 0 000 0: E = +8
      {0x6E, 32768.0},                 // 0 11 0 111 0: E = +15, the largest finite
      {0x7E, std::ldexp(1.0, -15)},    // 0 11 1 111 0: the smallest normal
      {0x7F, std::ldexp(1.5, -15)},    // 0 11 1 111 1
      {0x07, std::ldexp(1.0, -16)},    // 0 0000 111: the largest denormal
      {0x01, std::ldexp(1.0, -22)},    // 0 0000 001: the smallest denormal
      {0x88, -1.0},                    // sign
      {0xEE, -32768.0},
  };
  for (const auto& c : cases) EXPECT_EQ(hif8_to_float(static_cast<uint8_t>(c.code)), c.value) << hex(c.code);
  EXPECT_TRUE(std::isnan(hif8_to_float(0x80)));
  EXPECT_EQ(hif8_to_float(0x6F), std::numeric_limits<float>::infinity());
  EXPECT_EQ(hif8_to_float(0xEF), -std::numeric_limits<float>::infinity());
}

TEST(Hif8Format, TaperedPrecisionCounts) {
  // The abstract: 7 exponents with 3 mantissa bits, 8 with 2, 16 with 1, and
  // 7 denormal binades, 38 binades in all.
  std::vector<int> per_exponent(64, 0);
  for (unsigned c = 1; c < 128; ++c) {
    const double v = hif8_table_value(c);
    if (!std::isfinite(v)) continue;
    per_exponent[static_cast<size_t>(std::ilogb(v) + 32)]++;
  }
  for (int e = -32; e < 32; ++e) {
    const int n = per_exponent[static_cast<size_t>(e + 32)];
    const int a = std::abs(e);
    int want = 0;
    if (a <= 3) want = 8;
    else if (a <= 7) want = 4;
    else if (e == 15) want = 1;  // 1.5 * 2^15 is the Inf code
    else if (a <= 15) want = 2;
    else if (e >= -22 && e <= -16) want = 1;
    EXPECT_EQ(n, want) << "exponent " << e;
  }
}

TEST(E4m3Format, EveryCodeMatchesTheTable) {
  for (unsigned c = 0; c < 256; ++c) {
    const double want = e4m3_table_value(c);
    const double got = e4m3fn_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << hex(c);
      continue;
    }
    EXPECT_EQ(got, want) << hex(c);
    EXPECT_EQ(std::signbit(got), c >= 0x80) << hex(c);  // -0 included
  }
  int nans = 0;
  for (unsigned c = 0; c < 256; ++c) nans += std::isnan(e4m3fn_to_float(static_cast<uint8_t>(c))) ? 1 : 0;
  EXPECT_EQ(nans, 2);  // S.1111.111 only
  EXPECT_EQ(e4m3fn_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3fn_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3fn_to_float(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3fn_to_float(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3fn_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3fn_to_float(0xFE), -448.0f);
}

// ---- round trip and symmetry -----------------------------------------------------

TEST(Hif8Format, RoundTripEveryNonNanCode) {
  for (unsigned c = 0; c < 256; ++c) {
    if (c == 0x80) continue;
    EXPECT_EQ(double_to_hif8(hif8_to_float(static_cast<uint8_t>(c))), c) << hex(c);
  }
  EXPECT_EQ(double_to_hif8(kNaN), 0x80);
  EXPECT_EQ(double_to_hif8(-kNaN), 0x80);
}

TEST(E4m3Format, RoundTripEveryNonNanCode) {
  for (unsigned c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(double_to_e4m3fn(e4m3fn_to_float(static_cast<uint8_t>(c))), c) << hex(c);
  }
  EXPECT_TRUE(std::isnan(e4m3fn_to_float(double_to_e4m3fn(kNaN))));
  EXPECT_TRUE(std::isnan(e4m3fn_to_float(double_to_e4m3fn(-kNaN))));
}

TEST(Fp8Format, SignSymmetry) {
  for (unsigned c = 1; c < 128; ++c) {
    const double h = hif8_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(hif8_to_float(static_cast<uint8_t>(c | 0x80)), -h) << hex(c);
    if (c != 0x7F) {
      const double e = e4m3fn_to_float(static_cast<uint8_t>(c));
      EXPECT_EQ(e4m3fn_to_float(static_cast<uint8_t>(c | 0x80)), -e) << hex(c);
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log2mag(-26.0, 17.0);
  for (int i = 0; i < 20000; ++i) {
    const double x = std::exp2(log2mag(rng));
    const unsigned h = double_to_hif8(x);
    EXPECT_EQ(double_to_hif8(-x), h == 0 ? 0u : (h | 0x80)) << x;
    EXPECT_EQ(double_to_e4m3fn(-x), double_to_e4m3fn(x) | 0x80) << x;
  }
}

// ---- rounding --------------------------------------------------------------------

// Every midpoint between neighbours, and the doubles just beside it, against
// the oracle; and the midpoint itself against the rule stated directly.
template <class Encode, class Oracle>
void check_midpoints(const Grid& g, Encode encode, Oracle oracle, Ties ties, const char* name) {
  for (size_t i = 0; i + 1 < g.value.size(); ++i) {
    const double lo = g.value[i], hi = g.value[i + 1];
    const double mid = (lo + hi) / 2;  // exact: a few bits more than the format
    const double below = std::nextafter(mid, 0.0), above = std::nextafter(mid, kInf);
    for (double s : {1.0, -1.0}) {
      for (double x : {mid, below, above, lo + (hi - lo) / 4, hi - (hi - lo) / 4})
        EXPECT_EQ(encode(s * x), oracle(g, s * x)) << name << " x = " << s * x;
      // The stated rule, independent of the oracle.
      const unsigned sign = s < 0 ? 0x80u : 0u;
      auto with_sign = [&](unsigned c) { return (c == 0 && ties == Ties::away) ? 0u : (c | sign); };
      EXPECT_EQ(encode(s * below), with_sign(g.code[i])) << name << " just below the midpoint of " << lo << ", " << hi;
      EXPECT_EQ(encode(s * above), with_sign(g.code[i + 1])) << name << " just above the midpoint of " << lo << ", " << hi;
      const unsigned tie = ties == Ties::away ? g.code[i + 1] : ((g.code[i] & 1u) == 0 ? g.code[i] : g.code[i + 1]);
      EXPECT_EQ(encode(s * mid), with_sign(tie)) << name << " at the midpoint of " << lo << ", " << hi;
    }
  }
}

TEST(Hif8Format, MidpointsRoundToNearestTiesAway) {
  const Grid g = grid_of(hif8_table);
  ASSERT_EQ(g.value.size(), 127u);  // zero and 126 finite magnitudes
  check_midpoints(g, [](double x) { return unsigned{double_to_hif8(x)}; }, hif8_oracle, Ties::away, "hif8");
}

TEST(E4m3Format, MidpointsRoundToNearestEven) {
  const Grid g = grid_of(e4m3_table);
  ASSERT_EQ(g.value.size(), 127u);  // zero and 126 finite magnitudes
  check_midpoints(g, [](double x) { return unsigned{double_to_e4m3fn(x)}; }, e4m3_oracle, Ties::even, "e4m3");
}

TEST(Fp8Format, RandomValuesMatchTheOracle) {
  const Grid gh = grid_of(hif8_table), ge = grid_of(e4m3_table);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> log2mag(-30.0, 20.0);
  std::uniform_int_distribution<int> coin(0, 1);
  for (int i = 0; i < 200000; ++i) {
    const double x = (coin(rng) ? -1 : 1) * std::exp2(log2mag(rng));
    ASSERT_EQ(unsigned{double_to_hif8(x)}, hif8_oracle(gh, x)) << "hif8 x = " << x;
    ASSERT_EQ(unsigned{double_to_e4m3fn(x)}, e4m3_oracle(ge, x)) << "e4m3 x = " << x;
  }
}

TEST(Fp8Format, StridedSweepOfFloat32MatchesTheOracle) {
  // Every 127th fp32 bit pattern from 2^-30 to 2^20, both signs: the stride
  // is odd, so the sampled low mantissa bits vary from binade to binade.
  const Grid gh = grid_of(hif8_table), ge = grid_of(e4m3_table);
  const uint32_t from = 0x30800000u, to = 0x49800000u;  // 2^-30, 2^20
  for (uint32_t u = from; u < to; u += 127) {
    for (uint32_t s : {0u, 0x80000000u}) {
      const double x = std::bit_cast<float>(u | s);
      ASSERT_EQ(unsigned{double_to_hif8(x)}, hif8_oracle(gh, x)) << "hif8 x = " << x;
      ASSERT_EQ(unsigned{double_to_e4m3fn(x)}, e4m3_oracle(ge, x)) << "e4m3 x = " << x;
    }
  }
}

TEST(Fp8Format, RoundedOnceFromDouble) {
  // Just off a midpoint by less than fp32 can resolve: a detour through fp32
  // would land on the midpoint and take the tie rule instead.
  const double off = std::ldexp(1.0, -40);
  EXPECT_EQ(double_to_e4m3fn(1.0625 + off), 0x39);  // 1.125, not the even 1.0
  EXPECT_EQ(double_to_e4m3fn(1.0625), 0x38);        // the tie goes to even 1.0
  EXPECT_EQ(double_to_hif8(1.0625 - off), 0x08);    // 1.0, not the away 1.125
  EXPECT_EQ(double_to_hif8(1.0625), 0x09);          // the tie goes away: 1.125
}

TEST(Hif8Format, OverflowSaturatesAndSpecialsPass) {
  for (double x : {32768.0, 32768.5, 36863.0, 40960.0, 49152.0, 65536.0, 1e10, std::numeric_limits<double>::max()}) {
    EXPECT_EQ(double_to_hif8(x), 0x6E) << x;
    EXPECT_EQ(double_to_hif8(-x), 0xEE) << -x;
  }
  EXPECT_EQ(double_to_hif8(kInf), 0x6F);
  EXPECT_EQ(double_to_hif8(-kInf), 0xEF);
  EXPECT_EQ(double_to_hif8(0.0), 0x00);
  EXPECT_EQ(double_to_hif8(-0.0), 0x00);  // 0x80 would be NaN
}

TEST(Hif8Format, DenormalBoundaries) {
  const double m22 = std::ldexp(1.0, -22);
  EXPECT_EQ(double_to_hif8(m22 / 2), 0x01);                          // the tie with zero goes away
  EXPECT_EQ(double_to_hif8(std::nextafter(m22 / 2, 0.0)), 0x00);
  EXPECT_EQ(double_to_hif8(-std::nextafter(m22 / 2, 0.0)), 0x00);    // -tiny is +0, not NaN
  EXPECT_EQ(double_to_hif8(-m22 / 2), 0x81);
  EXPECT_EQ(double_to_hif8(1.5 * m22), 0x02);                        // 2^-21: ties away
  EXPECT_EQ(double_to_hif8(std::nextafter(1.5 * m22, 0.0)), 0x01);
  EXPECT_EQ(double_to_hif8(std::ldexp(1.5, -16)), 0x7E);             // up into the smallest normal 2^-15
  EXPECT_EQ(double_to_hif8(std::ldexp(1.25, -15)), 0x7F);            // 1.5 * 2^-15 (1 mantissa bit)
  EXPECT_EQ(double_to_hif8(std::numeric_limits<double>::denorm_min()), 0x00);
}

TEST(E4m3Format, OverflowSaturatesAndSpecials) {
  for (double x : {448.0, 455.0, 464.0, 479.0, 480.0, 512.0, 1e10, std::numeric_limits<double>::max(), kInf}) {
    EXPECT_EQ(double_to_e4m3fn(x), 0x7E) << x;
    EXPECT_EQ(double_to_e4m3fn(-x), 0xFE) << -x;
  }
  EXPECT_EQ(double_to_e4m3fn(0.0), 0x00);
  EXPECT_EQ(double_to_e4m3fn(-0.0), 0x80);
  EXPECT_EQ(double_to_e4m3fn(kNaN) & 0x7F, 0x7F);
}

TEST(E4m3Format, SubnormalBoundaries) {
  const double m9 = std::ldexp(1.0, -9);
  EXPECT_EQ(double_to_e4m3fn(m9 / 2), 0x00);                         // tie with zero: even is zero
  EXPECT_EQ(double_to_e4m3fn(-m9 / 2), 0x80);                        // signed zero
  EXPECT_EQ(double_to_e4m3fn(std::nextafter(m9 / 2, 1.0)), 0x01);
  EXPECT_EQ(double_to_e4m3fn(1.5 * m9), 0x02);                       // tie between 1 and 2: even 2
  EXPECT_EQ(double_to_e4m3fn(2.5 * m9), 0x02);                       // tie between 2 and 3: even 2
  EXPECT_EQ(double_to_e4m3fn(7.5 * m9), 0x08);                       // largest subnormal up to the smallest normal
  EXPECT_EQ(double_to_e4m3fn(std::numeric_limits<double>::denorm_min()), 0x00);
}

}  // namespace
