// The denormal rules of the bf16 dot-product instructions (vdpbf16ps and
// tdpbf16ps ignore MXCSR), for the emulations of them: kernels/avx512/simd.hpp
// under SIMDe and kernels/amx/tile_emu.hpp. An input whose exponent field is
// zero reads as a zero of its sign (daz), and a result is flushed the same way
// (ftz). Internal linkage, because the including files are compiled with
// different ISA flags.
#pragma once

#include <cstdint>
#include <cstring>

namespace convbwd::detail {
namespace {

// A bf16 (the upper half of an fp32 pattern) or fp32 pattern as fp32.
inline float daz(uint32_t bits) {
  if ((bits & 0x7f800000u) == 0) bits &= 0x80000000u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline float daz(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return daz(bits);
}
inline float ftz(float f) { return daz(f); }

}  // namespace
}  // namespace convbwd::detail
