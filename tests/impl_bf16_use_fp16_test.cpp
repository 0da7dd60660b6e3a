// bfloat16 with cubeMathType 2 (USE_FP16), as CANN's implementation computes
// it (issue 19): the operands of the data and weight gradients are rounded
// bf16 -> fp16 (nearest even; past fp16's range to +-Inf; tiny values to fp16
// subnormals or zero), products are summed in fp32 and each output is rounded
// once to its dtype; gradBias sums gradOutput as it is.
//
// The expected operand rounding is written here by hand, value by value, not
// taken from the library: each raw bf16 operand comes with its fp16 value, and
// the expectation is the fp64 reference run with KEEP_DTYPE on the rounded
// operands (every fp16 value a bf16 value rounds to is itself a bf16 value, so
// the rounded operands are stored exactly). The data keep every sum exact in
// fp32 (multiples of 2^-26 far below 2^24 units, or few large terms), so the
// outputs must equal the expectation bit for bit, NaN and +-Inf included.
//
// The shapes reach every fast path (depthwise, small channels, channels-last
// GEMM, planar 1x1); the file is labelled "isa", so CONVBWD_ISA reruns it on
// each lower instruction set.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "util/guarded.hpp"

namespace convbwd::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kU = 0x1p-24;  // fp16's smallest subnormal

struct Rounded {
  double raw;    // a bf16 value
  double fp16;   // what round-to-nearest-even into fp16 makes of it
};

// Below fp16's normal range, the fp16 quantum is 2^-24 (kU): a value rounds
// to the nearest multiple of kU, ties to an even multiple.
const Rounded kTiny[] = {
    {0.25 * kU, 0},          // 2^-26: below half a quantum
    {0.5 * kU, 0},           // 2^-25: a tie, to the even multiple 0
    {0.75 * kU, kU},         // 1.5 * 2^-25
    {1.25 * kU, kU},         // 1.25 * 2^-24
    {1.5 * kU, 2 * kU},      // a tie, up to the even 2
    {-2.5 * kU, -2 * kU},    // 1.25 * 2^-23, a tie, down to the even 2
    {3.5 * kU, 4 * kU},      // 1.75 * 2^-23, a tie, up to the even 4
    {64.5 * kU, 64 * kU},    // (129/128) * 2^-18, a tie, to 64
    {-65.5 * kU, -66 * kU},  // (131/128) * 2^-18, a tie, to 66
    {33.25 * kU, 33 * kU},   // (133/128) * 2^-19
    {3 * kU, 3 * kU},        // an fp16 subnormal, exact
    {896 * kU, 896 * kU},    // 1.75 * 2^-15, exact
    {1024 * kU, 1024 * kU},  // 2^-14, fp16's smallest normal
    {0x1p-100, 0},           // a bf16 normal far below fp16's range
    {-0x1p-133, 0},          // a bf16 subnormal (-0 after rounding; compared as 0)
};

// fp16's largest finite value is 65504; round-to-nearest-even sends 65520
// and above to Inf. The bf16 values around it are 65280 and 65536.
const Rounded kHuge[] = {
    {65280, 65280},    // the largest bf16 value that stays finite
    {-65280, -65280},
    {65536, kInf},     // 2^16
    {-65536, -kInf},
    {99840, kInf},     // bf16(1e5)
    {0x1p100, kInf},
};

GuardedTensor& operand(GuardedRun& r, int which) {
  return which == 0 ? r.grad_output : which == 1 ? r.input : r.weight;
}
const char* const kOperandName[3] = {"gradOutput", "input", "weight"};
const char* const kGradName[3] = {"gradInput", "gradWeight", "gradBias"};

bool same(double got, double want) { return got == want || (std::isnan(got) && std::isnan(want)); }

// The part of an implementation name before the ISA (":avx512").
std::string family(std::string_view name) { return std::string(name.substr(0, name.find(':'))); }

struct Case {
  int special = 0;        // the operand that holds the table's values
  bool huge = false;      // kHuge (sparse, among small integers) or kTiny (every element)
  bool strided = false;
};

