// The AVX-512 build of the pair-row interleave (see
// kernels/interleave_pairs.hpp): 16 pairs per step. Plain C++, so the
// emulated build compiles it with its own flags.
#include "kernels/avx512/simd.hpp"

#include "kernels/tier_kernels.hpp"
#include "kernels/interleave_pairs.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {

void interleave_pair_rows(const uint16_t* even, const uint16_t* odd, int64_t n, uint32_t* dst) {
  interleave_pair_rows_body(even, odd, n, dst);
}

void shift_pair_words(const uint32_t* src, int64_t n, int64_t pitch, uint32_t* dst) {
  shift_pair_words_body(src, n, pitch, dst);
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
