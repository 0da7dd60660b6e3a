// The portable build of the row add (see kernels/add_row.hpp).
#include "kernels/tier_kernels.hpp"
#include "kernels/add_row.hpp"

namespace convbwd::detail {

void scalar::add_row(float* dst, const float* src, int64_t n) { add_row_body(dst, src, n); }

}  // namespace convbwd::detail
