// Guard zones: every output and workspace buffer sits between poisoned
// guards, outputs start poisoned, and after each run nothing outside the
// declared views may have changed: not the guards, not the bytes before the
// offset, not the holes inside strided views, not the inputs, not the outputs
// that were not requested. The values are checked against the reference too.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "acl/acl.h"
#include "util/guarded.hpp"

namespace convbwd::test {
namespace {

Problem parse(const std::string& d) {
  auto p = Problem::parse(d);
  EXPECT_TRUE(p.ok()) << d << ": " << (p.ok() ? "" : p.error().message);
  return p.ok() ? p.value() : Problem{};
}

// The allocator itself: a test that cannot fail proves nothing, so first show
// that each kind of stray write is seen.
TEST(ReliabilityGuard, GuardsCatchEveryKindOfStrayWrite) {
  GuardedBuffer b(40);
  EXPECT_EQ(b.check_guards("b"), "");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  b.data()[40] = 0;  // one past the end
  EXPECT_NE(b.check_guards("b").find("after the end"), std::string::npos);
  GuardedBuffer c(8);
  c.data()[-1] = 0;  // one before the start
  EXPECT_NE(c.check_guards("c").find("before"), std::string::npos);

  StridedLayout l;
  l.gaps = {1, 1};
  l.offset = 2;
  GuardedTensor t = make_guarded(DataType::f32, {2, 3}, l);
  EXPECT_EQ(t.desc.strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(t.desc.storage_elements, 2 + 4 + 2 + 1);
  for (int64_t i = 0; i < 6; ++i) t.set(i, 1.0);
  EXPECT_EQ(t.check_outside_view("t"), "");
  t.buffer.data()[5 * 4] = 0;  // element 5: the hole after row 0
  EXPECT_NE(t.check_outside_view("t").find("storage element 5"), std::string::npos);
  GuardedTensor u = make_guarded(DataType::bf16, {3}, l);
  u.buffer.data()[0] = 0;  // before the offset
  EXPECT_NE(u.check_outside_view("u").find("storage element 0"), std::string::npos);
}

struct Case {
  std::string desc;
  bool strided_in, strided_out;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const std::string& d : reliability_descriptors())
    for (int v = 0; v < 3; ++v) c.push_back({d, v >= 1, v != 1});
  return c;
}

// Plan::execute with guarded operands, outputs and an exact-size workspace.
TEST(ReliabilityGuard, PlanExecuteWritesOnlyInsideItsViews) {
  std::mt19937_64 rng(11);
  int runs = 0;
  for (const Case& c : cases()) {
    const Problem p = parse(c.desc);
    GuardedRun r = make_guarded_run(p, c.strided_in, c.strided_out, rng);
    const std::string e = run_plan(r);
    EXPECT_EQ(e, "") << c.desc << (c.strided_in ? " strided inputs" : "") << (c.strided_out ? " strided outputs" : "");
    ++runs;
  }
  EXPECT_GT(runs, 100);
}

// Every mask on a few shapes: unrequested outputs have buffers bound that
// must stay poisoned.
TEST(ReliabilityGuard, UnrequestedOutputsStayUntouched) {
  std::mt19937_64 rng(12);
  for (const char* d : {"mb2ic3ih5oc4kh3ph1", "mb2ic3iw7oc5kw2sw3_tr", "mb2g2ic4id3ih3iw3oc2kd2kh2kw2"}) {
    for (int m = 0; m < 8; ++m) {
      Problem p = parse(d);
      p.output_mask = {(m & 1) != 0, (m & 2) != 0, (m & 4) != 0};
      GuardedRun r = make_guarded_run(p, true, true, rng);
      // Bind every output buffer, requested or not.
      Buffers b = r.buffers();
      auto plan = Plan::create(r.problem);
      ASSERT_TRUE(plan.ok()) << d << " mask " << m << ": " << plan.error().message;
      GuardedBuffer ws(plan->workspace_size());
      ASSERT_FALSE(plan->execute(b, ws.data(), ws.size())) << d;
      EXPECT_EQ(ws.check_guards("workspace"), "") << d;
      EXPECT_EQ(r.check(), "") << d << " mask " << m;
    }
  }
}

// The same problems through the C API, on the default stream and on a stream
// of its own.
TEST(ReliabilityGuard, CApiWritesOnlyInsideItsViews) {
  std::mt19937_64 rng(13);
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  int i = 0;
  for (const Case& c : cases()) {
    const Problem p = parse(c.desc);
    GuardedRun r = make_guarded_run(p, c.strided_in, c.strided_out, rng);
    EXPECT_EQ(run_capi(r, (i++ % 2) ? stream : nullptr), "") << c.desc;
  }
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

// Random shapes beyond the fixed list: random ranks, groups, strides and
// layouts, with every dtype.
TEST(ReliabilityGuard, RandomProblemsWriteOnlyInsideTheirViews) {
  std::mt19937_64 rng(14);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* dts[] = {"", "_dtf16", "_dtbf16"};
  for (int t = 0; t < 60; ++t) {
    const int sp = pick(1, 3);
    const int g = pick(1, 3);
    const bool tr = pick(0, 1) != 0;
    std::string d = "mb" + std::to_string(pick(1, 3)) + "g" + std::to_string(g) + "ic" +
                    std::to_string(g * pick(1, 3)) + "oc" + std::to_string(g * pick(1, 3));
    for (int i = 3 - sp; i < 3; ++i) {
      const char dim = "dhw"[i];
      const int s = pick(1, 3);
      const int k = pick(1, 3);
      d += std::string("i") + dim + std::to_string(pick(k + 1, 7)) + "k" + dim + std::to_string(k) + "s" + dim +
           std::to_string(s) + "p" + dim + std::to_string(pick(0, k - 1)) + "d" + dim + std::to_string(pick(1, 2));
      if (tr) d += std::string("op") + dim + std::to_string(pick(0, s - 1));
    }
    if (tr) d += "_tr";
    d += dts[pick(0, 2)];
    auto p = Problem::parse(d);
    if (!p.ok()) continue;  // the dilated kernel can outgrow a small input
    if (!Plan::create(p.value()).ok()) continue;
    GuardedRun r = make_guarded_run(p.value(), pick(0, 1) != 0, true, rng);
    EXPECT_EQ(run_plan(r), "") << d;
  }
}

}  // namespace
}  // namespace convbwd::test
