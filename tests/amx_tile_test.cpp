// The tile emulator (src/kernels/amx/tile_emu.hpp) against the ISA manual's
// definitions of LDTILECFG, STTILECFG, TILELOADD, TILESTORED, TILEZERO and
// TDPBF16PS, on values worked out by hand from those definitions; and the
// configuration rule of tile.hpp (configure when the thread's configuration
// differs, repair what other code changed).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/amx/tile_emu.hpp"

namespace convbwd::detail {
namespace {

using T = EmulatedTiles;

uint16_t bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  EXPECT_EQ(u & 0xffffu, 0u) << f << " is not a bf16 value";
  return static_cast<uint16_t>(u >> 16);
}
uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t{lo} | uint32_t{hi} << 16; }
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// tmm0 = C (rows x cols fp32), tmm1 = A (rows x k pairs), tmm2 = B (k x cols pairs).
TileConfig dp_config(int rows, int k, int cols) {
  TileConfig c;
  c.palette = 1;
  c.rows[0] = static_cast<uint8_t>(rows);
  c.colsb[0] = static_cast<uint16_t>(4 * cols);
  c.rows[1] = static_cast<uint8_t>(rows);
  c.colsb[1] = static_cast<uint16_t>(4 * k);
  c.rows[2] = static_cast<uint8_t>(k);
  c.colsb[2] = static_cast<uint16_t>(4 * cols);
  return c;
}

// One output: c + the k pairs (a_lo, a_hi) . (b_lo, b_hi) in one TDPBF16PS
// of a 1 x k x 1 shape.
float dot(float c, const std::vector<std::array<float, 4>>& pairs) {
  const int k = static_cast<int>(pairs.size());
  const TileConfig cfg = dp_config(1, k, 1);
  T::load_config(&cfg);
  std::vector<uint32_t> a, b;
  for (const auto& p : pairs) {
    a.push_back(pair(bf16(p[0]), bf16(p[1])));
    b.push_back(pair(bf16(p[2]), bf16(p[3])));
  }
  T::load<0>(&c, 4);
  T::load<1>(a.data(), 4 * k);
  T::load<2>(b.data(), 4);
  T::dpbf16ps<0, 1, 2>();
  float out = -1.0f;
  T::store<0>(&out, 4);
  T::release();
  return out;
}

TEST(AmxTileEmulator, PairSumRoundedBeforeTheAccumulator) {
  const float e24 = 0x1p-24f;
  // even = 2^-24, odd = 2^-49: even + odd rounds to 2^-24 (2^-49 is a
  // quarter of its ulp); 1 + 2^-24 then ties to 1. With one rounding of the
  // three terms: 1 + 2^-23.
  EXPECT_EQ(dot(1.0f, {{e24, 0x1p-49f, 1.0f, 1.0f}}), 1.0f);
  // even = odd = 2^-24: 2^-23 reaches the accumulator at once, 1 + 2^-23
  // exactly; adding the products one by one (the Intrinsics Guide's order, or
  // vdpbf16ps's) would tie to 1 twice.
  EXPECT_EQ(dot(1.0f, {{e24, e24, 1.0f, 1.0f}}), 1.0f + 0x1p-23f);
}

TEST(AmxTileEmulator, HalvesSummedApartOverK) {
  const float e24 = 0x1p-24f;
  // even = 1 + 0, odd = 2^-24 + 2^-24 = 2^-23: 1 + 2^-23. Per pair into the
  // accumulator: 1 + 2^-24 ties to 1, twice.
  EXPECT_EQ(dot(0.0f, {{1.0f, e24, 1.0f, 1.0f}, {0.0f, e24, 1.0f, 1.0f}}), 1.0f + 0x1p-23f);
  // Within each half the steps add in k order, each rounded: 1 + 2^-24
  // ties to 1, then + 2^-24 again: the even sum is 1, not 1 + 2^-23.
  EXPECT_EQ(dot(0.0f, {{1.0f, 0.0f, 1.0f, 1.0f}, {e24, 0.0f, 1.0f, 1.0f}, {e24, 0.0f, 1.0f, 1.0f}}), 1.0f);
}

