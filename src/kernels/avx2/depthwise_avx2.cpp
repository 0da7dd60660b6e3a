// The depthwise/grouped direct kernels on AVX2+FMA+F16C.
#include "kernels/tier_kernels.hpp"
#include "kernels/avx2/depthwise_simd_avx2.hpp"
#include "kernels/depthwise/depthwise_kernel.hpp"
#include "kernels/depthwise/depthwise_cl_kernel.hpp"

namespace convbwd::detail {

void avx2::depthwise_task(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task, float* scratch) {
  DwKernel<VecAvx2>::task(p, a, b, dst, task, scratch);
}

unsigned avx2::depthwise_cl_task(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t task,
                                float* scratch) {
  return DwClKernel<VecAvx2>::task(p, a, b, dst, task, scratch);
}

bool avx2::depthwise_cl_fused(const DwClFusedPlan& p, const void* dy, const void* x, const void* w, void* const* dst,
                             int64_t block, float* scratch) {
  return DwClKernel<VecAvx2>::fused(p, dy, x, w, dst, block, scratch);
}

}  // namespace convbwd::detail
