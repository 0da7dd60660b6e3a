// Whether any of n fp32 values is NaN or +-Inf: how a kernel that reports
// NaN/Inf itself (NonfiniteMode::report, src/impl/implementation.hpp) checks
// the operand copies it has just made, while they are still in cache. One
// body, compiled portable and with AVX2 (src/kernels/<isa>/any_nonfinite_*);
// AVX-512 has its own (kernels/avx512/any_nonfinite_avx512.cpp).
#pragma once

#include <cstdint>
#include <cstring>

namespace convbwd::detail {

using AnyNonfinite = bool (*)(const float* p, int64_t n);

// Replaces NaN and +-Inf among n floats by 0: how a fast path honours
// OpArgs::zero_nonfinite on its fp32 copies (src/impl/nonfinite). Portable,
// non-inline (src/kernels/zero_nonfinite.cpp), for every tier.
void zero_nonfinite(float* p, int64_t n);

namespace {  // this body is compiled with every tier's flags: one copy per file
// The exponent of NaN and +-Inf is all ones, and only then does adding one
// to it carry into the sign bit. An OR of integers has no order to keep, so
// the compiler vectorizes the loop for the ISA it is built for.
inline bool any_nonfinite_body(const float* p, int64_t n) {
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + i, sizeof u);
    any |= (u & 0x7f800000u) + 0x00800000u;
  }
  return (any & 0x80000000u) != 0;
}
}  // namespace

}  // namespace convbwd::detail
