// The 8-bit float formats of transposed gradInput: OCP FLOAT8_E4M3FN and
// Huawei's HiFloat8 (arXiv 2409.16626). fp8.cpp describes both layouts.
#pragma once

#include <cstdint>

namespace convbwd::detail {

// Exact decodes (every code is representable in fp32). E4M3FN: 0x7F/0xFF are
// NaN, 0x80 is -0. HiFloat8: 0x80 is NaN, 0x6F/0xEF are +-Inf.
float e4m3fn_to_float(uint8_t code);
float hif8_to_float(uint8_t code);

// Single rounding from fp64.
// E4M3FN: round to nearest, ties to even; finite overflow and +-Inf saturate
// to +-448 (the format has no Inf); NaN stays NaN (sign kept); -0 stays -0.
// HiFloat8: round to nearest, ties away from zero (the paper's TA); finite
// overflow saturates to +-32768; +-Inf stays +-Inf (the format has it); NaN
// gives 0x80; zero and anything rounding to zero gives the one zero, 0x00.
uint8_t double_to_e4m3fn(double v);
uint8_t double_to_hif8(double v);

}  // namespace convbwd::detail
