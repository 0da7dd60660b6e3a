// Plan: implementation names, the workspace contract, the skip paths of
// empty problems, flops(), and bit-identical results across runs and across
// threads sharing one plan.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "util/run.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

Problem parse(const std::string& d) {
  auto p = Problem::parse(d);
  EXPECT_TRUE(p.ok()) << d << ": " << (p.ok() ? "" : p.error().message);
  return p.ok() ? p.value() : Problem{};
}

// Operands filled once; any number of output sets.
struct Operands {
  HostTensor go, in, w;
  explicit Operands(const Problem& p, uint64_t seed = 5) {
    std::mt19937_64 rng(seed);
    go = make_tensor(p.grad_output.dtype, p.grad_output.dims, Layout::contiguous);
    in = make_tensor(p.input.dtype, p.input.dims, Layout::contiguous);
    w = make_tensor(p.weight.dtype, p.weight.dims, Layout::contiguous);
    for (HostTensor* t : {&go, &in, &w}) fill(*t, Fill::uniform, rng);
  }
};

struct Outputs {
  std::array<HostTensor, 3> t;
  explicit Outputs(const Problem& p) {
    for (int i = 0; i < 3; ++i)
      if (p.output_mask[i])
        t[i] = make_tensor(p.gradient_dtype(static_cast<Gradient>(i)), p.gradient_dims(static_cast<Gradient>(i)),
                           Layout::contiguous);
  }
  Buffers bind(const Operands& o) {
    return {o.go.data(), o.in.data(), o.w.data(), t[0].data(), t[1].data(), t[2].data()};
  }
};

// 64-byte aligned scratch with `guard` canary bytes after `bytes`.
struct Scratch {
  static constexpr size_t kGuard = 256;
  size_t bytes;
  std::unique_ptr<unsigned char, decltype(&std::free)> mem;
  explicit Scratch(size_t n)
      : bytes(n), mem(static_cast<unsigned char*>(std::aligned_alloc(64, (n + kGuard + 63) / 64 * 64)), &std::free) {
    std::memset(mem.get() + n, 0x5c, kGuard);
  }
  void* data() { return bytes ? mem.get() : nullptr; }
  bool guard_intact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (mem.get()[bytes + i] != 0x5c) return false;
    return true;
  }
};

// --- implementation names -------------------------------------------------------

TEST(Plan, ImplementationNames) {
  const Problem p = parse("mb2ic3ih8oc4kh3ph1");
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  for (Gradient g : {Gradient::input, Gradient::weight, Gradient::bias}) {
    const std::string_view name = impl_base(plan->implementation(g));
    EXPECT_FALSE(name.empty());
    // A non-empty reduction is computed, not skipped.
    EXPECT_NE(name, "zeros");
    EXPECT_NE(name, "empty");
  }
  // Unrequested gradients have no implementation.
  auto only_w = Plan::create(parse("mb2ic3ih8oc4kh3ph1_mask010"));
  ASSERT_TRUE(only_w.ok());
  EXPECT_EQ(impl_base(only_w->implementation(Gradient::input)), "");
  EXPECT_FALSE(impl_base(only_w->implementation(Gradient::weight)).empty());
  EXPECT_EQ(impl_base(only_w->implementation(Gradient::bias)), "");
}

