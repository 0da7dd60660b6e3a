// Special values: NaN and +-Inf propagate as IEEE arithmetic says, subnormal
// operands give exact results (no flush to zero) and complete, and fp16/bf16
// outputs overflow to +-Inf exactly where round-to-nearest-even says.
//
// "Depends on" is structural: with all operands 1 except a one-hot element,
// an output is non-zero exactly when some product links it to that element.
//
// Two readings of padding exist. The reference skips taps that fall outside
// a tensor; the optimized kernels multiply zero-filled copies, so a NaN or an
// Inf also meets those phantom zeros (NaN * 0, Inf * 0 = NaN). The tests hold
// every implementation to what both readings share: true dependents are
// NaN/Inf; outputs reachable only through phantom taps of the same (image,
// channel) slice may be NaN or the reference value; every other output (other
// images, channels, groups) is finite and equal to the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "util/guarded.hpp"

namespace convbwd::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const char* const kGradName[3] = {"gradInput", "gradWeight", "gradBias"};

GuardedTensor& operand(GuardedRun& r, int which) {
  return which == 0 ? r.grad_output : which == 1 ? r.input : r.weight;
}

// Which elements of each gradient depend on element `pos` of operand `which`
// (0 gradOutput, 1 input, 2 weight). With slice = true, on any element of
// pos's (dim 0, dim 1) slice: a superset of what phantom taps can reach.
std::vector<bool> dependents(const Problem& p, int which, int64_t pos, Gradient g, bool slice = false) {
  std::mt19937_64 rng(0);
  GuardedRun r = make_guarded_run(p, false, false, rng);
  for (int o = 0; o < 3; ++o) {
    GuardedTensor& t = operand(r, o);
    int64_t inner = 1;
    for (size_t d = 2; d < t.desc.dims.size(); ++d) inner *= t.desc.dims[d];
    for (int64_t i = 0; i < t.elements(); ++i) {
      const bool hit = slice ? i / inner == pos / inner : i == pos;
      t.set(i, o == which ? (hit ? 1.0 : 0.0) : 1.0);
    }
  }
  const std::vector<double> v = reference_output(r.problem, r.buffers(), g);
  std::vector<bool> dep(v.size());
  for (size_t i = 0; i < v.size(); ++i) dep[i] = v[i] != 0;
  return dep;
}

// Checks one gradient after a special value went into element pos of operand
// `which`: strict dependents must satisfy `special`, phantom-reachable ones
// may be NaN or the reference value, all others equal the reference.
template <class F>
void expect_propagation(GuardedRun& r, int which, int64_t pos, int g, F special, const std::string& what) {
  const std::vector<bool> dep = dependents(r.problem, which, pos, static_cast<Gradient>(g));
  const std::vector<bool> slice = dependents(r.problem, which, pos, static_cast<Gradient>(g), true);
  const std::vector<double> want = reference_output(r.problem, r.buffers(), static_cast<Gradient>(g));
  int phantom = 0;
  for (int64_t i = 0; i < r.outs[g].elements(); ++i) {
    const double v = r.outs[g].at(i), w = want[static_cast<size_t>(i)];
    const auto u = static_cast<size_t>(i);
    const bool close = v == w || std::fabs(v - w) <= 1e-5 * (1 + std::fabs(w));
    if (dep[u]) {
      ASSERT_TRUE(special(v)) << what << ": " << kGradName[g] << "[" << i << "] = " << v << " depends on it";
    } else if (slice[u] && std::isnan(v)) {
      ++phantom;  // a phantom tap of the same slice: allowed, see the top
    } else {
      ASSERT_TRUE(close) << what << ": " << kGradName[g] << "[" << i << "] = " << v << ", want " << w
                         << (slice[u] ? "" : " (another image, channel or group: it must not see the value)");
    }
  }
  if (phantom) std::printf("%s: %d %s elements NaN through phantom (padding) taps\n", what.c_str(), phantom, kGradName[g]);
}

std::string run(GuardedRun& r) {
  auto plan = Plan::create(r.problem);
  if (!plan) return plan.error().message;
  GuardedBuffer ws(plan->workspace_size());
  if (Error e = plan->execute(r.buffers(), ws.data(), ws.size())) return e.message;
  return ws.check_guards("workspace");
}

const char* const kShapes[] = {
    "mb2ic3iw9oc4kw3pw1",         "mb2ic4iw11oc3kw3sw2pw1dw2",  "mb2ic3iw5oc4kw2sw2_tr",
    "mb1ic3ih6iw5oc4kh3kw2ph1",   "mb2g2ic4ih6oc4kh3sh2ph1",    "mb1g3ic3ih6oc3kh3ph1",
    "mb1ic2ih3iw4oc3kh3kw3sh2sw2ph1pw1_tr", "mb1ic2id4ih3iw4oc2kd2kh2kw3pd1",
    "mb2ic16ih7oc24kh3ph1",       "mb2ic24iw20oc32kw1",
};

