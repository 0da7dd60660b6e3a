// CPU features, detected once, and the instruction-set tiers built from them.
// Kernels are chosen per plan from the tier found here (through the kernel
// config, src/kernels/config.hpp), never inside inner loops.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace convbwd::detail {

// A tier is a set of features, not a rung of one ladder: Skylake-SP and Ice
// Lake have avx512 but not avx512_bf16; a Zen 4 has avx512_bf16 but not amx.
enum class Isa {
  scalar,       // portable C++, any x86-64
  avx2,         // AVX2 + FMA + F16C
  avx512,       // AVX-512 F + BW + DQ + VL (Skylake-SP, Ice Lake, Zen 4 and later)
  avx512_bf16,  // avx512 + AVX512_BF16 (vdpbf16ps)
  amx,          // avx512_bf16 + AMX-TILE + AMX-BF16, with the OS's tile-data permission (Sapphire Rapids on)
};
constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16, Isa::amx};

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false;
  bool os_ymm = false, os_zmm = false, os_amx = false;  // XCR0: the OS saves those registers
  // Linux hands a process the tile data state only on request; asked once,
  // at detection, where the CPU and XCR0 have AMX. 0, or the errno of the
  // refusal (EPERM, EINVAL on kernels before 5.16, ...).
  bool amx_permitted = false;
  int amx_request_errno = 0;
  // Bytes of the largest (last-level) data cache that CPUID describes
  // (leaf 4 on Intel, 0x8000001D on AMD): the cache an output written with
  // ordinary stores may still be in when the next layer reads it. 0 when
  // CPUID does not say.
  int64_t llc_bytes = 0;
  // The CPU runs 512-bit operations as two 256-bit halves through 256-bit
  // units and a 32-byte-per-cycle L2 (AMD Zen 4: family 19h with AVX-512),
  // so zmm bodies gain nothing per element over ymm ones and their larger
  // working sets cost more. No CPUID bit says so; the family does.
  bool zmm_in_halves = false;
};
const CpuFeatures& cpu_features();

// Whether this CPU and OS can run every instruction of the tier.
bool cpu_has(Isa);
// The tier the kernels run on: the best one this CPU has that the kernel
// config implements, or the one CONVBWD_ISA names (see kernels/config.hpp).
Isa active_isa();
Isa detected_isa();  // ignoring CONVBWD_ISA
std::string_view to_string(Isa);
std::optional<Isa> isa_from_string(std::string_view);

}  // namespace convbwd::detail
