// Streams of the C API: in-order execution, concurrency between streams,
// draining on destroy, and error reporting at synchronize. Uses the internal
// Task interface to put observable work on a stream.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "capi/capi.hpp"
#include "capi/stream.hpp"

namespace {

using namespace std::chrono_literals;

// A task running a function; counts its releases so tests see that every
// task is released exactly once.
class FnTask final : public convbwd::capi::Task {
 public:
  FnTask(std::function<convbwd::Error()> f, std::atomic<int>* released) : f_(std::move(f)), released_(released) {}
  convbwd::Error run() noexcept override { return f_(); }
  void release() noexcept override {
    if (released_ != nullptr) ++*released_;
    delete this;
  }

 private:
  std::function<convbwd::Error()> f_;
  std::atomic<int>* released_;
};

std::shared_ptr<convbwd::capi::Stream> as_stream(aclrtStream s) { return convbwd::capi::resolve_stream(s, "test"); }

void enqueue(aclrtStream s, std::function<convbwd::Error()> f, std::atomic<int>* released = nullptr) {
  as_stream(s)->enqueue(new FnTask(std::move(f), released));
}

TEST(CapiStream, TasksRunInSubmissionOrder) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::vector<int> seen;  // touched only by the stream's thread until synchronize
  std::atomic<int> released{0};
  for (int i = 0; i < 2000; ++i) {
    enqueue(s, [&seen, i] {
      if (i % 500 == 0) std::this_thread::sleep_for(1ms);  // let the producer run ahead
      seen.push_back(i);
      return convbwd::Error{};
    }, &released);
  }
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  ASSERT_EQ(seen.size(), 2000u);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], i);
  EXPECT_EQ(released.load(), 2000);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

// synchronize() runs a task the stream's thread has not taken yet, on the
// calling thread. Several threads enqueueing and synchronizing on one stream
// must still see every task run once, one at a time, in enqueue order.
TEST(CapiStream, SynchronizingThreadsRunQueuedTasksInOrderOneAtATime) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::mutex enqueue_order;  // tickets in the order the tasks are enqueued
  int next_ticket = 0;
  std::vector<int> ran;  // appended by whichever thread runs a task
  std::atomic<int> active{0}, overlaps{0};
  std::atomic<int> released{0};
  constexpr int kThreads = 4, kTasksEach = 500;
  std::vector<std::thread> callers;
  for (int c = 0; c < kThreads; ++c) {
    callers.emplace_back([&] {
      for (int i = 0; i < kTasksEach; ++i) {
        {
          std::lock_guard<std::mutex> l(enqueue_order);
          const int ticket = next_ticket++;
          enqueue(s, [&, ticket] {
            if (active.fetch_add(1) != 0) ++overlaps;
            ran.push_back(ticket);
            active.fetch_sub(1);
            return convbwd::Error{};
          }, &released);
        }
        EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
      }
    });
  }
  for (auto& t : callers) t.join();
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(ran.size(), static_cast<size_t>(kThreads * kTasksEach));
  for (size_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i], static_cast<int>(i));
  EXPECT_EQ(released.load(), kThreads * kTasksEach);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

// The same path must be taken at all: a caller that synchronizes right
// after enqueueing finds its task before the stream's thread wakes (about
// 4 us here), so within a few tries a task runs on the calling thread.
TEST(CapiStream, SynchronizeRunsATaskTheStreamThreadHasNotTaken) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  const std::thread::id me = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int tries = 0;
  while (!on_caller.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);  // the stream's thread goes back to sleep
    enqueue(s, [&] {
      if (std::this_thread::get_id() == me) on_caller = true;
      return convbwd::Error{};
    });
    ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    ++tries;
  }
  EXPECT_TRUE(on_caller.load()) << "no task ran in synchronize() in " << tries << " tries";
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiStream, TwoStreamsRunConcurrently) {
  // Stream A's task waits for stream B's, which is enqueued later. If the
  // streams shared one thread, A's task would time out.
  aclrtStream a = nullptr, b = nullptr;
  ASSERT_EQ(aclrtCreateStream(&a), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&b), ACL_SUCCESS);
  std::atomic<bool> b_ran{false};
  enqueue(a, [&] {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!b_ran.load()) {
      if (std::chrono::steady_clock::now() > deadline)
        return convbwd::Error{convbwd::Status::runtime_error, "stream B never ran while A was busy"};
      std::this_thread::sleep_for(100us);
    }
    return convbwd::Error{};
  });
  std::this_thread::sleep_for(5ms);  // A is now blocked inside its task
  enqueue(b, [&] {
    b_ran = true;
    return convbwd::Error{};
  });
  EXPECT_EQ(aclrtSynchronizeStream(b), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(a), ACL_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_EQ(aclrtDestroyStream(a), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(b), ACL_SUCCESS);
}

