// The emulated avx512 tier of the test binaries: the AVX-512 kernel sources
// compiled a second time against SIMDe (src/kernels/avx512/simd.hpp), in
// namespace avx512_emu, registered at start-up. Planning runs them where the
// CPU lacks AVX-512 (CONVBWD_ISA=avx512), or everywhere with
// CONVBWD_EMULATED=1, so every machine tests the AVX-512 code paths. SIMDe is
// built here for AVX2, so the tier is registered only on CPUs that have it.
#include "kernels/config.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail {
namespace {

const KernelConfig kAvx512Emulated = CONVBWD_AVX512_TIER_CONFIG(avx512_emu, true);

// The avx512_bf16 tier: the same, plus the pair kernels built on simd.hpp's
// emulation of vdpbf16ps.
const KernelConfig kAvx512Bf16Emulated = [] {
  KernelConfig c = kAvx512Emulated;
  c.isa = Isa::avx512_bf16;
  c.bf16 = {8, 32, &avx512_emu::bf16_gemm_8x32_gather, &avx512_emu::bf16_gemm_8x32_strided,
            "bf16_gemm_8x32_avx512_emu"};
  return c;
}();

const bool kRegistered = [] {
  if (cpu_has(Isa::avx2)) register_emulated_kernel_config(kAvx512Emulated);
  if (cpu_has(Isa::avx2)) register_emulated_kernel_config(kAvx512Bf16Emulated);
  return true;
}();

}  // namespace
}  // namespace convbwd::detail
