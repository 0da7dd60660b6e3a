// Portable bf16 pair transpose (Bf16PairsChannelsLast, kernels/gemm.hpp):
// the definition written out element by element. The tiers without bf16
// arithmetic never pair bf16 operands; the AVX-512 tiers have their own
// (kernels/avx512/bf16_pairs_avx512.cpp), held to this one by
// tests/kernel_channels_last_test.cpp.
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail::scalar {

bool bf16_pairs_channels_last(const uint16_t* src, int64_t cstride, int64_t rows, int64_t len, bool pair_elements,
                              int lead, bool zero_nonfinite, uint32_t* dst, int64_t pitch) {
  bool nonfinite = false;
  // Element e of row j, or the zero half outside the block.
  auto half = [&](int64_t j, int64_t e) -> uint32_t {
    if (j >= rows || e < 0 || e >= len) return 0;
    const uint16_t v = src[j * cstride + e];
    const bool bad = (v & 0x7f80u) == 0x7f80u;
    nonfinite = nonfinite || bad;
    return zero_nonfinite && bad ? 0u : v;
  };
  if (pair_elements) {
    for (int64_t t = 0; t < (lead + len + 1) / 2; ++t)
      for (int64_t j = 0; j < rows; ++j) dst[t * pitch + j] = half(j, 2 * t - lead) | half(j, 2 * t + 1 - lead) << 16;
  } else {
    for (int64_t e = 0; e < len; ++e)
      for (int64_t p = 0; p < (rows + 1) / 2; ++p) dst[e * pitch + p] = half(2 * p, e) | half(2 * p + 1, e) << 16;
  }
  return nonfinite;
}

}  // namespace convbwd::detail::scalar
