/*
 * convbwd: CANN-compatible aclnnConvolutionBackward.
 *
 * Reachable both as "aclnnop/aclnn_convolution_backward.h" (with -I<prefix>/include)
 * and as "aclnn_convolution_backward.h" (with -I<prefix>/include/aclnnop), as
 * CANN's build lines use both. Plain C.
 */
#ifndef CONVBWD_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_
#define CONVBWD_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Phase one: validates the problem, chooses the algorithms and sizes the
 * workspace. The tensors' data pointers are bound now.
 *
 * Tensors are NCL (1D), NCHW (2D), NCDHW (3D) or ND; gradBias is [Cout].
 * Data types: ACL_FLOAT, ACL_FLOAT16, ACL_BF16, and for transposed gradInput
 * ACL_HIFLOAT8 and ACL_FLOAT8_E4M3FN. padding has one value per spatial dim
 * (symmetric) or, in 2D, four: top, bottom, left, right. outputMask is
 * {gradInput, gradWeight, gradBias}; only the requested outputs are touched.
 * cubeMathType: 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32.
 *
 * Returns ACLNN_ERR_PARAM_NULLPTR (161001) for a null gradOutput, input, weight,
 * stride, padding, dilation, outputPadding, outputMask, workspaceSize or
 * executor; for the null output of a requested gradient; and for a null
 * biasSizes when gradBias is requested. Returns ACLNN_ERR_PARAM_INVALID
 * (161002) for anything else invalid. aclGetRecentErrMsg() names the parameter,
 * the value given and the value expected.
 */
ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *input, const aclTensor *weight,
    const aclIntArray *biasSizes, const aclIntArray *stride, const aclIntArray *padding,
    const aclIntArray *dilation, bool transposed, const aclIntArray *outputPadding, int groups,
    const aclBoolArray *outputMask, int8_t cubeMathType, aclTensor *gradInput,
    aclTensor *gradWeight, aclTensor *gradBias, uint64_t *workspaceSize,
    aclOpExecutor **executor);

/*
 * Phase two: enqueues the work on the stream (null: the default stream) and
 * returns. The stream releases the executor after its one run. A workspace
 * smaller than phase one asked for is ACLNN_ERR_PARAM_INVALID; the executor
 * then stays the caller's. Failures during the run are reported by
 * aclrtSynchronizeStream.
 */
ACL_FUNC_VISIBILITY aclnnStatus aclnnConvolutionBackward(void *workspace, uint64_t workspaceSize,
                                                         aclOpExecutor *executor,
                                                         const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* CONVBWD_ACLNNOP_ACLNN_CONVOLUTION_BACKWARD_H_ */
