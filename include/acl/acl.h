/*
 * convbwd: CANN-compatible umbrella header of the ACL runtime. Plain C.
 */
#ifndef CONVBWD_ACL_ACL_H_
#define CONVBWD_ACL_ACL_H_

#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* configPath may be null or empty; a non-empty path must name a readable file
 * (its content is not interpreted). A second aclInit without aclFinalize
 * returns ACL_ERROR_REPEAT_INITIALIZE. */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
/* Drains and destroys the default stream. Without a prior aclInit it returns
 * ACL_ERROR_UNINITIALIZE. aclInit may be called again afterwards. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

/* The message of this thread's most recent failure ("" if none). The pointer
 * stays valid until the next failing call on this thread. */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif

#endif /* CONVBWD_ACL_ACL_H_ */