// A fast path whose copies of one image exceed the workspace budget (the
// largest input, or 64 MiB) may take up to 8 times the largest input when
// nothing but the reference would accept: one 512x512 image of 64 channels, fp32, went to
// the single-threaded reference loops (344 s) and now takes the GEMM paths
// (under a second), asking for 137 MB. Planning only: nothing is allocated.
TEST(Plan, LargeImageTakesAFastPathWithARelaxedBudget) {
  auto plan = Plan::create(parse("mb1ic64ih512iw512oc64kh3ph1"));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), "gemm_dgrad_phase_nhwc");
  EXPECT_EQ(impl_base(plan->implementation(Gradient::weight)), "gemm_wgrad_nhwc");
  const size_t budget = size_t{64} * 512 * 512 * sizeof(float);  // the largest input
  EXPECT_GT(plan->workspace_size(), budget);
  EXPECT_LE(plan->workspace_size(), 8 * budget);
}
// The same on a small problem, whose budget CONVBWD_WORKSPACE_FLOOR lowers
// below its copies: the relaxed pass chooses the GEMM paths, and their
// results are the reference's.
TEST(Plan, RelaxedBudgetPathsAreExact) {
  setenv("CONVBWD_WORKSPACE_FLOOR", "4096", 1);
  const Problem p = parse("mb1ic32ih48oc32kh3ph1");
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), "gemm_dgrad_phase_nhwc");
  EXPECT_EQ(impl_base(plan->implementation(Gradient::weight)), "gemm_wgrad_nhwc");
  EXPECT_GT(plan->workspace_size(), size_t{32} * 48 * 48 * sizeof(float));  // over the 1x budget
  const Comparison c = check_against_reference(p);
  EXPECT_TRUE(c.pass) << c.first_failure;
  unsetenv("CONVBWD_WORKSPACE_FLOOR");
}

