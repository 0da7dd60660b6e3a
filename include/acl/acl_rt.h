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

/* Where the calling program runs: always ACL_HOST here, so CANN samples
 * that branch on it take their host path (explicit copies to "device"
 * memory, which are host copies). */
typedef enum {
  ACL_DEVICE = 0,
  ACL_HOST = 1,
  ACL_RUN_MODE_RESERVED_INT_MIN_ = -0x7fffffff - 1,
  ACL_RUN_MODE_RESERVED_INT_MAX_ = 0x7fffffff
} aclrtRunMode;

typedef enum {
  ACL_EVENT_STATUS_COMPLETE = 0,
  ACL_EVENT_STATUS_NOT_READY = 1,
  ACL_EVENT_STATUS_RESERVED = 2
} aclrtEventStatus;

typedef enum {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

/* Event flags of aclrtCreateEventWithFlag (accepted; every event here keeps
 * a timestamp and can be waited on by the host and by other streams). */
#define ACL_EVENT_SYNC 0x00000001U
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U
#define ACL_EVENT_TIME_LINE 0x00000008U

ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode *runMode);
/* Waits until every stream (the default one included) is idle. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);

/* Contexts: an explicit context belongs to device 0 and becomes the calling
 * thread's current context; aclrtSetDevice gives a thread the default
 * context, which cannot be destroyed. Streams and memory are process-wide, as
 * on one device. */
ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext *context);

/* Events: a marker put into a stream's queue by aclrtRecordEvent. It is
 * complete once the stream has run everything enqueued before it; a
 * never-recorded (or reset) event counts as complete. aclrtStreamWaitEvent
 * makes a stream wait, without blocking the host, for the latest record made
 * before the call. Destroying an event with a pending record is safe: the
 * record completes unobserved. */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent *event);
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status);
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
/* Milliseconds between two completed records (host steady clock). */
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);

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
