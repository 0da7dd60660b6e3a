// Contexts of acl/acl_rt.h. On a device a context owns streams and memory;
// here there is one device (the host) whose streams and memory are
// process-wide, so a context only binds a thread to device 0. What CANN code
// observes is kept: creating a context makes it current, the current context
// can be read back and switched, aclrtSetDevice gives a thread the default
// context, and only explicitly created contexts can be destroyed.
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "capi/capi.hpp"

namespace convbwd::capi {
namespace {

struct Context {
  int32_t device = 0;
};

// The default context of device 0 (never destroyed).
Context g_default_context;

struct ContextRegistry {
  std::mutex mutex;
  std::unordered_set<Context*> live;  // created by aclrtCreateContext
};

ContextRegistry& registry() {
  static ContextRegistry* const r = new ContextRegistry;
  return *r;
}

// Null means "the default context, if this thread has a device".
thread_local Context* t_current = nullptr;

bool is_live(Context* c) {
  if (c == &g_default_context) return true;
  ContextRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.live.count(c) != 0;
}

}  // namespace
}  // namespace convbwd::capi

using convbwd::capi::fail_acl;

aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
  if (context == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext: context is null");
  }
  if (aclError e = convbwd::capi::check_device(deviceId, "aclrtCreateContext")) {
    return e;
  }
  auto& r = convbwd::capi::registry();
  try {
    auto* c = new convbwd::capi::Context{deviceId};
    std::lock_guard<std::mutex> lock(r.mutex);
    try {
      r.live.insert(c);
    } catch (const std::bad_alloc&) {
      delete c;
      throw;
    }
    convbwd::capi::t_current = c;
    *context = c;
  } catch (const std::bad_alloc&) {
    return fail_acl(ACL_ERROR_BAD_ALLOC, "aclrtCreateContext: out of memory");
  }
  convbwd::capi::set_thread_device(deviceId);
  return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
  if (context == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext: context is null");
  }
  auto* c = static_cast<convbwd::capi::Context*>(context);
  if (c == &convbwd::capi::g_default_context) {
    return fail_acl(ACL_ERROR_INVALID_PARAM,
                    "aclrtDestroyContext: context is the default context, which only aclrtResetDevice ends");
  }
  {
    auto& r = convbwd::capi::registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.live.erase(c) == 0) {
      return fail_acl(ACL_ERROR_INVALID_PARAM,
                      "aclrtDestroyContext: context is not a live context from aclrtCreateContext");
    }
  }
  if (convbwd::capi::t_current == c) convbwd::capi::t_current = nullptr;
  delete c;
  return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  if (context == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: context is null");
  }
  auto* c = static_cast<convbwd::capi::Context*>(context);
  if (!convbwd::capi::is_live(c)) {
    return fail_acl(ACL_ERROR_INVALID_PARAM,
                    "aclrtSetCurrentContext: context is not a live context (destroyed, or not from "
                    "aclrtCreateContext / aclrtGetCurrentContext)");
  }
  convbwd::capi::t_current = c == &convbwd::capi::g_default_context ? nullptr : c;
  convbwd::capi::set_thread_device(0);
  return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  if (context == nullptr) {
    return fail_acl(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is null");
  }
  convbwd::capi::Context* c = convbwd::capi::t_current;
  if (c != nullptr && !convbwd::capi::is_live(c)) c = nullptr;  // destroyed by another thread
  if (c == nullptr) {
    if (convbwd::capi::thread_device() < 0) {
      return fail_acl(ACL_ERROR_INVALID_DEVICE,
                      "aclrtGetCurrentContext: this thread has no context; call aclrtSetDevice(0) or "
                      "aclrtCreateContext first");
    }
    c = &convbwd::capi::g_default_context;
  }
  *context = c;
  return ACL_SUCCESS;
}