TEST(Plan, ProblemIsCanonical) {
  auto plan = Plan::create(parse("mb2ic3ih8oc4kh3ph1"));
  ASSERT_TRUE(plan.ok());
  const Problem& p = plan->problem();
  EXPECT_EQ(p.padding_after, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(p.output_padding, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(p.grad_input.dims, p.input.dims);
  EXPECT_EQ(p.grad_weight.dims, p.weight.dims);
  EXPECT_EQ(p.grad_bias.dims, (std::vector<int64_t>{4}));
  EXPECT_EQ(p.descriptor(), "mb2ic3ih8iw8oc4oh8ow8kh3kw3ph1pw1");
}

// --- empty problems ---------------------------------------------------------------

// Every element of an output view is +0 (all bytes zero).
void expect_zero_bits(const HostTensor& t, const char* what, const std::string& d) {
  const size_t es = size_of(t.desc.dtype);
  for (int64_t i = 0; i < t.elements(); ++i)
    for (size_t b = 0; b < es; ++b)
      ASSERT_EQ(t.storage[static_cast<size_t>(t.storage_index(i)) * es + b], 0)
          << d << ": " << what << "[" << i << "] is not +0";
}

struct EmptyCase {
  const char* desc;
  const char* impl[3];  // expected: "zeros" (empty sum), "empty" (no elements) or "*" (a real kernel)
};

TEST(Plan, EmptyProblemsTakeTheZerosPath) {
  const EmptyCase cases[] = {
      // N = 0: gradInput has no elements; gradWeight and gradBias are empty sums.
      {"mb0ic3ih5oc4kh3", {"empty", "zeros", "zeros"}},
      {"mb0ic3ih5oc4kh3sh2_tr", {"empty", "zeros", "zeros"}},
      // Cout = 0: gradInput sums over no output channels.
      {"mb2ic3ih5oc0kh3", {"zeros", "empty", "empty"}},
      {"mb2ic3ih5oc0kh3_tr", {"zeros", "empty", "empty"}},
      // Cin = 0: gradBias is still a real sum over gradOutput.
      {"mb2ic0ih5oc4kh3", {"empty", "empty", "*"}},
      {"mb2ic0ih5oc4kh3_tr", {"empty", "empty", "*"}},
      // Groups with zero channels per group.
      {"mb2g2ic4ih5oc0kh3_dtbf16", {"zeros", "empty", "empty"}},
      {"mb0g2ic4id3oc2kd2_dtf16", {"empty", "zeros", "zeros"}},
  };
  for (const EmptyCase& c : cases) {
    const Problem p = parse(c.desc);
    auto plan = Plan::create(p);
    ASSERT_TRUE(plan.ok()) << c.desc << ": " << plan.error().message;
    for (int i = 0; i < 3; ++i) {
      const std::string_view got = impl_base(plan->implementation(static_cast<Gradient>(i)));
      if (std::string_view(c.impl[i]) == "*") {
        EXPECT_NE(got, "zeros") << c.desc << " gradient " << i;
        EXPECT_NE(got, "empty") << c.desc << " gradient " << i;
      } else {
        EXPECT_EQ(got, c.impl[i]) << c.desc << " gradient " << i;
      }
    }
    Operands ops(p);
    Outputs out(p);  // filled with the canary pattern
    Scratch ws(plan->workspace_size());
    const Error e = plan->execute(out.bind(ops), ws.data(), ws.bytes);
    ASSERT_FALSE(e) << c.desc << ": " << e.message;
    for (int i = 0; i < 3; ++i)
      if (std::string_view(c.impl[i]) == "zeros") expect_zero_bits(out.t[i], c.impl[i], c.desc);
    // And the reference agrees on every output.
    const Comparison cmp = check_against_reference(p);
    EXPECT_TRUE(cmp.pass) << c.desc << ": " << cmp.first_failure;
  }
}

TEST(Plan, EmptyProblemReadsNoOperands) {
  // N = 0: nothing to read, so null operand pointers are fine.
  const Problem p = parse("mb0ic3ih5oc4kh3");
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Outputs out(p);
  Buffers b{nullptr, nullptr, nullptr, out.t[0].data(), out.t[1].data(), out.t[2].data()};
  Scratch ws(plan->workspace_size());
  const Error e = plan->execute(b, ws.data(), ws.bytes);
  EXPECT_FALSE(e) << e.message;
  expect_zero_bits(out.t[1], "gradWeight", "mb0ic3ih5oc4kh3");
  expect_zero_bits(out.t[2], "gradBias", "mb0ic3ih5oc4kh3");
}

// --- workspace ---------------------------------------------------------------------

// Problems that exercise a variety of implementations.
const char* const kVariety[] = {
    "mb2ic3ih8oc4kh3ph1",
    "mb2ic30ih14oc32kh3ph1",
    "mb2ic16ih16oc16kh3sh2ph1_dtbf16",
    "mb2g4ic16ih12oc16kh3ph1_dtf16",
    "mb3g8ic8ih10oc8kh3ph1",
    "mb2ic8ih9oc12kh3sh2ph1oph1_tr",
    "mb2ic6id6oc8kd3pd1_math1",
    "mb4ic24iw40oc16kw5pw2dw1_dtf16:bf16:f32",
    "mb2ic16ih14oc32kh1_math2",
};

TEST(Plan, ExecuteWithExactlyTheWorkspaceSize) {
  for (const char* d : kVariety) {
    const Problem p = parse(d);
    auto plan = Plan::create(p);
    ASSERT_TRUE(plan.ok()) << d << ": " << plan.error().message;
    Operands ops(p);
    Outputs out(p);
    Scratch ws(plan->workspace_size());
    const Error e = plan->execute(out.bind(ops), ws.data(), ws.bytes);
    ASSERT_FALSE(e) << d << ": " << e.message;
    EXPECT_TRUE(ws.guard_intact()) << d << ": wrote past the " << ws.bytes << " workspace bytes it asked for";
    const Comparison cmp = check_against_reference(p);
    EXPECT_TRUE(cmp.pass) << d << ": " << cmp.first_failure;
  }
}

// --- flops ----------------------------------------------------------------------------

// 2 per multiply-add of gradInput and gradWeight (each as many as the forward
// convolution), plus one per gradOutput element summed for gradBias.
double expected_flops(const Problem& p) {
  auto prod = [](const std::vector<int64_t>& v, size_t from) {
    double r = 1;
    for (size_t i = from; i < v.size(); ++i) r *= static_cast<double>(v[i]);
    return r;
  };
  const double k_sp = prod(p.weight.dims, 2);
  // MACs of the forward: every (output element, reduction term) pair for a
  // normal convolution; every (input element, scatter target) for a
  // transposed one.
  const double per_group_in = static_cast<double>(p.weight.dims[1]);
  const double macs = p.transposed ? prod(p.input.dims, 0) * per_group_in * k_sp
                                   : prod(p.grad_output.dims, 0) * per_group_in * k_sp;
  double f = 0;
  if (p.output_mask[0] && prod(p.input.dims, 0) > 0) f += 2 * macs;
  if (p.output_mask[1] && prod(p.weight.dims, 0) > 0) f += 2 * macs;
  if (p.output_mask[2] && p.grad_output.dims[1] > 0) f += prod(p.grad_output.dims, 0);
  return f;
}

TEST(Plan, Flops) {
  // Worked by hand: 2 * (4*320*80*80) * 30 * 9 per conv gradient, plus the
  // 4*320*80*80 gradOutput elements for gradBias.
  auto cann = Plan::create(parse("mb4ic30ih80oc320kh3ph1"));
  ASSERT_TRUE(cann.ok());
  EXPECT_DOUBLE_EQ(cann->flops(), 2 * 2 * 8192000.0 * 270 + 8192000.0);
  for (const char* d : {"mb2ic3ih8oc4kh3ph1", "mb2ic3ih8oc4kh3ph1_mask100", "mb2ic3ih8oc4kh3ph1_mask010",
                        "mb2ic3ih8oc4kh3ph1_mask001", "mb2g2ic4ih6oc6kh3sh2_tr", "mb3g3ic6id4oc9kd2_mask011",
                        "mb1ic5iw17oc7kw4sw3dw1pw1_tr_mask110", "mb0ic3ih5oc4kh3", "mb2ic3ih5oc0kh3"}) {
    const Problem p = parse(d);
    auto plan = Plan::create(p);
    ASSERT_TRUE(plan.ok()) << d;
    EXPECT_DOUBLE_EQ(plan->flops(), expected_flops(p)) << d;
  }
}

// --- determinism ------------------------------------------------------------------------

TEST(Plan, ExecuteTwiceGivesIdenticalBits) {
  for (const char* d : kVariety) {
    const Problem p = parse(d);
    auto plan = Plan::create(p);
    ASSERT_TRUE(plan.ok()) << d;
    Operands ops(p);
    Outputs a(p), b(p);
    Scratch ws(plan->workspace_size());
    ASSERT_FALSE(plan->execute(a.bind(ops), ws.data(), ws.bytes)) << d;
    // The second run reuses the dirty workspace: nothing may depend on its contents.
    ASSERT_FALSE(plan->execute(b.bind(ops), ws.data(), ws.bytes)) << d;
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(a.t[i].storage == b.t[i].storage) << d << " gradient " << i;
  }
}

TEST(Plan, SharedByFourThreadsGivesIdenticalBits) {
  for (const char* d : kVariety) {
    const Problem p = parse(d);
    auto plan = Plan::create(p);
    ASSERT_TRUE(plan.ok()) << d;
    Operands ops(p);
    Outputs single(p);
    {
      Scratch ws(plan->workspace_size());
      ASSERT_FALSE(plan->execute(single.bind(ops), ws.data(), ws.bytes)) << d;
    }
    constexpr int kThreads = 4;
    std::vector<Outputs> outs(kThreads, Outputs(p));
    std::vector<Scratch> scratch;
    for (int t = 0; t < kThreads; ++t) scratch.emplace_back(plan->workspace_size());
    Error errors[kThreads];
    std::vector<std::thread> threads;
    const Plan& shared = plan.value();
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 3; ++rep)
          if (Error e = shared.execute(outs[t].bind(ops), scratch[t].data(), scratch[t].bytes)) errors[t] = e;
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_FALSE(errors[t]) << d << " thread " << t << ": " << errors[t].message;
      EXPECT_TRUE(scratch[t].guard_intact()) << d << " thread " << t;
      for (int i = 0; i < 3; ++i)
        EXPECT_TRUE(outs[t].t[i].storage == single.t[i].storage) << d << " thread " << t << " gradient " << i;
    }
  }
}

TEST(Plan, CopiesShareTheSamePlan) {
  auto plan = Plan::create(parse("mb2ic3ih8oc4kh3ph1"));
  ASSERT_TRUE(plan.ok());
  const Plan copy = plan.value();
  EXPECT_EQ(copy.workspace_size(), plan->workspace_size());
  EXPECT_EQ(copy.flops(), plan->flops());
  EXPECT_EQ(copy.implementation(Gradient::weight), plan->implementation(Gradient::weight));
  EXPECT_EQ(copy.problem().descriptor(), plan->problem().descriptor());
}

}  // namespace
}  // namespace convbwd::test
