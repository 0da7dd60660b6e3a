// Extreme parameters (issue 18): strides, paddings and dilations up to
// 2^63-1 on small tensors, and a broadcast view of 2^61 elements. Every
// registered implementation is planned directly on each problem, on every
// ISA; each one that accepts runs with an exactly-sized workspace and
// exactly-sized operands and outputs between guard zones, and must equal the
// reference. Whole plans run the same way through Plan::execute.
#include <gtest/gtest.h>

#include <map>
#include <vector>
#include <random>
#include <string>

#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"
#include "problem/spec.hpp"
#include "reference/reference.hpp"
#include "runtime/thread_pool.hpp"
#include "util/extreme.hpp"
#include "util/guarded.hpp"
#include "util/impl_check.hpp"

namespace convbwd::test {
namespace {

// The name before the ISA suffix ("gemm_wgrad_nhwc:avx512" -> "gemm_wgrad_nhwc").
std::string base_name(std::string_view name) { return std::string(name.substr(0, name.find(':'))); }

TEST(ReliabilityExtreme, ProblemsAreValid) {
  const std::vector<Problem> problems = extreme_problems();
  EXPECT_GE(problems.size(), 80u);
  for (const Problem& p : problems) {
    auto spec = detail::validate(p);
    EXPECT_TRUE(spec.ok()) << p.descriptor() << ": " << spec.error().message;
  }
}

// One operation of a problem through one implementation: "" or what went
// wrong. *accepted says whether the implementation took it.
std::string run_one(const Problem& p, Gradient which, const detail::Implementation& impl, detail::Isa isa,
                    detail::ThreadPool& pool, bool* accepted) {
  *accepted = false;
  std::mt19937_64 rng(7);
  GuardedTensor go = make_guarded(p.grad_output.dtype, p.grad_output.dims, contiguous_layout());
  GuardedTensor in = make_guarded(p.input.dtype, p.input.dims, contiguous_layout());
  GuardedTensor w = make_guarded(p.weight.dtype, p.weight.dims, contiguous_layout());
  for (GuardedTensor* t : {&go, &in, &w}) t->fill_random(rng, /*small_ints=*/true);
  Problem q = p;
  q.grad_output = go.desc;
  q.input = in.desc;
  q.weight = w.desc;
  GuardedTensor out = make_guarded(p.gradient_dtype(which), p.gradient_dims(which), contiguous_layout());
  GuardedTensor want = make_guarded(p.gradient_dtype(which), p.gradient_dims(which), contiguous_layout());
  TensorDesc* outs[3] = {&q.grad_input, &q.grad_weight, &q.grad_bias};
  *outs[static_cast<int>(which)] = out.desc;
  auto spec = detail::validate(q);
  if (!spec) return "validate: " + spec.error().message;
  const detail::OpSpec op = spec->op_for(which);
  const bool tr = p.transposed;
  const void* a = go.data();
  const void* b = w.data();
  if (which == Gradient::weight) {
    a = tr ? in.data() : go.data();
    b = tr ? go.data() : in.data();
  }
  std::string why;
  auto kernel = impl.plan(op, detail::PlanContext{isa, 2}, &why);
  if (!kernel) return "";
  *accepted = true;
  const auto before = std::vector{snapshot(go), snapshot(in), snapshot(w)};
  GuardedBuffer ws(kernel->workspace_bytes());
  detail::OpArgs args{a, b, out.data(), reinterpret_cast<std::byte*>(ws.data())};
  kernel->run(args, pool);
  detail::reference_run(op, a, b, want.data());
  const std::string where = std::string(impl.name) + " on " + std::string(detail::to_string(op.op)) + ": ";
  if (std::string e = ws.check_guards("workspace"); !e.empty()) return where + e;
  if (std::string e = out.check_outside_view("output"); !e.empty()) return where + e;
  if (snapshot(go) != before[0] || snapshot(in) != before[1] || snapshot(w) != before[2])
    return where + "an operand was written";
  // Small integers: every sum is exact, so the values must be equal.
  for (int64_t i = 0; i < out.elements(); ++i)
    if (out.at(i) != want.at(i))
      return where + "element " + std::to_string(i) + " is " + std::to_string(out.at(i)) + ", the reference " +
             std::to_string(want.at(i));
  return "";
}

TEST(ReliabilityExtreme, EveryImplementationInGuardZones) {
  detail::ThreadPool pool(2);
  std::map<std::string, int> accepted;
  for (const Problem& p : extreme_problems()) {
    for (int g = 0; g < 3; ++g) {
      if (!p.output_mask[g]) continue;
      const auto which = static_cast<Gradient>(g);
      auto spec = detail::validate(p);
      ASSERT_TRUE(spec.ok()) << spec.error().message;
      for (detail::Isa isa : test_isas())
        for (const detail::Implementation& impl : detail::implementations(spec->op_for(which).op)) {
          bool took = false;
          const std::string e = run_one(p, which, impl, isa, pool, &took);
          EXPECT_EQ(e, "") << p.descriptor() << " gradient " << g << " isa " << detail::to_string(isa);
          if (took) ++accepted[base_name(impl.name)];
        }
    }
  }
  // Not vacuous: the depthwise paths take the problems whose indices fit.
  EXPECT_GT(accepted["depthwise_cl"], 0);
  EXPECT_GT(accepted["depthwise_direct"], 0);
  for (const auto& [name, count] : accepted) std::printf("%s accepted %d operations\n", name.c_str(), count);
}

TEST(ReliabilityExtreme, WholePlansMatchTheReference) {
  std::mt19937_64 rng(11);
  for (const Problem& p : extreme_problems())
    for (bool strided : {false, true}) {
      GuardedRun r = make_guarded_run(p, strided, strided, rng);
      EXPECT_EQ(run_plan(r), "") << p.descriptor();
    }
}

// Issue 18, item 1: a gradWeight over a broadcast input of 2^61 elements
// (every stride 0, one float of storage). depthwise_direct sized its x
// packing as c*xd*xh*sw*lq, which wrapped to 0: the plan asked for 1792
// bytes and execute wrote past them. Its sizes are checked now: it declines,
// and the plan goes to a path whose workspace is what it touches.
TEST(ReliabilityExtreme, HugeBroadcastViewDoesNotWrapTheScratchSize) {
  Problem p;
  p.input.dims = {1, 16, int64_t{1} << 28, int64_t{1} << 29, 1};
  p.input.strides = {0, 0, 0, 0, 0};
  p.input.storage_elements = 1;
  p.weight.dims = {16, 1, 1, 1, 1};
  p.grad_output.dims = {1, 16, 1, 2, 1};
  p.grad_output.strides = {0, 0, 0, 0, 0};
  p.grad_output.storage_elements = 1;
  p.stride = {int64_t{1} << 28, int64_t{1} << 28, 1};
  p.padding_before = {0, 0, 0};
  p.dilation = {1, 1, 1};
  p.groups = 16;
  p.output_mask = {false, true, false};
  auto spec = detail::validate(p);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const detail::OpSpec op = spec->op_for(Gradient::weight);
  for (const detail::Implementation& impl : detail::implementations(op.op)) {
    if (base_name(impl.name).rfind("depthwise", 0) != 0) continue;
    std::string why;
    auto k = impl.plan(op, detail::PlanContext{detail::Isa::scalar, 2}, &why);
    EXPECT_EQ(k, nullptr) << impl.name << " accepted with " << (k ? k->workspace_bytes() : 0) << " bytes";
    EXPECT_NE(why.find("exceeds"), std::string::npos) << why;
  }
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
}

// A gradOutput broadcast over its pixels (spatial strides 0) is no
// contiguous pixel sequence: the planar 1x1 GEMMs read 16 neighbouring
// elements of it at a time, and took it for stride 1 (a fuzz_plan finding:
// a transposed 1x1x1 layer with 8 groups read past the one element stored).
// Both planar 1x1 data paths decline it, and the plan matches the reference.
TEST(ReliabilityExtreme, BroadcastPixelsAreNotContiguousForThePlanar1x1Paths) {
  for (bool transposed : {true, false}) {
    Problem p;
    p.transposed = transposed;
    p.input.dims = {1, 16, 4, 4, 4};
    p.weight.dims = {16, 2, 1, 1, 1};
    p.grad_output.dims = {1, 16, 4, 4, 4};
    p.grad_output.strides = {0, 0, 0, 0, 0};
    p.grad_output.storage_elements = 1;
    p.stride = {1, 1, 1};
    p.padding_before = {0, 0, 0};
    p.dilation = {1, 1, 1};
    p.groups = 8;
    p.output_mask = {true, false, false};
    auto spec = detail::validate(p);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    const detail::OpSpec op = spec->op_for(Gradient::input);
    for (const detail::Implementation* impl : {&detail::kGemm1x1FwdImpl, &detail::kGemm1x1BwdDataImpl}) {
      std::string why;
      auto k = impl->plan(op, detail::PlanContext{detail::Isa::scalar, 2}, &why);
      EXPECT_EQ(k, nullptr) << impl->name << (transposed ? " transposed" : "");
    }
    const float one = 0.75f;
    std::vector<float> w(32, 0.5f), dx(16 * 64, -1.0f), want(16 * 64, -2.0f);
    p.grad_input.dims = p.input.dims;
    auto plan = Plan::create(p);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    Buffers bufs{&one, nullptr, w.data(), dx.data(), nullptr, nullptr};
    std::vector<unsigned char> ws(plan->workspace_size());
    ASSERT_FALSE(plan->execute(bufs, ws.data(), ws.size()));
    auto rspec = detail::validate(p);
    detail::reference_run(rspec->op_for(Gradient::input), &one, w.data(), want.data());
    EXPECT_EQ(dx, want) << (transposed ? "transposed" : "");
  }
}

// A one-pixel signal padded by 2^62 - 1 on both sides has 2^63 - 1 output
// pixels: valid, and planned without overflow. The small-channel data
// gradient rounded that count up to its tile before any check (a fuzz_plan
// finding under UBSan); it declines it now, naming the bound.
TEST(ReliabilityExtreme, SmallChannelsDeclineAnOutputOfTwoToThe63Pixels) {
  auto parsed = Problem::parse("mb1ic2iw1oc1ow9223372036854775807kw1pw4611686018427387903dw2_mask100_math2");
  ASSERT_TRUE(parsed) << parsed.error().message;
  // gradOutput broadcast, as the fuzz input had it: its 2^63 - 1 elements
  // in one.
  Problem& p = parsed.value();
  p.grad_output.strides = {0, 0, 0};
  p.grad_output.storage_elements = 1;
  auto spec = detail::validate(p);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const detail::OpSpec op = spec->op_for(Gradient::input);
  std::string why;
  auto k = detail::kSmallChannelsBwdDataImpl.plan(op, detail::PlanContext{detail::Isa::scalar, 2}, &why);
  EXPECT_EQ(k, nullptr);
  EXPECT_NE(why.find("output beyond 2^36"), std::string::npos) << why;
  EXPECT_TRUE(Plan::create(p).ok());
}

}  // namespace
}  // namespace convbwd::test
