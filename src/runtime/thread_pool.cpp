#include "runtime/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
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
    // The job number as of now (no job runs while busy_ is held): a worker
    // that read it only once running would take a job published before it
    // started for an old one, and sit it out.
    const uint32_t seen = static_cast<uint32_t>(cursor_.load() >> 32);
    workers_.emplace_back([this, i, seen] { worker_loop(i, seen); });
    size_.store(i + 1, std::memory_order_release);
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `ready` for about `us` microseconds; true as soon as it holds. The
// clock is read every 64 polls: a read costs more than a pause.
template <class Ready>
bool spin_until(Ready ready, int us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= end) return ready();
  }
}

constexpr uint32_t job_of(uint64_t cursor) { return static_cast<uint32_t>(cursor >> 32); }
// The task index of a closed job: above any task count (at most 2^31).
constexpr uint64_t kClosed = 0xffffffffu;

}  // namespace

int64_t ThreadPool::work(uint32_t job, int thread, int64_t* tasks) {
  int64_t ran = 0;
  uint64_t c = cursor_.load(std::memory_order_acquire);
  for (;;) {
    const int64_t n = tasks_.load(std::memory_order_acquire);
    if (job_of(c) != job || static_cast<int64_t>(c & 0xffffffffu) >= n) break;
    // Success also makes this job's fields visible (written before the cursor
    // was published; n was read after c, so it is this job's or a later
    // one's, and a later one's means the job was closed first, so the
    // exchange fails), and they stay valid until this task is counted in
    // completed_.
    if (!cursor_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    fn_(ctx_, static_cast<int64_t>(c & 0xffffffffu), thread);
    *tasks = n;
    ++ran;
    c = cursor_.load(std::memory_order_acquire);
  }
  return ran;
}

void ThreadPool::worker_loop(int index, uint32_t seen) {
  for (;;) {
    const auto new_job = [&] { return stop_.load(std::memory_order_acquire) || job_of(cursor_.load()) != seen; };
    if (!spin_until(new_job, kSpinMicroseconds)) {
      std::unique_lock<std::mutex> l(m_);
      // Counted before the predicate is read (both sequentially consistent):
      // a caller that publishes after the read sees the sleeper and notifies
      // under m_, which it can take only once this thread waits.
      sleepers_.fetch_add(1);
      wake_.wait(l, new_job);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    const uint64_t c = cursor_.load(std::memory_order_acquire);
    seen = job_of(c);
    // job_threads_ belongs to job `seen` only if the cursor still names it
    // after the read; a stale value merely makes work() find nothing.
    if (index >= job_threads_.load(std::memory_order_relaxed)) continue;
    int64_t tasks = 0;
    const int64_t ran = work(seen, index, &tasks);
    if (ran > 0 && completed_.fetch_add(ran) + ran == tasks && caller_waits_.load()) {
      std::lock_guard<std::mutex> l(m_);
      done_.notify_all();
    }
  }
}

void ThreadPool::run(int64_t tasks, int max_threads, TaskFn fn, void* ctx) {
  if (tasks <= 0) return;
  // The cursor holds 32 bits of task index: larger jobs run in slices.
  constexpr int64_t kMaxSlice = int64_t{1} << 31;
  if (tasks > kMaxSlice) {
    struct Slice {
      TaskFn fn;
      void* ctx;
      int64_t base;
    } slice{fn, ctx, 0};
    for (; slice.base < tasks; slice.base += kMaxSlice)
      run(std::min(kMaxSlice, tasks - slice.base), max_threads,
          [](void* c, int64_t t, int th) {
            auto* s = static_cast<Slice*>(c);
            s->fn(s->ctx, s->base + t, th);
          },
          &slice);
    return;
  }
  const int threads = static_cast<int>(std::min<int64_t>({static_cast<int64_t>(max_threads),
                                                          static_cast<int64_t>(size()), tasks}));
  std::unique_lock<std::mutex> owner(busy_, std::try_to_lock);
  if (threads <= 1 || !owner.owns_lock()) {
    for (int64_t t = 0; t < tasks; ++t) fn(ctx, t, 0);
    return;
  }
  // No task of the previous job is running (its caller waited for them all),
  // but a worker may still be about to claim "one more" of its tasks with a
  // task count it read after the new one was stored here: closing the old
  // job first makes that claim's compare-exchange fail (the count is stored
  // with release, read with acquire, so the close is visible to it).
  const uint32_t previous = job_of(cursor_.load(std::memory_order_relaxed));
  cursor_.store(static_cast<uint64_t>(previous) << 32 | kClosed, std::memory_order_relaxed);
  fn_ = fn;
  ctx_ = ctx;
  tasks_.store(tasks, std::memory_order_release);
  job_threads_.store(threads, std::memory_order_relaxed);
  completed_.store(0, std::memory_order_relaxed);
  const uint32_t job = previous + 1;
  cursor_.store(static_cast<uint64_t>(job) << 32);  // sequentially consistent: see worker_loop
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> l(m_);
    wake_.notify_all();
  }
  int64_t unused = 0;
  const int64_t ran = work(job, 0, &unused);
  const int64_t before = completed_.fetch_add(ran);
  if (before + ran == tasks) return;
  const auto finished = [&] { return completed_.load(std::memory_order_acquire) == tasks; };
  if (spin_until(finished, kSpinMicroseconds)) return;
  std::unique_lock<std::mutex> l(m_);
  caller_waits_.store(true);
  done_.wait(l, finished);
  caller_waits_.store(false);
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
