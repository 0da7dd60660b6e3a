/*
 * convbwd: the include path older CANN releases and samples use
 * (aclnnop/level2/...); the declarations live in aclnnop/.
 */
#ifndef CONVBWD_ACLNNOP_LEVEL2_ACLNN_CONVOLUTION_BACKWARD_H_
#define CONVBWD_ACLNNOP_LEVEL2_ACLNN_CONVOLUTION_BACKWARD_H_

#include "../aclnn_convolution_backward.h"

#endif
