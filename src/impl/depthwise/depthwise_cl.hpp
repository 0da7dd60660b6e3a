// The width choice of the channel-blocked depthwise plans (depthwise_cl),
// declared for the tests: a tier with two widths must give the same bits in
// both, and they check it where the choice flips with the thread count.
#pragma once

#include <cstdint>

#include "kernels/config.hpp"

namespace convbwd::detail {

// The kernels plan_depthwise_cl runs a layer of `groups` groups (one channel
// each, or 6 to 8 on each side if `grouped`) with on `threads` threads.
const DwClKernels& depthwise_cl_kernels_for(bool grouped, int64_t groups, int threads, const DepthwiseKernels& k);

}  // namespace convbwd::detail