// A NaN in one gradOutput element makes exactly its dependents NaN; every
// other output stays finite and equal to the reference.
TEST(ReliabilitySpecialValues, NaNPoisonsItsDependentsAndNothingElse) {
  for (const char* d : kShapes) {
    const Problem p = Problem::parse(d).value();
    for (int which = 0; which < 3; ++which) {
      std::mt19937_64 rng(3);
      GuardedRun r = make_guarded_run(p, false, true, rng);
      GuardedTensor& t = operand(r, which);
      const int64_t pos = t.elements() / 2;
      t.set(pos, kNaN);
      r.in_snapshots[which] = snapshot(t);
      ASSERT_EQ(run(r), "") << d;
      for (int g = 0; g < 3; ++g) {
        // gradInput reads gradOutput and weight, gradWeight gradOutput and
        // input, gradBias gradOutput only (transposed or not).
        if (!(which == 0 || (which == 1 && g == 1) || (which == 2 && g == 0))) continue;
        expect_propagation(r, which, pos, g, [](double v) { return std::isnan(v); },
                           std::string(d) + ", NaN in operand " + std::to_string(which));
      }
    }
  }
}

// Inf times zero is NaN: gradOutput all zero and one weight +Inf make the
// gradInput elements that multiply that weight NaN; all others are exactly 0.
TEST(ReliabilitySpecialValues, InfTimesZeroIsNaN) {
  for (const char* d : kShapes) {
    const Problem p = Problem::parse(d).value();
    std::mt19937_64 rng(4);
    GuardedRun r = make_guarded_run(p, false, false, rng);
    for (int64_t i = 0; i < r.grad_output.elements(); ++i) r.grad_output.set(i, 0.0);
    const int64_t pos = r.weight.elements() / 3;
    r.weight.set(pos, kInf);
    ASSERT_EQ(run(r), "") << d;
    expect_propagation(r, 2, pos, 0, [](double v) { return std::isnan(v); }, std::string(d) + ", 0 * Inf");
    for (int g = 1; g < 3; ++g)  // these never read the weight
      for (int64_t i = 0; i < r.outs[g].elements(); ++i)
        ASSERT_TRUE(std::isfinite(r.outs[g].at(i))) << d << ": " << kGradName[g] << "[" << i << "]";
  }
}

// +Inf (or -Inf) in gradOutput with positive finite weights and inputs gives
// exactly the dependents +Inf (or -Inf), including the channel's gradBias.
TEST(ReliabilitySpecialValues, InfPropagatesWithItsSign) {
  for (const char* d : kShapes) {
    for (double inf : {kInf, -kInf}) {
      const Problem p = Problem::parse(d).value();
      std::mt19937_64 rng(5);
      std::uniform_real_distribution<double> pos_value(0.25, 1.0);
      GuardedRun r = make_guarded_run(p, true, true, rng);
      for (GuardedTensor* t : {&r.input, &r.weight, &r.grad_output})
        for (int64_t i = 0; i < t->elements(); ++i) t->set(i, pos_value(rng));
      const int64_t pos = r.grad_output.elements() - 1;
      r.grad_output.set(pos, inf);
      for (int o = 0; o < 3; ++o) r.in_snapshots[o] = snapshot(operand(r, o));
      ASSERT_EQ(run(r), "") << d;
      for (int g = 0; g < 3; ++g)
        expect_propagation(r, 0, pos, g, [inf](double v) { return v == inf; },
                           std::string(d) + (inf > 0 ? ", +Inf" : ", -Inf") + " in gradOutput");
    }
  }
}

// Subnormal fp32 operands: integer multiples of 2^-140 times small integers
// give sums that are exact in fp32's subnormal range, so the outputs must
// equal the reference bit for bit: a flush-to-zero mode (FTZ/DAZ) would show.
TEST(ReliabilitySpecialValues, SubnormalOperandsAreExactAndComplete) {
  for (const char* d : {"mb2ic3iw9oc4kw3pw1", "mb2ic16ih7oc24kh3ph1", "mb2g2ic4ih6oc4kh3sh2ph1",
                        "mb2ic3iw5oc4kw2sw2_tr", "mb4ic16ih12oc16kh3ph1"}) {
    const Problem p = Problem::parse(d).value();
    for (int tiny = 0; tiny < 3; ++tiny) {  // which operand holds the subnormals
      std::mt19937_64 rng(6);
      std::uniform_int_distribution<int> ints(-3, 3);
      GuardedRun r = make_guarded_run(p, false, false, rng);
      for (int o = 0; o < 3; ++o) {
        GuardedTensor& t = operand(r, o);
        for (int64_t i = 0; i < t.elements(); ++i) t.set(i, o == tiny ? std::ldexp(ints(rng), -140) : ints(rng));
        r.in_snapshots[o] = snapshot(t);
      }
      ASSERT_EQ(run(r), "") << d;
      for (int g = 0; g < 3; ++g) {
        // gradInput reads gradOutput and weight, gradWeight gradOutput and
        // input, gradBias gradOutput only.
        const bool reads_tiny = g == 2 ? tiny == 0 : g == 0 ? tiny != 1 : tiny != 2;
        if (!reads_tiny) continue;
        const std::vector<double> want = reference_output(r.problem, r.buffers(), static_cast<Gradient>(g));
        bool any_subnormal = false;
        for (int64_t i = 0; i < r.outs[g].elements(); ++i) {
          const double v = r.outs[g].at(i);
          ASSERT_EQ(v, want[static_cast<size_t>(i)]) << d << ": " << kGradName[g] << "[" << i << "]";
          any_subnormal |= v != 0 && std::fabs(v) < 0x1p-126;
        }
        EXPECT_TRUE(any_subnormal) << d << ": " << kGradName[g] << " has no subnormal result";
      }
    }
  }
  // fp16 subnormal operands, compared with the tolerance.
  for (const char* d : {"mb2ic3ih6oc4kh3ph1_dtf16", "mb2ic3iw7oc5kw2sw3_tr_dtf16"}) {
    const Problem p = Problem::parse(d).value();
    std::mt19937_64 rng(7);
    GuardedRun r = make_guarded_run(p, false, false, rng);
    for (int64_t i = 0; i < r.input.elements(); ++i) r.input.set(i, std::ldexp(1 + static_cast<int>(i % 7), -22));
    r.in_snapshots[1] = snapshot(r.input);
    ASSERT_EQ(run(r), "") << d;
    EXPECT_EQ(r.check(), "") << d;
  }
}

