// The kernel config: for each instruction-set tier, every microkernel family
// with its kernels *and* their shape (tile mr x nr, lanes), built once. The
// planners (src/impl/) read kernels and shapes from here and never name an
// ISA or a width; adding a tier is adding its entry (config.cpp).
//
// A tier whose kernels are also compiled against SIMDe or on the AMX tile
// emulator (tests only, see tests/emulated/) can register that emulated
// config: planning then runs the same kernel source on a CPU without the
// tier, so every machine tests it.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/add_row.hpp"
#include "kernels/any_nonfinite.hpp"
#include "kernels/gemm.hpp"
#include "kernels/interleave_pairs.hpp"
#include "kernels/store_row.hpp"
#include "runtime/cpu.hpp"

namespace convbwd::detail {

struct DwPlan;
struct DwClPlan;
struct DwClFusedPlan;
struct BiasPlan;

// The channel-blocked depthwise kernels (depthwise_cl) of one width.
struct DwClKernels {
  int lanes = 0;  // channels per block (DwClPlan::lanes); 0: no such kernels
  unsigned (*task)(const DwClPlan&, const void* a, const void* b, void* dst, int64_t task, float* scratch) = nullptr;
  bool (*fused)(const DwClFusedPlan&, const void* dy, const void* x, const void* w, void* const* dst, int64_t block,
                float* scratch) = nullptr;
};

struct DepthwiseKernels {
  int lanes = 8;  // floats per vector the kernels tile by: plan-time sizes follow it
  void (*task)(const DwPlan&, const void* a, const void* b, void* dst, int64_t task, float* scratch) = nullptr;
  DwClKernels cl;
  // 8-channel blocks for a tier whose `cl` is wider, where the wider
  // block's planes would not stay in L2 (plan_depthwise_cl says when);
  // lanes 0 elsewhere.
  DwClKernels cl_narrow = {};
};

struct BiasKernels {
  int lanes = 8;  // floats per vector: defines the summation order (BiasPlan)
  void (*task)(const BiasPlan&, const void* a, void* dst, float* partials, int64_t task) = nullptr;
};

struct KernelConfig {
  Isa isa = Isa::scalar;
  bool emulated = false;  // compiled against SIMDe (tests only)
  GemmKernels gemm;
  ToChannelsLast to_channels_last = nullptr;
  StoreRow store_row = nullptr;
  AnyNonfinite any_nonfinite = nullptr;
  DepthwiseKernels depthwise;
  BiasKernels bias;
  // fp32 kernels of a narrower tile, for tiers whose `gemm` is wider than 16
  // columns: a group of at most nr columns (ResNeXt-style 16-channel groups)
  // fills it where `gemm` would compute half its lanes on padding. Null
  // elsewhere (the planners then use `gemm`).
  GemmKernels gemm_narrow = {};
  // The bf16 pair kernels (kernels/gemm.hpp), for tiers with bf16 arithmetic;
  // null gather/strided elsewhere (bf16 operands then widen to fp32). Last,
  // so that configs without them need not name it.
  GemmKernels bf16 = {};
  // Narrower pair kernels, as gemm_narrow is to gemm; null where `bf16` is
  // the only pair family.
  GemmKernels bf16_narrow = {};
  // The row store of several contiguous rows (kernels/store_row.hpp).
  StoreRows store_rows = nullptr;
  // The bf16 pair copies' transpose (kernels/gemm.hpp).
  Bf16PairsChannelsLast bf16_pairs_channels_last = nullptr;
  // The planar store of a channels-last output tile (kernels/store_row.hpp).
  StoreColumns store_columns = nullptr;
  // dst += src along a row (kernels/add_row.hpp).
  AddRow add_row = nullptr;
  // Two bf16 rows as pair words (kernels/interleave_pairs.hpp).
  InterleavePairRows interleave_pair_rows = nullptr;
  // Pair words shifted by one element (kernels/interleave_pairs.hpp).
  ShiftPairWords shift_pair_words = nullptr;
  // The channels-last conversion into two column phases (kernels/gemm.hpp).
  ToChannelsLastSplit to_channels_last_split = nullptr;
};

// The tier's name as plans report it: "avx2", "avx512", "avx512_emu".
inline std::string tier_name(const KernelConfig& c) { return std::string(to_string(c.isa)) + (c.emulated ? "_emu" : ""); }

// Whether this build has kernels of the tier's own (a tier without them runs
// the next tier below: see active_isa()).
bool kernel_config_exists(Isa);
// The config of a tier this CPU has (cpu_has), or else its registered
// emulated config; the scalar one for anything else. Planners take it from
// PlanContext::isa.
const KernelConfig& kernel_config(Isa);
// The native config of a tier this CPU has and this build has kernels for.
const KernelConfig* native_kernel_config(Isa);
// The emulated config of a tier, if a test build registered one.
const KernelConfig* emulated_kernel_config(Isa);
void register_emulated_kernel_config(const KernelConfig&);

}  // namespace convbwd::detail
