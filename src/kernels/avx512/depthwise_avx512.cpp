// The depthwise/grouped direct kernels (depthwise_direct) at 16 lanes on
// AVX-512. The channel-blocked ones (depthwise_cl8) are AVX2's on this tier:
// see CONVBWD_AVX512_TIER_CONFIG in kernels/tier_kernels.hpp.
#include "kernels/avx512/simd.hpp"

#include "kernels/tier_kernels.hpp"
#include "kernels/avx512/depthwise_simd_avx512.hpp"
#include "kernels/depthwise/depthwise_kernel.hpp"

namespace convbwd::detail {

void CONVBWD_AVX512_NS::depthwise_task(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task,
                                       float* scratch) {
  DwKernel<CONVBWD_AVX512_NS::VecAvx512>::task(p, a, b, dst, task, scratch);
}

}  // namespace convbwd::detail