// gradBias in fp16: per-channel sums of two exact fp16 values, accumulated
// exactly in fp32 and rounded once: 65504 is the largest finite fp16, 65520
// the midpoint to the next binade, which ties to even, i.e. to Inf.
TEST(ReliabilitySpecialValues, Fp16OverflowRoundsToInfLikeRoundToNearest) {
  Problem p = Problem::parse("mb1ic1iw3oc5kw1_dtf16_mask001").value();
  std::mt19937_64 rng(8);
  GuardedRun r = make_guarded_run(p, false, false, rng);
  const double go[5][3] = {{32752, 32768, 0},  {32752, 32752, 0},  {32752, 32752, 15},
                           {32752, 32752, 16}, {-32752, -32768, 0}};
  const double want[5] = {kInf, 65504, 65504, kInf, -kInf};
  for (int ch = 0; ch < 5; ++ch)
    for (int x = 0; x < 3; ++x) r.grad_output.set(ch * 3 + x, go[ch][x]);
  ASSERT_EQ(run(r), "");
  for (int ch = 0; ch < 5; ++ch) EXPECT_EQ(r.outs[2].at(ch), want[ch]) << "gradBias[" << ch << "]";

  // A product that overflows fp16 (256 * 256) in gradInput and gradWeight.
  Problem q = Problem::parse("mb1ic1iw1oc2kw1_dtf16_mask110").value();
  GuardedRun s = make_guarded_run(q, false, false, rng);
  s.grad_output.set(0, 256);
  s.grad_output.set(1, -1);
  s.weight.set(0, 256);
  s.weight.set(1, 1);
  s.input.set(0, -256);
  ASSERT_EQ(run(s), "");
  EXPECT_EQ(s.outs[0].at(0), kInf);   // 256*256 - 1
  EXPECT_EQ(s.outs[1].at(0), -kInf);  // 256 * -256
  EXPECT_EQ(s.outs[1].at(1), 256);
}

// The same in bf16: max finite is 2^128 - 2^120; 2^128 - 2^119 is the
// midpoint and ties to even, i.e. to Inf. The fp32 sums are exact.
TEST(ReliabilitySpecialValues, Bf16OverflowRoundsToInfLikeRoundToNearest) {
  Problem p = Problem::parse("mb1ic1iw2oc4kw1_dtbf16_mask001").value();
  std::mt19937_64 rng(9);
  GuardedRun r = make_guarded_run(p, false, false, rng);
  const double a = std::ldexp(1.0, 127);
  const double go[4][2] = {{a, a - std::ldexp(1.0, 119)}, {a, a - std::ldexp(1.0, 120)}, {a, a}, {-a, -a}};
  const double want[4] = {kInf, std::ldexp(1.0, 128) - std::ldexp(1.0, 120), kInf, -kInf};
  for (int ch = 0; ch < 4; ++ch)
    for (int x = 0; x < 2; ++x) r.grad_output.set(ch * 2 + x, go[ch][x]);
  ASSERT_EQ(r.grad_output.at(2), go[1][0]);  // the inputs are exact bf16 values
  ASSERT_EQ(r.grad_output.at(1), go[0][1]);
  ASSERT_EQ(run(r), "");
  for (int ch = 0; ch < 4; ++ch) EXPECT_EQ(r.outs[2].at(ch), want[ch]) << "gradBias[" << ch << "]";

  // gradWeight as a sum of two products that overflows only when added.
  Problem q = Problem::parse("mb2ic1iw1oc1kw1_dtbf16_mask010").value();
  GuardedRun s = make_guarded_run(q, false, false, rng);
  s.grad_output.set(0, a);
  s.grad_output.set(1, a);
  s.input.set(0, 1);
  s.input.set(1, 1);
  ASSERT_EQ(run(s), "");
  EXPECT_EQ(s.outs[1].at(0), kInf);
}

}  // namespace
}  // namespace convbwd::test
