// A pool of persistent worker threads. parallel_for hands out task indices
// dynamically; results stay deterministic because every task owns a fixed part
// of the output and computes it in a fixed order, whichever thread runs it.
// Running a job allocates nothing and takes no lock.
//
// Idle workers spin for a short while (kSpinMicroseconds) before they sleep,
// and so does a caller waiting for the last task: one backward pass runs
// several jobs back to back (copies, packing, the GEMMs, partial sums), and
// waking a sleeping thread costs an IPI and, under a hypervisor, a halted
// vCPU's exit. Spinning is bounded, so a pool left idle costs nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace convbwd::detail {

class ThreadPool {
 public:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);

  static ThreadPool& global();

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_.load(std::memory_order_acquire); }
  // Adds workers until the pool has `threads` (waits for a running job).
  void grow(int threads);

  // Runs fn(ctx, t, thread) for every t in [0, tasks), with thread in
  // [0, max_threads). If the pool is busy with another caller's job, the
  // calling thread runs all tasks itself as thread 0.
  void run(int64_t tasks, int max_threads, TaskFn fn, void* ctx);

  template <class F>
  void parallel_for(int64_t tasks, int max_threads, F&& f) {
    run(tasks, max_threads,
        [](void* c, int64_t t, int th) { (*static_cast<F*>(c))(t, th); },
        const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  // How long an idle worker, or a caller waiting for stragglers, polls
  // before it blocks. About the gap between two jobs of one execute and
  // between back-to-back executes of a training loop.
  static constexpr int kSpinMicroseconds = 200;

  // `seen`: the last job number this worker need not run.
  void worker_loop(int index, uint32_t seen);
  // Claims and runs tasks of job `job` until none is left; returns how many
  // it ran, and in *tasks the job's task count when it ran any.
  int64_t work(uint32_t job, int thread, int64_t* tasks);

  std::vector<std::thread> workers_;
  std::atomic<int> size_{1};  // workers + the calling thread
  std::mutex busy_;           // held by the caller owning the current job
  // The current job: written by its caller before `cursor_` publishes it,
  // constant until every one of its tasks has completed. fn_ and ctx_ are
  // read only after a task was claimed; the two counts may be read by a
  // worker still looking at an earlier job, hence atomic (relaxed).
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<int64_t> tasks_{0};
  std::atomic<int> job_threads_{0};
  // (job number << 32) | next task index. A task is claimed by a
  // compare-exchange that also checks the job number, so a worker that saw
  // an earlier job can never claim a task of a later one.
  std::atomic<uint64_t> cursor_{0};
  std::atomic<int64_t> completed_{0};  // tasks of the current job finished
  std::atomic<bool> stop_{false};
  // Blocking, after the spin: workers wait on wake_ for a new job number,
  // the caller on done_ for the last task.
  std::mutex m_;
  std::condition_variable wake_, done_;
  std::atomic<int> sleepers_{0};        // workers blocked (or about to) on wake_
  std::atomic<bool> caller_waits_{false};
};

// The most threads a plan may use (set_num_threads, CONVBWD_NUM_THREADS).
constexpr int kMaxThreads = 256;

// Threads a new plan uses: set_num_threads, else CONVBWD_NUM_THREADS, else
// the number of cores.
int configured_threads();

}  // namespace convbwd::detail