TEST(CapiStream, DestroyingAStreamWithPendingWorkDrainsIt) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::atomic<int> ran{0}, released{0};
  for (int i = 0; i < 5; ++i) {
    enqueue(s, [&] {
      std::this_thread::sleep_for(10ms);
      ++ran;
      return convbwd::Error{};
    }, &released);
  }
  // Failures pending at destroy are dropped with the stream, not leaked.
  enqueue(s, [] { return convbwd::Error{convbwd::Status::runtime_error, "late"}; }, &released);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_EQ(ran.load(), 5);
  EXPECT_EQ(released.load(), 6);
}

TEST(CapiStream, SynchronizeReportsTheFirstErrorOnce) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::atomic<int> ran{0};
  enqueue(s, [] { return convbwd::Error{convbwd::Status::invalid_parameter, "first failure"}; });
  enqueue(s, [] { return convbwd::Error{convbwd::Status::runtime_error, "second failure"}; });
  enqueue(s, [&] {
    ++ran;  // work after a failure still runs: the queue does not stall
    return convbwd::Error{};
  });
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_ERROR_FAILURE);
  const std::string msg = aclGetRecentErrMsg();
  EXPECT_NE(msg.find("first failure"), std::string::npos) << msg;
  EXPECT_NE(msg.find("161002"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("second failure"), std::string::npos) << msg;
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS) << "an error is reported once";
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiStream, BadHandlesAreRefused) {
  EXPECT_EQ(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM);
  int not_a_stream = 0;
  EXPECT_EQ(aclrtSynchronizeStream(&not_a_stream), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("stream"), std::string::npos);
  EXPECT_EQ(aclrtDestroyStream(&not_a_stream), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDestroyStream(nullptr), ACL_ERROR_INVALID_PARAM);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_ERROR_INVALID_PARAM) << "destroying twice is refused, not a crash";
}

TEST(CapiStream, NullIsTheDefaultStreamAndFinalizeDrainsIt) {
  ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
  const std::shared_ptr<convbwd::capi::Stream> def = convbwd::capi::resolve_stream(nullptr, "test");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def, convbwd::capi::resolve_stream(nullptr, "test")) << "one default stream";
  std::atomic<int> ran{0};
  def->enqueue(new FnTask([&] {
    std::this_thread::sleep_for(10ms);
    ++ran;
    return convbwd::Error{};
  }, nullptr));
  EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(ran.load(), 1);
  def->enqueue(new FnTask([&] {
    std::this_thread::sleep_for(10ms);
    ++ran;
    return convbwd::Error{};
  }, nullptr));
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  EXPECT_EQ(ran.load(), 2);
}

TEST(CapiStream, ManyStreamsCreatedAndDestroyedFromManyThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0}, ran{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        aclrtStream s = nullptr;
        if (aclrtCreateStream(&s) != ACL_SUCCESS) {
          ++failures;
          continue;
        }
        enqueue(s, [&] {
          ++ran;
          return convbwd::Error{};
        });
        if (aclrtDestroyStream(s) != ACL_SUCCESS) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ran.load(), 100);
}