TEST(AmxTileEmulator, RoundsToNearestEven) {
  // 1 + 2^-23 + 2^-24 lies halfway between 1 + 2^-23 and 1 + 2^-22: the even
  // mantissa, 1 + 2^-22.
  EXPECT_EQ(dot(1.0f + 0x1p-23f, {{0x1p-24f, 0.0f, 1.0f, 1.0f}}), 1.0f + 0x1p-22f);
  // Below halfway, down: 1 + 2^-25 -> 1; above, up: 1 + 2^-24 + 2^-25 ->
  // 1 + 2^-23 (the pair sum 2^-24 + 2^-25 is exact).
  EXPECT_EQ(dot(1.0f, {{0x1p-25f, 0.0f, 1.0f, 1.0f}}), 1.0f);
  EXPECT_EQ(dot(1.0f, {{0x1p-24f, 0x1p-25f, 1.0f, 1.0f}}), 1.0f + 0x1p-23f);
}

TEST(AmxTileEmulator, DenormalInputsReadAsZero) {
  // bf16 0x0001 is 2^-133; times 2^100 it would be 2^-33.
  uint32_t one_denormal = 0x00010000u;
  float d;
  std::memcpy(&d, &one_denormal, sizeof d);
  EXPECT_EQ(bits(dot(0.0f, {{d, 0.0f, 0x1p100f, 0.0f}})), 0u);
  EXPECT_EQ(bits(dot(0.0f, {{0.0f, d, 0.0f, 0x1p100f}})), 0u);
  // A denormal accumulator (2^-140) reads as zero.
  EXPECT_EQ(bits(dot(0x1p-140f, {{0.0f, 0.0f, 0.0f, 0.0f}})), 0u);
  // And keeps its sign: -0 + (+0) = +0 under round to nearest.
  EXPECT_EQ(bits(dot(-0x1p-140f, {{0.0f, 0.0f, 0.0f, 0.0f}})), 0u);
}

TEST(AmxTileEmulator, DenormalResultsFlushToZero) {
  // 2^-70 * 2^-60 = 2^-130 is below fp32's normal range: the even sum is
  // flushed, and the output is 0 rather than 2^-130.
  EXPECT_EQ(bits(dot(0.0f, {{0x1p-70f, 0.0f, 0x1p-60f, 0.0f}})), 0u);
  // 1.5 * 2^-126 - 2^-126 = 2^-127: the final sum is flushed (sign kept:
  // +0).
  EXPECT_EQ(bits(dot(0x1.8p-126f, {{-0x1p-63f, 0.0f, 0x1p-63f, 0.0f}})), 0u);
  // -2^-130 flushes to -0 (sign kept), but the high half's sum is +0 and
  // -0 + +0 = +0, so even -0 + that is +0.
  EXPECT_EQ(bits(dot(-0.0f, {{-0x1p-70f, 0.0f, 0x1p-60f, 0.0f}})), 0u);
  // The smallest normal survives.
  EXPECT_EQ(dot(0.0f, {{0x1p-63f, 0.0f, 0x1p-63f, 0.0f}}), 0x1p-126f);
}

