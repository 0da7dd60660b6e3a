// The kernels every tier provides, declared once for each tier's namespace
// (scalar, avx2, avx512, amx, and avx512_emu / amx_emu for the emulated
// builds of the tests).
// Each tier's sources are compiled with that tier's flags and define these in
// its namespace only, so no function built for one ISA can be linked into a
// caller of another. The shapes travel with them in the kernel config.
#pragma once

#include "kernels/config.hpp"

// The GEMM microkernels are named by shape too: <dtype>_gemm_<MR>x<NR>_<A access>.
#define CONVBWD_DECLARE_TIER_GEMM(ns, gemm_shape)            \
  namespace convbwd::detail::ns {                          \
  void f32_gemm_##gemm_shape##_gather(const MicroArgs&);   \
  void f32_gemm_##gemm_shape##_strided(const MicroArgs&);  \
  }

// The converters, row stores, NaN/Inf checks, row adds, pair-row interleaves, depthwise_direct and bias kernels.
#define CONVBWD_DECLARE_TIER_ROW_KERNELS(ns)                                                                  \
  namespace convbwd::detail::ns {                                                                           \
  void to_channels_last(const void* src, DataType dt, OperandRounding rounding, int64_t src_index,         \
                        int64_t cstride, int64_t wstride, int64_t nc, int64_t nw, float* dst, int64_t pitch); \
  void to_channels_last_split(const void* src, DataType dt, OperandRounding rounding, int64_t src_index,   \
                              int64_t cstride, int64_t nc, int64_t nw, float* even, float* odd, int64_t pitch); \
  void store_row(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride);     \
  void store_rows(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt,   \
                  int64_t index, int64_t row_stride);                                                       \
  void store_columns(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base, DataType dt, \
                     int64_t index, int64_t col_stride, int64_t pixel_step);                                \
  bool any_nonfinite(const float* p, int64_t n);                                                            \
  void add_row(float* dst, const float* src, int64_t n);                                                    \
  void interleave_pair_rows(const uint16_t* even, const uint16_t* odd, int64_t n, uint32_t* dst);          \
  void shift_pair_words(const uint32_t* src, int64_t n, int64_t pitch, uint32_t* dst);                    \
  void depthwise_task(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task, float* scratch); \
  void bias_task(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t task);               \
  }

// The channel-blocked depthwise kernels (depthwise_cl: one channel per lane).
#define CONVBWD_DECLARE_TIER_DWCL_KERNELS(ns)                                                            \
  namespace convbwd::detail::ns {                                                                      \
  unsigned depthwise_cl_task(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t task, \
                             float* scratch);                                                          \
  bool depthwise_cl_fused(const DwClFusedPlan& p, const void* dy, const void* x, const void* w,       \
                          void* const* dst, int64_t block, float* scratch);                            \
  }

#define CONVBWD_DECLARE_TIER_KERNELS(ns, gemm_shape) \
  CONVBWD_DECLARE_TIER_GEMM(ns, gemm_shape)          \
  CONVBWD_DECLARE_TIER_ROW_KERNELS(ns)               \
  CONVBWD_DECLARE_TIER_DWCL_KERNELS(ns)

