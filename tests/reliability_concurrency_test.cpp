// Concurrency: many threads plan and execute different problems at once,
// through the C++ API (each with its own plan, and all sharing one plan), and
// through the C API on a stream per thread and on one shared stream. Every
// result must be bit-identical to a serial run of the same problem on the
// same data. scripts/sanitize.sh runs this test under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "util/guarded.hpp"

namespace convbwd::test {
namespace {

constexpr int kThreads = 6;
constexpr int kProblemsPerThread = 8;

struct Baseline {
  std::vector<std::string> descs;
  std::vector<std::vector<unsigned char>> bits;
};

// Run i of the suite is always built from seed i, so any thread can rebuild
// exactly the operands, layouts and poison of the serial run.
GuardedRun build(const std::string& desc, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return make_guarded_run(Problem::parse(desc).value(), seed % 2 != 0, seed % 3 != 0, rng);
}

const Baseline& baseline() {
  static const Baseline b = [] {
    Baseline r;
    r.descs = reliability_descriptors();
    for (size_t i = 0; i < r.descs.size(); ++i) {
      GuardedRun run = build(r.descs[i], i);
      const std::string e = run_plan(run);
      if (!e.empty()) ADD_FAILURE() << "serial run of " << r.descs[i] << ": " << e;
      r.bits.push_back(output_bits(run));
    }
    return r;
  }();
  return b;
}

// Runs `body(thread, problem index)` on kThreads threads at once, each over
// kProblemsPerThread problems starting at a different place, and collects
// the failures.
template <class F>
std::vector<std::string> race(F body) {
  const Baseline& b = baseline();
  std::vector<std::string> errors(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // Start together so the runs really overlap.
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int j = 0; j < kProblemsPerThread && errors[t].empty(); ++j) {
        const size_t i = (static_cast<size_t>(t) * 5 + static_cast<size_t>(j)) % b.descs.size();
        errors[t] = body(t, i);
      }
    });
  for (std::thread& th : threads) th.join();
  std::vector<std::string> failures;
  for (const std::string& e : errors)
    if (!e.empty()) failures.push_back(e);
  return failures;
}

std::string compare(const GuardedRun& r, size_t i) {
  if (output_bits(r) != baseline().bits[i]) return baseline().descs[i] + ": differs from the serial run";
  return r.check();
}

TEST(ReliabilityConcurrency, ThreadsPlanAndExecuteDifferentProblems) {
  for (const std::string& e : race([](int, size_t i) {
         GuardedRun r = build(baseline().descs[i], i);
         if (std::string e = run_plan(r); !e.empty()) return e;
         return compare(r, i);
       }))
    ADD_FAILURE() << e;
}

// One plan, executed by every thread at once into its own buffers.
TEST(ReliabilityConcurrency, ThreadsShareOnePlan) {
  const Baseline& b = baseline();
  for (size_t i : {size_t{6}, size_t{11}, size_t{15}}) {
    GuardedRun proto = build(b.descs[i], i);
    auto plan = Plan::create(proto.problem);
    ASSERT_TRUE(plan.ok()) << b.descs[i];
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 3 && errors[t].empty(); ++rep) {
          GuardedRun r = build(b.descs[i], i);  // same layouts: the plan's views fit
          GuardedBuffer ws(plan->workspace_size());
          if (Error e = plan->execute(r.buffers(), ws.data(), ws.size())) {
            errors[t] = e.message;
            break;
          }
          errors[t] = ws.check_guards("workspace");
          if (errors[t].empty()) errors[t] = compare(r, i);
        }
      });
    for (std::thread& th : threads) th.join();
    for (const std::string& e : errors) EXPECT_EQ(e, "") << b.descs[i];
  }
}

