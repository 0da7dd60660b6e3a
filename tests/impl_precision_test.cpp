// The precision modes (cubeMathType) against values the test rounds itself.
// The library's reference takes its operand rounding from the same lines
// as the fast paths, so comparing with it could not see a mode that fails
// to round: here the expected values come from the tests' own oracle on
// operands rounded by this file's own arithmetic.
//
// Operands sit on and around the rounding boundaries: exact ties (HF32
// rounds them away from zero, fp16 to even: both directions, as the kept
// bit is odd or even, and both signs), a quarter quantum either side of a
// tie, values near fp16's largest finite value and in its subnormal range.
// Only one side of each product carries such a value, the other is a small
// integer, so every fp32 sum stays exact and the comparison is equality.
// Each implementation that rounds operands is reached through Plan (the
// route is asserted) in every mode, and KEEP_DTYPE must not round at all.
//
// The second half sweeps each ISA's operand rounding, kernel by kernel,
// over a dense set of fp32 patterns against the same hand rounding (as
// kernel_store_row_test does for the stores).
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"
#include "kernels/config.hpp"
#include "runtime/thread_pool.hpp"
#include "util/impl_check.hpp"
#include "util/oracle_run.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

// --- the test's own roundings ------------------------------------------------------
// Written with frexp/ldexp arithmetic, not with the library's bit tricks.

// HF32: fp32's exponent range with 12 significant bits (11 stored), ties
// away from zero; below fp32's smallest normal 2^-126 the quantum stays
// 2^-137, as for any format with subnormals.
double hf32(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  (void)std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  const double q = std::ldexp(1.0, std::max(e - 1, -126) - 11);
  const double r = std::floor(std::fabs(v) / q + 0.5) * q;
  return std::copysign(r > FLT_MAX ? HUGE_VAL : r, v);
}

// IEEE binary16: 11 significant bits, ties to even, normal exponents from
// -14, subnormal quantum 2^-24, overflow (at 65520 and above) to Inf.
double fp16(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  (void)std::frexp(v, &e);
  const double q = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  const double r = std::nearbyint(std::fabs(v) / q) * q;  // the default rounding mode: ties to even
  return std::copysign(r > 65504 ? HUGE_VAL : r, v);
}

TEST(PrecisionRounding, TheTestsRoundingsOnHandValues) {
  // HF32 quantum at [1, 2) is 2^-11.
  EXPECT_EQ(hf32(1 + 0x1p-12), 1 + 0x1p-11);               // tie: away from zero
  EXPECT_EQ(hf32(-(1 + 0x1p-12)), -(1 + 0x1p-11));         // tie, negative: away from zero
  EXPECT_EQ(hf32(1 + 0x1p-11 + 0x1p-12), 1 + 0x1p-10);     // tie above an odd kept bit: still away
  EXPECT_EQ(hf32(1 + 0x1p-12 - 0x1p-23), 1.0);             // just below a tie
  EXPECT_EQ(hf32(2 - 0x1p-12), 2.0);                       // tie carrying into the next binade
  EXPECT_EQ(hf32(3 * 0x1p-13), 3 * 0x1p-13);               // 2 significant bits: exact
  EXPECT_EQ(hf32(0x1p-138), 0x1p-137);                     // fp32 subnormal: half the quantum 2^-137, away
  EXPECT_EQ(hf32(0x1p-139), 0.0);
  // fp16 quantum at [1, 2) is 2^-10.
  EXPECT_EQ(fp16(1 + 0x1p-11), 1.0);                       // tie to even: down
  EXPECT_EQ(fp16(1 + 3 * 0x1p-11), 1 + 0x1p-9);            // tie to even: up
  EXPECT_EQ(fp16(-(1 + 3 * 0x1p-11)), -(1 + 0x1p-9));
  EXPECT_EQ(fp16(65519.0), 65504.0);                       // below the overflow tie
  EXPECT_EQ(fp16(65520.0), HUGE_VAL);                      // the tie to 65536: overflow
  EXPECT_EQ(fp16(65488.0), 65472.0);                       // tie between 65472 and 65504: even
  EXPECT_EQ(fp16(0x1p-25), 0.0);                           // half the smallest subnormal: even (0)
  EXPECT_EQ(fp16(3 * 0x1p-25), 0x1p-23);                   // 1.5 quanta: even (2)
  EXPECT_EQ(fp16(3 * 0x1p-26), 0x1p-24);                   // 0.75 quanta: up
  EXPECT_EQ(fp16(0x1p-14 - 0x1p-25), 0x1p-14);             // largest subnormal + half: even (min normal)
}

