// The 8-bit float formats of transposed gradInput: OCP FLOAT8_E4M3FN and
// Huawei's HiFloat8 (arXiv 2409.16626).
#pragma once

#include <cstdint>

namespace convbwd::detail {

// Exact decodes (every code is representable in fp32).
float e4m3fn_to_float(uint8_t code);
float hif8_to_float(uint8_t code);

// Single rounding from fp64: E4M3FN rounds to nearest even and saturates to
// +-448 (the format has no Inf; NaN stays NaN). HiFloat8 rounds to nearest,
// ties away from zero, as the paper specifies, saturating to its max finite.
uint8_t double_to_e4m3fn(double v);
uint8_t double_to_hif8(double v);

}  // namespace convbwd::detail
