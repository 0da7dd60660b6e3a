// Seeded random property tests: thousands of tiny problems, every combination
// of rank, transposed, output mask, dtype (single and mixed) and precision
// mode enumerated exhaustively, with groups/depthwise, stride (with gaps),
// dilation, asymmetric padding, outputPadding, empty tensors and strided
// layouts drawn at random. Each runs through Plan::execute and is compared
// with the reference by check_against_reference. A failure prints the one-line
// repro: descriptor, layouts, fill and seed.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "util/forward_oracle.hpp"
#include "util/run.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

constexpr DataType kF32 = DataType::f32, kF16 = DataType::f16, kBf16 = DataType::bf16;

// gradOutput, input, weight.
struct Dtypes {
  DataType go, in, w;
};
constexpr Dtypes kDtypeCombos[] = {
    {kF32, kF32, kF32},   {kF16, kF16, kF16},   {kBf16, kBf16, kBf16},
    {kF16, kBf16, kF32},  {kBf16, kF32, kF16},  {kF32, kF16, kF16},
};
constexpr int kCombos = sizeof(kDtypeCombos) / sizeof(kDtypeCombos[0]);

// A random tiny geometry; `empty` picks which dim is zero (0 none, 1 N, 2 the
// input channels, 3 the output channels).
ConvParams random_geometry(int spatial, bool transposed, int empty, std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (;;) {
    ConvParams c;
    c.spatial = spatial;
    c.transposed = transposed;
    c.n = pick(1, 2);
    const int64_t shape = pick(0, 5);
    c.groups = shape == 0 ? pick(2, 3) : 1;
    int64_t cg = pick(1, spatial == 3 ? 2 : 3), kg = pick(1, spatial == 3 ? 2 : 3);
    if (shape == 1) {  // depthwise: one input channel per group (or one output channel)
      c.groups = pick(2, 4);
      (pick(0, 2) == 0 ? kg : cg) = 1;
    }
    if (empty == 1) c.n = 0;
    if (empty == 2) cg = 0;
    if (empty == 3) kg = 0;
    c.cin = c.groups * cg;
    c.cout = c.groups * kg;
    const int64_t max_in = spatial == 1 ? 10 : spatial == 2 ? 6 : 4;
    const int64_t max_k = spatial == 3 ? 2 : 3;
    const bool asym = pick(0, 2) == 0;
    for (int d = 0; d < spatial; ++d) {
      const int64_t k = pick(1, max_k);
      // Stride sometimes above the kernel: positions no tap reaches.
      const int64_t s = pick(0, 3) == 0 ? k + pick(1, 2) : pick(1, 2);
      c.in.push_back(pick(1, max_in));
      c.kernel.push_back(k);
      c.stride.push_back(s);
      c.dilation.push_back(pick(0, 2) == 0 ? 2 : 1);
      c.pad_before.push_back(pick(0, 2));
      c.pad_after.push_back(asym ? pick(0, 2) : c.pad_before.back());
      c.output_padding.push_back(transposed ? pick(0, s - 1) : 0);
    }
    if (c.well_formed()) return c;
  }
}

struct Tally {
  int run = 0, exact = 0, empty = 0;
};

// Every (mask, dtype combo, math mode) for one rank and direction, `reps`
// times, each with its own random geometry, layouts and seed.
void run_property(int spatial, bool transposed, int reps, uint64_t seed0, Tally& t) {
  const Layout layouts[] = {Layout::contiguous, Layout::channels_last, Layout::padded, Layout::reversed};
  std::mt19937_64 rng(seed0);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  uint64_t seed = seed0 * 100000;
  for (int rep = 0; rep < reps; ++rep)
    for (int mask = 1; mask < 8; ++mask)
      for (int combo = 0; combo < kCombos; ++combo)
        for (int math = 0; math < 4; ++math) {
          ++seed;
          const int empty = pick(0, 11) < 3 ? static_cast<int>(pick(1, 3)) : 0;
          const ConvParams c = random_geometry(spatial, transposed, empty, rng);
          Problem p = c.to_problem();
          p.grad_output.dtype = kDtypeCombos[combo].go;
          p.input.dtype = kDtypeCombos[combo].in;
          p.weight.dtype = kDtypeCombos[combo].w;
          p.output_mask = {(mask & 4) != 0, (mask & 2) != 0, (mask & 1) != 0};
          if (!p.output_mask[2] && pick(0, 1)) p.bias_sizes.reset();  // may be null without gradBias
          p.math_mode = static_cast<MathMode>(math);
          RunOptions o;
          o.in_layout = layouts[pick(0, 3)];
          o.out_layout = layouts[pick(0, 3)];
          o.fill = pick(0, 3) == 0 ? Fill::small_ints : Fill::uniform;
          o.seed = seed;
          CheckOptions co;
          co.in_layout = o.in_layout;
          co.out_layout = o.out_layout;
          co.fill = o.fill;
          co.seed = o.seed;
          const Comparison cmp = check_against_reference(p, co);
          ASSERT_TRUE(cmp.pass) << "repro: " << repro(p, o) << "\n  " << cmp.first_failure << "\n  ("
                                << c.to_string() << ")";
          // The same case at 1 and 2 threads: identical bits.
          set_num_threads(1);
          const RunResult one = run_problem(p, o);
          set_num_threads(2);
          const RunResult two = run_problem(p, o);
          set_num_threads(0);
          ASSERT_FALSE(one.error || two.error) << repro(p, o);
          for (int g = 0; g < 3; ++g)
            ASSERT_TRUE(one.outs[g].storage == two.outs[g].storage)
                << "gradient " << g << " bits differ between 1 and 2 threads; repro: " << repro(p, o);
          ++t.run;
          t.exact += o.fill == Fill::small_ints;
          t.empty += empty != 0;
        }
}

