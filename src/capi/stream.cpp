#include "capi/stream.hpp"

#include <utility>

namespace convbwd::capi {
namespace {

// Tasks enqueued on any stream and not yet released: the device is idle at 0.
// Never destroyed, like the runtime: stream threads may outlive static
// destructors.
struct DeviceActivity {
  std::mutex mutex;
  std::condition_variable idle;
  int64_t pending = 0;
};

DeviceActivity& device_activity() {
  static DeviceActivity* const d = new DeviceActivity;
  return *d;
}

}  // namespace

void Stream::wait_until_all_idle() {
  DeviceActivity& d = device_activity();
  std::unique_lock<std::mutex> lock(d.mutex);
  d.idle.wait(lock, [&d] { return d.pending == 0; });
}

// Touches the device-wide counter first, so that enqueue() never allocates it.
Stream::Stream() : thread_((device_activity(), [this] { serve(); })) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  // serve() only returns once the queue is empty, so pending work still runs
  // and its executors are released: destroying a busy stream loses nothing.
  thread_.join();
}

void Stream::enqueue(Task* task) noexcept {
  task->next_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(device_activity().mutex);
    ++device_activity().pending;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tail_ != nullptr) {
      tail_->next_ = task;
    } else {
      head_ = task;
    }
    tail_ = task;
    ++enqueued_;
  }
  work_ready_.notify_one();
}

// Waits for the tasks enqueued so far only: waiting for an empty queue
// never ended while another thread kept enqueueing.
//
// A task not yet taken by the stream's thread is run here, by the caller
// (in order: one task runs at a time, always the head). "Launch, then
// synchronize" is the common pattern, and the stream's thread is then often
// still waking up: under a hypervisor a halted vCPU's wake-up has been
// measured at 3.5 ms now and then, and the caller would wait for it and
// again for the wake-up that tells it the task is done.
Error Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = enqueued_;
  while (completed_ < target) {
    if (head_ != nullptr && !running_) {
      run_head(lock, /*helping=*/true);
    } else {
      idle_.wait(lock);
    }
  }
  return std::exchange(first_error_, Error{});
}

void Stream::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = enqueued_;
  idle_.wait(lock, [this, target] { return completed_ >= target; });
}

void Stream::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return !running_ && (head_ != nullptr || stopping_); });
    if (head_ == nullptr) {
      return;  // stopping, and nothing left to drain
    }
    run_head(lock, /*helping=*/false);
  }
}

void Stream::run_head(std::unique_lock<std::mutex>& lock, bool helping) {
  Task* task = head_;
  head_ = task->next_;
  if (head_ == nullptr) {
    tail_ = nullptr;
  }
  running_ = true;
  lock.unlock();
  Error error = task->run();
  task->release();
  {
    DeviceActivity& d = device_activity();
    std::lock_guard<std::mutex> device_lock(d.mutex);
    if (--d.pending == 0) d.idle.notify_all();
  }
  lock.lock();
  running_ = false;
  ++completed_;
  if (error && !first_error_) {
    first_error_ = std::move(error);
  }
  idle_.notify_all();
  // The stream's thread skips the queue while a synchronizing caller runs a
  // task; it is told when that caller is done (it may also be stopping).
  if (helping && (head_ != nullptr || stopping_)) work_ready_.notify_one();
}

}  // namespace convbwd::capi
