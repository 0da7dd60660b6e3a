/* The runtime and operator headers from plain C: this file must compile as
 * C99 and run. It exercises the C-visible surface once (init, memory, a
 * stream, a tensor, and the operator's argument checking). */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"

#define EXPECT(cond)                                             \
  do {                                                           \
    if (!(cond)) {                                               \
      printf("FAIL line %d: %s (%s)\n", __LINE__, #cond, aclGetRecentErrMsg()); \
      return 1;                                                  \
    }                                                            \
  } while (0)

int main(void) {
  aclrtStream stream = NULL;
  void* buffer = NULL;
  float host[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  float back[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t dims[2] = {2, 2};
  aclTensor* t = NULL;
  aclDataType dt = ACL_DT_UNDEFINED;
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;

  EXPECT(aclInit(NULL) == ACL_SUCCESS);
  EXPECT(aclInit(NULL) == ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT(aclrtSetDevice(0) == ACL_SUCCESS);
  EXPECT(aclrtSetDevice(1) == ACL_ERROR_INVALID_DEVICE);
  EXPECT(aclrtCreateStream(&stream) == ACL_SUCCESS);
  EXPECT(aclrtMalloc(&buffer, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(buffer, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(back, sizeof back, buffer, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
  EXPECT(memcmp(host, back, sizeof host) == 0);
  t = aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 2, buffer);
  EXPECT(t != NULL);
  EXPECT(aclGetDataType(t, &dt) == ACLNN_SUCCESS && dt == ACL_FLOAT);
  EXPECT(aclnnConvolutionBackwardGetWorkspaceSize(NULL, t, t, NULL, NULL, NULL, NULL, false, NULL, 1, NULL, 0,
                                                  NULL, NULL, NULL, &ws, &ex) == ACLNN_ERR_PARAM_NULLPTR);
  EXPECT(aclDestroyTensor(t) == ACLNN_SUCCESS);
  EXPECT(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
  EXPECT(aclrtDestroyStream(stream) == ACL_SUCCESS);
  EXPECT(aclrtFree(buffer) == ACL_SUCCESS);
  EXPECT(aclrtResetDevice(0) == ACL_SUCCESS);
  EXPECT(aclFinalize() == ACL_SUCCESS);
  printf("PASS c_api_smoke\n");
  return 0;
}
