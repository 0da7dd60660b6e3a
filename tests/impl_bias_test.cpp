// The bias sum (gradBias) against the reference: every dtype, every memory
// layout mode (contiguous rows, channels last, generic strides), tails,
// chunked sums for few channels, every tier that runs here (test_isas), and
// identical bits for any thread count and between tiers of one lane count.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"
#include "reference/reference.hpp"
#include "runtime/cpu.hpp"
#include "runtime/thread_pool.hpp"
#include "kernels/config.hpp"
#include "util/tensor.hpp"
#include "util/tiers.hpp"

namespace convbwd::test {
namespace {

using detail::Isa;

const char* const kShapes[] = {
    "mb2ic3ih9iw11oc5kh3kw3ph1pw1",   // rows of 11: one vector and a tail
    "mb3ic4iw5oc3kw1",                // rows shorter than a vector
    "mb2ic2ih1iw1oc20kh1kw1",         // one element per channel
    "mb2ic3id3ih4iw9oc9kd1kh1kw1",    // 3D
    "mb1ic2ih70iw70oc2kh1kw1",        // few channels, long sums: chunked
    "mb4ic2iw40000oc1kw1",            // one channel, chunked along N
    "mb2ic4ih8iw8oc70kh1kw1",         // channels_last: more than one channel block
    "mb2ic3ih5iw6oc13kh3kw3_tr",      // transposed: gradOutput is the image side
    "mb2ic2ih3iw21oc11kh1kw1",        // channels_last with a partial channel block, width tail
    "mb1ic2ih300iw300oc3kh1kw1",      // N = 1: one chunk however long
};

Problem parse(const std::string& d) {
  auto p = Problem::parse(d);
  EXPECT_TRUE(p) << d << ": " << p.error().message;
  Problem r = p ? p.value() : Problem{};
  r.output_mask = {false, false, true};
  return r;
}

// Positive data, compared within the bound of bias_reduce's own summation
// order (util/tensor's bias_summation_depth): with no cancellation, a lost
// or doubled partial sum (a lane, a chunk) is an error of at least 1/64 of
// the sum, which that bound rejects at every length here (see
// BoundRejectsADroppedPartialSum); mixed signs run too.
TEST(BiasReduce, AgainstReference) {
  const Layout kLayouts[] = {Layout::contiguous, Layout::channels_last, Layout::padded, Layout::reversed};
  for (const char* s : kShapes)
    for (const char* dt : {"", "_dtf16", "_dtbf16"})
      for (Layout l : kLayouts)
        for (Fill f : {Fill::positive, Fill::uniform}) {
          if (f == Fill::uniform && l != Layout::contiguous) continue;
          const std::string desc = std::string(s) + dt;
          SCOPED_TRACE(desc + " " + to_string(l) + (f == Fill::positive ? " positive" : " uniform"));
          const Problem p = parse(desc);
          auto plan = Plan::create(p);
          ASSERT_TRUE(plan) << plan.error().message;
          EXPECT_EQ(impl_base(plan->implementation(Gradient::bias)), "bias_reduce");
          CheckOptions o;
          o.in_layout = l;
          o.out_layout = l == Layout::channels_last ? Layout::contiguous : l;
          o.fill = f;
          const Comparison c = check_against_reference(p, o);
          EXPECT_TRUE(c.pass) << c.first_failure;
        }
}

// The bound AgainstReference applies is tight enough for its purpose on
// every shape: for positive data (each element in [0.5, 1], so the sum ref
// is between n/2 and n and sum|x| = ref), an error of ref/64, the smallest
// partial sum bias_reduce can lose (one of at most 64 chunks; a lane is 1/8),
// is above the tolerance, in every output dtype. The old bound, n instead of
// the summation depth, passed an all-zero gradBias on the long sums.
TEST(BiasReduce, BoundRejectsADroppedPartialSum) {
  for (const char* s : kShapes)
    for (const char* dt : {"", "_dtf16", "_dtbf16"}) {
      const Problem p = parse(std::string(s) + dt);
      auto spec = detail::validate(p);
      ASSERT_TRUE(spec) << spec.error().message;
      const detail::OpSpec op = spec->op_for(Gradient::bias);
      const int64_t n = detail::reduction_length(op);
      for (double ref : {0.5 * static_cast<double>(n), static_cast<double>(n)})
        EXPECT_LT(tolerance(op.dst.dtype, ref, ref, summation_depth(op)), ref / 64) << s << dt << " n " << n;
    }
}

struct Direct {
  HostTensor go, out;
  detail::OpSpec op;
  Direct(const std::string& desc, Layout l, Fill f) {
    Problem p = parse(desc);
    std::mt19937_64 rng(5);
    go = make_tensor(p.grad_output.dtype, p.grad_output.dims, l);
    fill(go, f, rng);
    p.grad_output = go.desc;
    out = make_tensor(p.gradient_dtype(Gradient::bias), p.gradient_dims(Gradient::bias),
                      l == Layout::channels_last ? Layout::contiguous : l);
    p.grad_bias = out.desc;
    auto s = detail::validate(p);
    EXPECT_TRUE(s) << s.error().message;
    op = s->op_for(Gradient::bias);
  }
  std::vector<unsigned char> run(Isa isa, int threads, detail::ThreadPool& pool) const {
    detail::PlanContext ctx;
    ctx.isa = isa;
    ctx.threads = threads;
    std::string why;
    auto k = detail::kBiasReduceImpl.plan(op, ctx, &why);
    EXPECT_TRUE(k) << why;
    if (!k) return {};
    std::vector<std::byte> ws(k->workspace_bytes());
    std::vector<unsigned char> o = out.storage;
    detail::OpArgs args;
    args.a = go.data();
    args.dst = o.data();
    args.workspace = ws.data();
    k->run(args, pool);
    return o;
  }
  std::vector<unsigned char> reference() const {
    std::vector<unsigned char> o = out.storage;
    detail::reference_run(op, go.data(), nullptr, o.data());
    return o;
  }
};

// Small integers: fp32 sums are exact, so the bits must equal the
// reference's on every ISA.
TEST(BiasReduce, ExactPerIsa) {
  detail::ThreadPool pool(2);
  for (const char* s : kShapes)
    for (const char* dt : {"", "_dtf16", "_dtbf16"})
      for (Layout l : {Layout::contiguous, Layout::channels_last, Layout::padded}) {
        Direct d(std::string(s) + dt, l, Fill::small_ints);
        const auto want = d.reference();
        for (Isa isa : test_isas())
          EXPECT_TRUE(d.run(isa, 2, pool) == want) << s << dt << " " << to_string(l) << " " << tier_name(isa);
      }
}

// Rounding sums: same bits for 1, 2 and 3 threads on every tier, and on
// tiers of one lane count (scalar and AVX2: 8): the kernels only add, in the
// lane order the plan fixes.
TEST(BiasReduce, BitsIndependentOfThreadsAndIsa) {
  detail::ThreadPool pool(3);
  for (const char* s : kShapes)
    for (Layout l : {Layout::contiguous, Layout::channels_last, Layout::reversed}) {
      Direct d(std::string(s) + "_dtbf16", l, Fill::uniform);
      Direct f(s, l, Fill::uniform);
      for (const Direct* x : {&d, &f}) {
        std::vector<std::pair<int, std::vector<unsigned char>>> by_lanes;  // the first tier's bits per lane count
        for (Isa isa : test_isas()) {
          const auto one = x->run(isa, 1, pool);
          EXPECT_TRUE(x->run(isa, 2, pool) == one) << s << " " << tier_name(isa);
          EXPECT_TRUE(x->run(isa, 3, pool) == one) << s << " " << tier_name(isa);
          const int lanes = detail::kernel_config(isa).bias.lanes;
          bool seen = false;
          for (const auto& [n, bits] : by_lanes)
            if (n == lanes) {
              seen = true;
              EXPECT_TRUE(bits == one) << s << " " << tier_name(isa) << " differs from a tier of " << lanes << " lanes";
            }
          if (!seen) by_lanes.emplace_back(lanes, one);
        }
      }
    }
}

// The summation order is logical, not physical: the same values in any
// memory layout give the same bits (rows, channels-last and generic paths).
TEST(BiasReduce, BitsIndependentOfLayout) {
  detail::ThreadPool pool(2);
  const Layout kLayouts[] = {Layout::contiguous, Layout::channels_last, Layout::padded, Layout::reversed};
  for (const char* s : kShapes)
    for (const char* dt : {"", "_dtbf16", "_dtf16"}) {
      for (Isa isa : test_isas()) {
        std::vector<double> first;
        for (Layout l : kLayouts) {
          Direct d(std::string(s) + dt, l, Fill::uniform);  // same logical values in every layout
          HostTensor out = d.out;
          out.storage = d.run(isa, 2, pool);
          std::vector<double> v;
          for (int64_t i = 0; i < out.elements(); ++i) v.push_back(out.at(i));
          if (first.empty())
            first = v;
          else
            EXPECT_TRUE(v == first) << s << dt << " " << to_string(l) << " differs from contiguous on "
                                    << tier_name(isa);
        }
      }
    }
}

}  // namespace
}  // namespace convbwd::test
