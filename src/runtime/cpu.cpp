#include "runtime/cpu.hpp"

#include <cpuid.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "convbwd/convbwd.hpp"

namespace convbwd::detail {
namespace {

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

Isa detect() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::scalar;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return Isa::scalar;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;  // opmask, ZMM_Hi256, Hi16_ZMM
  if (__get_cpuid_max(0, nullptr) < 7) return Isa::scalar;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = (b >> 5) & 1;
  const bool avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
  __cpuid_count(7, 1, a, b, c, d);
  const bool avx512bf16 = (a >> 5) & 1;
  if (!(ymm_state && avx2 && fma && f16c)) return Isa::scalar;
  if (zmm_state && avx512f && avx512dq && avx512bw && avx512vl && avx512bf16) return Isa::avx512;
  return Isa::avx2;
}

Isa from_env(Isa best) {
  const char* e = std::getenv("CONVBWD_ISA");
  if (!e || !*e) return best;
  Isa want = best;
  if (!std::strcmp(e, "scalar")) want = Isa::scalar;
  else if (!std::strcmp(e, "avx2")) want = Isa::avx2;
  else if (!std::strcmp(e, "avx512")) want = Isa::avx512;
  else std::fprintf(stderr, "convbwd: CONVBWD_ISA=%s is unknown; expected scalar, avx2 or avx512\n", e);
  return want < best ? want : best;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
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
  }
  return "?";
}

}  // namespace convbwd::detail

namespace convbwd {
std::string_view isa() { return detail::to_string(detail::active_isa()); }
}  // namespace convbwd
