// Internals of the CANN-compatible C API: the objects behind the opaque
// handles, the thread's recent error message, and the status helpers.
// Tests include this header (through convbwd_internal) to reach the stream.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "capi/stream.hpp"
#include "convbwd/convbwd.hpp"

// The handle types are declared by the C headers as incomplete structs in the
// global namespace; here they get their bodies.
struct aclTensor {
  std::vector<int64_t> view_dims;
  std::vector<int64_t> strides;  // always one per view dim (filled when null was given)
  int64_t offset = 0;
  // The raw enum values as given: unknown values are only rejected by the
  // operators that read them, as CANN does.
  int32_t dtype = 0;
  int32_t format = 0;
  std::vector<int64_t> storage_dims;
  void* data = nullptr;
};

struct aclIntArray {
  std::vector<int64_t> values;
};

struct aclBoolArray {
  std::vector<bool> values;
};

// One use of one planned operator. It is also the stream's queue node, so that
// the second phase enqueues without allocating.
struct aclOpExecutor final : convbwd::capi::Task {
  explicit aclOpExecutor(convbwd::Plan p) : plan(std::move(p)) {}
  convbwd::Plan plan;
  convbwd::Buffers buffers;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  convbwd::Error run() noexcept override;
  void release() noexcept override;
};

namespace convbwd::capi {

// The message aclGetRecentErrMsg() returns on this thread.
void set_recent_error(std::string message);
const std::string& recent_error();

// Records the message and returns the status, so that failures read as
// `return fail(ACLNN_ERR_PARAM_NULLPTR, "...")`.
aclnnStatus fail(aclnnStatus status, std::string message);
aclError fail_acl(aclError code, std::string message);

// The calling thread's device (-1 when none is set) and the one check of a
// device id: 0, the host, is the only device.
int32_t thread_device();
void set_thread_device(int32_t device_id);
aclError check_device(int32_t device_id, const char* caller);

// Streams: null is the default stream (created on first use). Returns null,
// with the recent error set, for a handle that is not a live stream. The
// caller holds the stream until it drops the pointer: a concurrent destroy
// cannot free it under the caller's feet.
std::shared_ptr<Stream> resolve_stream(aclrtStream handle, std::string_view caller);

// Executors not yet handed to a stream. Tracked so that a second use of an
// executor, or a stray pointer, is an error instead of a use-after-free.
// register_executor may throw std::bad_alloc.
void register_executor(aclOpExecutor*);
// The workspace a live executor needs, read under the registry lock (another
// thread may be running and releasing it); nullopt when it is not live.
std::optional<size_t> live_executor_workspace(aclOpExecutor*);
// Plan::check of a live executor's buffers with this workspace, under the
// registry lock (so the executor cannot be run and released meanwhile);
// nullopt when it is not live.
std::optional<Error> check_live_executor(aclOpExecutor*, const void* workspace, size_t workspace_bytes);
// True, and forgets it, when the executor is live: of two threads racing to
// run one executor, exactly one wins.
bool claim_executor(aclOpExecutor*);

// Names of enum values for messages: "ACL_FORMAT_NHWC (1)", "unknown (99)".
std::string format_name(int32_t format);
std::string dtype_name(int32_t dtype);

}  // namespace convbwd::capi