TEST(AmxTileEmulator, MatrixShapeAndOperandRoles) {
  // C (2 x 3) += A (2 x 2 pairs) . B (2 pairs x 3), small integers: exact.
  // C[m][n] = sum_k A[m][k].lo * B[k][n].lo + A[m][k].hi * B[k][n].hi.
  TileConfig cfg = dp_config(2, 2, 3);
  T::load_config(&cfg);
  const float a[2][2][2] = {{{1, 2}, {3, 4}}, {{-1, 0}, {2, -3}}};  // [m][k][lo, hi]
  const float b[2][3][2] = {{{1, 0}, {2, 1}, {0, -1}}, {{1, 1}, {-2, 0}, {3, 2}}};  // [k][n][lo, hi]
  uint32_t ta[2][2], tb[2][3];
  for (int m = 0; m < 2; ++m)
    for (int k = 0; k < 2; ++k) ta[m][k] = pair(bf16(a[m][k][0]), bf16(a[m][k][1]));
  for (int k = 0; k < 2; ++k)
    for (int n = 0; n < 3; ++n) tb[k][n] = pair(bf16(b[k][n][0]), bf16(b[k][n][1]));
  // C rows 8 floats apart in memory (a stride larger than the row).
  float c[2][8] = {{10, 20, 30, 99, 99, 99, 99, 99}, {40, 50, 60, 99, 99, 99, 99, 99}};
  T::load<0>(c, sizeof c[0]);
  T::load<1>(ta, sizeof ta[0]);
  T::load<2>(tb, sizeof tb[0]);
  T::dpbf16ps<0, 1, 2>();
  float out[2][8];
  for (auto& row : out)
    for (float& x : row) x = -7.0f;
  T::store<0>(out, sizeof out[0]);
  // By hand, C + (k0 lo*lo + hi*hi) + (k1 ...): row 0: 10 + (1+0) + (3+4),
  // 20 + (2+2) + (-6+0), 30 + (0-2) + (9+8); row 1: 40 + (-1+0) + (2-3),
  // 50 + (-2+0) + (-4+0), 60 + (0+0) + (6-6).
  const float want[2][3] = {{18, 18, 45}, {38, 44, 60}};
  for (int m = 0; m < 2; ++m) {
    for (int n = 0; n < 3; ++n) EXPECT_EQ(out[m][n], want[m][n]) << m << "," << n;
    for (int n = 3; n < 8; ++n) EXPECT_EQ(out[m][n], -7.0f) << "TILESTORED wrote past colsb at " << m << "," << n;
  }
  T::release();
}

TEST(AmxTileEmulator, LoadZeroesPastTheShapeStoreWritesOnlyIt) {
  TileConfig cfg;
  cfg.palette = 1;
  cfg.rows[5] = 3;
  cfg.colsb[5] = 8;
  T::load_config(&cfg);
  std::vector<uint8_t> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i % 251 + 1);
  T::load<5>(src.data() + 7, 100);
  // The tile holds rows 0..2 of 8 bytes from base + row*stride; the rest of
  // each row and the rows past 3 are zero.
  const auto& t = T::state().t[5];
  for (int r = 0; r < kTileRows; ++r)
    for (int b = 0; b < kTileRowBytes; ++b)
      EXPECT_EQ(t[r][b], r < 3 && b < 8 ? src[static_cast<size_t>(7 + 100 * r + b)] : 0) << r << "," << b;
  std::vector<uint8_t> dst(400, 0xee);
  T::store<5>(dst.data() + 3, 50);
  for (size_t i = 0; i < dst.size(); ++i) {
    const bool in = i >= 3 && (i - 3) % 50 < 8 && (i - 3) / 50 < 3;
    EXPECT_EQ(dst[i], in ? src[7 + (i - 3) / 50 * 100 + (i - 3) % 50] : 0xee) << i;
  }
  T::zero<5>();
  for (int r = 0; r < kTileRows; ++r)
    for (int b = 0; b < kTileRowBytes; ++b) EXPECT_EQ(t[r][b], 0);
  T::release();
}

TEST(AmxTileEmulator, ConfigurationRule) {
  // Unconfigured, STTILECFG stores zeros.
  TileConfig seen;
  seen.palette = 9;
  T::store_config(&seen);
  EXPECT_EQ(seen.palette, 0);
  TileConfig want;
  want.palette = 1;
  want.rows[0] = 16;
  want.colsb[0] = 64;
  ensure_tile_config<T>(want);
  T::store_config(&seen);
  EXPECT_EQ(std::memcmp(&seen, &want, sizeof want), 0);
  // Already configured: no LDTILECFG, so the tile data survives (LDTILECFG
  // would zero it).
  std::vector<float> ones(256, 1.0f);
  T::load<0>(ones.data(), 64);
  ensure_tile_config<T>(want);
  EXPECT_EQ(T::state().t[0][15][63], bits(1.0f) >> 24);  // the top byte of 1.0f
  // Other code changed or released the configuration: configured again.
  TileConfig other = want;
  other.rows[0] = 2;
  T::load_config(&other);
  ensure_tile_config<T>(want);
  T::store_config(&seen);
  EXPECT_EQ(std::memcmp(&seen, &want, sizeof want), 0);
  T::release();
  ensure_tile_config<T>(want);
  T::store_config(&seen);
  EXPECT_EQ(std::memcmp(&seen, &want, sizeof want), 0);
  T::release();
}

}  // namespace
}  // namespace convbwd::detail
