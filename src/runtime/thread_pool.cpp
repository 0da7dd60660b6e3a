#include "runtime/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#include "convbwd/convbwd.hpp"
#include "runtime/env.hpp"

namespace convbwd::detail {
namespace {
std::atomic<int> g_requested_threads{0};

int default_threads() {
  // Read per plan (bench/run.py changes it between plans).
  if (const auto n = env_int("CONVBWD_NUM_THREADS", 1, kMaxThreads)) return static_cast<int>(*n);
  // Read once: glibc answers by opening and reading
  // /sys/devices/system/cpu/online, three system calls that every plan paid
  // (a fifth of a warm plan's time).
  static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return cores;
}
}  // namespace

int configured_threads() {
  const int n = g_requested_threads.load();
  return n > 0 ? n : default_threads();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(configured_threads());
  return pool;
}

ThreadPool::ThreadPool(int threads) { grow(threads); }

void ThreadPool::grow(int threads) {
  std::lock_guard<std::mutex> owner(busy_);  // no job runs while workers are added
  for (int i = size(); i < threads; ++i) {
    workers_.emplace_back([this, i] { worker_loop(i); });
    size_.store(i + 1, std::memory_order_release);
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    int64_t t;
    {
      std::lock_guard<std::mutex> l(m_);
      if (next_ >= tasks_) return;
      t = next_++;
    }
    fn_(ctx_, t, thread);
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(m_);
      wake_.wait(l, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= job_threads_) continue;
      ++running_;
    }
    work(index);
    {
      std::lock_guard<std::mutex> l(m_);
      --running_;
    }
    done_.notify_all();
  }
}

void ThreadPool::run(int64_t tasks, int max_threads, TaskFn fn, void* ctx) {
  if (tasks <= 0) return;
  const int threads = static_cast<int>(std::min<int64_t>({static_cast<int64_t>(max_threads),
                                                          static_cast<int64_t>(size()), tasks}));
  std::unique_lock<std::mutex> owner(busy_, std::try_to_lock);
  if (threads <= 1 || !owner.owns_lock()) {
    for (int64_t t = 0; t < tasks; ++t) fn(ctx, t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> l(m_);
    fn_ = fn;
    ctx_ = ctx;
    tasks_ = tasks;
    next_ = 0;
    job_threads_ = threads;
    ++generation_;
  }
  wake_.notify_all();
  work(0);
  std::unique_lock<std::mutex> l(m_);
  // Wait until every task is handed out and every worker that joined is out.
  done_.wait(l, [&] { return next_ >= tasks_ && running_ == 0; });
  // A worker that wakes late sees next_ >= tasks_ and leaves at once; one that
  // has not woken yet must not join this finished job.
  tasks_ = 0;
}

}  // namespace convbwd::detail

namespace convbwd {
void set_num_threads(int n) {
  if (n < 0 || n > detail::kMaxThreads) {
    // The same rule as the environment's: reported, and nothing changes.
    detail::report_invalid_call("convbwd::set_num_threads", std::to_string(n),
                               "0 (the default) or a thread count from 1 to " + std::to_string(detail::kMaxThreads));
    return;
  }
  detail::g_requested_threads.store(n);
  detail::ThreadPool::global().grow(detail::configured_threads());
}
int num_threads() { return std::min(detail::configured_threads(), detail::ThreadPool::global().size()); }
}  // namespace convbwd