// --- operand values -------------------------------------------------------------------

// Around the ties of a format with `bits` significant bits: +-(b + j q + f)
// for b in {1, 2}, q the quantum of b's binade, j in 0..3 (the kept bit odd
// and even) and f in {0, q/4, q/2, 3q/4}: on a quantum, below, on and above
// the tie. Zero is common too, so some products vanish.
double near_ties(int bits, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 79);
  const int r = pick(rng);
  if (r >= 64) return 0.0;
  const double b = (r & 1) ? 2.0 : 1.0;
  const double q = std::ldexp(b, 1 - bits);
  const double v = b + ((r >> 1) & 3) * q + ((r >> 3) & 3) * q / 4;
  return (r & 32) ? -v : v;
}

// Near fp16's largest finite value (65504, quantum 32 there): on, below the
// overflow tie, and the ties below it, which round to the even neighbour.
double near_fp16_max(std::mt19937_64& rng) {
  static const double kValues[] = {65504, 65519, 65488, 65456, 65472, 65500, 0, 0};
  std::uniform_int_distribution<int> pick(0, 15);
  const int r = pick(rng);
  return (r & 8) ? -kValues[r & 7] : kValues[r & 7];
}

// In fp16's subnormal range (quantum 2^-24): k 2^-26 for k in 1..7 (ties at
// even k, quarters between), and the boundary with the normals.
double near_fp16_subnormal(std::mt19937_64& rng) {
  static const double kValues[] = {0x1p-26,     0x1p-25,         3 * 0x1p-26,     0x1p-24,
                                   5 * 0x1p-26, 3 * 0x1p-25,     7 * 0x1p-26,     5 * 0x1p-25,
                                   0x1p-14,     0x1p-14 - 0x1p-25, 0x1p-14 - 0x1p-26, 0};
  std::uniform_int_distribution<int> pick(0, 23);
  const int r = pick(rng);
  return (r >= 12) ? -kValues[r - 12] : kValues[r];
}

int small_int(std::mt19937_64& rng) { return std::uniform_int_distribution<int>(-2, 2)(rng); }

struct Mode {
  const char* name;
  MathMode math;
  RoundOperand round;
  int bits;  // of the format whose ties the data straddles
};

const Mode kModes[] = {
    {"ALLOW_FP32_DOWN_PRECISION", MathMode::allow_fp32_down_precision, hf32, 12},
    {"USE_HF32", MathMode::use_hf32, hf32, 12},
    {"USE_FP16", MathMode::use_fp16, fp16, 11},
    // KEEP_DTYPE: the same HF32-tie data must come out unrounded.
    {"KEEP_DTYPE", MathMode::keep_dtype, no_rounding, 12},
};

// One problem per implementation that rounds operands (f32 operands: the
// modes act on fp32 computations only). Sums stay short enough (< 128
// terms, |products| <= 8) for fp32 to hold them exactly.
struct Routed {
  ConvParams p;
  Want want;
};

