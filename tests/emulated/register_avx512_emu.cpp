// The emulated avx512, avx512_bf16 and amx tiers of the test binaries: the
// AVX-512 kernel sources compiled a second time against SIMDe
// (src/kernels/avx512/simd.hpp), in namespace avx512_emu, and the AMX ones on
// the tile emulator (src/kernels/amx/tile_emu.hpp), in amx_emu, registered
// at start-up. Planning runs them where the CPU lacks the tier
// (CONVBWD_ISA=avx512, amx), or everywhere with CONVBWD_EMULATED=1, so every
// machine tests those code paths. SIMDe is built here for AVX2, so the tiers
// are registered only on CPUs that have it.
#include "kernels/config.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail {
namespace {

const KernelConfig kAvx512Emulated = CONVBWD_AVX512_TIER_CONFIG(avx512_emu, true);

// The avx512_bf16 tier: the same, plus the pair kernels built on simd.hpp's
// emulation of vdpbf16ps and the row stores on its vcvtneps2bf16.
const KernelConfig kAvx512Bf16Emulated = CONVBWD_AVX512_BF16_TIER_CONFIG(avx512_emu, true);

// The amx tier: avx512_bf16's emulated config with the AMX kernels on the
// tile emulator (kernels/amx/tile_emu.hpp) for bf16 operands, as the native
// amx config is avx512_bf16's with the native AMX kernels.
const KernelConfig kAmxEmulated = with_amx_tiles(kAvx512Bf16Emulated, CONVBWD_AMX_BF16_GEMM(amx_emu));

const bool kRegistered = [] {
  if (cpu_has(Isa::avx2)) {
    register_emulated_kernel_config(kAvx512Emulated);
    register_emulated_kernel_config(kAvx512Bf16Emulated);
    register_emulated_kernel_config(kAmxEmulated);
  }
  return true;
}();

}  // namespace
}  // namespace convbwd::detail
