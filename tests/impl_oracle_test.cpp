// Every registered implementation against the tests' own backward oracle
// (util/backward_oracle: plain loops over the raw parameters, nothing from
// src/reference or src/problem's geometry), through Plan::create and
// execute. Operands are small integers, so every sum is an exact integer
// and the library's output must equal the oracle exactly: a lost, doubled or
// misplaced product shows however long the reduction.
//
// Each case names the implementation the planner must pick for each
// gradient (the part before ':' of its name), so a planner change that
// moves a case elsewhere fails here instead of silently testing another
// path. The cases cover 1D, 2D and 3D, stride, dilation and padding (before
// and after differing) each above 2 in some dimension, transposed and
// grouped problems, for the GEMM family, small channels, depthwise (fused
// and alone), bias, fp8, zeros and the reference. Under CONVBWD_ISA the same
// cases run each lower ISA's kernels (scripts/test.sh).
//
// The problems are filled in as structs (no descriptor strings), and the
// oracle itself is anchored by hand-computed values and by finite
// differences of util/forward_oracle.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "util/oracle_run.hpp"

namespace convbwd::test {
namespace {

struct Case {
  ConvParams p;
  Want want;
  DataType dt = DataType::f32;  // of the three operands
  int max_abs = 3;              // operands are integers in [-max_abs, max_abs]
};

void check_all(const std::vector<Case>& cases) {
  uint64_t seed = 1;
  for (const Case& c : cases) {
    OracleCase oc;
    oc.p = c.p;
    oc.want = c.want;
    oc.dt = c.dt;
    oc.max_abs = c.max_abs;
    check_against_oracle(oc, ++seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

constexpr const char* kBias = "bias_reduce";

// --- the oracle itself -----------------------------------------------------------

TEST(BackwardOracle, HandComputed1d) {
  // y[o] = x[o] + 10 x[o+1] (x = [1 2 3 4], w = [1 10]) with gradOutput
  // [1 2 3]: dL/dx[i] = sum_o go[o] w[i-o], dL/dw[r] = sum_o go[o] x[o+r].
  ConvParams p = Conv(1, 1, 1, {4}, {2});
  OracleGradients g = backward(p, {1, 2, 3}, {1, 2, 3, 4}, {1, 10});
  EXPECT_EQ(g.input, (std::vector<double>{1, 12, 23, 30}));
  EXPECT_EQ(g.weight, (std::vector<double>{14, 20}));
  EXPECT_EQ(g.bias, (std::vector<double>{6}));
  // Stride 2, padding 1 before, 2 after, dilation 2: padded x is
  // [0 1 2 3 4 0 0], outputs o = 0, 1, 2 read padded positions (2o, 2o+2),
  // i.e. x[2o-1] and x[2o+1].
  p = Conv(1, 1, 1, {4}, {2}).stride({2}).dil({2}).pad({1}, {2});
  ASSERT_EQ(p.output_dims(), (std::vector<int64_t>{1, 1, 3}));
  g = backward(p, {1, 2, 3}, {1, 2, 3, 4}, {1, 10});
  EXPECT_EQ(g.input, (std::vector<double>{0, 10 + 2, 0, 20 + 3}));
  EXPECT_EQ(g.weight, (std::vector<double>{1 * 0 + 2 * 2 + 3 * 4, 1 * 2 + 2 * 4 + 3 * 0}));
  // Transposed, stride 2: y = [1 10 2 20] for x = [1 2]; with gradOutput
  // [1 2 3 4], dL/dx[i] = go[2i] + 10 go[2i+1].
  p = Conv(1, 1, 1, {2}, {2}).stride({2}).transposed({0});
  g = backward(p, {1, 2, 3, 4}, {1, 2}, {1, 10});
  EXPECT_EQ(g.input, (std::vector<double>{21, 43}));
  EXPECT_EQ(g.weight, (std::vector<double>{1 * 1 + 2 * 3, 1 * 2 + 2 * 4}));
  EXPECT_EQ(g.bias, (std::vector<double>{10}));
}

// The gradients are the derivatives of L(x, w, b) = sum(go * (forward + b)),
// forward being util/forward_oracle. L is linear in each argument, so a
// step-1 difference is exact for integer data.
TEST(BackwardOracle, EqualsFiniteDifferencesOfTheForwardOracle) {
  const std::vector<ConvParams> problems = {
      Conv(2, 2, 3, {7}, {3}).stride({2}).dil({3}).pad({3}, {1}),
      Conv(1, 4, 2, {5, 6}, {2, 3}).stride({3, 1}).dil({1, 2}).pad({0, 2}, {2, 1}).groups(2),
      Conv(1, 2, 2, {3, 4, 3}, {2, 2, 1}).stride({1, 2, 3}).pad({1, 0, 0}, {0, 1, 2}),
      Conv(2, 3, 2, {4}, {3}).stride({3}).dil({2}).pad({1}, {2}).transposed({2}),
      Conv(1, 4, 6, {3, 2}, {2, 3}).stride({2, 3}).dil({3, 1}).pad({1, 2}, {0, 1}).groups(2).transposed({1, 0}),
      Conv(1, 2, 2, {2, 3, 2}, {2, 1, 2}).stride({3, 1, 2}).pad({0, 0, 1}, {1, 0, 0}).transposed({0, 0, 1}),
  };
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> ints(-3, 3);
  auto random_vec = [&](int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& e : v) e = ints(rng);
    return v;
  };
  for (const ConvParams& p : problems) {
    SCOPED_TRACE(p.to_string());
    const auto go = random_vec(product(p.output_dims())), x = random_vec(product(p.input_dims())),
               w = random_vec(product(p.weight_dims()));
    const OracleGradients g = backward(p, go, x, w);
    auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww, const std::vector<double>& bb) {
      const std::vector<double> y = forward(p, xx, ww, bb);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += go[i] * y[i];
      return l;
    };
    const std::vector<double> b0(static_cast<size_t>(p.cout), 0.0);
    const double base = loss(x, w, b0);
    for (size_t j = 0; j < x.size(); ++j) {
      auto x1 = x;
      x1[j] += 1;
      ASSERT_EQ(g.input[j], loss(x1, w, b0) - base) << "input " << j;
    }
    for (size_t j = 0; j < w.size(); ++j) {
      auto w1 = w;
      w1[j] += 1;
      ASSERT_EQ(g.weight[j], loss(x, w1, b0) - base) << "weight " << j;
    }
    for (size_t j = 0; j < b0.size(); ++j) {
      auto b1 = b0;
      b1[j] += 1;
      ASSERT_EQ(g.bias[j], loss(x, w, b1) - base) << "bias " << j;
    }
  }
}

// --- every implementation against it ------------------------------------------------
// Channel counts above 16 on one side keep the dense cases off
// depthwise_direct (which takes groups of up to 16 channels) and the
// small-channel paths (image side of at most 4 channels).

TEST(ImplOracle, GemmPhaseDataAndWeightGradients) {
  check_all({
      {Conv(2, 17, 20, {11, 9}, {3, 4}).stride({3, 2}).dil({1, 3}).pad({3, 0}, {1, 4}),
       {"gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc", kBias}},
      {Conv(2, 18, 9, {40}, {3}).stride({3}).dil({4}).pad({4}, {2}), {"gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc", kBias}},
      {Conv(1, 9, 19, {6, 7, 8}, {3, 2, 3}).stride({1, 3, 2}).dil({3, 1, 1}).pad({3, 0, 1}, {1, 2, 0}),
       {"gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc", kBias}},
      // Grouped: three groups of 6 -> 17 channels.
      {Conv(2, 18, 51, {8, 9}, {3, 3}).stride({2, 1}).dil({1, 3}).pad({0, 3}, {2, 1}).groups(3),
       {"gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc", kBias}},
  });
}

TEST(ImplOracle, GemmForwardForTransposedGradInput) {
  check_all({
      {Conv(2, 20, 9, {5, 6}, {3, 3}).stride({3, 2}).dil({1, 3}).pad({1, 3}, {2, 0}).transposed({2, 1}),
       {"gemm_fwd_nhwc", "gemm_wgrad_nhwc", kBias}},
      {Conv(2, 17, 6, {13}, {4}).stride({3}).dil({3}).pad({4}, {1}).transposed({1}),
       {"gemm_fwd_nhwc", "gemm_wgrad_nhwc", kBias}},
      {Conv(1, 18, 8, {3, 4, 3}, {2, 3, 2}).stride({3, 1, 2}).dil({1, 2, 3}).pad({0, 3, 1}, {1, 0, 2}).transposed({1, 0, 0}),
       {"gemm_fwd_nhwc", "gemm_wgrad_nhwc", kBias}},
      {Conv(1, 36, 10, {4, 5}, {3, 2}).stride({2, 3}).pad({3, 0}, {1, 1}).groups(2).transposed({1, 2}),
       {"gemm_fwd_nhwc", "gemm_wgrad_nhwc", kBias}},
  });
}

TEST(ImplOracle, PlanarOneByOne) {
  check_all({
      {Conv(2, 20, 24, {9, 8}, {1, 1}), {"gemm_dgrad_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
      {Conv(3, 19, 17, {70}, {1}), {"gemm_dgrad_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
      // Images of more than 256 pixels: the weight gradient sums chunk by
      // chunk across images instead of in one pass.
      {Conv(2, 17, 18, {300}, {1}), {"gemm_dgrad_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
      {Conv(1, 17, 21, {4, 4, 5}, {1, 1, 1}), {"gemm_dgrad_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
      {Conv(2, 24, 18, {8, 9}, {1, 1}).transposed({0, 0}), {"gemm_fwd_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
      {Conv(2, 32, 40, {66}, {1}).groups(2).transposed({0}), {"gemm_fwd_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
  });
}

// bf16 operands: on a tier with bf16 pair kernels the weight gradients
// multiply pixel pairs (odd widths padded per row, stride and dilation
// along the paired width, several images). Operands in [-1, 1] keep every
// sum within the integers bf16 holds exactly (at most 256).
TEST(ImplOracle, Bf16PairWeightGradients) {
  check_all({
      {Conv(2, 17, 20, {7, 9}, {3, 3}).stride({2, 3}).dil({1, 2}).pad({1, 2}, {1, 0}),
       {"gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc", kBias}, DataType::bf16, 1},
      {Conv(2, 18, 9, {41}, {3}).stride({2}).dil({3}).pad({3}, {1}), {"gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc", kBias},
       DataType::bf16, 1},
      {Conv(2, 20, 24, {9, 9}, {1, 1}), {"gemm_dgrad_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}, DataType::bf16, 1},
  });
}

TEST(ImplOracle, SmallChannels) {
  check_all({
      {Conv(2, 3, 20, {13, 11}, {5, 3}).stride({3, 2}).dil({1, 3}).pad({3, 0}, {1, 4}),
       {"small_channels_dgrad", "small_channels_wgrad", kBias}},
      {Conv(2, 1, 24, {50}, {7}).stride({3}).dil({3}).pad({4}, {1}), {"small_channels_dgrad", "small_channels_wgrad", kBias}},
      {Conv(1, 2, 18, {5, 6, 7}, {3, 3, 2}).stride({1, 3, 2}).dil({3, 1, 1}).pad({3, 1, 0}, {1, 0, 3}),
       {"small_channels_dgrad", "small_channels_wgrad", kBias}},
      // Grouped: two groups of 4 -> 17 channels.
      {Conv(2, 8, 34, {9, 10}, {3, 3}).stride({1, 3}).dil({3, 1}).pad({3, 1}, {0, 2}).groups(2),
       {"small_channels_dgrad", "small_channels_wgrad", kBias}},
      // Transposed: the image side is gradOutput (3 channels here).
      {Conv(2, 20, 3, {5, 6}, {3, 3}).stride({3, 2}).dil({1, 3}).pad({1, 3}, {2, 0}).transposed({2, 1}),
       {"gemm_fwd_nhwc", "small_channels_wgrad", kBias}},
  });
}

TEST(ImplOracle, DepthwiseChannelBlockedFused) {
  // All three gradients together: one fused pass.
  check_all({
      {Conv(2, 16, 16, {10, 9}, {3, 5}).stride({3, 2}).dil({1, 3}).pad({3, 1}, {1, 4}).groups(16),
       {"depthwise_cl_fused", "depthwise_cl_fused", "depthwise_cl_fused"}},
      {Conv(2, 12, 12, {37}, {4}).stride({3}).dil({3}).pad({4}, {2}).groups(12),
       {"depthwise_cl_fused", "depthwise_cl_fused", "depthwise_cl_fused"}},
      {Conv(1, 9, 9, {5, 6, 7}, {3, 2, 3}).stride({1, 3, 2}).dil({3, 1, 1}).pad({3, 0, 1}, {1, 2, 0}).groups(9),
       {"depthwise_cl_fused", "depthwise_cl_fused", "depthwise_cl_fused"}},
      // Transposed: its data gradient is a forward convolution, which the
      // fused pass does not take.
      {Conv(2, 10, 10, {5, 6}, {3, 3}).stride({3, 2}).dil({1, 3}).pad({1, 3}, {2, 0}).groups(10).transposed({2, 1}),
       {"depthwise_cl", "depthwise_cl", kBias}},
      // Groups of 8 -> 7 channels.
      {Conv(2, 16, 14, {8, 9}, {3, 3}).stride({2, 1}).dil({1, 3}).pad({0, 3}, {2, 1}).groups(2),
       {"depthwise_cl_fused", "depthwise_cl_fused", "depthwise_cl_fused"}},
  });
}

TEST(ImplOracle, DepthwiseChannelBlockedAlone) {
  const ConvParams dw2 = Conv(2, 16, 16, {10, 9}, {3, 5}).stride({3, 2}).dil({1, 3}).pad({3, 1}, {1, 4}).groups(16);
  const ConvParams tr3 =
      Conv(1, 9, 9, {4, 5, 3}, {3, 2, 3}).stride({3, 1, 2}).dil({1, 3, 1}).pad({3, 0, 1}, {1, 2, 0}).groups(9).transposed({1, 0, 1});
  check_all({
      {dw2, {"depthwise_cl", nullptr, nullptr}},
      {dw2, {nullptr, "depthwise_cl", nullptr}},
      {tr3, {"depthwise_cl", nullptr, kBias}},
      {tr3, {nullptr, "depthwise_cl", kBias}},
  });
}

TEST(ImplOracle, DepthwiseDirect) {
  // Groups of 2 -> 3 and 1 -> 2 (a channel multiplier) channels: too few
  // lanes for the channel-blocked path.
  check_all({
      {Conv(2, 6, 9, {10, 9}, {3, 5}).stride({3, 2}).dil({1, 3}).pad({3, 1}, {1, 4}).groups(3),
       {"depthwise_direct", "depthwise_direct", kBias}},
      {Conv(2, 4, 8, {37}, {4}).stride({3}).dil({3}).pad({4}, {2}).groups(4), {"depthwise_direct", "depthwise_direct", kBias}},
      {Conv(1, 4, 6, {5, 6, 7}, {3, 2, 3}).stride({1, 3, 2}).dil({3, 1, 1}).pad({3, 0, 1}, {1, 2, 0}).groups(2),
       {"depthwise_direct", "depthwise_direct", kBias}},
      {Conv(2, 6, 4, {5, 6}, {3, 3}).stride({3, 2}).dil({1, 3}).pad({1, 3}, {2, 0}).groups(2).transposed({2, 1}),
       {"depthwise_direct", "depthwise_direct", kBias}},
      // One group: a small dense layer also runs along the rows.
      {Conv(2, 5, 7, {12, 11}, {3, 3}).stride({3, 1}).dil({1, 3}).pad({0, 3}, {2, 1}),
       {"depthwise_direct", "depthwise_direct", kBias}},
  });
}

TEST(ImplOracle, Fp8TransposedGradInput) {
  // 8-bit operands: sums of at most 4 products of -1, 0, 1 (one output
  // channel, 4 taps) stay in [-4, 4], exact in both formats' outputs. gradBias (fp32) goes to the
  // reference, which is the only path taking 8-bit operands there.
  for (DataType t : {DataType::f8e4m3, DataType::hif8}) {
    SCOPED_TRACE(std::string(to_string(t)));
    Case c{Conv(2, 2, 1, {5, 4}, {2, 2}).stride({3, 2}).dil({3, 1}).pad({1, 0}, {0, 1}).transposed({0, 0}),
           {"f8_fwd_direct", nullptr, "reference"}, t, 1};
    Case one_d{Conv(1, 3, 1, {6}, {4}).stride({3}).dil({2}).pad({3}, {1}).transposed({0}), {"f8_fwd_direct", nullptr, nullptr}, t, 1};
    Case three_d{Conv(1, 2, 1, {3, 2, 3}, {2, 1, 2}).stride({1, 3, 2}).pad({0, 0, 1}, {1, 0, 0}).transposed({0, 0, 0}),
                 {"f8_fwd_direct", nullptr, nullptr}, t, 1};
    check_all({c, one_d, three_d});
  }
}

TEST(ImplOracle, ZerosForEmptySums) {
  // N = 0: gradWeight and gradBias are empty sums. Cout = 0: gradInput is.
  // The outputs start as a canary pattern, so the zeros must be written.
  check_all({
      {Conv(0, 5, 7, {6, 5}, {3, 3}).pad({1, 1}, {1, 1}), {nullptr, "zeros", "zeros"}},
      {Conv(0, 3, 4, {9}, {3}).stride({2}).transposed({1}), {nullptr, "zeros", "zeros"}},
      {Conv(2, 5, 0, {6, 5}, {3, 3}).pad({1, 1}, {1, 1}), {"zeros", nullptr, nullptr}},
  });
}

}  // namespace
}  // namespace convbwd::test
