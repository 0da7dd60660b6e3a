// The depthwise kernels on AVX-512, at 16 lanes: depthwise_direct's and the
// channel-blocked ones (depthwise_cl, 16 channels per block).
#include "kernels/avx512/simd.hpp"

#include "kernels/tier_kernels.hpp"
#include "kernels/avx512/depthwise_simd_avx512.hpp"
#include "kernels/depthwise/depthwise_cl_kernel.hpp"
#include "kernels/depthwise/depthwise_kernel.hpp"

namespace convbwd::detail {

void CONVBWD_AVX512_NS::depthwise_task(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task,
                                       float* scratch) {
  DwKernel<CONVBWD_AVX512_NS::VecAvx512>::task(p, a, b, dst, task, scratch);
}

unsigned CONVBWD_AVX512_NS::depthwise_cl_task(const DwClPlan& p, const void* a, const void* b, void* dst,
                                              int64_t task, float* scratch) {
  return DwClKernel<CONVBWD_AVX512_NS::VecAvx512>::task(p, a, b, dst, task, scratch);
}

bool CONVBWD_AVX512_NS::depthwise_cl_fused(const DwClFusedPlan& p, const void* dy, const void* x, const void* w,
                                           void* const* dst, int64_t block, float* scratch) {
  return DwClKernel<CONVBWD_AVX512_NS::VecAvx512>::fused(p, dy, x, w, dst, block, scratch);
}

}  // namespace convbwd::detail