std::vector<Routed> routed_cases() {
  constexpr const char* kBias = "bias_reduce";
  return {
      {Conv(2, 17, 18, {7, 6}, {3, 3}).stride({3, 1}).dil({1, 3}).pad({3, 0}, {1, 3}),
       {"gemm_dgrad_phase_nhwc", "gemm_wgrad_nhwc", kBias}},
      {Conv(1, 18, 9, {4, 5}, {3, 3}).stride({3, 2}).pad({1, 3}, {2, 0}).transposed({2, 1}),
       {"gemm_fwd_nhwc", "gemm_wgrad_nhwc", kBias}},
      {Conv(1, 20, 18, {9, 8}, {1, 1}), {"gemm_dgrad_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
      {Conv(1, 18, 17, {66}, {1}).transposed({0}), {"gemm_fwd_1x1_nchw", "gemm_wgrad_1x1_nchw", kBias}},
      {Conv(2, 3, 18, {9, 12}, {3, 5}).stride({3, 1}).dil({1, 3}).pad({3, 0}, {1, 4}),
       {"small_channels_dgrad", "small_channels_wgrad", kBias}},
      {Conv(2, 16, 16, {9, 10}, {3, 3}).stride({3, 1}).dil({1, 3}).pad({3, 0}, {1, 3}).groups(16),
       {"depthwise_cl_fused", "depthwise_cl_fused", nullptr}},  // (the fused bias sum only without rounding)
      {Conv(2, 16, 16, {9, 10}, {3, 3}).stride({3, 1}).dil({1, 3}).pad({3, 0}, {1, 3}).groups(16),
       {"depthwise_cl", nullptr, kBias}},
      {Conv(2, 16, 16, {9, 10}, {3, 3}).stride({3, 1}).dil({1, 3}).pad({3, 0}, {1, 3}).groups(16),
       {nullptr, "depthwise_cl", nullptr}},
      {Conv(2, 6, 9, {8, 9}, {3, 3}).stride({2, 3}).dil({3, 1}).pad({0, 3}, {3, 1}).groups(3),
       {"depthwise_direct", "depthwise_direct", kBias}},
  };
}

// Operands: `special` ones carry `value`, the others small integers.
void run_modes(const char* what, const std::function<double(const Mode&, std::mt19937_64&)>& value,
               bool fp16_only) {
  uint64_t seed = 100;
  for (const Mode& m : kModes) {
    if (fp16_only && m.round != fp16) continue;
    for (const Routed& r : routed_cases())
      for (int special : {0, 1}) {  // 0: gradOutput carries the values; 1: input and weight do
        SCOPED_TRACE(std::string(what) + " " + m.name + (special ? ", input and weight" : ", gradOutput") +
                     " hold the values");
        OracleCase c;
        c.p = r.p;
        c.want = r.want;
        c.math = m.math;
        check_against_oracle(
            c, ++seed,
            [&](int which, std::mt19937_64& rng) {
              return (which == 0) == (special == 0) ? value(m, rng) : small_int(rng);
            },
            m.round);
        if (::testing::Test::HasFatalFailure()) return;
      }
  }
}

TEST(PrecisionModes, TiesAndNearTiesEveryPath) {
  run_modes("near ties", [](const Mode& m, std::mt19937_64& rng) { return near_ties(m.bits, rng); }, false);
}

TEST(PrecisionModes, NearFp16OverflowEveryPath) {
  // HF32 rounds these too (65519 has 16 significant bits), KEEP_DTYPE not.
  run_modes("near fp16 max", [](const Mode&, std::mt19937_64& rng) { return near_fp16_max(rng); }, false);
}

TEST(PrecisionModes, Fp16SubnormalsEveryPath) {
  run_modes("fp16 subnormals", [](const Mode&, std::mt19937_64& rng) { return near_fp16_subnormal(rng); }, true);
}

// --- each ISA's operand rounding, kernel by kernel ------------------------------------
// Problems whose every output is one swept operand value times 1.0 (the
// other products of a sum are times 0.0), so the fp32 output is the rounded
// operand itself: each kernel's loaders (the channels-last copies of the
// GEMMs with their 8x8 register transposes, the planar 1x1 packers, the
// data gradients' weight packers, the small-channel and depthwise loads)
// are swept on every ISA of this CPU against the hand rounding. Widths of
// 16 or more channels or pixels put the values through the vector paths,
// not only the tails.

std::vector<float> sweep_values() {
  std::vector<float> v;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 104729) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(u));
    if (std::isfinite(f)) v.push_back(f);
  }
  // Every low pattern that decides an HF32 (12 dropped bits) or fp16 (13)
  // tie, on a spread of high halves and both signs, and fp16's overflow and
  // subnormal edges.
  for (uint32_t hi = 0; hi < 0x7f80u; hi += 61)
    for (uint32_t lo : {0x0000u, 0x07ffu, 0x0800u, 0x0801u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu})
      for (uint32_t sign : {0u, 0x80000000u}) v.push_back(std::bit_cast<float>(sign | (hi << 16) | lo));
  for (float f : {65504.0f, 65519.0f, 65519.996f, 65520.0f, 65536.0f, FLT_MAX, 0x1p-25f, 0x1.8p-25f, 0x1p-24f,
                  0x1.ffcp-15f, 0x1.ffep-15f})
    v.push_back(f), v.push_back(-f);
  while (v.size() % 64) v.push_back(1.0f);
  return v;
}

