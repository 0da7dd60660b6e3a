// The portable row helpers of the depthwise kernels (declared in
// depthwise_plan.hpp), compiled without ISA flags: every tier's kernels call
// them for strided views and vector tails.
#include <algorithm>

#include "kernels/any_nonfinite.hpp"
#include "kernels/depthwise/depthwise_cl_plan.hpp"
#include "kernels/depthwise/depthwise_plan.hpp"
#include "numeric/float_formats.hpp"

namespace convbwd::detail {

void dw_load_row_generic(const void* base, DataType dt, int64_t off, int64_t stride, int64_t n,
                         OperandRounding rounding, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = load_as_float(base, off + i * stride, dt);
    switch (rounding) {
      case OperandRounding::none: out[i] = v; break;
      case OperandRounding::hf32: out[i] = round_to_hf32(v); break;
      case OperandRounding::fp16: out[i] = round_to_fp16(v); break;
    }
  }
}

void dw_load_rows_transposed_generic(const void* base, DataType dt, const int64_t* rows, int64_t stride, int64_t nv,
                                     int64_t n, OperandRounding rounding, int64_t lanes, float* out) {
  std::fill(out, out + dw_round_up(n, lanes) * lanes, 0.0f);
  float v[kDwClMaxLanes];
  for (int64_t j = 0; j < n; j += lanes) {
    const int64_t cnt = std::min(lanes, n - j);
    for (int64_t c = 0; c < nv; ++c) {
      dw_load_row_generic(base, dt, rows[c] + j * stride, stride, cnt, rounding, v);
      for (int64_t i = 0; i < cnt; ++i) out[(j + i) * lanes + c] = v[i];
    }
  }
}

}  // namespace convbwd::detail
