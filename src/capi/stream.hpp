// An in-order asynchronous work queue served by one host thread: the CPU
// stand-in for a device stream.
//
// The queue is intrusive: every Task carries its own `next` link, so that
// enqueueing never allocates (an operator's executor is itself the node).
// Work runs in submission order, one task at a time: on the stream's thread,
// or on a thread that synchronizes before the stream's thread took it. The
// first failure since the last synchronize() is kept and reported there, as
// a device stream reports asynchronous errors at the next synchronization.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "convbwd/convbwd.hpp"

namespace convbwd::capi {

class Task {
 public:
  Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  // Does the work. Runs on the stream's thread.
  virtual Error run() noexcept = 0;
  // Called once after run(); the task may delete itself here.
  virtual void release() noexcept = 0;

 protected:
  ~Task() = default;

 private:
  friend class Stream;
  Task* next_ = nullptr;
};

class Stream {
 public:
  Stream();
  // Drains the pending work, then stops the thread.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Takes the task; it is released after it runs. Never allocates.
  void enqueue(Task* task) noexcept;
  // Waits until every task enqueued before the call has run. Returns the first
  // error since the previous synchronize() and forgets it.
  Error synchronize();
  // Waits like synchronize(), but leaves the error for a later synchronize()
  // (aclrtDestroyStream, aclFinalize: another thread may still sync on it).
  void drain();
  // Waits until no stream of the process has queued or running work
  // (aclrtSynchronizeDevice). Errors stay with their streams.
  static void wait_until_all_idle();

 private:
  void serve();
  // Runs the head of the queue; `lock` holds mutex_ on entry and on return.
  // `helping`: called by a synchronizing thread, not the stream's own.
  void run_head(std::unique_lock<std::mutex>& lock, bool helping);

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  Task* head_ = nullptr;
  Task* tail_ = nullptr;
  // Tasks enqueued and run so far: synchronize() waits for the count it saw.
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stopping_ = false;
  bool running_ = false;  // a task is running (on the stream's thread or in synchronize())
  Error first_error_;
  std::thread thread_;  // last: starts after the state above exists
};

}  // namespace convbwd::capi
