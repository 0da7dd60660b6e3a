// The AMX-BF16 peak: tdpbf16ps on tiles (compiled with -mamx-tile
// -mamx-bf16; called only when the CPU, XCR0 and the OS's tile-data
// permission allow it: cpu_has_amx_bf16()).
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "chain.hpp"

namespace convbwd::bench {
namespace {

// Six C tiles (tmm0..5) against one A (tmm6) and one B (tmm7) tile, all
// 16 rows x 64 bytes: six independent accumulations, so the TMUL unit never
// waits for a previous product of the same tile (its latency is several of
// its 16-cycle issue intervals on Sapphire Rapids). One tdpbf16ps is
// 16 x 16 fp32 outputs x 32 bf16 products: 16384 FLOPs.
constexpr int kAccTiles = 6;
constexpr double kFlopsPerProduct = 16.0 * 16.0 * 32.0 * 2.0;

struct alignas(64) Config {
  uint8_t palette = 1, start_row = 0, reserved0[14] = {};
  uint16_t colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t reserved1[16] = {};
  uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
  uint8_t reserved2[8] = {};
};

float run(int64_t iterations) {
  static const Config cfg;
  // bf16 2^-10 in both halves of every pair: each product adds 32 * 2^-20 =
  // 2^-15 per output, far from overflow and from subnormals.
  alignas(64) uint32_t ab[16][16];
  for (auto& row : ab)
    for (uint32_t& x : row) x = 0x3a803a80u;
  alignas(64) float c[16][16] = {};
  __asm__ volatile("" : : "r"(&cfg), "r"(ab) : "memory");  // GCC's asm names 8 of the 64 bytes only
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0][0];
}

}  // namespace

bool cpu_has_amx_bf16() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!cpu_has_avx512f() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0x60000u) != 0x60000u) return false;  // XTILECFG and XTILEDATA state
    // Linux grants the tile data state only on request
    // (ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18).
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return ok;
}

const PeakKernel& tdpbf16_amx_kernel() {
  static const PeakKernel k{"bf16_tile_amx", kAccTiles * kFlopsPerProduct, cpu_has_amx_bf16, run};
  return k;
}

}  // namespace convbwd::bench