enum class Shape {
  dgrad,      // gradInput = gradOutput (swept) x identity weight, B channels, 1x1
  dgrad_w,    // gradInput[c, p] = weight[p, c] (swept): gradOutput the B x B identity, 1x1
  fwd,        // the same, transposed
  wgrad_dy,   // gradWeight[k, c] = sum_p gradOutput[k, p] x[c, p], x the B x B identity
  depthwise,  // one channel per group, 1x1: gradInput = gradOutput (swept) x 1
  depthwise_wgrad_x,  // one pixel per channel: gradWeight = 1 x input (swept)
};

struct Sweep {
  const char* name;
  const detail::Implementation* impl;
  Shape shape;
  int64_t block;  // B: channels (dgrad, fwd), pixels (wgrad_dy) or pixels per channel (depthwise)
};

const Sweep kSweeps[] = {
    {"gemm_dgrad_phase_nhwc", &detail::kGemmBwdDataImpl, Shape::dgrad, 16},
    {"gemm_dgrad_1x1_nchw", &detail::kGemm1x1BwdDataImpl, Shape::dgrad, 16},
    // The weight packers of the data gradients (a 1x1 weight's rows cut
    // into column blocks; the planar path's row tiles), 64 pixels so that
    // the planar path takes it.
    {"gemm_dgrad_phase_nhwc weights", &detail::kGemmBwdDataImpl, Shape::dgrad_w, 64},
    {"gemm_dgrad_1x1_nchw weights", &detail::kGemm1x1BwdDataImpl, Shape::dgrad_w, 64},
    {"small_channels_dgrad", &detail::kSmallChannelsBwdDataImpl, Shape::dgrad, 4},
    {"gemm_fwd_nhwc", &detail::kGemmFwdImpl, Shape::fwd, 16},
    {"gemm_fwd_1x1_nchw", &detail::kGemm1x1FwdImpl, Shape::fwd, 16},
    {"gemm_wgrad_nhwc", &detail::kGemmBwdWeightsImpl, Shape::wgrad_dy, 16},
    {"gemm_wgrad_1x1_nchw", &detail::kGemm1x1BwdWeightsImpl, Shape::wgrad_dy, 64},
    {"small_channels_wgrad", &detail::kSmallChannelsBwdWeightsImpl, Shape::wgrad_dy, 4},
    {"depthwise_cl", &detail::kDepthwiseClImpl, Shape::depthwise, 64},
    {"depthwise_direct", &detail::kDepthwiseDirectImpl, Shape::depthwise, 64},
    {"depthwise_cl weights", &detail::kDepthwiseClImpl, Shape::depthwise_wgrad_x, 1},
    {"depthwise_direct weights", &detail::kDepthwiseDirectImpl, Shape::depthwise_wgrad_x, 1},
};

ConvParams sweep_problem(const Sweep& s, int64_t count) {
  const int64_t b = s.block, rest = count / s.block;
  switch (s.shape) {
    case Shape::dgrad: return Conv(1, b, b, {rest}, {1});
    case Shape::dgrad_w: return Conv(1, rest, b, {b}, {1});
    case Shape::fwd: return Conv(1, b, b, {rest}, {1}).transposed({0});
    case Shape::wgrad_dy: return Conv(1, b, rest, {b}, {1});
    case Shape::depthwise: return Conv(1, rest, rest, {b}, {1}).groups(rest);
    case Shape::depthwise_wgrad_x: return Conv(1, count, count, {1}, {1}).groups(count);
  }
  return Conv(1, 1, 1, {1}, {1});
}