// 4 reps x 7 masks x 6 dtype combos x 4 modes = 672 problems per family, 4032
// in all.
constexpr int kReps = 4;

void family(int spatial, bool transposed, uint64_t seed) {
  Tally t;
  run_property(spatial, transposed, kReps, seed, t);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(t.run, kReps * 7 * kCombos * 4);
  EXPECT_GT(t.exact, 0);
  EXPECT_GT(t.empty, 0);
  ::testing::Test::RecordProperty("problems", t.run);
}

TEST(Property, Conv1d) { family(1, false, 1); }
TEST(Property, Conv2d) { family(2, false, 2); }
TEST(Property, Conv3d) { family(3, false, 3); }
TEST(Property, ConvTranspose1d) { family(1, true, 4); }
TEST(Property, ConvTranspose2d) { family(2, true, 5); }
TEST(Property, ConvTranspose3d) { family(3, true, 6); }

// The same problem at 1 and 2 threads gives the same output bits. Problems
// are drawn a little larger so that work is actually split.
TEST(Property, BitsIndependentOfThreadCount) {
  std::mt19937_64 rng(77);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const Layout layouts[] = {Layout::contiguous, Layout::channels_last, Layout::padded, Layout::reversed};
  const char* fixed[] = {"mb4ic16ih12oc16kh3ph1", "mb2ic8ih12oc24kh3sh2ph1_dtbf16", "mb3g8ic8ih10oc8kh3ph1",
                         "mb2ic8ih9oc8kh3sh2ph1oph1_tr_dtf16", "mb2ic6id5oc6kd3pd1_math1",
                         "mb8ic32iw33oc16kw5pw2_dtf16:bf16:f32"};
  int cases = 0;
  for (int i = 0; i < 120; ++i) {
    Problem p;
    if (i < static_cast<int>(std::size(fixed))) {
      auto parsed = Problem::parse(fixed[i]);
      ASSERT_TRUE(parsed.ok()) << fixed[i] << ": " << parsed.error().message;
      p = parsed.value();
    } else {
      const int sp = static_cast<int>(pick(1, 3));
      ConvParams c = random_geometry(sp, pick(0, 1) == 1, 0, rng);
      c.n += pick(0, 3);
      p = c.to_problem();
      const Dtypes dt = kDtypeCombos[pick(0, kCombos - 1)];
      p.grad_output.dtype = dt.go;
      p.input.dtype = dt.in;
      p.weight.dtype = dt.w;
      const int64_t mask = pick(1, 7);
      p.output_mask = {(mask & 4) != 0, (mask & 2) != 0, (mask & 1) != 0};
      p.math_mode = static_cast<MathMode>(pick(0, 3));
    }
    RunOptions o;
    o.in_layout = layouts[pick(0, 3)];
    o.out_layout = layouts[pick(0, 3)];
    o.seed = 9000 + static_cast<uint64_t>(i);
    set_num_threads(1);
    const RunResult one = run_problem(p, o);
    set_num_threads(2);
    const RunResult two = run_problem(p, o);
    set_num_threads(0);
    ASSERT_FALSE(one.error) << repro(p, o) << ": " << one.error.message;
    ASSERT_FALSE(two.error) << repro(p, o) << ": " << two.error.message;
    const char* names[3] = {"gradInput", "gradWeight", "gradBias"};
    for (int g = 0; g < 3; ++g)
      ASSERT_TRUE(one.outs[g].storage == two.outs[g].storage)
          << names[g] << " bits differ between 1 and 2 threads (" << one.implementation[g] << " / "
          << two.implementation[g] << "); repro: " << repro(p, o);
    ++cases;
  }
  EXPECT_EQ(cases, 120);
}

}  // namespace
}  // namespace convbwd::test
