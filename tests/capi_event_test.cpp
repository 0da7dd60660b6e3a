// Contexts, events and device synchronization of the C API (acl/acl_rt.h):
// the calls older CANN samples make around the operator. Streams are gated
// with internal tasks, so "not yet" is observed while a stream is provably
// blocked, and "done" after it is released.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "acl/acl.h"
#include "aclnnop/level2/aclnn_convolution_backward.h"  // the older include path compiles
#include "capi/capi.hpp"
#include "capi/stream.hpp"

namespace {

using namespace std::chrono_literals;

// A task that blocks its stream until the gate opens, then runs `after`.
class GateTask final : public convbwd::capi::Task {
 public:
  GateTask(std::shared_future<void> gate, std::function<void()> after)
      : gate_(std::move(gate)), after_(std::move(after)) {}
  convbwd::Error run() noexcept override {
    gate_.wait();
    if (after_) after_();
    return {};
  }
  void release() noexcept override { delete this; }

 private:
  std::shared_future<void> gate_;
  std::function<void()> after_;
};

void enqueue(aclrtStream s, std::shared_future<void> gate, std::function<void()> after = {}) {
  const std::shared_ptr<convbwd::capi::Stream> stream = convbwd::capi::resolve_stream(s, "test");
  ASSERT_NE(stream, nullptr);
  stream->enqueue(new GateTask(std::move(gate), std::move(after)));
}

std::shared_future<void> open_gate() {
  std::promise<void> p;
  p.set_value();
  return p.get_future().share();
}

bool recorded_complete(aclrtEvent e) {
  aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  EXPECT_EQ(aclrtQueryEventStatus(e, &st), ACL_SUCCESS);
  aclrtEventStatus old = ACL_EVENT_STATUS_RESERVED;
  EXPECT_EQ(aclrtQueryEvent(e, &old), ACL_SUCCESS);
  EXPECT_EQ(old == ACL_EVENT_STATUS_COMPLETE, st == ACL_EVENT_RECORDED_STATUS_COMPLETE) << "the two queries disagree";
  return st == ACL_EVENT_RECORDED_STATUS_COMPLETE;
}

std::string recent() { return aclGetRecentErrMsg(); }

TEST(CapiContext, CreateSwitchDestroy) {
  std::thread([] {  // a fresh thread: no device, no context yet
    aclrtContext c = nullptr;
    EXPECT_EQ(aclrtGetCurrentContext(&c), ACL_ERROR_INVALID_DEVICE);
    EXPECT_NE(recent().find("aclrtSetDevice"), std::string::npos) << recent();
    EXPECT_EQ(aclrtCreateContext(nullptr, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtCreateContext(&c, 1), ACL_ERROR_INVALID_DEVICE);
    EXPECT_NE(recent().find("deviceId is 1"), std::string::npos) << recent();

    aclrtContext a = nullptr, b = nullptr, cur = nullptr;
    ASSERT_EQ(aclrtCreateContext(&a, 0), ACL_SUCCESS);
    int32_t dev = -1;
    EXPECT_EQ(aclrtGetDevice(&dev), ACL_SUCCESS);
    EXPECT_EQ(dev, 0);
    ASSERT_EQ(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    EXPECT_EQ(cur, a) << "a created context becomes current";
    ASSERT_EQ(aclrtCreateContext(&b, 0), ACL_SUCCESS);
    EXPECT_NE(a, b);
    ASSERT_EQ(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    EXPECT_EQ(cur, b);
    ASSERT_EQ(aclrtSetCurrentContext(a), ACL_SUCCESS);
    ASSERT_EQ(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    EXPECT_EQ(cur, a);

    EXPECT_EQ(aclrtDestroyContext(a), ACL_SUCCESS);
    EXPECT_EQ(aclrtDestroyContext(a), ACL_ERROR_INVALID_PARAM) << "a second destroy is refused";
    EXPECT_NE(recent().find("not a live context"), std::string::npos) << recent();
    EXPECT_EQ(aclrtSetCurrentContext(a), ACL_ERROR_INVALID_PARAM);
    // The device stays set: the thread falls back to the default context.
    ASSERT_EQ(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    EXPECT_NE(cur, a);
    EXPECT_NE(cur, b);
    EXPECT_EQ(aclrtDestroyContext(cur), ACL_ERROR_INVALID_PARAM) << "the default context cannot be destroyed";
    EXPECT_NE(recent().find("default context"), std::string::npos) << recent();
    EXPECT_EQ(aclrtSetCurrentContext(cur), ACL_SUCCESS) << "the default context can be made current again";
    EXPECT_EQ(aclrtDestroyContext(b), ACL_SUCCESS);
    EXPECT_EQ(aclrtDestroyContext(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtSetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_EQ(aclrtGetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM);
  }).join();
}

TEST(CapiContext, SetDeviceGivesTheDefaultContext) {
  std::thread([] {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtContext d1 = nullptr;
    ASSERT_EQ(aclrtGetCurrentContext(&d1), ACL_SUCCESS);
    aclrtContext d2 = nullptr;
    std::thread([&] {
      ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
      ASSERT_EQ(aclrtGetCurrentContext(&d2), ACL_SUCCESS);
    }).join();
    EXPECT_EQ(d1, d2) << "every thread's default context of device 0 is the same one";
    EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
  }).join();
}

TEST(CapiRuntime, RunModeIsHost) {
  aclrtRunMode mode = ACL_DEVICE;
  ASSERT_EQ(aclrtGetRunMode(&mode), ACL_SUCCESS);
  EXPECT_EQ(mode, ACL_HOST);
  EXPECT_EQ(aclrtGetRunMode(nullptr), ACL_ERROR_INVALID_PARAM);
}

TEST(CapiEvent, RecordCompletesWhenTheStreamReachesIt) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  aclrtEvent e = nullptr;
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  EXPECT_TRUE(recorded_complete(e)) << "a never-recorded event is complete";
  EXPECT_EQ(aclrtSynchronizeEvent(e), ACL_SUCCESS) << "and synchronizing on it returns at once";

  std::promise<void> gate;
  enqueue(s, gate.get_future().share());
  ASSERT_EQ(aclrtRecordEvent(e, s), ACL_SUCCESS);
  EXPECT_FALSE(recorded_complete(e)) << "the stream is blocked before the record";
  std::atomic<bool> synced{false};
  std::thread waiter([&] {
    EXPECT_EQ(aclrtSynchronizeEvent(e), ACL_SUCCESS);
    synced = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(synced.load()) << "aclrtSynchronizeEvent returned before the record was reached";
  gate.set_value();
  waiter.join();
  EXPECT_TRUE(synced.load());
  EXPECT_TRUE(recorded_complete(e));

  // Reset returns a pending event to "never recorded".
  std::promise<void> gate2;
  enqueue(s, gate2.get_future().share());
  ASSERT_EQ(aclrtRecordEvent(e, s), ACL_SUCCESS);
  EXPECT_FALSE(recorded_complete(e));
  EXPECT_EQ(aclrtResetEvent(e, s), ACL_SUCCESS);
  EXPECT_TRUE(recorded_complete(e));
  gate2.set_value();
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyEvent(e), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiEvent, StreamWaitsForAnotherStreamsRecord) {
  aclrtStream a = nullptr, b = nullptr;
  ASSERT_EQ(aclrtCreateStream(&a), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&b), ACL_SUCCESS);
  aclrtEvent e = nullptr;
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  std::promise<void> gate;
  std::atomic<int> order{0}, a_done_at{-1}, b_done_at{-1};
  enqueue(a, gate.get_future().share(), [&] { a_done_at = order++; });
  ASSERT_EQ(aclrtRecordEvent(e, a), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(b, e), ACL_SUCCESS);
  enqueue(b, open_gate(), [&] { b_done_at = order++; });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(b_done_at.load(), -1) << "stream b ran past its wait while a's record was pending";
  gate.set_value();
  ASSERT_EQ(aclrtSynchronizeStream(b), ACL_SUCCESS);
  EXPECT_EQ(a_done_at.load(), 0);
  EXPECT_EQ(b_done_at.load(), 1);

  // A wait on a never-recorded event does not block.
  aclrtEvent fresh = nullptr;
  ASSERT_EQ(aclrtCreateEvent(&fresh), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(b, fresh), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(b), ACL_SUCCESS);
  for (aclrtEvent x : {e, fresh}) EXPECT_EQ(aclrtDestroyEvent(x), ACL_SUCCESS);
  for (aclrtStream x : {a, b}) EXPECT_EQ(aclrtDestroyStream(x), ACL_SUCCESS);
}

TEST(CapiEvent, ElapsedTimeBetweenRecords) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  aclrtEvent start = nullptr, end = nullptr;
  ASSERT_EQ(aclrtCreateEventWithFlag(&start, ACL_EVENT_TIME_LINE), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEvent(&end), ACL_SUCCESS);
  float ms = -1;
  EXPECT_EQ(aclrtEventElapsedTime(&ms, start, end), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("startEvent was never recorded"), std::string::npos) << recent();
  ASSERT_EQ(aclrtRecordEvent(start, s), ACL_SUCCESS);
  enqueue(s, open_gate(), [] { std::this_thread::sleep_for(30ms); });
  ASSERT_EQ(aclrtRecordEvent(end, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeEvent(end), ACL_SUCCESS);
  ASSERT_EQ(aclrtEventElapsedTime(&ms, start, end), ACL_SUCCESS);
  EXPECT_GE(ms, 29.0f) << "the two records straddle a 30 ms task";
  EXPECT_EQ(ms, ms);
  EXPECT_EQ(aclrtEventElapsedTime(nullptr, start, end), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtEventElapsedTime(&ms, start, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("endEvent is null"), std::string::npos) << recent();
  for (aclrtEvent x : {start, end}) EXPECT_EQ(aclrtDestroyEvent(x), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiEvent, DestroyWithARecordPendingIsSafe) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  aclrtEvent e = nullptr;
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  std::promise<void> gate;
  enqueue(s, gate.get_future().share());
  ASSERT_EQ(aclrtRecordEvent(e, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(s, e), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyEvent(e), ACL_SUCCESS);  // the queued record and wait keep its state (ASan checks)
  gate.set_value();
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiEvent, BadHandlesAndFlagsAreRefusedByName) {
  aclrtEvent e = nullptr;
  EXPECT_EQ(aclrtCreateEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtCreateEventWithFlag(&e, 0x100), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("flag is 256"), std::string::npos) << recent();
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  int not_an_event = 0;
  EXPECT_EQ(aclrtRecordEvent(&not_an_event, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("not a live event"), std::string::npos) << recent();
  EXPECT_EQ(aclrtRecordEvent(nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("event is null"), std::string::npos) << recent();
  EXPECT_EQ(aclrtQueryEventStatus(e, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtQueryEvent(e, nullptr), ACL_ERROR_INVALID_PARAM);
  // A record on a dead stream is refused and withdrawn: the event stays complete.
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  ASSERT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtRecordEvent(e, s), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("stream"), std::string::npos) << recent();
  EXPECT_TRUE(recorded_complete(e));
  EXPECT_EQ(aclrtStreamWaitEvent(s, e), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSynchronizeEvent(e), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyEvent(e), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyEvent(e), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSynchronizeEvent(e), ACL_ERROR_INVALID_PARAM);
}

TEST(CapiDevice, SynchronizeDeviceWaitsForEveryStream) {
  aclrtStream a = nullptr;
  ASSERT_EQ(aclrtCreateStream(&a), ACL_SUCCESS);
  std::promise<void> gate_a, gate_default;
  std::atomic<int> ran{0};
  enqueue(a, gate_a.get_future().share(), [&] { ++ran; });
  enqueue(nullptr, gate_default.get_future().share(), [&] { ++ran; });
  std::atomic<bool> synced{false};
  std::thread waiter([&] {
    EXPECT_EQ(aclrtSynchronizeDevice(), ACL_SUCCESS);
    synced = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(synced.load());
  gate_a.set_value();
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(synced.load()) << "returned while the default stream was still busy";
  gate_default.set_value();
  waiter.join();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(aclrtSynchronizeDevice(), ACL_SUCCESS) << "an idle device returns at once";
  EXPECT_EQ(aclrtDestroyStream(a), ACL_SUCCESS);
}

}  // namespace
