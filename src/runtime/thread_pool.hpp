// A pool of persistent worker threads. parallel_for hands out task indices
// dynamically; results stay deterministic because every task owns a fixed part
// of the output and computes it in a fixed order, whichever thread runs it.
// Running a job allocates nothing.
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
  void worker_loop(int index);
  void work(int thread);

  std::vector<std::thread> workers_;
  std::atomic<int> size_{1};  // workers + the calling thread
  std::mutex busy_;  // held by the caller owning the current job
  std::mutex m_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  // The current job.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t tasks_ = 0;
  int job_threads_ = 0;
  int64_t next_ = 0;   // next task index, under m_
  int running_ = 0;    // workers inside the job, under m_
};

// The most threads a plan may use (set_num_threads, CONVBWD_NUM_THREADS).
constexpr int kMaxThreads = 256;

// Threads a new plan uses: set_num_threads, else CONVBWD_NUM_THREADS, else
// the number of cores.
int configured_threads();

}  // namespace convbwd::detail