TEST(PrecisionModes, EveryKernelsOperandRoundingOnEveryIsa) {
  const std::vector<float> all = sweep_values();
  const int64_t count = static_cast<int64_t>(all.size());
  detail::ThreadPool pool(2);
  for (const Sweep& s : kSweeps)
    for (const Mode& m : kModes) {
      SCOPED_TRACE(std::string(s.name) + " " + m.name);
      Problem prob = sweep_problem(s, count).to_problem();
      prob.math_mode = m.math;
      const Gradient which = s.shape == Shape::wgrad_dy || s.shape == Shape::depthwise_wgrad_x ? Gradient::weight
                                                                                                : Gradient::input;
      prob.output_mask = {which == Gradient::input, which == Gradient::weight, false};
      auto spec = detail::validate(prob);
      ASSERT_TRUE(spec) << spec.error().message;
      const detail::OpSpec op = spec->op_for(which);
      // Where an identity partner sums zero products too, a value that
      // rounds to Inf would make them NaN: such values are swept only by
      // the shapes without zero products (and skipped when checking).
      const bool zero_products = s.shape == Shape::dgrad || s.shape == Shape::dgrad_w || s.shape == Shape::fwd ||
                                 s.shape == Shape::wgrad_dy;
      std::vector<float> values = all;
      for (float& v : values)
        if (zero_products && !std::isfinite(m.round(v))) v = 1.0f;
      std::vector<float> go(static_cast<size_t>(spec->grad_output.elements()), 1.0f);
      std::vector<float> in(static_cast<size_t>(spec->input.elements()), 1.0f);
      std::vector<float> w(static_cast<size_t>(spec->weight.elements()), 1.0f);
      const int64_t b = s.block;
      auto identity = [b](std::vector<float>& t) {
        ASSERT_EQ(static_cast<int64_t>(t.size()), b * b);
        for (int64_t i = 0; i < b; ++i)
          for (int64_t j = 0; j < b; ++j) t[static_cast<size_t>(i * b + j)] = i == j ? 1.0f : 0.0f;
      };
      if (s.shape == Shape::dgrad || s.shape == Shape::fwd) identity(w);
      if (s.shape == Shape::wgrad_dy) identity(in);
      if (s.shape == Shape::dgrad_w) identity(go);
      std::vector<float>& swept = s.shape == Shape::depthwise_wgrad_x ? in : s.shape == Shape::dgrad_w ? w : go;
      ASSERT_EQ(static_cast<int64_t>(swept.size()), count);
      std::copy(values.begin(), values.end(), swept.begin());
      // Operands as execute binds them: (gradOutput, weight) for the data
      // gradients, (dy, x) = (gradOutput, input) for the weight gradient.
      const void* a = go.data();
      const void* bop = which == Gradient::weight ? static_cast<const void*>(in.data()) : w.data();
      ASSERT_EQ(spec->grads[static_cast<size_t>(which)].elements(), count);
      for (detail::Isa isa : test_isas()) {
        SCOPED_TRACE(std::string("isa ") + std::string(detail::to_string(isa)));
        std::string why;
        auto k = s.impl->plan(op, detail::PlanContext{isa, 2}, &why);
        ASSERT_TRUE(k) << "declined: " << why;
        std::unique_ptr<std::byte, decltype(&std::free)> ws(
            static_cast<std::byte*>(std::aligned_alloc(64, (k->workspace_bytes() + 64) / 64 * 64)), &std::free);
        std::vector<float> out(static_cast<size_t>(count), -7.0f);
        detail::NonfiniteFound found;
        detail::OpArgs args{a, bop, out.data(), ws.get()};
        if (k->nonfinite_mode() == detail::NonfiniteMode::report) args.found = &found;
        k->run(args, pool);
        int failures = 0;
        bool saw_inf = false;
        // Where value i lands: dgrad_w's weight[k, c] (i = k * C + c) is
        // gradInput[c, k]; every other shape keeps the swept order.
        auto landing = [&](size_t i) {
          if (s.shape != Shape::dgrad_w) return i;
          const size_t channels = values.size() / static_cast<size_t>(b);
          return i % channels * static_cast<size_t>(b) + i / channels;
        };
        for (size_t i = 0; i < values.size() && failures < 5; ++i) {
          const double want = m.round(values[i]);
          const float got = out[landing(i)];
          // Inf operands are the event pass's business at execute (a
          // reporting kernel must say it read one).
          if (std::isinf(want)) {
            saw_inf = true;
            continue;
          }
          // Sums start from +0: a -0 product leaves +0.
          if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(static_cast<float>(0.0 + want))) {
            ++failures;
            ADD_FAILURE() << "operand 0x" << std::hex << std::bit_cast<uint32_t>(values[i]) << std::dec << " ("
                          << values[i] << ") at " << i << ": kernel gives " << got << ", rounded by hand " << want;
          }
        }
        if (saw_inf && k->nonfinite_mode() == detail::NonfiniteMode::report) {
          EXPECT_TRUE(found.a || found.b) << "operands that round to Inf went unreported";
        }
      }
    }
}

