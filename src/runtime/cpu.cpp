#include "runtime/cpu.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "convbwd/convbwd.hpp"
#include "kernels/config.hpp"
#include "runtime/env.hpp"

namespace convbwd::detail {
namespace {

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Asks Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM with
// XFEATURE_XTILEDATA, Linux 5.16 and later): without it the first TILELOADD
// faults, whatever CPUID and XCR0 say. Returns 0 or the errno. The
// permission is the process's and cannot be taken back, so once is enough.
int request_tile_data() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0 ? 0 : errno;
}

std::string amx_refusal(const CpuFeatures& f) {
  return "the OS refused the tile data permission (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): " +
         std::string(std::strerror(f.amx_request_errno)) + ")";
}

// The size of the highest-level data or unified cache in CPUID's cache
// descriptors at `leaf` (4 and 0x8000001D share the layout: EAX type and
// level, EBX ways, partitions and line size, ECX sets, each minus one).
int64_t last_level_cache(unsigned leaf) {
  int64_t bytes = 0;
  unsigned best_level = 0;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid_count(leaf, i, a, b, c, d);
    const unsigned type = a & 0x1f, level = (a >> 5) & 0x7;
    if (type == 0) break;  // no more caches
    if (type == 2 || level < best_level) continue;  // instruction cache
    best_level = level;
    bytes = int64_t{(b >> 22) + 1} * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * (int64_t{c} + 1);
  }
  return bytes;
}

int64_t detect_llc_bytes() {
  if (__get_cpuid_max(0, nullptr) >= 4)
    if (const int64_t bytes = last_level_cache(4)) return bytes;
  // AMD: leaf 4 is reserved; its descriptors are at 0x8000001D when
  // 0x80000001 ECX bit 22 (topology extensions) says so.
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000, nullptr)) >= 0x8000001Du &&
      __get_cpuid(0x80000001, &a, &b, &c, &d) &&
      ((c >> 22) & 1))
    return last_level_cache(0x8000001D);
  return 0;
}

// The family of an AMD CPU (base plus extended family, CPUID 1 EAX), 0 for
// any other vendor.
unsigned amd_family() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
  // "AuthenticAMD" in EBX, EDX, ECX.
  if (b != 0x68747541 || d != 0x69746e65 || c != 0x444d4163) return 0;
  __get_cpuid(1, &a, &b, &c, &d);
  const unsigned base = (a >> 8) & 0xf, ext = (a >> 20) & 0xff;
  return base == 0xf ? base + ext : base;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.llc_bytes = detect_llc_bytes();
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  f.os_ymm = (xcr0 & 0x6) == 0x6;
  f.os_zmm = (xcr0 & 0xe6) == 0xe6;        // opmask, ZMM_Hi256, Hi16_ZMM
  f.os_amx = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  f.avx512f = (b >> 16) & 1;
  f.avx512dq = (b >> 17) & 1;
  f.avx512bw = (b >> 30) & 1;
  f.avx512vl = (b >> 31) & 1;
  f.avx512_fp16 = (d >> 23) & 1;
  f.amx_bf16 = (d >> 22) & 1;
  f.amx_tile = (d >> 24) & 1;
  __cpuid_count(7, 1, a, b, c, d);
  f.avx512_bf16 = (a >> 5) & 1;
  f.zmm_in_halves = f.avx512f && amd_family() == 0x19;
  if (f.amx_tile && f.amx_bf16 && f.os_amx) {
    f.amx_request_errno = request_tile_data();
    f.amx_permitted = f.amx_request_errno == 0;
    // The tier below runs; say why, since the CPU has the tier.
    if (!f.amx_permitted && verbose())
      std::fprintf(stderr, "convbwd: amx: %s; the tier below runs\n", amx_refusal(f).c_str());
  }
  return f;
}

Isa best_implemented() {
  Isa best = Isa::scalar;
  for (Isa i : kAllIsas)
    if (cpu_has(i) && kernel_config_exists(i)) best = i;
  return best;
}

// CONVBWD_ISA: a tier name forces that tier's kernels (the highest tier at or
// below it that has kernels of its own). A tier this CPU lacks, or an unknown
// name, is refused with a message once, and the detected tier runs: running
// AVX-512 code on an AVX2 CPU would end in SIGILL, never in a result.
Isa from_env(Isa best) {
  const char* e = std::getenv("CONVBWD_ISA");
  if (!e || !*e) return best;
  std::string accepted;
  for (Isa i : kAllIsas)
    if (cpu_has(i) || emulated_kernel_config(i)) accepted += (accepted.empty() ? "" : ", ") + std::string(to_string(i));
  // Reported through the one strict parser's channel (runtime/env.hpp), so
  // the CLI exits 2 on it like on any other invalid variable.
  const std::optional<Isa> want = isa_from_string(e);
  if (!want) {
    report_invalid_env("CONVBWD_ISA", e, "a tier name this CPU has: " + accepted);
    return best;
  }
  if (!cpu_has(*want) && !emulated_kernel_config(*want)) {
    const CpuFeatures& f = cpu_features();
    const std::string lack = *want == Isa::amx && f.amx_tile && f.amx_bf16 && f.os_amx && !f.amx_permitted
                                 ? "it has amx but " + amx_refusal(f)
                                 : "it lacks " + std::string(e);
    report_invalid_env("CONVBWD_ISA", e, "a tier this CPU has (" + lack + "): " + accepted);
    return best;
  }
  Isa run = Isa::scalar;
  for (Isa i : kAllIsas)
    if (static_cast<int>(i) <= static_cast<int>(*want) && kernel_config_exists(i) &&
        (cpu_has(i) || emulated_kernel_config(i)))
      run = i;
  return run;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool cpu_has(Isa i) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.os_ymm && f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.os_zmm && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
  switch (i) {
    case Isa::scalar: return true;
    case Isa::avx2: return avx2;
    case Isa::avx512: return avx512;
    case Isa::avx512_bf16: return avx512 && f.avx512_bf16;
    case Isa::amx: return avx512 && f.avx512_bf16 && f.amx_tile && f.amx_bf16 && f.os_amx && f.amx_permitted;
  }
  return false;
}

Isa detected_isa() {
  static const Isa isa = best_implemented();
  return isa;
}

Isa active_isa() {
  static const Isa isa = from_env(detected_isa());
  return isa;
}

std::string_view to_string(Isa i) {
  switch (i) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
    case Isa::amx: return "amx";
  }
  return "?";
}

std::optional<Isa> isa_from_string(std::string_view s) {
  for (Isa i : kAllIsas)
    if (s == to_string(i)) return i;
  return std::nullopt;
}

}  // namespace convbwd::detail

namespace convbwd {
std::string_view isa() { return detail::to_string(detail::active_isa()); }
}  // namespace convbwd
