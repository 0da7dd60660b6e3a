// The finite-difference gradient check: the library's gradients (through
// Plan::execute) must be the derivatives of
//   L(input, weight, bias) = sum(gradOutput * (forward(input, weight) + bias))
// where forward is the tests' own convolution (util/forward_oracle), written
// from PyTorch's definition and sharing nothing with src/reference.
//
// L is linear in each argument, so a forward difference with step 1,
// L(x + e_j) - L(x), is the exact derivative up to fp64 rounding (about
// 2^-52 * sum|terms|, far below fp32's roundoff). The same difference taken on
// |gradOutput|, |input|, |weight| gives sum|products| of each gradient element,
// which scales the tolerance exactly as tolerance() defines it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "util/forward_oracle.hpp"
#include "util/run.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

double loss(const ConvParams& p, const std::vector<double>& go, const std::vector<double>& x,
            const std::vector<double>& w, const std::vector<double>& b) {
  const std::vector<double> y = forward(p, x, w, b);
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += go[i] * y[i];
  return l;
}

std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.at(static_cast<int64_t>(i));
  return v;
}

std::vector<double> abs_of(std::vector<double> v) {
  for (double& e : v) e = std::fabs(e);
  return v;
}

// d L / d arg[j] for every j, by a step-1 forward difference; `which` picks
// the argument (0 input, 1 weight, 2 bias).
std::vector<double> differences(const ConvParams& p, int which, const std::vector<double>& go,
                                std::vector<double> x, std::vector<double> w, std::vector<double> b) {
  std::vector<double>& arg = which == 0 ? x : which == 1 ? w : b;
  const double base = loss(p, go, x, w, b);
  std::vector<double> d(arg.size());
  for (size_t j = 0; j < arg.size(); ++j) {
    const double keep = arg[j];
    arg[j] = keep + 1.0;
    d[j] = loss(p, go, x, w, b) - base;
    arg[j] = keep;
  }
  return d;
}

struct Features {
  int spatial = 2;
  bool transposed = false;
  int kind = 0;  // 0 random, 1 stride > kernel, 2 dilation, 3 asymmetric padding, 4 groups, 5 depthwise,
                 // 6 output padding
};

// A random small problem with the requested feature, valid by construction.
ConvParams random_params(const Features& f, std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (;;) {
    ConvParams p;
    p.spatial = f.spatial;
    p.transposed = f.transposed;
    p.n = pick(1, 2);
    const int sp = f.spatial;
    const int64_t max_in = sp == 1 ? 9 : sp == 2 ? 5 : 3;
    const int64_t max_k = sp == 3 ? 2 : 3;
    int64_t cg = pick(1, 3), kg = pick(1, 3);
    p.groups = 1;
    if (f.kind == 4) p.groups = pick(2, 3);
    if (f.kind == 5) {
      // Depthwise as PyTorch defines it: groups = input channels, with a
      // channel multiplier of 1 or more; sometimes one output channel per
      // group instead.
      p.groups = pick(2, 4);
      if (pick(0, 2) == 0)
        kg = 1;
      else
        cg = 1;
    }
    if (sp == 3) cg = std::min<int64_t>(cg, 2), kg = std::min<int64_t>(kg, 2);
    p.cin = p.groups * cg;
    p.cout = p.groups * kg;
    for (int d = 0; d < sp; ++d) {
      int64_t k = pick(1, max_k), s = pick(1, 2), dil = 1, pb = pick(0, 1), pa = pb, op = 0;
      if (f.kind == 1) s = k + pick(1, 2);  // gaps: taps never reach some positions
      if (f.kind == 2) dil = pick(2, 3), k = std::max<int64_t>(k, 2);
      if (f.kind == 3) pb = pick(0, 2), pa = pick(0, 2);
      if (f.kind == 0) dil = pick(1, 2), pa = pick(0, 2);
      if (p.transposed && (f.kind == 6 || f.kind == 0 || f.kind == 1)) {
        if (f.kind == 6) s = std::max<int64_t>(s, 2);
        op = pick(0, s - 1);
      }
      p.in.push_back(pick(1, max_in));
      p.kernel.push_back(k);
      p.stride.push_back(s);
      p.dilation.push_back(dil);
      p.pad_before.push_back(pb);
      p.pad_after.push_back(pa);
      p.output_padding.push_back(op);
    }
    if (p.well_formed()) return p;
  }
}

struct Outcome {
  int checked = 0;
  double worst = 0;  // worst |got - want| / tolerance
};

