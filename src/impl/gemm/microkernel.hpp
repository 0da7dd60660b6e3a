// The register-blocked fp32 microkernels behind the dense convolution paths
// (src/impl/gemm/). One kernel shape serves all three operations:
//
//   acc[i][j] (+)= sum over runs r, steps t < len[r] of
//                  A(i, r, t) * b[b_off[r] + t*bs + j]      i < 6, j < 16
//
// The 16 columns j are one contiguous vector of the B side (16 channels of a
// channels-last image or of a packed weight block). The 6 rows i are either
//   gather:  six independent pointers, A(i, r, t) = a[i][a_off[r] + t]
//            (six output pixels, each reading a channel run of its own pixel);
//   strided: one pointer, A(i, r, t) = a[0][a_off[r] + t*as + i]
//            (six consecutive channels of one channels-last pixel).
// A "run" is one kernel tap (forward/data gradient) or one image row (weight
// gradient): the accumulators stay in registers across every run, so a whole
// reduction costs one load and one store of the 6x16 tile.
//
// Why 6x16 on AVX2: 12 ymm accumulators + 2 B vectors + 2 alternating
// broadcasts = the 16 registers, and each step issues 12 FMAs against 8
// loads, which keeps both FMA pipes busy without saturating the load ports.
//
// Users: gather_conv.cpp (fwd, phase dgrad: gather), wgrad_conv.cpp (blocked
// channels-last wgrad: strided), nchw_1x1.cpp (planar 1x1 fwd/dgrad:
// strided, A = packed weights), wgrad_1x1.cpp (planar 1x1 wgrad: gather, A
// rows = dy channel rows in place).
#pragma once

#include <cstdint>

#include "convbwd/convbwd.hpp"
#include "kernels/store_row.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {

constexpr int kMr = 6;
constexpr int kNr = 16;

struct MicroArgs {
  const float* a[kMr] = {};  // gather: six row pointers; strided: a[0] only
  const float* b = nullptr;
  int64_t as = 1;  // strided: A step stride (elements)
  int64_t bs = kNr;  // B step stride (elements); gather kernels require kNr
  const int64_t* a_off = nullptr;
  const int64_t* b_off = nullptr;
  const int64_t* len = nullptr;
  int64_t runs = 0;
  float* acc = nullptr;     // 6x16 row-major fp32 tile
  bool accumulate = false;  // add to acc (else overwrite)
};

using MicroKernel = void (*)(const MicroArgs&);

// Naming: <dtype>_gemm_<MR>x<NR>_<A access>_<isa>.
void f32_gemm_6x16_gather_scalar(const MicroArgs&);
void f32_gemm_6x16_strided_scalar(const MicroArgs&);
void f32_gemm_6x16_gather_avx2(const MicroArgs&);
void f32_gemm_6x16_strided_avx2(const MicroArgs&);

// Converts a [channels nc][pixels nw] block of a source image (element
// (c, w) at src_index + c*cstride + w*wstride, dtype dt) to fp32, applies the
// operand rounding, and stores it channels-last: dst[w*pitch + c]. The fast
// path (unit pixel or channel stride) transposes 8x8 blocks in registers.
using ToChannelsLast = void (*)(const void* src, DataType dt, OperandRounding rounding, int64_t src_index,
                                int64_t cstride, int64_t wstride, int64_t nc, int64_t nw, float* dst,
                                int64_t pitch);
void to_channels_last_scalar(const void*, DataType, OperandRounding, int64_t, int64_t, int64_t, int64_t, int64_t,
                             float*, int64_t);
void to_channels_last_avx2(const void*, DataType, OperandRounding, int64_t, int64_t, int64_t, int64_t, int64_t,
                           float*, int64_t);

}  // namespace convbwd::detail
