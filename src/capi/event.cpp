// Events of acl/acl_rt.h. A record is a task in the stream's queue that
// stamps the event when the stream reaches it; a stream wait is a task that
// blocks its stream (not the host) until a given record is reached.
//
// Records are numbered per event, so "complete" means the latest record made
// before the question was asked has been reached, however many records are
// in flight. The state is shared with the queued tasks, so destroying an
// event whose record is still pending is safe.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <unordered_set>

#include "capi/capi.hpp"

namespace convbwd::capi {
namespace {

using Clock = std::chrono::steady_clock;

struct EventState {
  std::mutex mutex;
  std::condition_variable reached_cv;
  uint64_t recorded = 0;  // records issued
  uint64_t reached = 0;   // latest record its stream has run
  Clock::time_point stamp{};
};

struct Event {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

class RecordTask final : public Task {
 public:
  RecordTask(std::shared_ptr<EventState> s, uint64_t number) : state_(std::move(s)), number_(number) {}
  Error run() noexcept override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      // Two streams may race to an event's records: keep the latest number.
      if (number_ > state_->reached) {
        state_->reached = number_;
        state_->stamp = Clock::now();
      }
    }
    state_->reached_cv.notify_all();
    return {};
  }
  void release() noexcept override { delete this; }

 private:
  std::shared_ptr<EventState> state_;
  uint64_t number_;
};

class WaitTask final : public Task {
 public:
  WaitTask(std::shared_ptr<EventState> s, uint64_t number) : state_(std::move(s)), number_(number) {}
  Error run() noexcept override {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->reached_cv.wait(lock, [this] { return state_->reached >= number_; });
    return {};
  }
  void release() noexcept override { delete this; }

 private:
  std::shared_ptr<EventState> state_;
  uint64_t number_;
};

// Live events, so that a stale or foreign handle is an error rather than a
// use-after-free. Never destroyed (see the runtime in runtime.cpp).
struct EventRegistry {
  std::mutex mutex;
  std::unordered_set<Event*> live;
};

EventRegistry& registry() {
  static EventRegistry* const r = new EventRegistry;
  return *r;
}

// The state of a live event, shared so that it outlives a concurrent destroy.
std::shared_ptr<EventState> resolve(aclrtEvent handle, const char* caller, const char* param = "event") {
  if (handle == nullptr) {
    set_recent_error(std::string(caller) + ": " + param + " is null");
    return nullptr;
  }
  EventRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto* e = static_cast<Event*>(handle);
  if (r.live.count(e) == 0) {
    set_recent_error(std::string(caller) + ": " + param + " is not a live event from aclrtCreateEvent");
    return nullptr;
  }
  return e->state;
}

bool is_complete(EventState& s) {
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.reached >= s.recorded;
}

aclError create(aclrtEvent* event, const char* caller) {
  if (event == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": event is null");
  }
  try {
    auto e = std::make_unique<Event>();
    EventRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.live.insert(e.get());
    *event = e.release();
  } catch (const std::bad_alloc&) {
    return fail_acl(ACL_ERROR_BAD_ALLOC, std::string(caller) + ": out of memory");
  }
  return ACL_SUCCESS;
}

// Puts a RecordTask or WaitTask on the stream, or says why not.
template <class TaskType>
aclError enqueue_on(aclrtStream stream, std::shared_ptr<EventState> state, uint64_t number, const char* caller) {
  const std::shared_ptr<Stream> s = resolve_stream(stream, caller);
  if (s == nullptr) {
    return ACL_ERROR_INVALID_PARAM;
  }
  Task* task = nullptr;
  try {
    task = new TaskType(std::move(state), number);
  } catch (const std::bad_alloc&) {
    return fail_acl(ACL_ERROR_BAD_ALLOC, std::string(caller) + ": out of memory");
  }
  s->enqueue(task);
  return ACL_SUCCESS;
}

}  // namespace
}  // namespace convbwd::capi

using convbwd::capi::fail_acl;

