// The one loop every peak measurement runs, instantiated per instruction set
// (fma_avx2.cpp, fma_avx512.cpp), so the AVX-512 paths that cannot run on a
// machine without AVX-512 share their source with the AVX2 path that does.
#pragma once

#include <cstdint>

namespace convbwd::bench {

// kChains independent accumulators, each updated once per iteration with
// Ops::step(acc, a, b). A chain waits for its previous result, so throughput
// needs latency x pipes chains in flight: 4 cycles x 2 FMA pipes = 8 on Zen 3/4
// and Skylake. 12 leaves headroom for other cores and still fits in the 16
// ymm registers of AVX2 with the two operands.
constexpr int kChains = 12;

template <class Ops>
float run_chains(int64_t iterations) {
  using V = typename Ops::acc;
  V acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = Ops::init(j);
  const auto a = Ops::a();
  const auto b = Ops::b();
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) acc[j] = Ops::step(acc[j], a, b);
  }
  // Summing the chains keeps the compiler from dropping any of them.
  V s = acc[0];
  for (int j = 1; j < kChains; ++j) s = Ops::add(s, acc[j]);
  return Ops::first(s);
}

// One call of run_chains(iterations) on the given instruction set; the return
// is a checksum. FLOPs per step: lanes x 2 (one multiply and one add) for FMA,
// pairs x 2 for a bf16 dot product. available() checks the CPU and the OS.
struct PeakKernel {
  const char* name;
  double flops_per_step;
  bool (*available)();
  float (*run)(int64_t iterations);
};

bool cpu_has_avx2_fma();
bool cpu_has_avx512f();
bool cpu_has_avx512bf16();
bool cpu_has_amx_bf16();  // CPU, XCR0 and the OS's tile-data permission (requested here)

const PeakKernel& fma_avx2_kernel();
const PeakKernel& fma_avx512_kernel();
const PeakKernel& dpbf16_avx512_kernel();
const PeakKernel& tdpbf16_amx_kernel();  // tiles: its own loop, not run_chains

}  // namespace convbwd::bench