// Checks the three gradients of one problem, stopping (fatal failure) at the
// first bad element with a message naming the problem.
void check_problem(const ConvParams& cp, DataType dt, Fill fill, uint64_t seed, Outcome& out) {
  Problem prob = cp.to_problem();
  prob.grad_output.dtype = prob.input.dtype = prob.weight.dtype = dt;
  RunOptions opt;
  opt.fill = fill;
  opt.seed = seed;
  const Layout layouts[] = {Layout::contiguous, Layout::channels_last, Layout::padded, Layout::reversed};
  opt.in_layout = layouts[seed % 4];
  opt.out_layout = layouts[(seed / 4) % 4];
  const std::string where = repro(prob, opt) + " (" + cp.to_string() + ")";
  RunResult r = run_problem(prob, opt);
  ASSERT_FALSE(r.error) << where << ": " << r.error.message;

  const std::vector<double> go = values(r.go), x = values(r.in), w = values(r.w);
  const std::vector<double> b(static_cast<size_t>(cp.cout), 0.0);
  const std::vector<double> go_a = abs_of(go), x_a = abs_of(x), w_a = abs_of(w);
  const char* const names[3] = {"gradInput", "gradWeight", "gradBias"};
  // Products per element, as tolerance() wants them: gradInput sums over
  // Cout/groups channels and the kernel, gradWeight over N and the smaller
  // (result) side's positions, gradBias over N and gradOutput's positions
  // (in bias_reduce's lanes and tree: bias_summation_depth).
  const std::vector<int64_t> ydims = cp.output_dims();
  const int64_t out_sp = product(std::vector<int64_t>(ydims.begin() + 2, ydims.end()));
  const int64_t result_sp = cp.transposed ? product(cp.in) : out_sp;
  const int64_t lengths[3] = {cp.cout / cp.groups * product(cp.kernel), cp.n * result_sp,
                              bias_summation_depth(cp.n * out_sp)};
  for (int which = 0; which < 3; ++which) {
    const std::vector<double> want = differences(cp, which, go, x, w, b);
    const std::vector<double> sum_abs = differences(cp, which, go_a, x_a, w_a, b);
    const HostTensor& got_t = r.outs[static_cast<size_t>(which)];
    ASSERT_EQ(got_t.elements(), static_cast<int64_t>(want.size())) << where << ": " << names[which] << " size";
    for (size_t j = 0; j < want.size(); ++j) {
      const double got = got_t.at(static_cast<int64_t>(j));
      const double tol = tolerance(got_t.desc.dtype, want[j], sum_abs[j], lengths[which]);
      const double err = std::fabs(got - want[j]);
      // Small integers keep every sum exact in fp32, and the finite
      // difference exact in fp64, so nothing less than equality will do.
      const bool exact = fill == Fill::small_ints && dt == DataType::f32;
      out.worst = std::max(out.worst, err / tol);
      ASSERT_TRUE(exact ? err == 0 : err <= tol)
          << where << ": " << names[which] << "[" << j << "] library " << got << ", finite difference " << want[j]
          << ", error " << err << ", tolerance " << tol << (exact ? " (exact expected)" : "");
    }
    ++out.checked;
  }
}

void run_family(int spatial, bool transposed, int problems, uint64_t seed0) {
  std::mt19937_64 rng(seed0);
  Outcome out;
  for (int i = 0; i < problems; ++i) {
    Features f;
    f.spatial = spatial;
    f.transposed = transposed;
    f.kind = i % 7;
    if (f.kind == 6 && !transposed) f.kind = 3;
    const ConvParams cp = random_params(f, rng);
    // Mostly fp32; every few problems exact integer data or a 16-bit dtype.
    const DataType dt = i % 11 == 5 ? DataType::f16 : i % 11 == 9 ? DataType::bf16 : DataType::f32;
    const Fill fill = i % 3 == 1 ? Fill::small_ints : Fill::uniform;
    check_problem(cp, dt, fill, seed0 * 1000 + static_cast<uint64_t>(i), out);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(out.checked, problems * 3);
  ::testing::Test::RecordProperty("worst_scaled_error", std::to_string(out.worst));
}

// --- the oracle against hand-computed values ---------------------------------
// Anchors the oracle itself: these are worked out on paper from PyTorch's
// definitions.

ConvParams one_d(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pa, int64_t dil, bool tr, int64_t op = 0) {
  ConvParams p;
  p.spatial = 1;
  p.transposed = tr;
  p.in = {in};
  p.kernel = {k};
  p.stride = {s};
  p.pad_before = {pb};
  p.pad_after = {pa};
  p.dilation = {dil};
  p.output_padding = {op};
  return p;
}

TEST(ForwardOracle, HandComputedConv1d) {
  // x = [1 2 3 4], w = [1 10]: y[o] = x[o] + 10 x[o+1].
  EXPECT_EQ(forward(one_d(4, 2, 1, 0, 0, 1, false), {1, 2, 3, 4}, {1, 10}, {}), (std::vector<double>{21, 32, 43}));
  // Stride 2, padding 1 before and 0 after: padded x = [0 1 2 3 4], o = 0, 1.
  EXPECT_EQ(forward(one_d(4, 2, 2, 1, 0, 1, false), {1, 2, 3, 4}, {1, 10}, {}), (std::vector<double>{10, 32}));
  // Dilation 2: y[o] = x[o] + 10 x[o+2]; bias 0.5 added everywhere.
  EXPECT_EQ(forward(one_d(4, 2, 1, 0, 0, 2, false), {1, 2, 3, 4}, {1, 10}, {0.5}),
            (std::vector<double>{31.5, 42.5}));
}

TEST(ForwardOracle, HandComputedConvTranspose1d) {
  // x = [1 2], w = [1 10], stride 2: scatter gives [1 10 2 20].
  EXPECT_EQ(forward(one_d(2, 2, 2, 0, 0, 1, true), {1, 2}, {1, 10}, {}), (std::vector<double>{1, 10, 2, 20}));
  // Padding 1 crops one element at each end; outputPadding 1 extends the end.
  EXPECT_EQ(forward(one_d(2, 2, 2, 1, 1, 1, true), {1, 2}, {1, 10}, {}), (std::vector<double>{10, 2}));
  EXPECT_EQ(forward(one_d(2, 2, 2, 1, 1, 1, true, 1), {1, 2}, {1, 10}, {}), (std::vector<double>{10, 2, 20}));
  // Stride 3 > kernel 2 leaves gaps; outputPadding 2 adds zeros at the end.
  EXPECT_EQ(forward(one_d(2, 2, 3, 0, 0, 1, true, 2), {1, 2}, {1, 10}, {}),
            (std::vector<double>{1, 10, 0, 2, 20, 0, 0}));
}

TEST(ForwardOracle, HandComputedGroups2d) {
  // Two groups of one channel, 2x2 input, 1x1 kernels 2 and 3.
  ConvParams p;
  p.spatial = 2;
  p.cin = p.cout = p.groups = 2;
  p.in = {2, 2};
  p.kernel = {1, 1};
  p.stride = p.dilation = {1, 1};
  p.pad_before = p.pad_after = p.output_padding = {0, 0};
  EXPECT_EQ(forward(p, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 3}, {}), (std::vector<double>{2, 4, 6, 8, 15, 18, 21, 24}));
}

