// The gradBias channel sums on AVX2+F16C.
#include "kernels/tier_kernels.hpp"
#include "kernels/avx2/depthwise_simd_avx2.hpp"
#include "kernels/bias/bias_kernel.hpp"

namespace convbwd::detail {

void avx2::bias_task(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t task) {
  BiasKernel<VecAvx2>::task(p, a, dst, partials, task);
}

}  // namespace convbwd::detail
