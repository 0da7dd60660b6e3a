// The output row store every fast path ends with: n fp32 values rounded once
// into an output's dtype (numeric/float_formats.hpp) at base[index],
// base[index + stride], ... One portable and one AVX2 version (eight
// conversions per instruction, the same bits); kernel_store_row_test holds
// them to each other.
#pragma once

#include <cstdint>

#include "convbwd/convbwd.hpp"

namespace convbwd::detail {

using StoreRow = void (*)(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride);
void store_row_scalar(const float*, int64_t, void*, DataType, int64_t, int64_t);
void store_row_avx2(const float*, int64_t, void*, DataType, int64_t, int64_t);

}  // namespace convbwd::detail
