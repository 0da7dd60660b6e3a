// The one definition of how far a computed output may be from the fp64
// reference. The tests and the CLI's check mode both use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "convbwd/convbwd.hpp"

namespace convbwd::detail {

// Unit roundoff of a dtype's coarsest significand.
inline double unit_roundoff(DataType t) {
  switch (t) {
    case DataType::f32: return 0x1p-24;
    case DataType::f16: return 0x1p-11;
    case DataType::bf16: return 0x1p-8;
    case DataType::f8e4m3: return 0x1p-4;
    case DataType::hif8: return 0x1p-2;  // tapered: as few as 1 mantissa bit at the ends of its range
  }
  return 0x1p-2;
}

// One ulp of the output dtype at |ref| (both sides round once, and may land
// on either side of a tie), plus the fp32 accumulation bound n*u*sum|products|
// (any summation order), plus the smallest fp16 spacing 2^-24 for results in
// the subnormal range.
inline double comparison_tolerance(DataType out, double ref, double sum_abs_products, int64_t reduction_length) {
  return 2 * unit_roundoff(out) * std::fabs(ref) +
         static_cast<double>(std::max<int64_t>(reduction_length, 1)) * 0x1p-24 * sum_abs_products + 0x1p-24;
}

}  // namespace convbwd::detail
