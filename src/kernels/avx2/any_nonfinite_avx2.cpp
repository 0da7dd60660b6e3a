// AVX2 build of the NaN/Inf check (see kernels/any_nonfinite.hpp).
#include "kernels/tier_kernels.hpp"
#include "kernels/any_nonfinite.hpp"

namespace convbwd::detail {

bool avx2::any_nonfinite(const float* p, int64_t n) { return any_nonfinite_body(p, n); }

}  // namespace convbwd::detail
