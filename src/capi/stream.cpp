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
Error Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = enqueued_;
  idle_.wait(lock, [this, target] { return completed_ >= target; });
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
    work_ready_.wait(lock, [this] { return head_ != nullptr || stopping_; });
    if (head_ == nullptr) {
      return;  // stopping, and nothing left to drain
    }
    Task* task = head_;
    head_ = task->next_;
    if (head_ == nullptr) {
      tail_ = nullptr;
    }
    lock.unlock();
    Error error = task->run();
    task->release();
    {
      DeviceActivity& d = device_activity();
      std::lock_guard<std::mutex> device_lock(d.mutex);
      if (--d.pending == 0) d.idle.notify_all();
    }
    lock.lock();
    ++completed_;
    if (error && !first_error_) {
      first_error_ = std::move(error);
    }
    idle_.notify_all();
  }
}

}  // namespace convbwd::capi