// A transposed convolution is the adjoint of the normal one with the same
// weight: <y, convT(x)> = <conv(y), x>. Checks the two halves of the oracle
// against each other over random problems.
TEST(ForwardOracle, TransposedIsAdjointOfNormal) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int i = 0; i < 60; ++i) {
    Features f;
    f.spatial = 1 + i % 3;
    f.transposed = true;
    f.kind = i % 7;
    const ConvParams t = random_params(f, rng);
    ConvParams nrm = t;
    nrm.transposed = false;
    nrm.cin = t.cout;
    nrm.cout = t.cin;
    const std::vector<int64_t> tout = t.output_dims();
    nrm.in.assign(tout.begin() + 2, tout.end());
    nrm.output_padding.assign(static_cast<size_t>(t.spatial), 0);
    ASSERT_EQ(nrm.output_dims(), t.input_dims()) << t.to_string();
    ASSERT_EQ(nrm.weight_dims(), t.weight_dims()) << t.to_string();
    auto rand_vec = [&](int64_t n) {
      std::vector<double> v(static_cast<size_t>(n));
      for (double& e : v) e = u(rng);
      return v;
    };
    const auto x = rand_vec(product(t.input_dims())), y = rand_vec(product(tout)), w = rand_vec(product(t.weight_dims()));
    const auto tx = forward(t, x, w, {}), ny = forward(nrm, y, w, {});
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t j = 0; j < y.size(); ++j) lhs += y[j] * tx[j], mag += std::fabs(y[j] * tx[j]);
    for (size_t j = 0; j < x.size(); ++j) rhs += ny[j] * x[j];
    EXPECT_NEAR(lhs, rhs, 1e-12 * (1 + mag)) << t.to_string();
  }
}

// --- the library against the oracle --------------------------------------------

TEST(GradCheck, Conv1d) { run_family(1, false, 150, 11); }
TEST(GradCheck, Conv2d) { run_family(2, false, 150, 12); }
TEST(GradCheck, Conv3d) { run_family(3, false, 100, 13); }
TEST(GradCheck, ConvTranspose1d) { run_family(1, true, 150, 21); }
TEST(GradCheck, ConvTranspose2d) { run_family(2, true, 150, 22); }
TEST(GradCheck, ConvTranspose3d) { run_family(3, true, 100, 23); }

// PyTorch-style asymmetric 2D padding given as [top, bottom, left, right].
TEST(GradCheck, AsymmetricPadding2dCorners) {
  Outcome out;
  uint64_t seed = 500;
  for (bool tr : {false, true})
    for (int64_t top : {0, 2})
      for (int64_t bottom : {0, 1})
        for (int64_t left : {1, 2})
          for (int64_t right : {0, 2}) {
            ConvParams p;
            p.spatial = 2;
            p.transposed = tr;
            p.n = 2;
            p.cin = 2;
            p.cout = 3;
            p.in = {4, 5};
            p.kernel = {3, 2};
            p.stride = {2, 1};
            p.dilation = {1, 2};
            p.pad_before = {top, left};
            p.pad_after = {bottom, right};
            p.output_padding = {tr ? 1 : 0, 0};
            check_problem(p, DataType::f32, Fill::uniform, ++seed, out);
            if (HasFatalFailure()) return;
          }
  EXPECT_EQ(out.checked, 2 * 16 * 3);
}

}  // namespace
}  // namespace convbwd::test
