// Portable channels-last conversion (see kernels/gemm.hpp), for every
// layout: the vector tiers (kernels/to_channels_last_kernel.hpp) send it the
// strides they have no register transpose for. Blocks of 16 channels keep
// their 16 source lines in L1 while the pixels walk through them.
#include <algorithm>

#include "kernels/format_dispatch.hpp"
#include "kernels/tier_kernels.hpp"
#include "numeric/float_formats.hpp"

namespace convbwd::detail {
namespace {

template <DataType T, OperandRounding R>
void convert(const void* src, int64_t s0, int64_t cs, int64_t ws, int64_t nc, int64_t nw, float* dst, int64_t pitch) {
  for (int64_t c0 = 0; c0 < nc; c0 += 16) {
    const int64_t cn = std::min<int64_t>(16, nc - c0);
    for (int64_t w = 0; w < nw; ++w) {
      float* o = dst + w * pitch + c0;
      const int64_t s = s0 + w * ws + c0 * cs;
      for (int64_t c = 0; c < cn; ++c) {
        float v;
        if constexpr (T == DataType::f32) v = static_cast<const float*>(src)[s + c * cs];
        else if constexpr (T == DataType::bf16) v = bf16_to_float(static_cast<const uint16_t*>(src)[s + c * cs]);
        else v = f16_to_float(static_cast<const uint16_t*>(src)[s + c * cs]);
        if constexpr (R == OperandRounding::hf32) v = round_to_hf32(v);
        if constexpr (R == OperandRounding::fp16) v = round_to_fp16(v);
        o[c] = v;
      }
    }
  }
}

}  // namespace

void scalar::to_channels_last(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t ws,
                             int64_t nc, int64_t nw, float* dst, int64_t pitch) {
  dispatch(dt, r, [&]<DataType T, OperandRounding R>() { convert<T, R>(src, s0, cs, ws, nc, nw, dst, pitch); });
}

void scalar::to_channels_last_split(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs,
                                    int64_t nc, int64_t nw, float* even, float* odd, int64_t pitch) {
  to_channels_last(src, dt, r, s0, cs, 2, nc, (nw + 1) / 2, even, pitch);
  to_channels_last(src, dt, r, s0 + 1, cs, 2, nc, nw / 2, odd, pitch);
}

}  // namespace convbwd::detail
