// The intrinsics back end of the tile interface (tile.hpp). Only for sources
// compiled with -mamx-tile -mamx-bf16 (src/kernels/amx/, CMakeLists.txt),
// and only run after cpu_has(Isa::amx), which includes the OS's permission
// for tile data (runtime/cpu.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/amx/tile.hpp"

// (GCC names the macros __AMX_TILE__, clang __AMXTILE__.)
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !(defined(__AMX_BF16__) || defined(__AMXBF16__))
#error "tile_native.hpp needs -mamx-tile -mamx-bf16"
#endif

namespace convbwd::detail {
namespace {

// GCC 12 writes the tile intrinsics as asm macros that paste the tile number
// into the instruction text (#dst), so they take only a literal: a template
// argument N would paste as "tmmN". These chains name each literal, and
// `if constexpr` keeps the one that matches.
#define CONVBWD_TILE_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

// The asm of GCC's _tile_loadd and _tile_loadconfig names no memory operand
// (the latter only 8 bytes of the 64): without a compiler barrier, stores
// into a buffer a tile is then loaded from could be moved past the load, or
// dropped as dead. A barrier that also takes the address makes the buffer
// escape, so the compiler must have it in memory here.
inline void memory_barrier(const void* p) { __asm__ volatile("" : : "r"(p) : "memory"); }

struct NativeTiles {
  static void load_config(const TileConfig* c) {
    memory_barrier(c);
    _tile_loadconfig(c);
  }
  static void store_config(TileConfig* c) {
    _tile_storeconfig(c);
    memory_barrier(c);  // all 64 bytes were written, not the 8 the asm names
  }
  static void release() { _tile_release(); }

  template <int N>
  static void load(const void* base, int64_t stride) {
    static_assert(N >= 0 && N < kTiles);
    memory_barrier(base);
#define CONVBWD_TILE_LOAD(i) \
  if constexpr (N == i) _tile_loadd(i, base, stride);
    CONVBWD_TILE_EACH(CONVBWD_TILE_LOAD)
#undef CONVBWD_TILE_LOAD
  }

  template <int N>
  static void store(void* base, int64_t stride) {
    static_assert(N >= 0 && N < kTiles);
#define CONVBWD_TILE_STORE(i) \
  if constexpr (N == i) _tile_stored(i, base, stride);
    CONVBWD_TILE_EACH(CONVBWD_TILE_STORE)
#undef CONVBWD_TILE_STORE
    memory_barrier(base);
  }

  template <int N>
  static void zero() {
    static_assert(N >= 0 && N < kTiles);
#define CONVBWD_TILE_ZERO(i) \
  if constexpr (N == i) _tile_zero(i);
    CONVBWD_TILE_EACH(CONVBWD_TILE_ZERO)
#undef CONVBWD_TILE_ZERO
  }

  // Three tile numbers: clang checks a non-dependent builtin call even in a
  // discarded branch and refuses one that names a tile twice, so the
  // triples are listed rather than generated. A kernel with other tiles adds
  // its line.
  template <int C, int A, int B>
  static void dpbf16ps() {
    static_assert(C != A && C != B && A != B, "TDPBF16PS takes three distinct tiles");
#define CONVBWD_TILE_DP(c, a, b) (C == c && A == a && B == b)
    static_assert(CONVBWD_TILE_DP(0, 2, 3) || CONVBWD_TILE_DP(1, 2, 4),
                  "add this tile triple to NativeTiles::dpbf16ps");
    if constexpr (CONVBWD_TILE_DP(0, 2, 3)) _tile_dpbf16ps(0, 2, 3);
    if constexpr (CONVBWD_TILE_DP(1, 2, 4)) _tile_dpbf16ps(1, 2, 4);
#undef CONVBWD_TILE_DP
  }
};

#undef CONVBWD_TILE_EACH

}  // namespace
}  // namespace convbwd::detail
