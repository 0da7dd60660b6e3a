// A seeded random campaign against the tests' own backward oracle
// (util/backward_oracle: plain loops over the raw parameters, sharing
// nothing with src/). impl_oracle_test pins hand-picked cases to each
// implementation; this draws problems the size of real layers' edges (up to
// 48 channels, images up to 16x16, 1D up to 100, 3D up to 7^3, and a fifth
// of them large images of up to 16 channels: 56x56, 3000, 14^3) so that the
// planner sends them down its fast paths, with whatever combination of
// rank, transposed, stride, dilation, asymmetric padding, groups or
// depthwise, dtype, output mask, operand and output layout and thread
// count comes up, and compares every element exactly: the operands are
// small integers, so every fp32 sum is exact in any order and each output
// must be that sum rounded once into its dtype.
//
// Run under CONVBWD_ISA for every tier (scripts/test.sh), natively or
// emulated, the same seeds reach each tier's kernels: tiles, row and
// column tails, edge tiles and the planners' choices between families.
// A failure prints the case's descriptor, parameters, layouts and seed.
// CONVBWD_RANDOM_ORACLE_CASES=N runs N cases instead of the default, and
// CONVBWD_RANDOM_ORACLE_SEED=S draws them, and their operand values, from
// seed S (a longer or another hunt; the coverage check runs only on the
// default seed's first kDefaultCases).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "util/oracle_run.hpp"

