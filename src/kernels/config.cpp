// The kernel config of each tier (see config.hpp). Compiled without ISA
// flags: it only takes the addresses of the kernels.
#include "kernels/config.hpp"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/tier_kernels.hpp"

namespace convbwd::detail {
namespace {

constexpr KernelConfig kScalar = CONVBWD_TIER_CONFIG(scalar, Isa::scalar, false, 6, 16, 6x16);
// Why 6x16 on AVX2: 12 ymm accumulators + 2 B vectors + 2 alternating
// broadcasts = the 16 registers, and each step issues 12 FMAs against 8
// loads, which keeps both FMA pipes busy without saturating the load ports.
constexpr KernelConfig kAvx2 = CONVBWD_TIER_CONFIG(avx2, Isa::avx2, false, 6, 16, 6x16);
constexpr KernelConfig kAvx512 = CONVBWD_AVX512_TIER_CONFIG(avx512, false);

// avx512 plus the vdpbf16ps pair kernels and vcvtneps2bf16 stores (tier_kernels.hpp).
constexpr KernelConfig kAvx512Bf16 = CONVBWD_AVX512_BF16_TIER_CONFIG(avx512, false);

// avx512_bf16 with AMX-BF16 tile kernels for bf16 operands (tier_kernels.hpp).
constexpr KernelConfig kAmx = with_amx_tiles(kAvx512Bf16, CONVBWD_AMX_BF16_GEMM(amx));

const KernelConfig* native(Isa i) {
  switch (i) {
    case Isa::scalar: return &kScalar;
    case Isa::avx2: return &kAvx2;
    case Isa::avx512: return &kAvx512;
    case Isa::avx512_bf16: return &kAvx512Bf16;
    case Isa::amx: return &kAmx;
  }
  return nullptr;
}

std::array<std::atomic<const KernelConfig*>, std::size(kAllIsas)> g_emulated{};

}  // namespace

bool kernel_config_exists(Isa i) { return native(i) != nullptr || emulated_kernel_config(i) != nullptr; }

const KernelConfig* native_kernel_config(Isa i) { return cpu_has(i) ? native(i) : nullptr; }

const KernelConfig* emulated_kernel_config(Isa i) {
  // (Every tier has a native entry, so GCC 12 infers that only a value
  // outside the enum reaches here from kernel_config_exists and flags the
  // index: the bound says what holds.)
  const size_t k = static_cast<size_t>(i);
  return k < g_emulated.size() ? g_emulated[k].load(std::memory_order_acquire) : nullptr;
}

void register_emulated_kernel_config(const KernelConfig& c) {
  g_emulated[static_cast<size_t>(c.isa)].store(&c, std::memory_order_release);
}

const KernelConfig& kernel_config(Isa i) {
  // CONVBWD_EMULATED=1 (test binaries): an emulated tier runs even where the
  // CPU has the native one, so that machines with AVX-512 test the SIMDe
  // build too.
  static const bool prefer_emulated = [] {
    const char* e = std::getenv("CONVBWD_EMULATED");
    return e && std::strcmp(e, "1") == 0;
  }();
  // The highest tier at or below i that has kernels: a tier without kernels
  // of its own (none today) would run the one below it.
  for (int t = static_cast<int>(i); t > 0; --t) {
    const Isa tier = static_cast<Isa>(t);
    const KernelConfig* n = native(tier);
    const KernelConfig* e = emulated_kernel_config(tier);
    if (e && prefer_emulated) return *e;
    if (n && cpu_has(tier)) return *n;
    if (e) return *e;
  }
  return kScalar;
}

}  // namespace convbwd::detail
