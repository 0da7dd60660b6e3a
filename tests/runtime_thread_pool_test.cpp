// The thread pool's contract (runtime/thread_pool.hpp): every task index of a
// job runs exactly once, on a thread index below the job's thread count, and
// run() returns only after all of them finished — whether the workers were
// spinning (jobs back to back) or asleep (a job after an idle pause), and
// when other callers share the pool.
#include "runtime/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace convbwd {
namespace {

using detail::ThreadPool;

// Runs one job of `tasks` tasks and checks every index ran once, on an
// allowed thread, before run() returned.
void run_and_check(ThreadPool& pool, int64_t tasks, int threads) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
  std::atomic<int> bad_thread{0};
  pool.parallel_for(tasks, threads, [&](int64_t t, int thread) {
    if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
    // A little work, so that several threads take part.
    volatile double x = 0;
    for (int i = 0; i < 200; ++i) x = x + i;
    hits[static_cast<size_t>(t)].fetch_add(1);
  });
  for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(hits[static_cast<size_t>(t)].load(), 1) << "task " << t << " of " << tasks;
  EXPECT_EQ(bad_thread.load(), 0);
}

TEST(ThreadPool, BackToBackJobsRunEveryTaskOnce) {
  ThreadPool pool(3);
  // Jobs of every size from 1, with thread limits below, at and above the
  // pool's size: workers are still spinning from the previous job.
  for (int64_t tasks = 1; tasks <= 300; tasks += 7)
    for (int threads : {1, 2, 3, 8}) run_and_check(pool, tasks, threads);
}

TEST(ThreadPool, JobsAfterAnIdlePauseWakeSleepingWorkers) {
  ThreadPool pool(2);
  for (int round = 0; round < 5; ++round) {
    // Longer than the spin: the workers are blocked when the job comes.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    run_and_check(pool, 64, 2);
  }
}

TEST(ThreadPool, WorkersTakePartWhenTasksAreLong) {
  ThreadPool pool(2);
  // Two tasks that each wait for the other to have started: they finish only
  // if two threads run them at the same time.
  std::atomic<int> started{0};
  std::atomic<bool> timed_out{false};
  pool.parallel_for(2, 2, [&](int64_t, int) {
    started.fetch_add(1);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2)
      if (std::chrono::steady_clock::now() > end) {
        timed_out = true;
        return;
      }
  });
  EXPECT_FALSE(timed_out.load()) << "the pool's worker never joined the job";
}

TEST(ThreadPool, CallerWaitsForTheSlowestTask) {
  ThreadPool pool(2);
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> finished{0};
    // One task outlasts the caller's spin, so the caller blocks.
    pool.parallel_for(4, 2, [&](int64_t t, int) {
      if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      finished.fetch_add(1);
    });
    EXPECT_EQ(finished.load(), 4);
  }
}

// Many tiny jobs from four callers: the caller owning the pool often runs a
// job alone and starts the next while the worker still looks at the old
// one. The first lock-free version let such a worker claim one task past the
// old job's end with the new job's task count (an over-count that returned
// run() early, then a hang): ThreadSanitizer (scripts/sanitize.sh) caught it
// here in one run of three.
TEST(ThreadPool, ConcurrentCallersEachGetAllTheirTasks) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int job = 0; job < 50000; ++job) {
        const int64_t tasks = 1 + (job * 7 + c) % 50;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
        pool.parallel_for(tasks, 2, [&](int64_t t, int) { hits[static_cast<size_t>(t)].fetch_add(1); });
        for (auto& h : hits)
          if (h.load() != 1) failures.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, GrowAddsWorkersThatJoinLaterJobs) {
  ThreadPool pool(1);
  run_and_check(pool, 10, 4);  // one thread: the caller alone
  pool.grow(3);
  EXPECT_EQ(pool.size(), 3);
  for (int i = 0; i < 20; ++i) run_and_check(pool, 30, 3);
}

}  // namespace
}  // namespace convbwd
