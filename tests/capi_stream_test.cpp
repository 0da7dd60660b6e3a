// Streams of the C API: in-order execution, concurrency between streams,
// draining on destroy, and error reporting at synchronize. Uses the internal
// Task interface to put observable work on a stream.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
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

convbwd::capi::Stream* as_stream(aclrtStream s) { return static_cast<convbwd::capi::Stream*>(s); }

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
  convbwd::capi::Stream* def = convbwd::capi::resolve_stream(nullptr, "test");
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

}  // namespace