// A tier's config from its namespace's kernels (8-lane depthwise and bias).
#define CONVBWD_TIER_CONFIG(ns, tier, is_emulated, MR, NR, gemm_shape)                                      \
  ::convbwd::detail::KernelConfig {                                                                         \
    tier, is_emulated,                                                                                      \
        {MR, NR, &ns::f32_gemm_##gemm_shape##_gather, &ns::f32_gemm_##gemm_shape##_strided,                 \
         "f32_gemm_" #gemm_shape "_" #ns},                                                                  \
        &ns::to_channels_last, &ns::store_row, &ns::any_nonfinite,                                          \
        {8, &ns::depthwise_task, {8, &ns::depthwise_cl_task, &ns::depthwise_cl_fused}}, {8, &ns::bias_task}, \
        {}, {}, {}, &ns::store_rows, &::convbwd::detail::scalar::bf16_pairs_channels_last, &ns::store_columns, \
        &ns::add_row, &ns::interleave_pair_rows, &ns::shift_pair_words, &ns::to_channels_last_split           \
  }

// The AVX-512 tier from namespace ns (avx512, or avx512_emu in the tests):
// 8x32 GEMM tiles (why: kernels/avx512/f32_gemm_avx512.cpp), the depthwise
// kernels and the bias sums at 16 lanes, with AVX2's 8-channel blocks beside
// the 16-channel ones of the channel-blocked depthwise kernels (they give the
// same bits; depthwise_cl_kernels_for in src/impl/depthwise says which runs).
// Their fused pass sums gradBias in the bias plan's own lane order
// (DwClFusedPlan::bias_lanes), so it matches this tier's bias_reduce.
#define CONVBWD_AVX512_TIER_CONFIG(ns, is_emulated)                                                            \
  ::convbwd::detail::KernelConfig {                                                                            \
    ::convbwd::detail::Isa::avx512, is_emulated,                                                               \
        {8, 32, &ns::f32_gemm_8x32_gather, &ns::f32_gemm_8x32_strided, "f32_gemm_8x32_" #ns, 0,                \
         &ns::f32_gemm_x32_strided_of_rows, ::convbwd::detail::kAvx512StridedRowsMax,                          \
         &ns::f32_gemm_8x16_strided},                                                                          \
        &ns::to_channels_last, &ns::store_row, &ns::any_nonfinite,                                             \
        {16, &ns::depthwise_task, {16, &ns::depthwise_cl_task, &ns::depthwise_cl_fused},                       \
         {8, &avx2::depthwise_cl_task, &avx2::depthwise_cl_fused}},                                            \
        {16, &ns::bias_task},                                                                                  \
        {16, 16, &ns::f32_gemm_12x16_gather, &ns::f32_gemm_16x16_strided, "f32_gemm_16x16_" #ns, 12},          \
        {}, {}, &ns::store_rows, &ns::bf16_pairs_channels_last, &ns::store_columns, &ns::add_row,              \
        &ns::interleave_pair_rows, &ns::shift_pair_words, &ns::to_channels_last_split                          \
  }

CONVBWD_DECLARE_TIER_KERNELS(scalar, 6x16)
CONVBWD_DECLARE_TIER_KERNELS(avx2, 6x16)
CONVBWD_DECLARE_TIER_GEMM(avx512, 8x32)
CONVBWD_DECLARE_TIER_GEMM(avx512_emu, 8x32)
// The AVX-512 tiers' strided kernels of any row count up to 14 (the most
// whose 2 x 14 accumulators fit the 32 zmm registers beside the 2 B vectors
// and a broadcast): GemmKernels::strided_of_rows.
namespace convbwd::detail {
constexpr int kAvx512StridedRowsMax = 14;
}
#define CONVBWD_DECLARE_STRIDED_OF_ROWS(ns)                 \
  namespace convbwd::detail::ns {                         \
  MicroKernel f32_gemm_x32_strided_of_rows(int rows);     \
  MicroKernel bf16_gemm_x32_strided_of_rows(int rows);    \
  void f32_gemm_8x16_strided(const MicroArgs&);           \
  void bf16_gemm_8x16_strided(const MicroArgs&);          \
  }
CONVBWD_DECLARE_STRIDED_OF_ROWS(avx512)
CONVBWD_DECLARE_STRIDED_OF_ROWS(avx512_emu)
CONVBWD_DECLARE_TIER_ROW_KERNELS(avx512)
CONVBWD_DECLARE_TIER_ROW_KERNELS(avx512_emu)
CONVBWD_DECLARE_TIER_DWCL_KERNELS(avx512)
CONVBWD_DECLARE_TIER_DWCL_KERNELS(avx512_emu)

// The bf16 pair kernels (kernels/gemm.hpp) of the tiers with vdpbf16ps.
#define CONVBWD_DECLARE_BF16_GEMM_KERNELS(ns, gemm_shape)   \
  namespace convbwd::detail::ns {                         \
  void bf16_gemm_##gemm_shape##_gather(const MicroArgs&);  \
  void bf16_gemm_##gemm_shape##_strided(const MicroArgs&); \
  }

CONVBWD_DECLARE_BF16_GEMM_KERNELS(avx512, 8x32)
CONVBWD_DECLARE_BF16_GEMM_KERNELS(avx512_emu, 8x32)
// The narrow families of the AVX-512 tiers: a 12-row gather kernel with a
// 16-row strided one (why: kernels/avx512/f32_gemm_avx512.cpp).
#define CONVBWD_DECLARE_NARROW_GEMM_KERNELS(ns)          \
  namespace convbwd::detail::ns {                       \
  void f32_gemm_12x16_gather(const MicroArgs&);         \
  void f32_gemm_16x16_strided(const MicroArgs&);        \
  void bf16_gemm_12x16_gather(const MicroArgs&);        \
  void bf16_gemm_16x16_strided(const MicroArgs&);       \
  }

CONVBWD_DECLARE_NARROW_GEMM_KERNELS(avx512)
CONVBWD_DECLARE_NARROW_GEMM_KERNELS(avx512_emu)
// The avx512_bf16 tier's pair families (KernelConfig::bf16, bf16_narrow)
// from namespace ns, for the native config and the emulated one alike.
#define CONVBWD_AVX512_BF16_GEMM(ns)                                                                     \
  ::convbwd::detail::GemmKernels {                                                                       \
    8, 32, &ns::bf16_gemm_8x32_gather, &ns::bf16_gemm_8x32_strided, "bf16_gemm_8x32_" #ns, 0,           \
        &ns::bf16_gemm_x32_strided_of_rows, ::convbwd::detail::kAvx512StridedRowsMax,                    \
        &ns::bf16_gemm_8x16_strided                                                                      \
  }
#define CONVBWD_AVX512_BF16_NARROW_GEMM(ns)                                                              \
  ::convbwd::detail::GemmKernels {                                                                       \
    16, 16, &ns::bf16_gemm_12x16_gather, &ns::bf16_gemm_16x16_strided, "bf16_gemm_16x16_" #ns, 12       \
  }
// The avx512_bf16 tier's row stores: the avx512 tier's, with bf16 rounded
// by vcvtneps2bf16 (kernels/avx512/store_row_avx512.cpp; the same bits).
#define CONVBWD_DECLARE_CVTNE_ROW_STORES(ns)                                                                    \
  namespace convbwd::detail::ns {                                                                             \
  void store_row_cvtne(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride);   \
  void store_rows_cvtne(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt, \
                        int64_t index, int64_t row_stride);                                                     \
  void store_columns_cvtne(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base,          \
                           DataType dt, int64_t index, int64_t col_stride, int64_t pixel_step);                 \
  }

CONVBWD_DECLARE_CVTNE_ROW_STORES(avx512)
CONVBWD_DECLARE_CVTNE_ROW_STORES(avx512_emu)

// The avx512_bf16 tier from namespace ns (avx512, or avx512_emu in the
// tests): the avx512 tier plus the vdpbf16ps pair kernels for bf16
// operands (kernels/avx512/bf16_gemm_avx512.cpp) and the row stores that
// round with vcvtneps2bf16; everything else is avx512's.
namespace convbwd::detail {
constexpr KernelConfig with_bf16_instructions(KernelConfig c, GemmKernels bf16, GemmKernels bf16_narrow,
                                              StoreRow store_row, StoreRows store_rows, StoreColumns store_columns) {
  c.isa = Isa::avx512_bf16;
  c.bf16 = bf16;
  c.bf16_narrow = bf16_narrow;
  c.store_row = store_row;
  c.store_rows = store_rows;
  c.store_columns = store_columns;
  return c;
}
}  // namespace convbwd::detail
#define CONVBWD_AVX512_BF16_TIER_CONFIG(ns, is_emulated)                                                          \
  ::convbwd::detail::with_bf16_instructions(CONVBWD_AVX512_TIER_CONFIG(ns, is_emulated),                         \
                                            CONVBWD_AVX512_BF16_GEMM(ns), CONVBWD_AVX512_BF16_NARROW_GEMM(ns), \
                                            &ns::store_row_cvtne, &ns::store_rows_cvtne, &ns::store_columns_cvtne)

// The amx tier: the avx512_bf16 tier's config c with AMX-BF16 kernels
// (kernels/amx/bf16_gemm_amx.cpp; namespace amx, or amx_emu on the tile
// emulator of the tests) for bf16 operands: 16x32 tiles, so the bf16
// planners tile by 16 rows there. No narrow pair family: even half-used, a
// tile outruns vdpbf16ps many times over (issue 15: 3.3 TFLOP/s per core
// against 0.24).
namespace convbwd::detail {
constexpr KernelConfig with_amx_tiles(KernelConfig c, GemmKernels amx) {
  c.isa = Isa::amx;
  c.bf16 = amx;
  c.bf16_narrow = {};
  return c;
}
}  // namespace convbwd::detail
#define CONVBWD_AMX_BF16_GEMM(ns)                                                                          \
  ::convbwd::detail::GemmKernels {                                                                         \
    16, 32, &ns::bf16_gemm_16x32_gather, &ns::bf16_gemm_16x32_strided, "bf16_gemm_16x32_" #ns              \
  }

// The bf16 pair transpose (Bf16PairsChannelsLast, kernels/gemm.hpp): the
// portable one, which the tiers without pair kernels name in their configs,
// and the AVX-512 one.
#define CONVBWD_DECLARE_BF16_PAIRS_CHANNELS_LAST(ns)                                                      \
  namespace convbwd::detail::ns {                                                                       \
  bool bf16_pairs_channels_last(const uint16_t* src, int64_t cstride, int64_t rows, int64_t len,         \
                                bool pair_elements, int lead, bool zero_nonfinite, uint32_t* dst,       \
                                int64_t pitch);                                                         \
  }

CONVBWD_DECLARE_BF16_PAIRS_CHANNELS_LAST(scalar)
CONVBWD_DECLARE_BF16_PAIRS_CHANNELS_LAST(avx512)
CONVBWD_DECLARE_BF16_PAIRS_CHANNELS_LAST(avx512_emu)
// The AMX-BF16 ones (kernels/amx/bf16_gemm_amx.cpp), natively and on the
// tile emulator of the test build.
CONVBWD_DECLARE_BF16_GEMM_KERNELS(amx, 16x32)
CONVBWD_DECLARE_BF16_GEMM_KERNELS(amx_emu, 16x32)
