#include "capi/stream.hpp"

#include <utility>

namespace convbwd::capi {

Stream::Stream() : thread_([this] { serve(); }) {}

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
    std::lock_guard<std::mutex> lock(mutex_);
    if (tail_ != nullptr) {
      tail_->next_ = task;
    } else {
      head_ = task;
    }
    tail_ = task;
  }
  work_ready_.notify_one();
}

Error Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return head_ == nullptr && !running_; });
  return std::exchange(first_error_, Error{});
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
    running_ = true;
    lock.unlock();
    Error error = task->run();
    task->release();
    lock.lock();
    running_ = false;
    if (error && !first_error_) {
      first_error_ = std::move(error);
    }
    if (head_ == nullptr) {
      idle_.notify_all();
    }
  }
}

}  // namespace convbwd::capi
