// Special values: NaN and +-Inf propagate as IEEE arithmetic says, subnormal
// operands give exact results (no flush to zero) and complete, and fp16/bf16
// outputs overflow to +-Inf exactly where round-to-nearest-even says.
//
// One semantics for padding, the reference's: a kernel tap that falls into
// the padding (or past a cropped edge) contributes no term. The fast paths
// compute on zero-filled copies; they must still give exactly the
// reference's NaN/Inf pattern (no phantom Inf * 0 = NaN), whatever the
// implementation, ISA, layout or thread count (src/impl/nonfinite/).
// Strict: for every element, NaN where and only where the reference has NaN,
// the same signed Inf, finite values within the tolerance (guarded.hpp's
// compare_with_reference).
//
// "Depends on" is also checked structurally, without the reference: with all
// operands 1 except a one-hot element, an output is non-zero exactly when
// some product links it to that element.
#include <gtest/gtest.h>

#include "util/tensor.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <set>
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
const char* const kOperandName[3] = {"gradOutput", "input", "weight"};

// Which elements of each gradient depend on element `pos` of operand `which`
// (0 gradOutput, 1 input, 2 weight), by the reference on one-hot data.
std::vector<bool> dependents(const Problem& p, int which, int64_t pos, Gradient g) {
  std::mt19937_64 rng(0);
  GuardedRun r = make_guarded_run(p, false, false, rng);
  for (int o = 0; o < 3; ++o) {
    GuardedTensor& t = operand(r, o);
    for (int64_t i = 0; i < t.elements(); ++i) t.set(i, o == which ? (i == pos ? 1.0 : 0.0) : 1.0);
  }
  const std::vector<double> v = reference_output(r.problem, r.buffers(), g);
  std::vector<bool> dep(v.size());
  for (size_t i = 0; i < v.size(); ++i) dep[i] = v[i] != 0;
  return dep;
}

// Checks one gradient after a special value went into element pos of operand
// `which`: its dependents must satisfy `special`, every other element is
// finite (no NaN through padding taps); the values themselves are compared
// with the reference by GuardedRun::check().
template <class F>
void expect_propagation(GuardedRun& r, int which, int64_t pos, int g, F special, const std::string& what) {
  const std::vector<bool> dep = dependents(r.problem, which, pos, static_cast<Gradient>(g));
  for (int64_t i = 0; i < r.outs[g].elements(); ++i) {
    const double v = r.outs[g].at(i);
    if (dep[static_cast<size_t>(i)]) {
      ASSERT_TRUE(special(v)) << what << ": " << kGradName[g] << "[" << i << "] = " << v << " depends on it";
    } else {
      ASSERT_TRUE(std::isfinite(v)) << what << ": " << kGradName[g] << "[" << i << "] = " << v
                                    << ", but no real tap links it to the special value";
    }
  }
}

std::string run(GuardedRun& r) {
  auto plan = Plan::create(r.problem);
  if (!plan) return plan.error().message;
  GuardedBuffer ws(plan->workspace_size());
  if (Error e = plan->execute(r.buffers(), ws.data(), ws.size())) return e.message;
  return ws.check_guards("workspace");
}

