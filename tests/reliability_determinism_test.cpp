// Determinism: the same problem on the same data gives the same output bits
// on every run, for every thread count (1, 2, 3 and 8, set before
// Plan::create), and whether the tensors are contiguous or strided views with
// holes. The problems are chosen so that every implementation registered in
// src/impl/registry.cpp is chosen by at least one plan; the test fails if one
// is not, naming it, so a new implementation cannot escape this check.
#include <gtest/gtest.h>

#include "util/tensor.hpp"

#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "impl/implementation.hpp"
#include "util/guarded.hpp"

namespace convbwd::test {
namespace {

const int kThreadCounts[] = {1, 2, 3, 8};

// Copies the logical values of a's operands into b's (exact: the values are
// already representable in the dtype).
void copy_operands(const GuardedRun& a, GuardedRun& b) {
  const GuardedTensor* from[3] = {&a.grad_output, &a.input, &a.weight};
  GuardedTensor* to[3] = {&b.grad_output, &b.input, &b.weight};
  for (int i = 0; i < 3; ++i) {
    for (int64_t j = 0, n = from[i]->elements(); j < n; ++j) to[i]->set(j, from[i]->at(j));
    b.in_snapshots[i] = snapshot(*to[i]);
  }
}

std::string execute(GuardedRun& r, std::map<std::string, std::set<std::string>>* chosen) {
  auto plan = Plan::create(r.problem);
  if (!plan) return "Plan::create: " + plan.error().message;
  if (chosen) {
    const detail::Spec spec = detail::validate(r.problem).value();
    for (int i = 0; i < 3; ++i) {
      const std::string_view name = impl_base(plan->implementation(static_cast<Gradient>(i)));
      if (!name.empty() && name != "empty")
        (*chosen)[std::string(detail::to_string(spec.op_for(static_cast<Gradient>(i)).op))].insert(std::string(name));
    }
  }
  GuardedBuffer ws(plan->workspace_size());
  if (Error e = plan->execute(r.buffers(), ws.data(), ws.size())) return "execute: " + e.message;
  return ws.check_guards("workspace");
}

// Problems beyond the shared list that steer towards particular
// implementation families (large channel counts, depthwise, 1x1, bias-only).
std::vector<std::string> descriptors() {
  std::vector<std::string> d = reliability_descriptors();
  for (const char* extra :
       {"mb2ic32ih8oc32kh3ph1", "mb2ic48iw24oc48kw1", "mb2g16ic16ih12oc16kh3ph1", "mb2g16ic16ih12oc16kh3ph1_mask100",
        "mb2g16ic16ih12oc16kh3sh2ph1_tr",
        "mb2ic16id4ih5iw5oc16kd3kh3kw3pd1ph1pw1", "mb2ic16ih7oc32kh3_dtbf16", "mb2ic16ih7oc32kh3_dtf16",
        "mb2ic32ih6oc32kh3ph1_mask001", "mb2ic32ih6oc32kh3ph1_mask010", "mb2ic32ih6oc32kh3ph1_mask100",
        "mb2ic32ih8oc16kh3sh2ph1_tr_dthif8_mask100", "mb2ic32ih6oc32kh3sh2ph1_tr", "mb2ic24ih5oc16kh3ph1_tr",
        "mb2ic16id3ih4iw4oc24kd2kh3kw3sh2_tr", "mb2ic3ih5oc0kh3_tr_mask100",
        // Small-channel columns paths (C <= 4 per group, K > 16).
        "mb2ic3ih9oc20kh3sh2ph1", "mb2g2ic2iw23oc40kw4sw2dw1pw3", "mb1ic4id3ih5iw6oc18kd2kh3kw3pd1ph1pw1_dtbf16"})
    d.emplace_back(extra);
  return d;
}

// Strided views must not change the bits of any gradient, gradBias included:
// bias_reduce sums in one logical order whatever the layout.
constexpr bool kBiasLayoutIndependent = true;

bool same_layout_bits(const GuardedRun& a, const GuardedRun& b, bool include_bias) {
  for (int g = 0; g < 3; ++g)
    if ((g != 2 || include_bias) && output_bits(a, g) != output_bits(b, g)) return false;
  return true;
}

TEST(ReliabilityDeterminism, BitIdenticalAcrossRunsThreadCountsAndLayouts) {
  std::map<std::string, std::set<std::string>> chosen;
  std::string matrix =
      "descriptor | 3 runs | threads 1/2/3/8 | strided views (dx,dw) | strided gradBias | implementations\n";
  for (const std::string& desc : descriptors()) {
    auto parsed = Problem::parse(desc);
    ASSERT_TRUE(parsed.ok()) << desc << ": " << parsed.error().message;
    const Problem p = parsed.value();
    std::mt19937_64 rng(std::hash<std::string>{}(desc));
    // The first run, single-threaded and contiguous, is the baseline.
    set_num_threads(1);
    GuardedRun base = make_guarded_run(p, false, false, rng);
    ASSERT_EQ(execute(base, &chosen), "") << desc;
    ASSERT_EQ(base.check(), "") << desc;  // and it is right
    const std::vector<unsigned char> want = output_bits(base);
    bool same_runs = true, same_threads = true, same_strided = true, same_bias = true;
    for (int t : kThreadCounts) {
      set_num_threads(t);
      ASSERT_EQ(num_threads(), t);
      // Repeated runs with fresh plans.
      for (int rep = 0; rep < (t == 1 ? 2 : 1); ++rep) {
        GuardedRun again = make_guarded_run(p, false, false, rng);
        copy_operands(base, again);
        ASSERT_EQ(execute(again, &chosen), "") << desc << " threads " << t;
        const bool same = output_bits(again) == want;
        (t == 1 ? same_runs : same_threads) &= same;
        EXPECT_TRUE(same) << desc << ": threads " << t << " run " << rep << " differs from the first run";
      }
      GuardedRun strided = make_guarded_run(p, true, true, rng);
      copy_operands(base, strided);
      ASSERT_EQ(execute(strided, &chosen), "") << desc << " strided, threads " << t;
      if (t == 1) {
        EXPECT_EQ(strided.check(), "") << desc << " strided";
      }
      const bool same = same_layout_bits(base, strided, false);
      same_strided &= same;
      same_bias &= output_bits(base, 2) == output_bits(strided, 2);
      EXPECT_TRUE(same) << desc << ": strided views with threads " << t << " differ from contiguous";
    }
    auto plan = Plan::create(base.problem);
    std::string impls;
    for (int i = 0; i < 3; ++i) {
      const std::string_view n = impl_base(plan->implementation(static_cast<Gradient>(i)));
      impls += std::string(i ? "," : "") + (n.empty() ? "-" : std::string(n));
    }
    matrix += desc + " | " + (same_runs ? "=" : "DIFF") + " | " + (same_threads ? "=" : "DIFF") + " | " +
              (same_strided ? "=" : "DIFF") + " | " + (same_bias ? "=" : "DIFF") + " | " + impls + "\n";
  }
  set_num_threads(0);
  std::printf("%s", matrix.c_str());

  // Coverage: every registered implementation was chosen somewhere. The
  // reference is exempt when faster entries accept everything it is tried on:
  // it is then unreachable through a plan (and it is the oracle anyway).
  for (detail::Op op : {detail::Op::fwd, detail::Op::bwd_data, detail::Op::bwd_weights, detail::Op::bias}) {
    const std::string opname(detail::to_string(op));
    for (const detail::Implementation& impl : detail::implementations(op)) {
      const std::string name(impl.name);
      if (name == "reference") continue;
      EXPECT_TRUE(chosen[opname].count(name))
          << opname << " implementation '" << name
          << "' is registered but no problem of this test chose it: add a descriptor that does";
    }
    std::string seen;
    for (const std::string& n : chosen[opname]) seen += " " + n;
    std::printf("%s chosen:%s\n", opname.c_str(), seen.c_str());
  }
}

TEST(ReliabilityDeterminism, GradBiasBitsIndependentOfLayout) {
  for (const char* desc : {"mb2ic16ih6oc24kh3ph1", "mb2g8ic8ih9oc16kh3sh2ph1", "mb3ic24id5ih6iw6oc24kd3kh3kw3pd1ph1pw1"}) {
    const Problem p = Problem::parse(desc).value();
    std::mt19937_64 rng(5);
    GuardedRun a = make_guarded_run(p, false, false, rng);
    GuardedRun b = make_guarded_run(p, true, true, rng);
    copy_operands(a, b);
    ASSERT_EQ(execute(a, nullptr), "");
    ASSERT_EQ(execute(b, nullptr), "");
    EXPECT_TRUE(output_bits(a, 2) == output_bits(b, 2)) << desc;
  }
}

// The C API path is deterministic too: the same call twice, on two streams.
TEST(ReliabilityDeterminism, CApiRunsAreBitIdentical) {
  for (const char* desc : {"mb2ic16ih6oc24kh3ph1", "mb2g8ic8ih9oc16kh3sh2ph1", "mb2ic3ih4iw5oc4kh3kw2sh2sw2ph1pw1_tr"}) {
    const Problem p = Problem::parse(desc).value();
    std::mt19937_64 rng(5);
    GuardedRun a = make_guarded_run(p, false, true, rng);
    GuardedRun b = make_guarded_run(p, true, false, rng);
    copy_operands(a, b);
    ASSERT_EQ(run_capi(a, nullptr), "") << desc;
    ASSERT_EQ(run_capi(b, nullptr), "") << desc;
    EXPECT_TRUE(same_layout_bits(a, b, kBiasLayoutIndependent)) << desc;
  }
}

}  // namespace
}  // namespace convbwd::test
