// zero_nonfinite (kernels/any_nonfinite.hpp), compiled without ISA flags.
#include <cmath>

#include "kernels/any_nonfinite.hpp"

namespace convbwd::detail {

void zero_nonfinite(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) p[i] = 0.0f;
}

}  // namespace convbwd::detail
