/*
 * convbwd: CANN-compatible operator-library base (init and executors). Plain C.
 */
#ifndef CONVBWD_ACLNN_ACLNN_BASE_H_
#define CONVBWD_ACLNN_ACLNN_BASE_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nothing to load on a CPU: both always succeed. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

/* Releases an executor that will not be run. An executor passed successfully
 * to its operator's second phase is owned and released by the stream; one that
 * the second phase rejected is still the caller's. Null returns success. */
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor);

#ifdef __cplusplus
}
#endif

#endif /* CONVBWD_ACLNN_ACLNN_BASE_H_ */
