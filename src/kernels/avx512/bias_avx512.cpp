// The gradBias channel sums at 16 lanes on AVX-512 (the order: BiasPlan).
#include "kernels/avx512/simd.hpp"

#include "kernels/tier_kernels.hpp"
#include "kernels/avx512/depthwise_simd_avx512.hpp"
#include "kernels/bias/bias_kernel.hpp"

namespace convbwd::detail {

void CONVBWD_AVX512_NS::bias_task(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t task) {
  BiasKernel<CONVBWD_AVX512_NS::VecAvx512>::task(p, a, dst, partials, task);
}

}  // namespace convbwd::detail
