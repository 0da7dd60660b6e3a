// The host runtime behind acl/acl.h: init, the device, streams, memory,
// system parameters and the recent error message.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "capi/capi.hpp"

namespace convbwd::capi {
namespace {

// Device memory is host memory with the alignment of a cache line and of the
// widest vector register (AVX-512), so kernels may use aligned loads.
constexpr size_t kAlignment = 64;

// Process-wide state. Deliberately never destroyed: a stream's worker may still
// be running when static destructors of other translation units (the core's
// thread pool, say) have already run, so tearing down at exit would be a
// use-after-destroy. Live objects stay reachable, so leak checkers stay quiet.
struct Runtime {
  std::mutex mutex;
  bool initialized = false;
  // Every call that resolved a stream holds a reference until it returns,
  // so destroying a stream (or aclFinalize's default stream) while another
  // thread synchronizes or enqueues on it only drops the registry's
  // reference: the last holder stops the stream's thread.
  std::shared_ptr<Stream> default_stream;
  // Live streams by handle. Handles are numbers that are never reused (not
  // addresses, which the allocator hands out again), so a destroyed stream's
  // handle stays refused whatever is created after it.
  std::unordered_map<aclrtStream, std::shared_ptr<Stream>> streams;
  uintptr_t last_handle = 0;
  std::unordered_set<aclOpExecutor*> executors;
  std::unordered_map<void*, size_t> allocations;
  std::atomic<int64_t> ctx_deterministic{0};
  std::atomic<int64_t> process_deterministic{0};
};

Runtime& runtime() {
  static Runtime* const r = new Runtime;
  return *r;
}

thread_local std::string t_recent_error;
thread_local int32_t t_device = -1;

std::string kind_list() { return "0 (HOST_TO_HOST) to 4 (DEFAULT)"; }

aclError check_opt(aclSysParamOpt opt, const char* caller) {
  if (opt != ACL_OPT_DETERMINISTIC) {
    return fail_acl(ACL_ERROR_INVALID_PARAM,
                    std::string(caller) + ": opt is " + std::to_string(static_cast<int>(opt)) +
                        "; expected ACL_OPT_DETERMINISTIC (0)");
  }
  return ACL_SUCCESS;
}

aclError set_opt(std::atomic<int64_t>& slot, aclSysParamOpt opt, int64_t value, const char* caller) {
  if (aclError e = check_opt(opt, caller)) {
    return e;
  }
  if (value != 0 && value != 1) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) +
                                                 ": ACL_OPT_DETERMINISTIC value is " +
                                                 std::to_string(value) + "; expected 0 or 1");
  }
  slot.store(value);
  return ACL_SUCCESS;
}

aclError get_opt(const std::atomic<int64_t>& slot, aclSysParamOpt opt, int64_t* value,
                 const char* caller) {
  if (value == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": value is null");
  }
  if (aclError e = check_opt(opt, caller)) {
    return e;
  }
  *value = slot.load();
  return ACL_SUCCESS;
}

aclError allocate(void** ptr, size_t size, const char* caller) {
  if (ptr == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": the pointer out-parameter is null");
  }
  if (size == 0) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": size is 0; expected at least 1 byte");
  }
  // aligned_alloc wants a multiple of the alignment; rounding up must not wrap.
  if (size > SIZE_MAX - (kAlignment - 1)) {
    return fail_acl(ACL_ERROR_BAD_ALLOC, std::string(caller) + ": cannot allocate " +
                                             std::to_string(size) + " bytes");
  }
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) {
    return fail_acl(ACL_ERROR_BAD_ALLOC, std::string(caller) + ": cannot allocate " +
                                             std::to_string(size) + " bytes");
  }
  try {
    Runtime& r = runtime();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.allocations.emplace(p, size);
  } catch (const std::bad_alloc&) {
    std::free(p);
    return fail_acl(ACL_ERROR_BAD_ALLOC, std::string(caller) + ": out of memory");
  }
  *ptr = p;
  return ACL_SUCCESS;
}

