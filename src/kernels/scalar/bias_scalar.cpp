// The gradBias channel sums in portable C++.
#include "kernels/tier_kernels.hpp"
#include "kernels/scalar/depthwise_simd_scalar.hpp"
#include "kernels/bias/bias_kernel.hpp"

namespace convbwd::detail {

void scalar::bias_task(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t task) {
  BiasKernel<VecScalar>::task(p, a, dst, partials, task);
}

}  // namespace convbwd::detail
