// The width choice of the channel-blocked depthwise plans (depthwise_cl),
// declared for the tests: a tier with two widths must give the same bits in
// both, and they check it where the choice flips with the thread count or
// the CPU.
#pragma once

#include <cstdint>

#include "impl/implementation.hpp"
#include "kernels/config.hpp"

namespace convbwd::detail {

// The kernels plan_depthwise_cl runs a depthwise layer of `groups` channels
// with on `threads` threads; the narrow ones wherever `narrow_planes`.
const DwClKernels& depthwise_cl_kernels_for(int64_t groups, int threads, const DepthwiseKernels& k,
                                            bool narrow_planes = false);

// Whether a depthwise layer's planes are large enough that the narrow blocks
// run faster on this kind of CPU (see the definition).
bool narrow_planes_suit(const Geometry& g, const PlanContext& ctx);

}  // namespace convbwd::detail