// The bf16 pair paths of the weight gradients copy bf16 operands bit for
// bit (no operand rounding applies): every finite bf16 pattern as
// gradOutput, times an identity input (gradWeight[k, c] = gradOutput[k, c]),
// must come back exactly in an fp32 gradWeight, on every tier and through
// both weight-gradient GEMMs. Subnormals are the one difference the pair
// kernels define (read as zero, kernels/gemm.hpp); where bf16 widens to fp32
// they come back too.
TEST(PrecisionModes, Bf16WeightGradientsKeepEveryBf16Value) {
  std::vector<uint16_t> values;
  for (uint32_t u = 0; u < 0x10000u; ++u)
    if ((u & 0x7f80u) != 0x7f80u) values.push_back(static_cast<uint16_t>(u));
  constexpr int64_t kPixels = 64;  // = input channels: the identity's side
  const int64_t rows = static_cast<int64_t>(values.size()) / kPixels;
  ASSERT_EQ(rows * kPixels, static_cast<int64_t>(values.size()));
  Problem prob = ConvParams(Conv(1, kPixels, rows, {kPixels}, {1})).to_problem();
  prob.grad_output.dtype = prob.input.dtype = DataType::bf16;
  prob.output_mask = {false, true, false};
  auto spec = detail::validate(prob);
  ASSERT_TRUE(spec) << spec.error().message;
  ASSERT_EQ(spec->grads[1].dtype, DataType::f32);
  const detail::OpSpec op = spec->op_for(Gradient::weight);
  std::vector<uint16_t> x(static_cast<size_t>(kPixels * kPixels), 0);
  for (int64_t c = 0; c < kPixels; ++c) x[static_cast<size_t>(c * kPixels + c)] = 0x3f80;  // 1.0
  detail::ThreadPool pool(2);
  for (const detail::Implementation* impl : {&detail::kGemmBwdWeightsImpl, &detail::kGemm1x1BwdWeightsImpl})
    for (detail::Isa isa : test_isas()) {
      SCOPED_TRACE(std::string(impl->name) + " isa " + tier_name(isa));
      std::string why;
      auto k = impl->plan(op, detail::PlanContext{isa, 2}, &why);
      ASSERT_TRUE(k) << "declined: " << why;
      std::unique_ptr<std::byte, decltype(&std::free)> ws(
          static_cast<std::byte*>(std::aligned_alloc(64, (k->workspace_bytes() + 64) / 64 * 64)), &std::free);
      std::vector<float> out(values.size(), -7.0f);
      detail::OpArgs args{values.data(), x.data(), out.data(), ws.get()};
      k->run(args, pool);
      const bool pairs = detail::kernel_config(isa).bf16.strided != nullptr;
      int failures = 0;
      for (size_t i = 0; i < values.size() && failures < 5; ++i) {
        const float v = std::bit_cast<float>(uint32_t{values[i]} << 16);
        const bool subnormal = v != 0 && std::fabs(v) < FLT_MIN;
        // Sums start from +0: a -0 product leaves +0.
        const float want = pairs && subnormal ? 0.0f : 0.0f + v;
        if (std::bit_cast<uint32_t>(out[i]) != std::bit_cast<uint32_t>(want)) {
          ++failures;
          ADD_FAILURE() << "bf16 0x" << std::hex << values[i] << std::dec << " (" << v << ") gives " << out[i]
                        << ", want " << want;
        }
      }
    }
}

}  // namespace
}  // namespace convbwd::test
