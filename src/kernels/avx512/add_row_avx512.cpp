// The AVX-512 build of the row add (see kernels/add_row.hpp): 16 floats per
// step. Plain C++, so the emulated build compiles it with its own flags.
#include "kernels/avx512/simd.hpp"

#include "kernels/tier_kernels.hpp"
#include "kernels/add_row.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {

void add_row(float* dst, const float* src, int64_t n) { add_row_body(dst, src, n); }

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
