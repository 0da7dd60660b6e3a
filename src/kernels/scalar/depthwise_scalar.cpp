// The depthwise/grouped direct kernels in portable C++.
#include "kernels/tier_kernels.hpp"
#include "kernels/scalar/depthwise_simd_scalar.hpp"
#include "kernels/depthwise/depthwise_kernel.hpp"
#include "kernels/depthwise/depthwise_cl_kernel.hpp"

namespace convbwd::detail {

void scalar::depthwise_task(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task, float* scratch) {
  DwKernel<VecScalar>::task(p, a, b, dst, task, scratch);
}

unsigned scalar::depthwise_cl_task(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t task,
                                  float* scratch) {
  return DwClKernel<VecScalar>::task(p, a, b, dst, task, scratch);
}

bool scalar::depthwise_cl_fused(const DwClFusedPlan& p, const void* dy, const void* x, const void* w, void* const* dst,
                               int64_t block, float* scratch) {
  return DwClKernel<VecScalar>::fused(p, dy, x, w, dst, block, scratch);
}

}  // namespace convbwd::detail
