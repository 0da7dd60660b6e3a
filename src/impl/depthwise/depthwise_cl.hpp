// The width choice of the channel-blocked depthwise plans (depthwise_cl),
// declared for the tests: a tier with two widths must give the same bits in
// both, and they check it where the choice flips with the thread count.
#pragma once

#include <cstdint>

#include "kernels/config.hpp"

namespace convbwd::detail {

// The kernels plan_depthwise_cl runs a depthwise layer of `groups` channels
// with on `threads` threads.
const DwClKernels& depthwise_cl_kernels_for(int64_t groups, int threads, const DepthwiseKernels& k);

}  // namespace convbwd::detail
