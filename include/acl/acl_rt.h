/*
 * convbwd: the CANN-compatible host runtime (devices, streams, memory).
 *
 * "Device" 0 is this host; device memory is host memory from an aligned
 * allocator, so every memcpy kind is a host copy. A stream is an in-order
 * asynchronous queue served by its own thread: operators enqueue and return,
 * aclrtSynchronizeStream waits and reports the first failure since the last
 * synchronization. Plain C.
 */
#ifndef CONVBWD_ACL_ACL_RT_H_
#define CONVBWD_ACL_ACL_RT_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
  ACL_MEMCPY_DEFAULT = 4,
  /* Not a kind: widens the range to every int (see acl_base.h). */
  ACL_MEMCPY_RESERVED_INT_MIN_ = -0x7fffffff - 1,
  ACL_MEMCPY_RESERVED_INT_MAX_ = 0x7fffffff
} aclrtMemcpyKind;

/* Page policies of device memory. The host has one kind of memory, so the
 * policy is accepted and ignored. */
typedef enum {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2,
  ACL_MEM_MALLOC_RESERVED_INT_MIN_ = -0x7fffffff - 1,
  ACL_MEM_MALLOC_RESERVED_INT_MAX_ = 0x7fffffff
} aclrtMemMallocPolicy;

typedef enum {
  ACL_OPT_DETERMINISTIC = 0,
  ACL_OPT_RESERVED_INT_MIN_ = -0x7fffffff - 1,
  ACL_OPT_RESERVED_INT_MAX_ = 0x7fffffff
} aclSysParamOpt;

/* Device 0 only; other ids give ACL_ERROR_INVALID_DEVICE. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
/* The device set on this thread; ACL_ERROR_INVALID_DEVICE when none is. */
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
/* Waits for the stream's pending work, then destroys it. */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
/* Waits until the stream is idle. Returns ACL_ERROR_FAILURE when any work
 * failed since the last synchronization; aclGetRecentErrMsg() says why. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);

/* 64-byte aligned. size 0 is ACL_ERROR_INVALID_PARAM, as in CANN. */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size);
/* Only pointers from aclrtMalloc; anything else is ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);
/* Synchronous. count > destMax is ACL_ERROR_INVALID_PARAM and copies nothing. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                         aclrtMemcpyKind kind);
/* Sets count bytes to (unsigned char)value; count > maxCount is an error. */
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
/* The same, in order with the stream's other work (null: the default stream).
 * Arguments are checked at the call; the copy happens on the stream. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                                              aclrtMemcpyKind kind, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                                              aclrtStream stream);

/* ACL_OPT_DETERMINISTIC accepts 0 or 1 and reports what was set. This library
 * is deterministic either way: results never depend on threads or timing. */
ACL_FUNC_VISIBILITY aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value);
ACL_FUNC_VISIBILITY aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value);
ACL_FUNC_VISIBILITY aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value);
ACL_FUNC_VISIBILITY aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* CONVBWD_ACL_ACL_RT_H_ */