aclError release_memory(void* ptr, const char* caller) {
  if (ptr == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": pointer is null");
  }
  Runtime& r = runtime();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    // Only what we allocated: freeing anything else would corrupt the heap.
    if (r.allocations.erase(ptr) == 0) {
      return fail_acl(ACL_ERROR_INVALID_PARAM,
                      std::string(caller) + ": pointer was not returned by aclrtMalloc, or is already freed");
    }
  }
  std::free(ptr);
  return ACL_SUCCESS;
}

// A copy or fill queued on a stream. Unlike an executor it is allocated per
// call: the C API has no handle the caller could lend us as the node.
class MemoryTask final : public Task {
 public:
  MemoryTask(void* dst, const void* src, int fill, size_t count) : dst_(dst), src_(src), fill_(fill), count_(count) {}
  Error run() noexcept override {
    if (src_ != nullptr) {
      std::memmove(dst_, src_, count_);
    } else {
      std::memset(dst_, fill_, count_);
    }
    return Error{};
  }
  void release() noexcept override { delete this; }

 private:
  void* dst_;
  const void* src_;  // null: a fill
  int fill_;
  size_t count_;
};

aclError check_memcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                      const char* caller) {
  const auto k = static_cast<int>(kind);
  if (k < ACL_MEMCPY_HOST_TO_HOST || k > ACL_MEMCPY_DEFAULT) {
    return fail_acl(ACL_ERROR_INVALID_PARAM,
                    std::string(caller) + ": kind is " + std::to_string(k) + "; expected " + kind_list());
  }
  if (count > destMax) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": count is " + std::to_string(count) +
                                                 " bytes; expected at most destMax (" + std::to_string(destMax) + ")");
  }
  if (count > 0 && (dst == nullptr || src == nullptr)) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": " + (dst == nullptr ? "dst" : "src") + " is null");
  }
  return ACL_SUCCESS;
}

aclError check_memset(void* devPtr, size_t maxCount, size_t count, const char* caller) {
  if (count > maxCount) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": count is " + std::to_string(count) +
                                                 " bytes; expected at most maxCount (" + std::to_string(maxCount) +
                                                 ")");
  }
  if (count > 0 && devPtr == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, std::string(caller) + ": devPtr is null");
  }
  return ACL_SUCCESS;
}

aclError enqueue_memory(void* dst, const void* src, int fill, size_t count, aclrtStream stream, const char* caller) {
  if (count == 0) {
    return ACL_SUCCESS;
  }
  const std::shared_ptr<Stream> s = resolve_stream(stream, caller);
  if (s == nullptr) {
    return ACL_ERROR_INVALID_PARAM;
  }
  auto* task = new (std::nothrow) MemoryTask(dst, src, fill, count);
  if (task == nullptr) {
    return fail_acl(ACL_ERROR_BAD_ALLOC, std::string(caller) + ": out of memory");
  }
  s->enqueue(task);
  return ACL_SUCCESS;
}

}  // namespace

void set_recent_error(std::string message) { t_recent_error = std::move(message); }
const std::string& recent_error() { return t_recent_error; }

aclnnStatus fail(aclnnStatus status, std::string message) {
  set_recent_error(std::move(message));
  return status;
}

aclError fail_acl(aclError code, std::string message) {
  set_recent_error(std::move(message));
  return code;
}

int32_t thread_device() { return t_device; }
void set_thread_device(int32_t device_id) { t_device = device_id; }

aclError check_device(int32_t device_id, const char* caller) {
  if (device_id != 0) {
    return fail_acl(ACL_ERROR_INVALID_DEVICE,
                    std::string(caller) + ": deviceId is " + std::to_string(device_id) +
                        "; expected 0 (the host is the only device)");
  }
  return ACL_SUCCESS;
}