namespace convbwd::test {
namespace {

constexpr int kDefaultCases = 480;
constexpr uint64_t kDefaultSeed = 20261207;

int64_t pick(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

template <class T, size_t N>
T pick_of(std::mt19937_64& rng, const T (&options)[N]) {
  return options[static_cast<size_t>(pick(rng, 0, N - 1))];
}

// Channel counts around the kernels' tiles: below, at and past 6, 8, 12,
// 16 and 32 (the tiers' mr, nr and lanes).
constexpr int64_t kChannels[] = {1, 2, 3, 5, 6, 7, 8, 9, 12, 13, 15, 16, 17, 24, 31, 32, 33, 40, 48};

enum class Family { dense, one_by_one, grouped, depthwise, small_channels };

// One spatial dim's kernel, stride, dilation and padding.
void draw_dim(ConvParams& p, Family f, int64_t in, std::mt19937_64& rng) {
  const int64_t k_max = p.spatial == 3 ? 3 : p.spatial == 1 ? 7 : 5;
  const int64_t k = f == Family::one_by_one ? 1 : pick(rng, 1, k_max);
  const int64_t s = f == Family::one_by_one ? 1 : pick(rng, 0, 3) == 0 ? pick(rng, 2, 3) : 1;
  const int64_t d = f == Family::one_by_one || pick(rng, 0, 3) != 0 ? 1 : pick(rng, 2, 3);
  const int64_t pb = f == Family::one_by_one ? 0 : pick(rng, 0, k - 1 + (d - 1));
  const int64_t pa = f == Family::one_by_one ? 0 : pick(rng, 0, 2) == 0 ? pick(rng, 0, k - 1) : pb;
  p.in.push_back(in);
  p.kernel.push_back(k);
  p.stride.push_back(s);
  p.dilation.push_back(d);
  p.pad_before.push_back(pb);
  p.pad_after.push_back(pa);
  p.output_padding.push_back(p.transposed ? pick(rng, 0, s - 1) : 0);
}

ConvParams random_params(Family f, std::mt19937_64& rng) {
  for (;;) {
    ConvParams p;
    const int64_t rank = pick(rng, 0, 9);
    p.spatial = rank < 3 ? 1 : rank < 8 ? 2 : 3;
    // The planar 1x1 paths want 64 pixels or more an image.
    const int64_t lo = f == Family::one_by_one ? (p.spatial == 1 ? 64 : p.spatial == 2 ? 8 : 4) : 1;
    // One case in five is a large image of few channels: past the planners'
    // step and pixel thresholds (the weight gradient's one pass of 1600
    // steps and its 256-step chunks, 512- and 4096-pixel batches).
    // (Half of the 1x1 cases: their weight gradient takes several passes
    // past 1600 steps.)
    const bool large = pick(rng, 0, f == Family::one_by_one ? 1 : 4) == 0;
    const int64_t hi = large ? (p.spatial == 1 ? 3000 : p.spatial == 2 ? 56 : 14)
                             : (p.spatial == 1 ? 100 : p.spatial == 2 ? 16 : 7);
    p.transposed = f != Family::one_by_one && pick(rng, 0, 3) == 0;
    p.n = pick(rng, 1, 3);
    int64_t cg = pick_of(rng, kChannels), kg = pick_of(rng, kChannels);
    switch (f) {
      case Family::grouped:
        p.groups = pick_of(rng, {2, 3, 4, 8});
        cg = std::min<int64_t>(cg, 20);
        kg = std::min<int64_t>(kg, 20);
        break;
      case Family::depthwise:
        p.groups = pick_of(rng, kChannels);
        cg = 1;
        kg = pick(rng, 0, 3) == 0 ? 2 : 1;
        break;
      case Family::small_channels: cg = pick(rng, 1, 4); break;
      default:
        // Groups of at most 16 channels a side go to the direct kernels
        // (depthwise_direct): most dense cases take more, for the GEMMs.
        if (cg <= 16 && kg <= 16 && pick(rng, 0, 3) != 0) (pick(rng, 0, 1) ? cg : kg) = pick_of(rng, {17, 24, 33, 40});
        break;
    }
    if (large) {  // the oracle's loops grow with the image
      cg = std::min<int64_t>(cg, 16);
      kg = std::min<int64_t>(kg, 16);
      p.n = std::min<int64_t>(p.n, 2);
    }
    if (p.spatial == 3) {  // and with the cube
      cg = std::min<int64_t>(cg, 16);
      kg = std::min<int64_t>(kg, 16);
    }
    p.cin = p.groups * cg;
    p.cout = p.groups * kg;
    for (int d = 0; d < p.spatial; ++d) draw_dim(p, f, pick(rng, lo, hi), rng);
    if (p.well_formed()) return p;
  }
}

// The most terms any output sums: gradInput over (channels, taps), gradWeight
// and gradBias over (batch, positions).
int64_t max_terms(const ConvParams& p) {
  int64_t taps = 1, in = 1, out = 1;
  const std::vector<int64_t> o = p.output_dims();
  for (int d = 0; d < p.spatial; ++d) {
    taps *= p.kernel[static_cast<size_t>(d)];
    in *= p.in[static_cast<size_t>(d)];
    out *= o[static_cast<size_t>(2 + d)];
  }
  return std::max({p.cout / p.groups * taps, p.n * in, p.n * out, int64_t{1}});
}

TEST(ImplRandomOracle, MediumProblemsOnEveryPathEqualTheOracle) {
  int cases = kDefaultCases;
  if (const char* e = std::getenv("CONVBWD_RANDOM_ORACLE_CASES")) cases = std::max(1, std::atoi(e));
  uint64_t seed = kDefaultSeed;
  if (const char* e = std::getenv("CONVBWD_RANDOM_ORACLE_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::mt19937_64 rng(seed);
  std::map<std::string, int> ran;  // implementation (tier dropped) -> gradients it computed
  const int default_threads = num_threads();
  for (int i = 0; i < cases && !::testing::Test::HasFailure(); ++i) {
    const Family f = pick_of(rng, {Family::dense, Family::dense, Family::one_by_one, Family::one_by_one, Family::grouped,
                                   Family::depthwise, Family::small_channels});
    OracleCase c;
    c.p = random_params(f, rng);
    c.dt = pick_of(rng, {DataType::f32, DataType::f32, DataType::bf16, DataType::f16});
    c.round_once = true;
    // Every partial sum below 2^24 in fp32 and, for fp16, the result
    // inside its range.
    const int64_t terms = max_terms(c.p);
    c.max_abs = terms * 9 <= (c.dt == DataType::f16 ? 60000 : 1 << 22) ? 3 : 1;
    const Layout layouts[] = {Layout::contiguous, Layout::contiguous, Layout::channels_last, Layout::padded,
                              Layout::reversed};
    c.in_layout = pick_of(rng, layouts);
    c.out_layout = pick_of(rng, layouts);
    const char* const any = kAnyImplementation;
    do {
      c.want = {pick(rng, 0, 4) ? any : nullptr, pick(rng, 0, 4) ? any : nullptr, pick(rng, 0, 4) ? any : nullptr};
    } while (!c.want[0] && !c.want[1] && !c.want[2]);
    set_num_threads(static_cast<int>(pick(rng, 1, 3)));
    // The operands' values follow the campaign seed too, so another seed
    // also draws other values; the default seed's are 1000 + i, the values
    // its recorded mutation results (docs/mutation.md) were taken with.
    const uint64_t values_seed = (seed ^ kDefaultSeed) * 1000003 + 1000 + static_cast<uint64_t>(i);
    const auto names = check_against_oracle(c, values_seed);
    for (const std::string& n : names)
      if (!n.empty()) ++ran[std::string(base_name(n))];
  }
  set_num_threads(default_threads);
  std::string tally;
  for (const auto& [name, count] : ran) tally += " " + name + " " + std::to_string(count);
  std::printf("implementations that ran:%s\n", tally.c_str());
  // The campaign is only worth its time if it reaches the fast paths: each
  // family the default run must have sent gradients to (a planner change
  // that diverts them all elsewhere fails here, not silently).
  if (cases < kDefaultCases || seed != kDefaultSeed || ::testing::Test::HasFailure()) return;
  for (const char* must : {"gemm_dgrad_phase_nhwc", "gemm_fwd_nhwc", "gemm_wgrad_nhwc", "gemm_dgrad_1x1_nchw",
                           "gemm_wgrad_1x1_nchw", "small_channels_dgrad", "small_channels_wgrad",
                           "depthwise_cl_fused", "bias_reduce"})
    EXPECT_GE(ran[must], 3) << must << " ran too few of the campaign's gradients:" << tally;
}

}  // namespace
}  // namespace convbwd::test
