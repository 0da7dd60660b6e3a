// The portable build of the pair-row interleave (see kernels/interleave_pairs.hpp).
#include "kernels/tier_kernels.hpp"
#include "kernels/interleave_pairs.hpp"

namespace convbwd::detail {

void scalar::interleave_pair_rows(const uint16_t* even, const uint16_t* odd, int64_t n, uint32_t* dst) {
  interleave_pair_rows_body(even, odd, n, dst);
}

void scalar::shift_pair_words(const uint32_t* src, int64_t n, int64_t pitch, uint32_t* dst) {
  shift_pair_words_body(src, n, pitch, dst);
}

}  // namespace convbwd::detail
