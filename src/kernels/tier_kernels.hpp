// The kernels every tier provides, declared once for each tier's namespace
// (scalar, avx2, avx512, and avx512_emu for the SIMDe build of the tests).
// Each tier's sources are compiled with that tier's flags and define these in
// its namespace only, so no function built for one ISA can be linked into a
// caller of another. The shapes travel with them in the kernel config.
#pragma once

#include "kernels/config.hpp"

// The GEMM microkernels are named by shape too: <dtype>_gemm_<MR>x<NR>_<A access>.
#define CONVBWD_DECLARE_TIER_KERNELS(ns, gemm_shape)                                                          \
  namespace convbwd::detail::ns {                                                                           \
  void f32_gemm_##gemm_shape##_gather(const MicroArgs&);                                                    \
  void f32_gemm_##gemm_shape##_strided(const MicroArgs&);                                                   \
  void to_channels_last(const void* src, DataType dt, OperandRounding rounding, int64_t src_index,         \
                        int64_t cstride, int64_t wstride, int64_t nc, int64_t nw, float* dst, int64_t pitch); \
  void store_row(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride);     \
  bool any_nonfinite(const float* p, int64_t n);                                                            \
  void depthwise_task(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task, float* scratch); \
  unsigned depthwise_cl_task(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t task,     \
                             float* scratch);                                                               \
  bool depthwise_cl_fused(const DwClFusedPlan& p, const void* dy, const void* x, const void* w,            \
                          void* const* dst, int64_t block, float* scratch);                                 \
  void bias_task(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t task);               \
  }

// A tier's config from its namespace's kernels.
#define CONVBWD_TIER_CONFIG(ns, tier, is_emulated, MR, NR, gemm_shape)                                      \
  ::convbwd::detail::KernelConfig {                                                                         \
    tier, is_emulated,                                                                                      \
        {MR, NR, &ns::f32_gemm_##gemm_shape##_gather, &ns::f32_gemm_##gemm_shape##_strided,                 \
         "f32_gemm_" #gemm_shape "_" #ns},                                                                  \
        &ns::to_channels_last, &ns::store_row, &ns::any_nonfinite,                                          \
        {8, &ns::depthwise_task, &ns::depthwise_cl_task, &ns::depthwise_cl_fused}, &ns::bias_task              \
  }

CONVBWD_DECLARE_TIER_KERNELS(scalar, 6x16)
CONVBWD_DECLARE_TIER_KERNELS(avx2, 6x16)
CONVBWD_DECLARE_TIER_KERNELS(avx512, 8x32)
CONVBWD_DECLARE_TIER_KERNELS(avx512_emu, 8x32)

// The bf16 pair kernels (kernels/gemm.hpp) of the tiers with vdpbf16ps.
#define CONVBWD_DECLARE_BF16_GEMM_KERNELS(ns, gemm_shape)   \
  namespace convbwd::detail::ns {                         \
  void bf16_gemm_##gemm_shape##_gather(const MicroArgs&);  \
  void bf16_gemm_##gemm_shape##_strided(const MicroArgs&); \
  }

CONVBWD_DECLARE_BF16_GEMM_KERNELS(avx512, 8x32)
CONVBWD_DECLARE_BF16_GEMM_KERNELS(avx512_emu, 8x32)