// Problems that take every implementation the registry can choose for a
// convolution: up to 16 channels per group go to depthwise_direct, more to
// the GEMM paths (gemm_fwd_nhwc for transposed gradInput, the phase data
// gradient, gemm_wgrad_nhwc); padding (asymmetric too), stride, dilation,
// groups, 1D/2D/3D, normal and transposed, and the dtypes and operand
// roundings the GEMM and depthwise copies convert.
const char* const kShapes[] = {
    "mb2ic3iw9oc4kw3pw1",
    "mb2ic4iw11oc3kw3sw2pw1dw1",
    "mb2ic3iw5oc4kw2sw2_tr",
    "mb1ic3ih6iw5oc4kh3kw2ph1",
    "mb2g2ic4ih6oc4kh3sh2ph1",
    "mb2ic4ih5iw6oc3kh3kw3ph0pw1phr2pwr0",
    "mb1ic2ih3iw4oc3kh3kw3sh2sw2ph1pw1_tr",
    "mb1ic2id4ih3iw4oc2kd2kh2kw3pd1",
    "mb2ic3ih5oc4kh3ph1_dtf16",
    "mb2ic17ih6oc18kh3ph1",
    "mb2ic18iw11oc17kw3sw2pw1dw1",
    "mb1ic17ih5iw4oc18kh3kw2sh2sw2ph1pw1_tr",
    "mb2g2ic34ih5oc36kh3sh2dh1ph2phr1",
    "mb1ic17id3ih3iw4oc18kd2kh2kw3pd1pw1",
    "mb2ic24iw9oc32kw1",
    "mb2ic17ih5oc18kh3ph1_dtbf16",
    // bf16 pairs in the gather path (avx512_bf16): odd reductions, stride
    // phases, transposed.
    "mb2ic17ih7oc19kh3sh2ph1_dtbf16",
    // ... and in the weight gradients: odd rows (dy's zero meets a real x
    // element, or zero on both sides in the 1x1 layers, which skip the
    // NaN/Inf pass), stride 2 with an odd width.
    "mb2ic17ih5iw9oc19kh3sh2ph1_dtbf16",
    "mb2ic17ih5iw7oc18kh1_dtbf16",
    // A long unit-stride planar row (81 slots a class: several register
    // blocks of the adjacent-pair copy), with padding.
    "mb2ic17iw161oc18kw3pw1_dtbf16",
    "mb1ic17ih5iw4oc19kh3kw2sh2sw2ph1pw1_tr_dtbf16",
    "mb2ic17iw7oc18kw3sw2pw2_tr_dtf16",
    "mb2ic17ih5oc18kh3ph1_math1",
    "mb2ic17ih5oc18kh3ph1_math2",
    "mb2ic4ih5oc3kh3ph1_math2",
    "mb2ic17ih5oc18kh3ph1_dtbf16_math2",  // bf16 rounded to fp16 (issue 19)
    "mb2g16ic16ih6oc16kh3ph1_dtbf16_math2",
    // Channel-blocked depthwise (one and eight channels per group; both
    // gradients in one fused pass, or one by one for a transposed layer)
    // and the small-channel columns paths (C <= 4 per group, stride and
    // dilation).
    "mb2g16ic16ih6oc16kh3ph1",
    "mb2g16ic16ih6oc16kh3ph1_tr",
    "mb2g8ic8ih7iw5oc8kh3kw3sh2sw2ph1pw1",
    // Rows wider than a block of pixels, with a full channel block (whose
    // loader tests its registers for NaN/Inf) and a partial one (which
    // scans what it wrote), on 8- and 16-lane tiers; after the operand
    // rounding too (-70000 becomes Inf under USE_FP16).
    "mb2g20ic20ih3iw37oc20kh3ph1",
    "mb2g20ic20ih3iw37oc20kh3ph1_dtf16",
    "mb2g20ic20ih3iw37oc20kh3ph1_math2",
    "mb2g2ic16ih6oc16kh3ph1",
    "mb2ic3ih9oc20kh3sh2ph1",
    "mb2ic1iw23oc24kw4sw2dw1pw3",
    "mb1ic2ih7iw6oc20kh3kw2ph1pw0phr2pwr1_dtbf16",
};

// The implementations kShapes must reach: each one's special-value handling
// is exercised (under CONVBWD_ISA=scalar too, via the isa label).
const char* const kMustReach[] = {"depthwise_direct",      "depthwise_cl",         "depthwise_cl_fused",
                                  "small_channels_dgrad",  "small_channels_wgrad",  "gemm_fwd_nhwc",
                                  "gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc"};

std::string describe(const char* d, int which, double v, int64_t pos) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return std::string(d) + ": " + buf + " in " + kOperandName[which] + "[" + std::to_string(pos) + "]";
}

// One NaN, +Inf or -Inf in each operand, at the first and last elements (a
// corner: its taps reach the padding), the middle and a random one; data of
// small integers, so real zeros meet the Inf too (Inf * 0 = NaN there) and
// finite sums are exact. Inputs and outputs in strided layouts every other
// time. The outputs must equal the reference element by element.
void check_one_nonfinite(const char* d) {
  const Problem p = Problem::parse(d).value();
  // USE_FP16 rounds fp32 and bf16 operands to fp16 first: 70000 (bf16:
  // 70144) becomes Inf there.
  std::vector<double> values = {kNaN, kInf, -kInf};
  if (std::string(d).find("_math2") != std::string::npos) values.push_back(-70000.0);
  int variant = 0;
  for (int which = 0; which < 3; ++which)
    for (double v : values)
      for (int at = 0; at < 4; ++at) {
        std::mt19937_64 rng(static_cast<uint64_t>(11 + variant));
        const bool strided = variant++ % 2 == 1;
        GuardedRun r = make_guarded_run(p, strided, strided, rng);
        for (int o = 0; o < 3; ++o) operand(r, o).fill_random(rng, true);
        GuardedTensor& t = operand(r, which);
        const int64_t n = t.elements();
        const int64_t pos = at == 0   ? 0
                            : at == 1 ? n - 1
                            : at == 2 ? n / 2
                                      : static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
        t.set(pos, v);
        for (int o = 0; o < 3; ++o) r.in_snapshots[o] = snapshot(operand(r, o));
        ASSERT_EQ(run_plan(r), "") << describe(d, which, v, pos);
      }
}

