// The AMX tile interface the AMX kernels are written against. A kernel is a
// template over a back end T that provides, as static functions:
//
//   T::load_config(const TileConfig*)    LDTILECFG
//   T::store_config(TileConfig*)         STTILECFG (all zero when unconfigured)
//   T::release()                         TILERELEASE
//   T::load<N>(base, stride)             TILELOADD tmmN, [base + stride*row]
//   T::store<N>(base, stride)            TILESTORED
//   T::zero<N>()                         TILEZERO tmmN
//   T::dpbf16ps<C, A, B>()               TDPBF16PS tmmC, tmmA, tmmB
//
// with tile numbers as template arguments, because the instructions encode
// them as immediates. Two back ends exist: the intrinsics (tile_native.hpp,
// only in sources built with -mamx-tile -mamx-bf16) and an emulator of the
// ISA manual's definitions (tile_emu.hpp), so that the kernels' tiling,
// packing and tails are tested on every machine.
#pragma once

#include <cstdint>
#include <cstring>

namespace convbwd::detail {

// The 64-byte operand of LDTILECFG/STTILECFG, palette 1: 8 tiles of up to
// 16 rows of up to 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 0;
  uint8_t start_row = 0;
  uint8_t reserved0[14] = {};
  uint16_t colsb[8] = {};
  uint8_t reserved1[16] = {};
  uint8_t rows[8] = {};
  uint8_t reserved2[8] = {};
};
static_assert(sizeof(TileConfig) == 64);

constexpr int kTileRows = 16;      // palette 1: rows per tile
constexpr int kTileRowBytes = 64;  // palette 1: bytes per row
constexpr int kTiles = 8;

// Makes `want` the thread's tile configuration. Why a check on every call
// rather than a thread_local "configured" flag: the tile configuration is
// per thread and anything else running on that thread may change it between
// two of our calls. The pool's workers run only convbwd, but the calling
// thread runs the caller's code too, and a library such as oneDNN (inside
// PyTorch) configures its own shapes and releases the tiles (TILERELEASE)
// after its kernels; a cached flag would then run TILELOADD on released
// tiles (#UD) or on foreign shapes. STTILECFG is a 64-byte store of state
// and the comparison a few vector compares; LDTILECFG, which also zeroes
// all tile data, runs only when the configuration actually differs, so a
// thread that runs only convbwd configures once. (The cost of STTILECFG
// against LDTILECFG on Sapphire Rapids is not measured here: no AMX CPU.)
template <class T>
inline void ensure_tile_config(const TileConfig& want) {
  TileConfig have;
  T::store_config(&have);
  if (std::memcmp(&have, &want, sizeof have) != 0) T::load_config(&want);
}

}  // namespace convbwd::detail
