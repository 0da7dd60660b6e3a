// Every GEMM microkernel of every tier this machine runs (native, and the
// SIMDe-emulated ones the test binaries register), held to the contract of
// kernels/gemm.hpp by the test's own loops: small-integer data, so every sum
// is exact and any dropped, doubled or misplaced product shows. The tile
// shape comes from the kernel's config entry, as the planners take it; the
// cases cover zero to several runs, empty and odd run lengths (tails of the
// unrolled step loops), offsets into A and B, strided B and A steps, and
// accumulate on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "kernels/config.hpp"

namespace convbwd::detail {
namespace {

struct TierGemm {
  std::string name;
  GemmKernels k;
};

std::vector<TierGemm> gemm_kernels() {
  std::vector<TierGemm> v;
  for (Isa i : kAllIsas) {
    for (const KernelConfig* c : {native_kernel_config(i), emulated_kernel_config(i)}) {
      if (!c) continue;
      v.push_back({tier_name(*c), c->gemm});
      if (c->gemm_narrow.gather) v.push_back({tier_name(*c) + ".narrow", c->gemm_narrow});
    }
  }
  return v;
}

struct Case {
  std::vector<int64_t> len;
  int64_t as = 0, bs = 0;  // 0: the densest the kernel allows (mr, nr)
  bool accumulate = false;
  // gather: the rows in one array, this many elements apart (a tile of
  // neighbouring pixels; the AMX kernels load such rows in place); 0: rows
  // of their own.
  int64_t row_pitch = 0;
};

// One contract case through a kernel, against the test's own loops:
//   acc[i][j] (+)= sum_r sum_t product(A(i, r, t), b[b_off[r] + t*bs + j]).
// slot(rng) draws one A or B element (a float, or a bf16 pair typed float);
// pad(x) rewrites A's elements of every other run (the pair kernels' odd
// reductions: a zero high half), or is null.
template <class Slot, class Product>
void check_contract(const TierGemm& g, bool gather, const Case& c, std::mt19937& rng, Slot slot, Product product,
                    float (*pad)(float)) {
  const int mr = gather ? g.k.gather_rows() : g.k.mr, nr = g.k.nr;
  ASSERT_GT(mr, 0);
  ASSERT_LE(mr, kMaxMr);
  ASSERT_GT(nr, 0);
  ASSERT_LE(nr, kMaxNr);
  const int64_t as = c.as ? c.as : mr, bs = gather ? nr : (c.bs ? c.bs : nr);
  const int64_t runs = static_cast<int64_t>(c.len.size());
  std::uniform_int_distribution<int> val(-4, 4), gap(0, 5);
  std::vector<int64_t> a_off(c.len.size()), b_off(c.len.size());
  int64_t a_end = 0, b_end = 0;
  for (int64_t r = 0; r < runs; ++r) {
    a_off[r] = a_end + gap(rng);
    b_off[r] = b_end + gap(rng);
    a_end = a_off[r] + (gather ? c.len[r] : c.len[r] * as + mr) + 1;
    b_end = b_off[r] + c.len[r] * bs + nr + 1;
  }
  // gather: mr rows of their own, or mr rows row_pitch apart in one array;
  // strided: one array.
  const bool own_rows = gather && c.row_pitch == 0;
  const int64_t a_size = own_rows || !gather ? a_end + 8 : (mr - 1) * c.row_pitch + a_end + 8;
  std::vector<std::vector<float>> a(own_rows ? mr : 1, std::vector<float>(static_cast<size_t>(a_size)));
  for (auto& row : a)
    for (float& x : row) x = slot(rng);
  auto a_at = [&](int64_t r, int64_t t, int i) -> float& {
    if (!gather) return a[0][a_off[r] + t * as + i];
    return own_rows ? a[i][a_off[r] + t] : a[0][i * c.row_pitch + a_off[r] + t];
  };
  if (pad)
    for (int64_t r = 1; r < runs; r += 2)
      for (int64_t t = 0; t < c.len[r]; ++t)
        for (int i = 0; i < mr; ++i) a_at(r, t, i) = pad(a_at(r, t, i));
  std::vector<float> b(static_cast<size_t>(b_end + 8));
  for (float& x : b) x = slot(rng);
  std::vector<float> acc(static_cast<size_t>(mr * nr)), want(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = want[i] = c.accumulate ? static_cast<float>(val(rng)) : 1e9f;
  if (!c.accumulate) std::fill(want.begin(), want.end(), 0.0f);
  for (int64_t r = 0; r < runs; ++r)
    for (int64_t t = 0; t < c.len[r]; ++t)
      for (int i = 0; i < mr; ++i)
        for (int j = 0; j < nr; ++j) want[i * nr + j] += product(a_at(r, t, i), b[b_off[r] + t * bs + j]);
  MicroArgs ka;
  for (int i = 0; i < (gather ? mr : 1); ++i) ka.a[i] = own_rows ? a[i].data() : a[0].data() + i * c.row_pitch;
  ka.b = b.data();
  ka.as = as;
  ka.bs = bs;
  ka.a_off = a_off.data();
  ka.b_off = b_off.data();
  ka.len = c.len.data();
  ka.runs = runs;
  ka.acc = acc.data();
  ka.accumulate = c.accumulate;
  (gather ? g.k.gather : g.k.strided)(ka);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j)
      ASSERT_EQ(acc[i * nr + j], want[i * nr + j])
          << g.k.name << (gather ? " gather" : " strided") << " runs " << runs << " as " << as << " bs " << bs
          << " row_pitch " << c.row_pitch << " accumulate " << c.accumulate << " at (" << i << ", " << j << ")";
}

// The cases every kernel family meets.
const std::vector<Case>& contract_cases() {
  static const std::vector<Case> cases = {
      {{}, 0, 0, false},          {{}, 0, 0, true},           {{1}, 0, 0, false},
      {{2}, 0, 0, true},          {{3}, 0, 0, false},         {{4}, 0, 0, false},
      {{5}, 0, 0, true},          {{7}, 0, 0, false},         {{17}, 0, 0, false},
      {{64}, 0, 0, true},         {{0, 3, 0}, 0, 0, false},   {{1, 1, 1, 1, 1}, 0, 0, true},
      {{9, 2, 31}, 0, 0, false},  {{6}, 40, 0, false},        {{5, 3}, 13, 0, true},
      {{4, 9}, 0, 48, false},     {{11}, 7, 80, true},        {{300}, 0, 0, false},
      // Reductions of 16-pair tile products with tails (the AMX kernels),
      // rows in one array for the gather form: full products in place, and
      // tails, after a run of 15 and a tail of 1 pair.
      {{16, 32, 15, 1}, 0, 0, true, 0}, {{16}, 0, 0, false, 37},   {{48, 7, 16}, 0, 0, true, 53},
      {{33}, 0, 0, false, 16},          {{17, 16}, 21, 40, false, 0},
  };
  return cases;
}

// fp32: small integers, so every sum is exact.
void check(const TierGemm& g, bool gather, const Case& c, std::mt19937& rng) {
  std::uniform_int_distribution<int> val(-4, 4);
  check_contract(
      g, gather, c, rng, [&](std::mt19937& r) { return static_cast<float>(val(r)); },
      [](float av, float bv) { return av * bv; }, nullptr);
}

TEST(KernelGemm, EveryTierAgainstTheContract) {
  const std::vector<TierGemm> kernels = gemm_kernels();
  ASSERT_FALSE(kernels.empty());
  std::mt19937 rng(20261201);
  for (const TierGemm& g : kernels) {
    SCOPED_TRACE(g.name + " " + g.k.name);
    for (bool gather : {true, false})
      for (const Case& c : contract_cases()) {
        if (gather && (c.bs != 0 || c.as != 0)) continue;  // the gather contract: dense B, A rows of their own
        if (!gather && c.row_pitch != 0) continue;
        check(g, gather, c, rng);
        if (HasFatalFailure()) return;
      }
  }
}

// The bf16 pair kernels (kernels/gemm.hpp) of every tier that has them.
std::vector<TierGemm> bf16_kernels() {
  std::vector<TierGemm> v;
  for (Isa i : kAllIsas) {
    for (const KernelConfig* c : {native_kernel_config(i), emulated_kernel_config(i)}) {
      if (!c) continue;
      if (c->bf16.gather) v.push_back({tier_name(*c), c->bf16});
      if (c->bf16_narrow.gather) v.push_back({tier_name(*c) + ".narrow", c->bf16_narrow});
    }
  }
  return v;
}

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  EXPECT_EQ(u & 0xffffu, 0u) << f << " is not a bf16 value";
  return static_cast<uint16_t>(u >> 16);
}
float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// A 32-bit slot holding a pair (lo = reduction index 2t, hi = 2t+1), typed
// float as MicroArgs wants it.
float pair_slot(uint16_t lo, uint16_t hi) {
  const uint32_t u = uint32_t{lo} | uint32_t{hi} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint16_t half(float slot, int h) {
  uint32_t u;
  std::memcpy(&u, &slot, sizeof u);
  return static_cast<uint16_t>(h ? u >> 16 : u & 0xffffu);
}

// As check, with pairs: small integers in both halves, and on every other
// run the high halves of A zero, as the packing pads an odd reduction.
void check_pairs(const TierGemm& g, bool gather, const Case& c, std::mt19937& rng) {
  std::uniform_int_distribution<int> val(-4, 4);
  auto small = [&](std::mt19937& r) { return bf16_bits(static_cast<float>(val(r))); };
  check_contract(
      g, gather, c, rng, [&](std::mt19937& r) { return pair_slot(small(r), small(r)); },
      [](float av, float bv) {
        float sum = 0.0f;
        for (int h = 0; h < 2; ++h) sum += bf16_value(half(av, h)) * bf16_value(half(bv, h));
        return sum;
      },
      [](float x) { return pair_slot(half(x, 0), 0); });
}

TEST(KernelGemm, Bf16PairsAgainstTheContract) {
  const std::vector<TierGemm> kernels = bf16_kernels();
  if (kernels.empty()) GTEST_SKIP() << "no tier with bf16 pair kernels runs here";
  std::mt19937 rng(20261202);
  for (const TierGemm& g : kernels) {
    SCOPED_TRACE(g.name + " " + g.k.name);
    for (bool gather : {true, false})
      for (const Case& c : contract_cases()) {
        if (gather && (c.bs != 0 || c.as != 0)) continue;
        if (!gather && c.row_pitch != 0) continue;
        check_pairs(g, gather, c, rng);
        if (HasFatalFailure()) return;
      }
  }
}

// One step of one lane, acc + the pair (a_lo, a_hi) . (b_lo, b_hi), through
// a kernel (every row and column get the same operands).
float one_step(const TierGemm& g, float acc0, float a_lo, float a_hi, float b_lo, float b_hi) {
  const int mr = g.k.mr, gather_mr = g.k.gather_rows(), nr = g.k.nr;
  const float a = pair_slot(bf16_bits(a_lo), bf16_bits(a_hi));
  std::vector<float> arow(1, a), brow(static_cast<size_t>(nr), pair_slot(bf16_bits(b_lo), bf16_bits(b_hi)));
  std::vector<float> astrided(static_cast<size_t>(mr), a);
  std::vector<float> acc(static_cast<size_t>(gather_mr * nr), acc0);
  const int64_t off = 0, len = 1;
  MicroArgs ka;
  for (int i = 0; i < gather_mr; ++i) ka.a[i] = arow.data();
  ka.b = brow.data();
  ka.bs = nr;
  ka.a_off = &off;
  ka.b_off = &off;
  ka.len = &len;
  ka.runs = 1;
  ka.acc = acc.data();
  ka.accumulate = true;
  g.k.gather(ka);
  for (float x : acc) EXPECT_EQ(std::memcmp(&x, &acc[0], sizeof x), 0) << g.k.name << ": lanes differ";
  std::vector<float> acc2(static_cast<size_t>(mr * nr), acc0);
  ka.a[0] = astrided.data();
  ka.as = 1;
  ka.acc = acc2.data();
  g.k.strided(ka);
  EXPECT_EQ(std::memcmp(&acc2[0], &acc[0], sizeof(float)), 0) << g.k.name << ": strided differs from gather";
  return acc[0];
}

// The strided kernels of each row count (GemmKernels::strided_of_rows) of
// every family that has them, each as a family of its own: mr = its rows,
// no gather kernel.
std::vector<TierGemm> strided_of_rows_kernels(const std::vector<TierGemm>& families) {
  std::vector<TierGemm> v;
  for (const TierGemm& g : families) {
    if (!g.k.strided_of_rows) continue;
    EXPECT_EQ(g.k.strided_kernel(0), nullptr) << g.k.name;
    EXPECT_EQ(g.k.strided_kernel(g.k.strided_rows_max + 1), nullptr) << g.k.name;
    for (int rows = 1; rows <= g.k.strided_rows_max; ++rows) {
      TierGemm e = g;
      e.name += ".rows" + std::to_string(rows);
      e.k.mr = rows;
      e.k.gather = nullptr;
      e.k.gather_mr = 0;
      e.k.strided = g.k.strided_kernel(rows);
      EXPECT_NE(e.k.strided, nullptr) << e.name;
      if (e.k.strided) v.push_back(e);
    }
  }
  return v;
}

// The strided-only families that derive() makes of every fp32 and pair
// family through the contract cases (no gather form, no row pitch); how
// many there were.
int check_strided_families(std::vector<TierGemm> (*derive)(const std::vector<TierGemm>&), uint32_t seed) {
  std::mt19937 rng(seed);
  int tested = 0;
  for (bool pairs : {false, true})
    for (const TierGemm& g : derive(pairs ? bf16_kernels() : gemm_kernels())) {
      ++tested;
      SCOPED_TRACE(g.name + " " + g.k.name);
      for (const Case& c : contract_cases()) {
        if (c.row_pitch != 0) continue;
        pairs ? check_pairs(g, false, c, rng) : check(g, false, c, rng);
        if (::testing::Test::HasFatalFailure()) return tested;
      }
    }
  return tested;
}

TEST(KernelGemm, StridedKernelsOfEveryRowCountAgainstTheContract) {
  if (check_strided_families(strided_of_rows_kernels, 20261206) == 0)
    GTEST_SKIP() << "no tier here has strided kernels of each row count";
}

// Inexact operands for the bit-equality tests below (the order of the
// additions shows): three runs (one empty), A steps `as` apart, B steps past
// nr; each slot a normal draw, or two bf16 ones for the pair kernels.
struct InexactRuns {
  int64_t as, bs;
  std::vector<int64_t> len{37, 0, 5}, a_off, b_off;
  std::vector<float> a, b;
  InexactRuns(bool pairs, int64_t a_step, int nr, int a_rows, std::normal_distribution<float>& dist,
              std::mt19937& rng)
      : as(a_step), bs(nr + 3), a_off{3, 0, 38 * as}, b_off{1, 0, 38 * bs},
        a(static_cast<size_t>(a_off[2] + 5 * as + a_rows)), b(static_cast<size_t>(b_off[2] + 5 * bs + nr)) {
    auto draw = [&] {
      if (!pairs) return dist(rng);
      auto bf16 = [&] { return static_cast<uint16_t>(std::bit_cast<uint32_t>(dist(rng)) >> 16); };
      return pair_slot(bf16(), bf16());
    };
    for (float& x : a) x = draw();
    for (float& x : b) x = draw();
  }
  // Kernel k over every run, A from row row0 on, added to acc.
  void run(MicroKernel k, int64_t row0, float* acc) const {
    MicroArgs ka;
    ka.a[0] = a.data() + row0;
    ka.b = b.data();
    ka.as = as;
    ka.bs = bs;
    ka.a_off = a_off.data();
    ka.b_off = b_off.data();
    ka.len = len.data();
    ka.runs = static_cast<int64_t>(len.size());
    ka.acc = acc;
    ka.accumulate = true;
    k(ka);
  }
};

// Any row count sums each element as `strided` does, bit for bit: rows of a
// tile of r rows equal the same rows computed one at a time, and so do the
// rows of the family's mr-row kernel. (A planner's choice of row tiles then
// cannot change a result.) Inexact data, so the order of the additions shows.
TEST(KernelGemm, StridedRowCountsGiveTheSameBits) {
  std::mt19937 rng(20261207);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int tested = 0;
  for (bool pairs : {false, true})
    for (const TierGemm& g : pairs ? bf16_kernels() : gemm_kernels()) {
      if (!g.k.strided_of_rows) continue;
      ++tested;
      SCOPED_TRACE(g.k.name);
      const int nr = g.k.nr, max_rows = std::max(g.k.strided_rows_max, g.k.mr);
      // A steps wider than a tile.
      const InexactRuns in(pairs, 19, nr, max_rows, dist, rng);
      std::vector<float> init(static_cast<size_t>(nr));
      for (float& x : init) x = dist(rng);
      // Row i alone, from the same initial accumulators.
      std::vector<std::vector<float>> one(static_cast<size_t>(max_rows));
      for (int i = 0; i < max_rows; ++i) {
        one[i] = init;
        in.run(g.k.strided_kernel(1), i, one[i].data());
      }
      auto expect_rows = [&](const std::vector<float>& acc, int rows, const std::string& what) {
        for (int i = 0; i < rows; ++i)
          ASSERT_EQ(std::memcmp(acc.data() + i * nr, one[i].data(), sizeof(float) * nr), 0)
              << what << ": row " << i << " differs from the 1-row kernel";
      };
      for (int rows = 2; rows <= g.k.strided_rows_max; ++rows) {
        std::vector<float> acc;
        for (int i = 0; i < rows; ++i) acc.insert(acc.end(), init.begin(), init.end());
        in.run(g.k.strided_kernel(rows), 0, acc.data());
        expect_rows(acc, rows, std::to_string(rows) + " rows");
      }
      std::vector<float> acc;
      for (int i = 0; i < g.k.mr; ++i) acc.insert(acc.end(), init.begin(), init.end());
      in.run(g.k.strided, 0, acc.data());
      expect_rows(acc, g.k.mr, "the mr-row kernel");
    }
  if (tested == 0) GTEST_SKIP() << "no tier here has strided kernels of each row count";
}

// The half-width strided kernels (GemmKernels::strided_half) of every
// family that has them, each as a family of its own: the first nr/2
// columns, no gather kernel.
std::vector<TierGemm> strided_half_kernels(const std::vector<TierGemm>& families) {
  std::vector<TierGemm> v;
  for (const TierGemm& g : families) {
    if (!g.k.strided_half) continue;
    TierGemm e = g;
    e.name += ".half";
    e.k.nr = g.k.nr / 2;
    e.k.gather = nullptr;
    e.k.gather_mr = 0;
    e.k.strided = g.k.strided_half;
    e.k.strided_of_rows = nullptr;
    v.push_back(e);
  }
  return v;
}

TEST(KernelGemm, HalfWidthStridedKernelsAgainstTheContract) {
  if (check_strided_families(strided_half_kernels, 20261208) == 0)
    GTEST_SKIP() << "no tier here has half-width strided kernels";
}

// The half-width kernel sums each of its columns as `strided` sums the same
// column, bit for bit, so a planner may give a tail to either.
TEST(KernelGemm, HalfWidthStridedKernelsGiveTheStridedKernelsBits) {
  std::mt19937 rng(20261209);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int tested = 0;
  for (bool pairs : {false, true})
    for (const TierGemm& g : pairs ? bf16_kernels() : gemm_kernels()) {
      if (!g.k.strided_half) continue;
      ++tested;
      SCOPED_TRACE(g.k.name);
      const int mr = g.k.mr, nr = g.k.nr, half = nr / 2;
      const InexactRuns in(pairs, mr + 5, nr, mr, dist, rng);
      std::vector<float> full(static_cast<size_t>(mr * nr)), part(static_cast<size_t>(mr * half));
      for (int i = 0; i < mr; ++i)
        for (int j = 0; j < nr; ++j) {
          full[i * nr + j] = dist(rng);
          if (j < half) part[i * half + j] = full[i * nr + j];
        }
      in.run(g.k.strided, 0, full.data());
      in.run(g.k.strided_half, 0, part.data());
      for (int i = 0; i < mr; ++i)
        ASSERT_EQ(std::memcmp(part.data() + i * half, full.data() + i * nr, sizeof(float) * half), 0)
            << "row " << i << " differs from the strided kernel's";
    }
  if (tested == 0) GTEST_SKIP() << "no tier here has half-width strided kernels";
}

// What the ISA manual defines for vdpbf16ps, which the emulated kernels must
// follow as the native ones do: the high products are added first, each
// addition rounded (not one fused dot product), denormal bf16 inputs and
// accumulators read as zero, denormal sums flushed to zero.
bool is_amx(const TierGemm& g) { return std::string(g.k.name).find("_amx") != std::string::npos; }

TEST(KernelGemm, Bf16PairsFollowTheInstructionsDefinition) {
  const std::vector<TierGemm> kernels = bf16_kernels();
  if (kernels.empty()) GTEST_SKIP() << "no tier with bf16 pair kernels runs here";
  for (const TierGemm& g : kernels) {
    if (is_amx(g)) continue;  // tdpbf16ps defines another order: below
    SCOPED_TRACE(g.name + " " + g.k.name);
    // 1 + 2^-24 ties to 1 (even), then + 2^-23 is 1 + 2^-23. Low first
    // (1 + 2^-23, then a tie to even) or fused would give 1 + 2^-22.
    EXPECT_EQ(one_step(g, 1.0f, 0x1p-23f, 0x1p-24f, 1.0f, 1.0f), 1.0f + 0x1p-23f);
    // Low half larger: 1 + 2^-24 (tie to 1) after 1 + 2^-23: 1 + 2^-22.
    EXPECT_EQ(one_step(g, 1.0f, 0x1p-24f, 0x1p-23f, 1.0f, 1.0f), 1.0f + 0x1p-22f);
    // A product below fp32's normal range is flushed: 2^-70 * 2^-70.
    EXPECT_EQ(one_step(g, 0.0f, 0x1p-70f, 0.0f, 0x1p-70f, 0.0f), 0.0f);
    // A bf16 denormal (2^-133) reads as zero, even times 2^100.
    EXPECT_EQ(one_step(g, 1.0f, 0x1p-133f, 0.0f, 0x1p100f, 0.0f), 1.0f);
    // A denormal accumulator reads as zero.
    EXPECT_EQ(one_step(g, 0x1p-140f, 0.0f, 0.0f, 0.0f, 0.0f), 0.0f);
    // Inf * 0 and Inf - Inf are NaN, Inf passes through.
    EXPECT_TRUE(std::isnan(one_step(g, 0.0f, INFINITY, 0.0f, 0.0f, 1.0f)));
    EXPECT_TRUE(std::isnan(one_step(g, 0.0f, INFINITY, INFINITY, 1.0f, -1.0f)));
    EXPECT_EQ(one_step(g, 1.0f, INFINITY, 2.0f, 1.0f, 1.0f), INFINITY);
    EXPECT_TRUE(std::isnan(one_step(g, NAN, 1.0f, 1.0f, 1.0f, 1.0f)));
  }
}

// One pair step: (a_lo, a_hi) . (b_lo, b_hi).
struct PairStep {
  float a_lo, a_hi, b_lo, b_hi;
};

// acc0 + the runs of pair steps, through a kernel whose every row and column
// get the same operands (each step's B row repeated over the nr columns);
// gather and strided must agree bit for bit.
float through_runs(const TierGemm& g, float acc0, const std::vector<std::vector<PairStep>>& runs) {
  const int mr = g.k.mr, gather_mr = g.k.gather_rows(), nr = g.k.nr;
  std::vector<float> arow, brow, astrided;
  std::vector<int64_t> a_off, b_off, len, sa_off;
  for (const std::vector<PairStep>& run : runs) {
    a_off.push_back(static_cast<int64_t>(arow.size()));
    b_off.push_back(static_cast<int64_t>(brow.size()));
    sa_off.push_back(static_cast<int64_t>(astrided.size()));
    len.push_back(static_cast<int64_t>(run.size()));
    for (const PairStep& st : run) {
      const float a = pair_slot(bf16_bits(st.a_lo), bf16_bits(st.a_hi));
      arow.push_back(a);
      astrided.insert(astrided.end(), static_cast<size_t>(mr), a);
      brow.insert(brow.end(), static_cast<size_t>(nr), pair_slot(bf16_bits(st.b_lo), bf16_bits(st.b_hi)));
    }
  }
  arow.push_back(0.0f);  // no empty vectors: data() must be a real pointer
  brow.push_back(0.0f);
  astrided.push_back(0.0f);
  MicroArgs ka;
  for (int i = 0; i < gather_mr; ++i) ka.a[i] = arow.data();
  ka.b = brow.data();
  ka.bs = nr;
  ka.a_off = a_off.data();
  ka.b_off = b_off.data();
  ka.len = len.data();
  ka.runs = static_cast<int64_t>(runs.size());
  std::vector<float> acc(static_cast<size_t>(gather_mr * nr), acc0), acc2(static_cast<size_t>(mr * nr), acc0);
  ka.acc = acc.data();
  ka.accumulate = true;
  g.k.gather(ka);
  for (float x : acc) EXPECT_EQ(std::memcmp(&x, &acc[0], sizeof x), 0) << g.k.name << ": lanes differ";
  for (int i = 1; i < mr; ++i) ka.a[i] = nullptr;
  ka.a[0] = astrided.data();
  ka.a_off = sa_off.data();
  ka.as = mr;
  ka.acc = acc2.data();
  g.k.strided(ka);
  EXPECT_EQ(std::memcmp(&acc2[0], &acc[0], sizeof(float)), 0) << g.k.name << ": strided differs from gather";
  return acc[0];
}

// What the ISA manual defines for tdpbf16ps (kernels/amx/tile_emu.hpp), as
// the AMX kernels must show it: within one tile product the low and the high
// halves are summed apart over its steps, the two sums added, then added to
// the accumulator (two roundings, to nearest even); a product spans 16 pair
// steps of one run; denormal inputs read as zero and denormal sums flush.
// Each expected value is worked out by hand from that definition.
TEST(KernelGemm, AmxPairsFollowTheTileDefinition) {
  int tested = 0;
  for (const TierGemm& g : bf16_kernels()) {
    if (!is_amx(g)) continue;
    ++tested;
    SCOPED_TRACE(g.name + " " + g.k.name);
    const float e24 = 0x1p-24f, e23 = 0x1p-23f;
    // lo 2^-24, hi 2^-49: the pair sum rounds to 2^-24 (2^-49 is a quarter of
    // its ulp), then 1 + 2^-24 ties to 1. One rounding of 1 + 2^-24 + 2^-49
    // would give 1 + 2^-23.
    EXPECT_EQ(through_runs(g, 1.0f, {{{e24, 0x1p-49f, 1.0f, 1.0f}}}), 1.0f);
    // lo = hi = 2^-24: their sum 2^-23 is added at once: 1 + 2^-23.
    // vdpbf16ps's order (each product into the accumulator) gives 1.
    EXPECT_EQ(through_runs(g, 1.0f, {{{e24, e24, 1.0f, 1.0f}}}), 1.0f + e23);
    // The halves are summed apart across the steps of one product: lo sum
    // 1 + 0, hi sum 2^-24 + 2^-24 = 2^-23, total 1 + 2^-23 exactly. Summing
    // each pair into the accumulator in turn would tie to 1 twice.
    EXPECT_EQ(through_runs(g, 0.0f, {{{1.0f, e24, 1.0f, 1.0f}, {0.0f, e24, 1.0f, 1.0f}}}), 1.0f + e23);
    // A tie rounds to even upwards too: 1 + 2^-23 + 2^-24 -> 1 + 2^-22.
    EXPECT_EQ(through_runs(g, 1.0f + e23, {{{e24, 0.0f, 1.0f, 1.0f}}}), 1.0f + 0x1p-22f);
    // Steps 0 and 15 of a run share a product (1 + 2^-23); steps 0 and 16
    // do not, and each 1 + 2^-24 ties to 1; nor do two runs of one step.
    std::vector<PairStep> run(17, {0.0f, 0.0f, 1.0f, 1.0f});
    run[0].a_lo = run[15].a_lo = e24;
    EXPECT_EQ(through_runs(g, 1.0f, {run}), 1.0f + e23);
    run[15].a_lo = 0.0f;
    run[16].a_lo = e24;
    EXPECT_EQ(through_runs(g, 1.0f, {run}), 1.0f);
    EXPECT_EQ(through_runs(g, 1.0f, {{{e24, 0.0f, 1.0f, 1.0f}}, {{e24, 0.0f, 1.0f, 1.0f}}}), 1.0f);
    // A bf16 denormal (2^-133) reads as zero, even times 2^100: 0, not 2^-33.
    EXPECT_EQ(through_runs(g, 0.0f, {{{0x1p-133f, 0.0f, 0x1p100f, 0.0f}}}), 0.0f);
    // 2^-70 * 2^-60 = 2^-130, below fp32's normal range: flushed to 0.
    EXPECT_EQ(through_runs(g, 0.0f, {{{0x1p-70f, 0.0f, 0x1p-60f, 0.0f}}}), 0.0f);
    // 1.5 * 2^-126 - 2^-126 = 2^-127, a denormal sum: flushed to 0.
    EXPECT_EQ(through_runs(g, 0x1.8p-126f, {{{-0x1p-63f, 0.0f, 0x1p-63f, 0.0f}}}), 0.0f);
    // A denormal accumulator reads as zero.
    EXPECT_EQ(through_runs(g, 0x1p-140f, {{{0.0f, 0.0f, 0.0f, 0.0f}}}), 0.0f);
  }
  if (tested == 0) GTEST_SKIP() << "no AMX kernels run here";
}

// Where the CPU has the instruction, the emulation is held to it bit for bit
// on random finite bf16 patterns of every exponent, denormals included
// (vdpbf16ps and, on AMX CPUs, tdpbf16ps: whether the silicon follows the
// manual's order is checked there).
class EmulatedMatchesNative : public ::testing::TestWithParam<Isa> {};
}  // namespace
// The tier's name in test listings (found by argument-dependent lookup).
void PrintTo(Isa i, std::ostream* os) { *os << to_string(i); }
namespace {

// One pair family of a tier, native against emulated, on random bf16 pairs.
void check_bf16_bit_for_bit(const GemmKernels& kn, const GemmKernels& ke) {
  SCOPED_TRACE(kn.name);
  ASSERT_EQ(kn.gather_rows(), ke.gather_rows());
  ASSERT_EQ(kn.nr, ke.nr);
  const int mr = kn.gather_rows(), nr = kn.nr;  // the gather kernel's tile
  std::mt19937 rng(7);
  // Exponents near the ends of the range too, so that denormal inputs,
  // flushed sums and overflow to Inf all occur.
  std::uniform_int_distribution<int> bits(0, 0xffff), expo(0, 254);
  auto random_bf16 = [&] {
    uint16_t h = static_cast<uint16_t>(bits(rng));
    const int ex = expo(rng) < 32 ? 0 : (expo(rng) % 3 == 0 ? 1 + bits(rng) % 20 : 100 + bits(rng) % 54);
    h = static_cast<uint16_t>((h & 0x807fu) | ex << 7);
    return h;
  };
  const int64_t len = 57;
  std::vector<std::vector<float>> a(static_cast<size_t>(mr), std::vector<float>(len));
  for (auto& row : a)
    for (float& x : row) x = pair_slot(random_bf16(), random_bf16());
  std::vector<float> b(static_cast<size_t>(len * nr));
  for (float& x : b) x = pair_slot(random_bf16(), random_bf16());
  for (int trial = 0; trial < 2; ++trial) {
    std::vector<float> acc_n(static_cast<size_t>(mr * nr)), acc_e(acc_n.size());
    for (float& x : acc_n) x = bf16_value(random_bf16());
    acc_e = acc_n;
    const int64_t off = 0;
    MicroArgs ka;
    for (int i = 0; i < mr; ++i) ka.a[i] = a[static_cast<size_t>(i)].data();
    ka.b = b.data();
    ka.bs = nr;
    ka.a_off = &off;
    ka.b_off = &off;
    ka.len = &len;
    ka.runs = 1;
    ka.accumulate = trial == 1;
    ka.acc = acc_n.data();
    kn.gather(ka);
    ka.acc = acc_e.data();
    ke.gather(ka);
    for (size_t i = 0; i < acc_n.size(); ++i) {
      if (std::isnan(acc_n[i])) {
        EXPECT_TRUE(std::isnan(acc_e[i])) << i;
        continue;
      }
      EXPECT_EQ(std::memcmp(&acc_n[i], &acc_e[i], sizeof(float)), 0) << i << ": " << acc_n[i] << " vs " << acc_e[i];
    }
  }
}

TEST_P(EmulatedMatchesNative, Bf16PairsBitForBit) {
  const KernelConfig* n = native_kernel_config(GetParam());
  const KernelConfig* e = emulated_kernel_config(GetParam());
  if (!n || !e || !n->bf16.gather || !e->bf16.gather) GTEST_SKIP() << "needs the native and the emulated tier";
  ASSERT_EQ(n->bf16_narrow.gather == nullptr, e->bf16_narrow.gather == nullptr);
  for (const auto family : {&KernelConfig::bf16, &KernelConfig::bf16_narrow})
    if ((n->*family).gather) check_bf16_bit_for_bit(n->*family, e->*family);
}

INSTANTIATE_TEST_SUITE_P(Tiers, EmulatedMatchesNative, ::testing::Values(Isa::avx512_bf16, Isa::amx),
                         [](const ::testing::TestParamInfo<Isa>& i) { return std::string(to_string(i.param)); });

// Each tier that runs here is listed, so a tier cannot drop out of the test
// silently: AVX2 CPUs run avx2 natively and avx512 emulated at least.
TEST(KernelGemm, TheListHasEveryTierThatRunsHere) {
  std::vector<std::string> names;
  for (const TierGemm& g : gemm_kernels()) names.push_back(g.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "scalar"), names.end());
  if (cpu_has(Isa::avx2)) {
    EXPECT_NE(std::find(names.begin(), names.end(), "avx2"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "avx512_emu"), names.end());
  }
  if (cpu_has(Isa::avx512)) {
    EXPECT_NE(std::find(names.begin(), names.end(), "avx512"), names.end());
  }
  std::vector<std::string> bf16_names;
  for (const TierGemm& g : bf16_kernels()) bf16_names.push_back(g.name);
  if (cpu_has(Isa::avx2)) {
    EXPECT_NE(std::find(bf16_names.begin(), bf16_names.end(), "avx512_bf16_emu"), bf16_names.end());
    EXPECT_NE(std::find(bf16_names.begin(), bf16_names.end(), "amx_emu"), bf16_names.end());
  }
  if (cpu_has(Isa::amx)) {
    EXPECT_NE(std::find(bf16_names.begin(), bf16_names.end(), "amx"), bf16_names.end());
  }
  if (cpu_has(Isa::avx512_bf16)) {
    EXPECT_NE(std::find(bf16_names.begin(), bf16_names.end(), "avx512_bf16"), bf16_names.end());
  }
}


// The implementation the default planner picks for one gradient of `desc`
// ("" and a test failure if it cannot plan).
std::string planned_implementation(const char* desc, Gradient which) {
  auto p = Problem::parse(desc);
  EXPECT_TRUE(p) << desc;
  if (!p) return "";
  auto plan = Plan::create(p.value());
  EXPECT_TRUE(plan) << plan.error().message;
  return plan ? std::string(plan->implementation(which)) : "";
}

// The emulated reruns of scripts/test.sh (CONVBWD_EMULATED=1) must plan on
// the SIMDe build, or they would test the native kernels a second time; the
// other runs must plan on native kernels wherever the CPU has the tier.
TEST(KernelGemm, EveryRunPlansTheTierItForces) {
  // Runs in every configuration (the default run and each rerun of
  // scripts/test.sh): emulated kernels run exactly when CONVBWD_EMULATED=1
  // asks for a registered emulated tier, or when the CPU lacks the tier;
  // the plan's implementation names that tier; and a tier forced by
  // CONVBWD_ISA is the one that runs.
  const char* e = std::getenv("CONVBWD_EMULATED");
  const char* isa = std::getenv("CONVBWD_ISA");
  const bool prefer_emulated = e && std::string(e) == "1";
  const Isa tier = active_isa();
  if (isa) {
    const std::optional<Isa> want = isa_from_string(isa);
    ASSERT_TRUE(want) << isa;
    EXPECT_EQ(tier, *want);
  }
  const KernelConfig& cfg = kernel_config(tier);
  EXPECT_EQ(cfg.emulated, (prefer_emulated && emulated_kernel_config(tier) != nullptr) || !cpu_has(tier))
      << tier_name(cfg);
  EXPECT_EQ(planned_implementation("mb2ic32ih9oc32kh3ph1", Gradient::weight), "gemm_wgrad_nhwc:" + tier_name(cfg));
}


// The amx rerun (CONVBWD_ISA=amx: native where the CPU has AMX, else the
// emulated tier) must plan bf16 problems on the AMX tile kernels and their
// 16-row tiles, not on the tier below; every other run on its own tier's.
TEST(KernelGemm, Bf16PlansOnTheRunningTiersKernels) {
  // In every run: bf16 plans name the tier that runs; in the amx rerun that
  // tier must be amx, with its 16x32 tile kernels.
  const char* isa = std::getenv("CONVBWD_ISA");
  const KernelConfig& cfg = kernel_config(active_isa());
  if (isa && std::string(isa) == "amx") {
    ASSERT_EQ(active_isa(), Isa::amx);
    EXPECT_EQ(cfg.isa, Isa::amx);
    EXPECT_EQ(cfg.bf16.mr, 16);
    EXPECT_EQ(cfg.bf16.nr, 32);
    EXPECT_NE(std::string(cfg.bf16.name).find("_amx"), std::string::npos) << cfg.bf16.name;
  }
  const std::string name = planned_implementation("mb2ic32ih9oc32kh3ph1_dtbf16", Gradient::input);
  EXPECT_EQ(name.substr(name.find(':') + 1), tier_name(cfg)) << name;
}

}  // namespace
}  // namespace convbwd::detail