TEST(ReliabilitySpecialValues, OneNonFiniteMatchesTheReferenceExactly) {
  std::set<std::string> reached;
  for (const char* d : kShapes) {
    {
      auto plan = Plan::create(Problem::parse(d).value()).value();
      for (int g = 0; g < 3; ++g) reached.insert(std::string(impl_base(plan.implementation(static_cast<Gradient>(g)))));
    }
    check_one_nonfinite(d);
  }
  for (const char* name : kMustReach) EXPECT_TRUE(reached.count(name)) << name << " was not exercised";
}

// Weight-heavy layers pack their weights slab by slab inside the GEMM tasks
// (gather_conv.cpp); each slab's pack must report what it finds. Forced here
// on small layers, with slabs of one and of two blocks.
TEST(ReliabilitySpecialValues, WeightSlabsMatchTheReferenceExactly) {
  for (const char* blocks : {"1", "2"}) {
    SCOPED_TRACE(std::string("CONVBWD_GEMM_SLAB_BLOCKS=") + blocks);
    setenv("CONVBWD_GEMM_SLAB_BLOCKS", blocks, 1);
    for (const char* d : {"mb2ic40ih5oc18kh3ph1", "mb1ic17ih5iw4oc36kh3kw2sh2sw2ph1pw1_tr", "mb2g2ic34ih5oc36kh3sh2ph1"})
      check_one_nonfinite(d);
  }
  unsetenv("CONVBWD_GEMM_SLAB_BLOCKS");
}

// One special value in each of two operands at once, every pair. A kernel
// that reports what it found (NonfiniteMode::report) must name each operand
// that held one: execute's second run reads every special value of both
// operands as 0, and the event pass adds back only the terms of the operands
// named, so a pair detected as one loses the other's NaN or Inf.
TEST(ReliabilitySpecialValues, OneInEachOfTwoOperandsMatchesTheReference) {
  for (const char* d : kShapes) {
    const Problem p = Problem::parse(d).value();
    int variant = 0;
    for (int first = 0; first < 3; ++first)
      for (int second = first + 1; second < 3; ++second)
        for (int at = 0; at < 2; ++at) {
          std::mt19937_64 rng(static_cast<uint64_t>(31 + variant));
          const bool strided = variant++ % 2 == 1;
          GuardedRun r = make_guarded_run(p, strided, strided, rng);
          for (int o = 0; o < 3; ++o) operand(r, o).fill_random(rng, true);
          // Middle elements (their taps are real), or random ones.
          GuardedTensor& a = operand(r, first);
          GuardedTensor& b = operand(r, second);
          const int64_t pa = at == 0 ? a.elements() / 2 : static_cast<int64_t>(rng() % static_cast<uint64_t>(a.elements()));
          const int64_t pb = at == 0 ? b.elements() / 3 : static_cast<int64_t>(rng() % static_cast<uint64_t>(b.elements()));
          a.set(pa, kInf);
          b.set(pb, kNaN);
          for (int o = 0; o < 3; ++o) r.in_snapshots[o] = snapshot(operand(r, o));
          ASSERT_EQ(run_plan(r), "") << describe(d, first, kInf, pa) << " and " << kOperandName[second] << "["
                                     << pb << "] = nan";
        }
  }
}

// Whole operands of NaN, of +Inf, of -Inf, and of +-Inf alternating (both
// signs meet in every output): each operand alone, then all three at once.
TEST(ReliabilitySpecialValues, AllNonFiniteOperandsMatchTheReference) {
  for (const char* d : kShapes) {
    const Problem p = Problem::parse(d).value();
    for (int kind = 0; kind < 4; ++kind)
      for (int which = 0; which < 4; ++which) {  // 3: all operands
        std::mt19937_64 rng(static_cast<uint64_t>(21 + kind * 4 + which));
        GuardedRun r = make_guarded_run(p, kind % 2 == 1, false, rng);
        for (int o = 0; o < 3; ++o) {
          GuardedTensor& t = operand(r, o);
          t.fill_random(rng, true);
          if (o == which || which == 3)
            for (int64_t i = 0; i < t.elements(); ++i)
              t.set(i, kind == 0 ? kNaN : kind == 1 ? kInf : kind == 2 ? -kInf : (i % 2 ? kInf : -kInf));
          r.in_snapshots[o] = snapshot(t);
        }
        ASSERT_EQ(run_plan(r), "") << d << ": kind " << kind << " (NaN, +Inf, -Inf, +-Inf) in "
                                   << (which == 3 ? "every operand" : kOperandName[which]);
      }
  }
}

