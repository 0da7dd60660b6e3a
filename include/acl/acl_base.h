/*
 * convbwd: CANN-compatible base types of the ACL runtime.
 *
 * Names, prototypes and numeric values follow CANN's public acl/acl_base.h so
 * that programs written for CANN compile unmodified; the values are part of the
 * ABI and must never change. Everything here is plain C (C99 and later).
 * Only the subset this library implements is declared.
 */
#ifndef CONVBWD_ACL_ACL_BASE_H_
#define CONVBWD_ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#ifndef ACL_FUNC_VISIBILITY
#if defined(_WIN32)
#define ACL_FUNC_VISIBILITY
#else
/* The library is built with -fvisibility=hidden: only the C ABI is exported. */
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handles. A stream is an in-order queue of work run by its own host
 * thread; null means the process's default stream. */
typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtContext;

typedef int aclError;
typedef uint16_t aclFloat16;

/* CANN declares the codes as constants rather than an enum; so do we, so that
 * `aclError ret = ACL_SUCCESS;` behaves identically. */
static const int ACL_SUCCESS = 0;
static const int ACL_ERROR_INVALID_PARAM = 100000;
static const int ACL_ERROR_UNINITIALIZE = 100001;
static const int ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const int ACL_ERROR_BAD_ALLOC = 200000;
static const int ACL_ERROR_API_NOT_SUPPORT = 200001;
static const int ACL_ERROR_INVALID_DEVICE = 200002;
static const int ACL_ERROR_INTERNAL_ERROR = 500000;
static const int ACL_ERROR_FAILURE = 500001;

/* A plain (unscoped) enum, so that both ACL_FLOAT and aclDataType::ACL_FLOAT
 * compile in C++, as CANN's samples spell it. */
typedef enum {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_UINT16 = 7,
  ACL_UINT32 = 8,
  ACL_INT64 = 9,
  ACL_UINT64 = 10,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_STRING = 13,
  ACL_COMPLEX64 = 16,
  ACL_COMPLEX128 = 17,
  ACL_BF16 = 27,
  ACL_INT4 = 29,
  ACL_UINT1 = 30,
  ACL_COMPLEX32 = 33,
  ACL_HIFLOAT8 = 34,
  ACL_FLOAT8_E5M2 = 35,
  ACL_FLOAT8_E4M3FN = 36,
  ACL_FLOAT8_E8M0 = 37,
  /* Not a type. It widens the enum's range to every int, so that an unknown
   * value from a caller is a value the library can report, not undefined
   * behaviour in C++. Likewise in the enums below. */
  ACL_DT_RESERVED_INT_MAX_ = 0x7fffffff
} aclDataType;

typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NC1HWC0 = 3,
  ACL_FORMAT_FRACTAL_Z = 4,
  ACL_FORMAT_NC1HWC0_C04 = 12,
  ACL_FORMAT_HWCN = 16,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_FRACTAL_NZ = 29,
  ACL_FORMAT_NCDHW = 30,
  ACL_FORMAT_NDC1HWC0 = 32,
  ACL_FRACTAL_Z_3D = 33, /* sic: CANN spells this one without FORMAT_ */
  ACL_FORMAT_NC = 35,
  ACL_FORMAT_NCL = 47,
  ACL_FORMAT_RESERVED_INT_MAX_ = 0x7fffffff
} aclFormat;

/* IEEE binary16 <-> binary32, round to nearest even. */
ACL_FUNC_VISIBILITY aclFloat16 aclFloatToFloat16(float value);
ACL_FUNC_VISIBILITY float aclFloat16ToFloat(aclFloat16 value);

/* Bytes of one element of the type; 0 for types without a byte size. */
ACL_FUNC_VISIBILITY size_t aclDataTypeSize(aclDataType dataType);

#ifdef __cplusplus
}
#endif

#endif /* CONVBWD_ACL_ACL_BASE_H_ */