std::shared_ptr<Stream> resolve_stream(aclrtStream handle, std::string_view caller) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (handle == nullptr) {
    if (r.default_stream == nullptr) {
      try {
        r.default_stream = std::make_shared<Stream>();
      } catch (const std::exception& e) {  // bad_alloc, or std::thread's system_error
        set_recent_error(std::string(caller) + ": cannot start the default stream: " + e.what());
        return nullptr;
      }
    }
    return r.default_stream;
  }
  const auto it = r.streams.find(handle);
  if (it == r.streams.end()) {
    set_recent_error(std::string(caller) + ": stream is not a live stream from aclrtCreateStream");
    return nullptr;
  }
  return it->second;
}

void register_executor(aclOpExecutor* e) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.executors.insert(e);
}

std::optional<size_t> live_executor_workspace(aclOpExecutor* e) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.executors.count(e) == 0) {
    return std::nullopt;
  }
  return e->plan.workspace_size();
}

std::optional<Error> check_live_executor(aclOpExecutor* e, const void* workspace, size_t workspace_bytes) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.executors.count(e) == 0) {
    return std::nullopt;
  }
  return e->plan.check(e->buffers, workspace, workspace_bytes);
}

bool claim_executor(aclOpExecutor* e) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.executors.erase(e) != 0;
}

}  // namespace convbwd::capi

using convbwd::capi::fail_acl;
using convbwd::capi::runtime;

extern "C" {

aclError aclInit(const char* configPath) {
  // CANN reads a JSON of options here; there is nothing to configure on a CPU,
  // but a path that cannot be read is still a caller's mistake worth reporting.
  if (configPath != nullptr && configPath[0] != '\0') {
    std::FILE* f = std::fopen(configPath, "rb");
    if (f == nullptr) {
      return fail_acl(ACL_ERROR_INVALID_PARAM,
                      std::string("aclInit: cannot read configPath '") + configPath + "'");
    }
    std::fclose(f);
  }
  auto& r = runtime();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.initialized) {
    return fail_acl(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized; call aclFinalize first");
  }
  r.initialized = true;
  return ACL_SUCCESS;
}

aclError aclFinalize(void) {
  auto& r = runtime();
  std::shared_ptr<convbwd::capi::Stream> default_stream;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.initialized) {
      return fail_acl(ACL_ERROR_UNINITIALIZE, "aclFinalize: aclInit was not called");
    }
    r.initialized = false;
    default_stream = std::exchange(r.default_stream, nullptr);
  }
  // Drains outside the lock (its tasks may need it); a thread still using
  // the stream keeps it alive until that call returns.
  if (default_stream) default_stream->drain();
  return ACL_SUCCESS;
}

const char* aclGetRecentErrMsg(void) { return convbwd::capi::recent_error().c_str(); }