// A sprinkling of NaN, +Inf and -Inf (1 in 50 and 1 in 4 of the elements of
// one operand, or of all three): between the one-hot and the all-special
// cases, where execute's event pass switches between its sparse and dense
// ways (src/impl/nonfinite/nonfinite.cpp).
TEST(ReliabilitySpecialValues, ScatteredNonFiniteMatchesTheReference) {
  for (const char* d : kShapes) {
    const Problem p = Problem::parse(d).value();
    for (int every : {50, 4})
      for (int which = 0; which < 4; ++which) {  // 3: all operands
        std::mt19937_64 rng(static_cast<uint64_t>(51 + every + which));
        GuardedRun r = make_guarded_run(p, which % 2 == 0, which % 2 == 1, rng);
        for (int o = 0; o < 3; ++o) {
          GuardedTensor& t = operand(r, o);
          t.fill_random(rng, true);
          if (o == which || which == 3)
            for (int64_t i = 0; i < t.elements(); ++i)
              if (rng() % static_cast<uint64_t>(every) == 0) {
                const uint64_t k = rng() % 3;
                t.set(i, k == 0 ? kNaN : k == 1 ? kInf : -kInf);
              }
          r.in_snapshots[o] = snapshot(t);
        }
        ASSERT_EQ(run_plan(r), "") << d << ": 1 in " << every << " special in "
                                   << (which == 3 ? "every operand" : kOperandName[which]);
      }
  }
}

// +Inf and -Inf in two neighbouring gradOutput elements: outputs that see
// both (through real taps) are NaN, those that see one keep its sign, and
// outputs that meet one only through padding stay finite.
TEST(ReliabilitySpecialValues, InfOfBothSignsMeeting) {
  for (const char* d : kShapes) {
    const Problem p = Problem::parse(d).value();
    for (int which = 0; which < 3; ++which) {
      std::mt19937_64 rng(static_cast<uint64_t>(31 + which));
      GuardedRun r = make_guarded_run(p, false, true, rng);
      for (int o = 0; o < 3; ++o) operand(r, o).fill_random(rng, false);
      GuardedTensor& t = operand(r, which);
      const int64_t pos = t.elements() / 3;
      t.set(pos, kInf);
      t.set(pos + 1 < t.elements() ? pos + 1 : 0, -kInf);
      for (int o = 0; o < 3; ++o) r.in_snapshots[o] = snapshot(operand(r, o));
      ASSERT_EQ(run_plan(r), "") << describe(d, which, kInf, pos) << " and -Inf next to it";
    }
  }
}

// The bits of every output are the same with 1 and 2 threads, with special
// values in the operands (one-hot, and whole operands of +-Inf).
TEST(ReliabilitySpecialValues, ThreadCountDoesNotChangeTheBits) {
  const int saved = num_threads();
  for (const char* d : kShapes) {
    const Problem p = Problem::parse(d).value();
    for (int kind = 0; kind < 3; ++kind) {
      std::mt19937_64 rng(static_cast<uint64_t>(41 + kind));
      GuardedRun r = make_guarded_run(p, true, true, rng);
      for (int o = 0; o < 3; ++o) operand(r, o).fill_random(rng, true);
      if (kind < 2) {
        operand(r, kind).set(0, kind == 0 ? kNaN : kInf);
        operand(r, 2).set(operand(r, 2).elements() - 1, -kInf);
      } else {
        for (int64_t i = 0; i < r.grad_output.elements(); ++i) r.grad_output.set(i, i % 3 ? kInf : -kInf);
      }
      for (int o = 0; o < 3; ++o) r.in_snapshots[o] = snapshot(operand(r, o));
      std::vector<unsigned char> bits[2];
      for (int th = 1; th <= 2; ++th) {
        set_num_threads(th);
        ASSERT_EQ(run_plan(r), "") << d << ", kind " << kind << ", " << th << " threads";
        bits[th - 1] = output_bits(r);
      }
      EXPECT_TRUE(bits[0] == bits[1]) << d << ", kind " << kind << ": outputs differ between 1 and 2 threads";
    }
  }
  set_num_threads(saved);
}

// A NaN in one element makes exactly its dependents NaN; every other output
// stays finite and equal to the reference.
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
      EXPECT_EQ(r.check(), "") << d << ", NaN in " << kOperandName[which];
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
    r.in_snapshots[0] = snapshot(r.grad_output);
    r.in_snapshots[2] = snapshot(r.weight);
    ASSERT_EQ(run(r), "") << d;
    EXPECT_EQ(r.check(), "") << d << ", 0 * Inf";
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
      EXPECT_EQ(r.check(), "") << d << (inf > 0 ? ", +Inf" : ", -Inf") << " in gradOutput";
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