aclError aclrtCreateEvent(aclrtEvent* event) { return convbwd::capi::create(event, "aclrtCreateEvent"); }

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  constexpr uint32_t kKnown = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE;
  if ((flag & ~kKnown) != 0) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: flag is " + std::to_string(flag) +
                                                 "; expected a combination of ACL_EVENT_SYNC (1), "
                                                 "ACL_EVENT_CAPTURE_STREAM_PROGRESS (2), ACL_EVENT_TIME_LINE (8)");
  }
  return convbwd::capi::create(event, "aclrtCreateEventWithFlag");
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  if (event == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: event is null");
  }
  auto& r = convbwd::capi::registry();
  auto* e = static_cast<convbwd::capi::Event*>(event);
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.live.erase(e) == 0) {
      return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: event is not a live event (already destroyed?)");
    }
  }
  delete e;  // queued records and waits hold the state
  return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  auto state = convbwd::capi::resolve(event, "aclrtRecordEvent");
  if (!state) {
    return ACL_ERROR_INVALID_PARAM;
  }
  uint64_t number = 0;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    number = ++state->recorded;
  }
  const aclError e =
      convbwd::capi::enqueue_on<convbwd::capi::RecordTask>(stream, state, number, "aclrtRecordEvent");
  if (e != ACL_SUCCESS) {
    // Nothing was queued: this record will never be reached, so withdraw it
    // (unless a later one was made meanwhile, which then stands).
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->recorded == number) --state->recorded;
  }
  return e;
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
  auto state = convbwd::capi::resolve(event, "aclrtResetEvent");
  if (!state) {
    return ACL_ERROR_INVALID_PARAM;
  }
  if (convbwd::capi::resolve_stream(stream, "aclrtResetEvent") == nullptr) {
    return ACL_ERROR_INVALID_PARAM;
  }
  // CANN asks the caller to reset only after the event's stream work is done;
  // forgetting pending records then returns the event to "never recorded".
  std::lock_guard<std::mutex> lock(state->mutex);
  state->recorded = state->reached;
  return ACL_SUCCESS;
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
  auto state = convbwd::capi::resolve(event, "aclrtQueryEvent");
  if (!state) {
    return ACL_ERROR_INVALID_PARAM;
  }
  if (status == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent: status is null");
  }
  *status = convbwd::capi::is_complete(*state) ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  auto state = convbwd::capi::resolve(event, "aclrtQueryEventStatus");
  if (!state) {
    return ACL_ERROR_INVALID_PARAM;
  }
  if (status == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is null");
  }
  *status = convbwd::capi::is_complete(*state) ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                               : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  auto state = convbwd::capi::resolve(event, "aclrtSynchronizeEvent");
  if (!state) {
    return ACL_ERROR_INVALID_PARAM;
  }
  std::unique_lock<std::mutex> lock(state->mutex);
  const uint64_t target = state->recorded;
  state->reached_cv.wait(lock, [&] { return state->reached >= target; });
  return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  auto state = convbwd::capi::resolve(event, "aclrtStreamWaitEvent");
  if (!state) {
    return ACL_ERROR_INVALID_PARAM;
  }
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    target = state->recorded;
  }
  return convbwd::capi::enqueue_on<convbwd::capi::WaitTask>(stream, state, target, "aclrtStreamWaitEvent");
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  if (ms == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is null");
  }
  auto start = convbwd::capi::resolve(startEvent, "aclrtEventElapsedTime", "startEvent");
  if (!start) {
    return ACL_ERROR_INVALID_PARAM;
  }
  auto end = convbwd::capi::resolve(endEvent, "aclrtEventElapsedTime", "endEvent");
  if (!end) {
    return ACL_ERROR_INVALID_PARAM;
  }
  convbwd::capi::Clock::time_point t0, t1;
  for (auto [state, t, name] : {std::tuple{start.get(), &t0, "startEvent"}, std::tuple{end.get(), &t1, "endEvent"}}) {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->recorded == 0 || state->reached < state->recorded) {
      return fail_acl(ACL_ERROR_INVALID_PARAM,
                      std::string("aclrtEventElapsedTime: ") + name +
                          (state->recorded == 0 ? " was never recorded" : " is not complete yet") +
                          "; record both events and synchronize first");
    }
    *t = state->stamp;
  }
  *ms = std::chrono::duration<float, std::milli>(t1 - t0).count();
  return ACL_SUCCESS;
}