// Issue 18, item 3: resolve_stream returned a raw pointer after dropping
// the registry lock, so a destroy on one thread freed the stream under a
// synchronize or an enqueue on another (hangs, aborts in glibc's mutex code,
// TSan races). Every call now holds the stream it resolved. Here one thread
// destroys a busy stream while others synchronize it and enqueue on it: each
// call either works or says the handle is no longer live, and everything
// enqueued runs, before the destroy returns or, when enqueued by a call
// that resolved the stream in time, before that call's last reference goes.
TEST(CapiStream, DestroyWhileOtherThreadsSynchronizeAndEnqueue) {
  for (int round = 0; round < 20; ++round) {
    aclrtStream s = nullptr;
    ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
    std::atomic<int> queued{0}, ran{0}, unexpected{0};
    auto slow = [&] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      ++ran;
      return convbwd::Error{};
    };
    for (int i = 0; i < 4; ++i) {
      ++queued;
      enqueue(s, slow);
    }
    std::atomic<bool> destroyed{false};
    // Outlive every copy: the last one may run after its caller's loop ended.
    unsigned char src[64] = {}, dst[64] = {};
    std::vector<std::thread> users;
    for (int t = 0; t < 3; ++t)
      users.emplace_back([&, t] {
        while (!destroyed.load()) {
          aclError e = ACL_SUCCESS;
          if (t == 0) {
            e = aclrtSynchronizeStream(s);
          } else if (t == 1) {
            e = aclrtMemcpyAsync(dst, sizeof dst, src, sizeof src, ACL_MEMCPY_HOST_TO_HOST, s);
          } else if (const auto held = convbwd::capi::resolve_stream(s, "test")) {
            ++queued;
            held->enqueue(new FnTask([&] {
              ++ran;
              return convbwd::Error{};
            }, nullptr));
          }
          if (e != ACL_SUCCESS && e != ACL_ERROR_INVALID_PARAM) ++unexpected;
        }
        // The handle is dead for good once the destroy returned.
        if (aclrtSynchronizeStream(s) != ACL_ERROR_INVALID_PARAM) ++unexpected;
      });
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
    destroyed = true;
    for (auto& th : users) th.join();
    EXPECT_EQ(unexpected.load(), 0);
    // The last reference is gone: the stream's thread has drained and stopped.
    EXPECT_EQ(ran.load(), queued.load());
  }
}

// Destroyed handles stay refused whatever is created after them (the
// allocator hands a freed stream's address out again; handles are never
// reused).
TEST(CapiStream, StaleHandleStaysRefusedAfterNewStreams) {
  aclrtStream old = nullptr;
  ASSERT_EQ(aclrtCreateStream(&old), ACL_SUCCESS);
  ASSERT_EQ(aclrtDestroyStream(old), ACL_SUCCESS);
  std::vector<aclrtStream> fresh(8);
  for (aclrtStream& f : fresh) {
    ASSERT_EQ(aclrtCreateStream(&f), ACL_SUCCESS);
    EXPECT_NE(f, old);
  }
  EXPECT_EQ(aclrtSynchronizeStream(old), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("not a live stream"), std::string::npos);
  EXPECT_EQ(aclrtDestroyStream(old), ACL_ERROR_INVALID_PARAM);
  for (aclrtStream f : fresh) EXPECT_EQ(aclrtDestroyStream(f), ACL_SUCCESS);
}

// aclFinalize used to delete the default stream while another thread
// synchronized it. Now it drains the stream and drops its reference; a
// thread still in a call keeps it alive, and the next use of the default
// stream starts a new one.
TEST(CapiStream, FinalizeWhileOtherThreadsUseTheDefaultStream) {
  for (int round = 0; round < 10; ++round) {
    ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
    std::atomic<bool> stop{false};
    std::atomic<int> unexpected{0}, queued{0}, ran{0};
    std::vector<std::thread> users;
    for (int t = 0; t < 2; ++t)
      users.emplace_back([&, t] {
        while (!stop.load()) {
          if (t == 0) {
            if (aclrtSynchronizeStream(nullptr) != ACL_SUCCESS) ++unexpected;
          } else {
            ++queued;
            enqueue(nullptr, [&] {
              ++ran;
              return convbwd::Error{};
            });
          }
        }
      });
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
    stop = true;
    for (auto& th : users) th.join();
    EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    EXPECT_EQ(unexpected.load(), 0);
    // Work on the finalized stream drained when its last holder let go;
    // work after it went to the new default stream, synchronized above.
    EXPECT_EQ(ran.load(), queued.load());
  }
  // Leave the runtime as the other tests expect it: not initialized.
}

// synchronize() waits for the work enqueued before it, not for an empty
// queue: waiting for the queue to empty never ended while another thread
// kept enqueueing (the destroy test above starved that way).
TEST(CapiStream, SynchronizeEndsWhileAnotherThreadKeepsEnqueueing) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::atomic<bool> stop{false};
  std::atomic<int> ran{0};
  std::thread producer([&] {
    // Always some work queued, never much (so the test stays short).
    for (int queued = 0; !stop.load();) {
      if (queued - ran.load() >= 20) {
        std::this_thread::yield();
        continue;
      }
      ++queued;
      enqueue(s, [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        ++ran;
        return convbwd::Error{};
      });
    }
  });
  while (ran.load() < 3) std::this_thread::yield();
  std::atomic<bool> synced{false};
  std::thread waiter([&] {
    EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    synced = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!synced.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(synced.load()) << "synchronize did not return while work kept arriving";
  stop = true;
  producer.join();
  waiter.join();
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

}  // namespace
