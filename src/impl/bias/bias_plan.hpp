// What other planners may ask of a planned bias_reduce kernel.
#pragma once

#include "kernels/bias/bias_plan.hpp"

namespace convbwd::detail {

class OpKernel;
// The plan of a bias_reduce kernel (null for any other kernel): what a fused
// pass that also sums gradOutput must match (src/impl/depthwise).
const BiasPlan* bias_plan_of(const OpKernel&);

}  // namespace convbwd::detail