aclError aclrtSetDevice(int32_t deviceId) {
  if (aclError e = convbwd::capi::check_device(deviceId, "aclrtSetDevice")) {
    return e;
  }
  convbwd::capi::set_thread_device(deviceId);
  return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
  if (aclError e = convbwd::capi::check_device(deviceId, "aclrtResetDevice")) {
    return e;
  }
  convbwd::capi::set_thread_device(-1);
  return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t* deviceId) {
  if (deviceId == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is null");
  }
  if (convbwd::capi::thread_device() < 0) {
    return fail_acl(ACL_ERROR_INVALID_DEVICE,
                    "aclrtGetDevice: no device is set on this thread; call aclrtSetDevice(0)");
  }
  *deviceId = convbwd::capi::thread_device();
  return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t* count) {
  if (count == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is null");
  }
  *count = 1;
  return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
  if (stream == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is null");
  }
  try {
    auto s = std::make_shared<convbwd::capi::Stream>();
    auto& r = runtime();
    std::lock_guard<std::mutex> lock(r.mutex);
    // Steps of 16 from a base that no allocation uses: a handle never
    // equals a stream's address, so stale code that casts one is caught.
    const auto handle = reinterpret_cast<aclrtStream>(0x5000 + 16 * ++r.last_handle);
    r.streams.emplace(handle, std::move(s));
    *stream = handle;
  } catch (const std::exception& e) {  // bad_alloc, or std::thread's system_error
    return fail_acl(ACL_ERROR_BAD_ALLOC, std::string("aclrtCreateStream: ") + e.what());
  }
  return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
  if (stream == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: stream is null");
  }
  std::shared_ptr<convbwd::capi::Stream> s;
  {
    auto& r = runtime();
    std::lock_guard<std::mutex> lock(r.mutex);
    // Forget it first, so no new work can find it while it drains.
    const auto it = r.streams.find(stream);
    if (it == r.streams.end()) {
      return fail_acl(ACL_ERROR_INVALID_PARAM,
                      "aclrtDestroyStream: stream is not a live stream (already destroyed?)");
    }
    s = std::move(it->second);
    r.streams.erase(it);
  }
  // Work queued before the call has run when it returns. Calls that
  // resolved the stream earlier still hold it; the last one stops it.
  s->drain();
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  const std::shared_ptr<convbwd::capi::Stream> s = convbwd::capi::resolve_stream(stream, "aclrtSynchronizeStream");
  if (s == nullptr) {
    return ACL_ERROR_INVALID_PARAM;
  }
  convbwd::Error error = s->synchronize();
  if (error) {
    return fail_acl(ACL_ERROR_FAILURE,
                    "aclrtSynchronizeStream: work on the stream failed with status " +
                        std::to_string(static_cast<int32_t>(error.status)) + ": " + error.message);
  }
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice() {
  convbwd::capi::Stream::wait_until_all_idle();
  return ACL_SUCCESS;
}

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  if (runMode == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is null");
  }
  *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy /*policy: one kind of host memory*/) {
  return convbwd::capi::allocate(devPtr, size, "aclrtMalloc");
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  return convbwd::capi::allocate(hostPtr, size, "aclrtMallocHost");
}

aclError aclrtFree(void* devPtr) { return convbwd::capi::release_memory(devPtr, "aclrtFree"); }

aclError aclrtFreeHost(void* hostPtr) { return convbwd::capi::release_memory(hostPtr, "aclrtFreeHost"); }

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  if (aclError e = convbwd::capi::check_memcpy(dst, destMax, src, count, kind, "aclrtMemcpy")) {
    return e;
  }
  if (count > 0) {
    std::memmove(dst, src, count);  // memmove: overlapping copies stay defined
  }
  return ACL_SUCCESS;
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  if (aclError e = convbwd::capi::check_memset(devPtr, maxCount, count, "aclrtMemset")) {
    return e;
  }
  if (count > 0) {
    std::memset(devPtr, static_cast<unsigned char>(value), count);
  }
  return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  if (aclError e = convbwd::capi::check_memcpy(dst, destMax, src, count, kind, "aclrtMemcpyAsync")) {
    return e;
  }
  return convbwd::capi::enqueue_memory(dst, src, 0, count, stream, "aclrtMemcpyAsync");
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
  if (aclError e = convbwd::capi::check_memset(devPtr, maxCount, count, "aclrtMemsetAsync")) {
    return e;
  }
  return convbwd::capi::enqueue_memory(devPtr, nullptr, static_cast<unsigned char>(value), count, stream,
                                       "aclrtMemsetAsync");
}

aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value) {
  return convbwd::capi::set_opt(runtime().ctx_deterministic, opt, value, "aclrtCtxSetSysParamOpt");
}

aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t* value) {
  return convbwd::capi::get_opt(runtime().ctx_deterministic, opt, value, "aclrtCtxGetSysParamOpt");
}

aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value) {
  return convbwd::capi::set_opt(runtime().process_deterministic, opt, value, "aclrtSetSysParamOpt");
}

aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t* value) {
  return convbwd::capi::get_opt(runtime().process_deterministic, opt, value, "aclrtGetSysParamOpt");
}

}  // extern "C"