// Elements where rounding the operands changes the reference's answer, for
// gradInput and gradWeight together and for gradBias (where the answer must
// be the unrounded one): proof that the data exercise the rounding.
struct Sensitivity {
  int64_t rounded = 0, bias = 0;
};

// Runs p (USE_FP16) on raw data and checks every requested output against
// the reference on the hand-rounded data.
void check_case(const Problem& p, const Case& c, uint64_t seed, Sensitivity& sensitive) {
  SCOPED_TRACE(p.descriptor() + ": " + (c.huge ? "huge" : "tiny") + " values in " + kOperandName[c.special] +
               (c.strided ? ", strided" : "") + ", seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  GuardedRun r = make_guarded_run(p, c.strided, c.strided, rng);
  std::vector<double> rounded[3];
  for (int o = 0; o < 3; ++o) {
    GuardedTensor& t = operand(r, o);
    t.fill_random(rng, true);  // integers in [-3, 3]
    rounded[o].resize(static_cast<size_t>(t.elements()));
    // Huge values are sparse (every fifth element, from a random start,
    // going through kHuge in turn, so that an operand of 11 elements or more
    // holds one that overflows): most outputs stay finite.
    const int64_t phase = static_cast<int64_t>(rng() % 5);
    for (int64_t i = 0; i < t.elements(); ++i) {
      double raw = t.at(i), fp16 = raw;
      if (o == c.special) {
        if (!c.huge) {
          const Rounded& v = kTiny[rng() % std::size(kTiny)];
          raw = v.raw, fp16 = v.fp16;
        } else if ((i + phase) % 5 == 0) {
          const Rounded& v = kHuge[static_cast<size_t>((i + phase) / 5) % std::size(kHuge)];
          raw = v.raw, fp16 = v.fp16;
        }
      }
      t.set(i, raw);
      ASSERT_EQ(t.at(i), raw) << "the test's raw values must be exact in " << to_string(t.desc.dtype);
      rounded[o][static_cast<size_t>(i)] = fp16;
    }
    r.in_snapshots[o] = snapshot(t);
  }
  // The library's output, checked by guarded.hpp against its own reference
  // too (guards, views, and values within the tolerance).
  ASSERT_EQ(run_plan(r), "");

  Problem keep = r.problem;
  keep.math_mode = MathMode::keep_dtype;
  std::vector<double> raw_ref[3];
  for (int g = 0; g < 3; ++g)
    if (p.output_mask[g]) raw_ref[g] = reference_output(keep, r.buffers(), static_cast<Gradient>(g));
  for (int o = 0; o < 3; ++o)
    for (int64_t i = 0; i < operand(r, o).elements(); ++i) operand(r, o).set(i, rounded[o][static_cast<size_t>(i)]);
  for (int g = 0; g < 3; ++g) {
    if (!p.output_mask[g]) continue;
    // gradBias is reduced from gradOutput before the fp16 casts.
    const std::vector<double> want =
        g == 2 ? raw_ref[g] : reference_output(keep, r.buffers(), static_cast<Gradient>(g));
    const std::vector<double> other =
        g == 2 ? reference_output(keep, r.buffers(), static_cast<Gradient>(g)) : raw_ref[g];
    for (size_t i = 0; i < want.size(); ++i) {
      const double got = r.outs[g].at(static_cast<int64_t>(i));
      ASSERT_TRUE(same(got, want[i])) << kGradName[g] << "[" << i << "] = " << got << ", want " << want[i]
                                      << (same(got, other[i]) ? " (as if the operands were not rounded)" : "");
      (g == 2 ? sensitive.bias : sensitive.rounded) += !same(want[i], other[i]);
    }
  }
}

// Every fast path the registry has for these dtypes, 1D/2D/3D, normal and
// transposed, bf16 alone and mixed with fp32 and fp16 (no dilation tokens:
// their grammar is changing).
const char* const kShapes[] = {
    "mb2ic3iw9oc4kw3pw1",                     // 1D
    "mb2ic18iw11oc17kw3sw2pw1",               // 1D, GEMM
    "mb2ic3iw5oc4kw2sw2_tr",                  // 1D transposed
    "mb2ic17ih6oc18kh3ph1",                   // channels-last GEMM
    "mb1ic17ih5iw4oc18kh3kw2sh2sw2ph1pw1_tr",  // transposed GEMM
    "mb2g2ic4ih6oc4kh3sh2ph1",                // small groups: depthwise_direct
    "mb2g16ic16ih6oc16kh3ph1",                // depthwise, channel-blocked
    "mb2g16ic16ih6oc16kh3ph1_tr",
    "mb2ic3ih9oc20kh3sh2ph1",                 // small channels (columns)
    "mb2ic1iw23oc24kw4sw2pw3",
    "mb2ic18ih9oc20kh1",                      // planar 1x1
    "mb2ic24iw9oc32kw1",
    "mb2ic18ih9oc20kh1_tr",                   // planar 1x1, transposed
    "mb1ic2id4ih3iw4oc2kd2kh2kw3pd1",         // 3D
    "mb1ic17id3ih3iw4oc18kd2kh2kw3pd1pw1",    // 3D, GEMM
    "mb1ic2id3ih3iw4oc3kd2kh2kw2sd2sh2sw2_tr",  // 3D transposed
};
const char* const kDtypes[] = {"_dtbf16", "_dtbf16:f32:f32", "_dtf32:bf16:bf16", "_dtf16:bf16:f32"};

// The fast-path families that kShapes must reach with bf16 and USE_FP16.
const char* const kMustReach[] = {"depthwise_direct",     "depthwise_cl",       "small_channels_dgrad",
                                  "small_channels_wgrad", "gemm_fwd_nhwc",       "gemm_dgrad_phase_nhwc",
                                  "gemm_wgrad_nhwc",      "gemm_fwd_1x1_nchw",   "gemm_dgrad_1x1_nchw",
                                  "gemm_wgrad_1x1_nchw",  "bias_reduce"};

void run_family(bool huge) {
  std::set<std::string> reached;
  uint64_t seed = huge ? 5000 : 1000;
  int64_t bias_sensitive = 0;
  for (const char* shape : kShapes)
    for (const char* dt : kDtypes) {
      Problem base = Problem::parse(std::string(shape) + dt + "_math2").value();
      for (int mask = 1; mask < 8; ++mask) {
        Problem p = base;
        p.output_mask = {(mask & 4) != 0, (mask & 2) != 0, (mask & 1) != 0};
        {
          auto plan = Plan::create(p);
          ASSERT_TRUE(plan.ok()) << p.descriptor() << ": " << plan.error().message;
          for (int g = 0; g < 3; ++g)
            if (p.output_mask[g]) reached.insert(family(plan->implementation(static_cast<Gradient>(g))));
        }
        Sensitivity sensitive;
        for (int special = 0; special < 3; ++special) {
          // Only bf16 and fp32 operands take the raw values: an fp16 one
          // holds fp16 values already.
          const TensorDesc& t = special == 0 ? p.grad_output : special == 1 ? p.input : p.weight;
          if (t.dtype == DataType::f16) continue;
          check_case(p, Case{special, huge, (seed & 1) != 0}, ++seed, sensitive);
          if (::testing::Test::HasFatalFailure()) return;
        }
        if (p.output_mask[0] || p.output_mask[1]) {
          EXPECT_GT(sensitive.rounded, 0) << p.descriptor() << ": no output depends on the rounding";
        }
        bias_sensitive += sensitive.bias;
      }
    }
  for (const char* name : kMustReach) EXPECT_TRUE(reached.count(name)) << name << " was not exercised";
  // Summed into bf16 (8 bits), most gradBias elements hide the quarter-ulp
  // differences of the tiny values; some must show them.
  EXPECT_GT(bias_sensitive, 0) << "no gradBias element tells the raw gradOutput from the rounded one";
}

TEST(Bf16UseFp16, TinyValuesRoundToFp16SubnormalsOrZero) { run_family(false); }
TEST(Bf16UseFp16, PastFp16RangeTheInfPatternIsTheReferences) { run_family(true); }

// Two problems small enough to work out on paper, with no reference at all.
TEST(Bf16UseFp16, HandComputedSubnormals) {
  // 1D, one channel, kernel 1: gradInput[l] = dy[l] * w, gradWeight =
  // sum dy[l] * x[l], gradBias = sum dy[l].
  Problem p = Problem::parse("mb1ic1iw4oc1kw1_dtbf16_math2").value();
  std::mt19937_64 rng(1);
  GuardedRun r = make_guarded_run(p, false, false, rng);
  const double dy[4] = {0.75 * kU, 2.5 * kU, 1.25 * kU, 33.25 * kU};  // fp16: 1, 2, 1, 33 (times kU)
  const double x[4] = {1, 2, 3, -1};
  for (int i = 0; i < 4; ++i) r.grad_output.set(i, dy[i]), r.input.set(i, x[i]);
  r.weight.set(0, 3);
  for (int o = 0; o < 3; ++o) r.in_snapshots[o] = snapshot(operand(r, o));
  auto plan = Plan::create(r.problem);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  GuardedBuffer ws(plan->workspace_size());
  ASSERT_FALSE(plan->execute(r.buffers(), ws.size() ? ws.data() : nullptr, ws.size()));
  const double grad_input[4] = {3 * kU, 6 * kU, 3 * kU, 99 * kU};  // unrounded: 2.25, 7.5, 3.75, 99.75
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.outs[0].at(i), grad_input[i]) << "gradInput[" << i << "]";
  EXPECT_EQ(r.outs[1].at(0), -25 * kU);     // 1 + 4 + 3 - 33; unrounded: -23.75
  EXPECT_EQ(r.outs[2].at(0), 37.75 * kU);   // the raw sum (rounded operands: 37)
}