TEST(ReliabilityConcurrency, CApiOnAStreamPerThread) {
  for (const std::string& e : race([](int, size_t i) {
         aclrtStream s = nullptr;
         if (aclrtCreateStream(&s) != ACL_SUCCESS) return std::string("aclrtCreateStream failed");
         GuardedRun r = build(baseline().descs[i], i);
         std::string e = run_capi(r, s, false);
         if (aclrtDestroyStream(s) != ACL_SUCCESS && e.empty()) e = "aclrtDestroyStream failed";
         return e.empty() ? compare(r, i) : e;
       }))
    ADD_FAILURE() << e;
}

TEST(ReliabilityConcurrency, CApiOnOneSharedStream) {
  aclrtStream shared = nullptr;
  ASSERT_EQ(aclrtCreateStream(&shared), ACL_SUCCESS);
  for (const std::string& e : race([shared](int, size_t i) {
         GuardedRun r = build(baseline().descs[i], i);
         // Each thread enqueues and then synchronizes the shared stream,
         // which waits for the other threads' work too.
         const std::string e = run_capi(r, shared, false);
         return e.empty() ? compare(r, i) : e;
       }))
    ADD_FAILURE() << e;
  EXPECT_EQ(aclrtDestroyStream(shared), ACL_SUCCESS);
}

TEST(ReliabilityConcurrency, CApiOnTheDefaultStream) {
  for (const std::string& e : race([](int, size_t i) {
         GuardedRun r = build(baseline().descs[i], i);
         const std::string e = run_capi(r, nullptr, false);
         return e.empty() ? compare(r, i) : e;
       }))
    ADD_FAILURE() << e;
}

}  // namespace
}  // namespace convbwd::test

namespace convbwd::test {
namespace {

// A stream destroyed while its work is still queued drains it first: every
// result is complete and right once aclrtDestroyStream returns, and (under
// LeakSanitizer) every executor is released.
TEST(ReliabilityConcurrency, StreamDestroyedWithPendingWorkCompletesIt) {
  const Baseline& b = baseline();
  std::vector<GuardedRun> runs;
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  for (size_t i = 0; i < b.descs.size(); i += 2) {
    runs.push_back(build(b.descs[i], i));
    ASSERT_EQ(run_capi(runs.back(), s, false, false), "") << b.descs[i];
  }
  ASSERT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  for (size_t j = 0; j < runs.size(); ++j) {
    EXPECT_EQ(runs[j].pending_workspace->check_guards("workspace"), "");
    EXPECT_EQ(compare(runs[j], 2 * j), "");
  }
}

// Issue 18: operators enqueued on a stream while another thread destroys
// it. Each call either enqueues (its work then completes, right, before the
// stream is gone) or is refused because the handle is no longer live; none
// works on a freed stream.
TEST(ReliabilityConcurrency, OperatorsEnqueuedWhileTheStreamIsDestroyed) {
  const Baseline& b = baseline();
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  constexpr int kCallers = 3;
  std::vector<std::vector<GuardedRun>> runs(kCallers);
  std::vector<std::vector<size_t>> which(kCallers);
  std::vector<std::string> errors(kCallers);
  std::atomic<int> started{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t)
    callers.emplace_back([&, t] {
      ++started;
      runs[t].reserve(b.descs.size());
      for (size_t i = static_cast<size_t>(t); i < b.descs.size(); i += kCallers) {
        runs[t].push_back(build(b.descs[i], i));
        const std::string e = run_capi(runs[t].back(), s, false, false);
        if (!e.empty()) {
          if (e.find("not a live stream") == std::string::npos) errors[t] = e;
          runs[t].pop_back();
          break;  // destroyed: every later call is refused too
        }
        which[t].push_back(i);
      }
    });
  while (started.load() < kCallers) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  for (std::thread& th : callers) th.join();
  for (int t = 0; t < kCallers; ++t) {
    EXPECT_EQ(errors[t], "");
    for (size_t j = 0; j < runs[t].size(); ++j) {
      EXPECT_EQ(runs[t][j].pending_workspace->check_guards("workspace"), "");
      EXPECT_EQ(compare(runs[t][j], which[t][j]), "");
    }
  }
}

}  // namespace
}  // namespace convbwd::test