TEST(Bf16UseFp16, HandComputedOverflow) {
  // 1D, two input channels, one output channel, kernel 1, two positions:
  // gradInput[c, l] = dy[l] * w[c], gradWeight[c] = sum_l dy[l] * x[c, l].
  Problem p = Problem::parse("mb1ic2iw2oc1kw1_dtbf16_math2").value();
  std::mt19937_64 rng(1);
  GuardedRun r = make_guarded_run(p, false, false, rng);
  r.grad_output.set(0, 65280);   // finite in fp16
  r.grad_output.set(1, -65536);  // -Inf in fp16
  r.weight.set(0, 1);
  r.weight.set(1, 0);
  const double x[4] = {1, 2, 0, -1};  // [c][l]
  for (int i = 0; i < 4; ++i) r.input.set(i, x[i]);
  for (int o = 0; o < 3; ++o) r.in_snapshots[o] = snapshot(operand(r, o));
  auto plan = Plan::create(r.problem);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  GuardedBuffer ws(plan->workspace_size());
  ASSERT_FALSE(plan->execute(r.buffers(), ws.size() ? ws.data() : nullptr, ws.size()));
  EXPECT_EQ(r.outs[0].at(0), 65280);
  EXPECT_EQ(r.outs[0].at(1), -kInf);
  EXPECT_EQ(r.outs[0].at(2), 0);
  EXPECT_TRUE(std::isnan(r.outs[0].at(3))) << r.outs[0].at(3);  // -Inf * 0
  EXPECT_EQ(r.outs[1].at(0), -kInf);  // 65280 - 2 Inf
  EXPECT_EQ(r.outs[1].at(1), kInf);   // 0 + Inf; unrounded: 65536
  EXPECT_EQ(r.outs[2].at(0), -256);   // gradBias sums the raw values
  EXPECT_EQ(r.check(), "");
}

}  // namespace
}  // namespace convbwd::test
