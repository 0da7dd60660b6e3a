// AMX-BF16 pair microkernels (the bf16 family of kernels/gemm.hpp): a 16x32
// fp32 tile of C held in two tile registers across every run of a call,
// each 16 pair steps of the reduction one TDPBF16PS per C tile.
//
// Compiled twice from this one source: natively with -mamx-tile -mamx-bf16
// into namespace amx, on the intrinsics (tile_native.hpp), and by the test
// build with CONVBWD_EMULATE_AMX into namespace amx_emu, on the emulator of
// the ISA manual's definitions (tile_emu.hpp), so every machine runs the
// tiling, packing and tails below.
//
// Why 16x32: a C tile is 16 rows x 16 fp32 columns; two of them (tmm0, tmm1)
// share one A tile (tmm2) against two B tiles (tmm3, tmm4), so each A tile,
// the operand that has to be packed, feeds two products. 16 rows is the
// kMaxMr every planner's stack tile buffers are already sized for, and 32
// columns is the nr of the other tiers' packed weights. (A 32x32 tile, four
// C tiles, would need kMaxMr = 32 and double those buffers; unmeasured.)
//
// The tiles, per 16 pair steps t0 .. t0+15 of one run:
//   A tile: row i = the 16 pairs A(i, r, t0 ..), 64 bytes;
//   B tile j: row t = the 16 pairs of columns 16j .. 16j+15 at step t: the
//   packed B ([step][nr] pairs) read in place, rows nr*4 bytes apart.
// TILELOADD wants A's 16 rows at one stride. The gather form's rows are
// independent pointers and the strided form's A is transposed (step-major),
// so A is packed into a 1 KB buffer per 16 steps: 16 rows of 64 bytes, in L1,
// against the 2 x 16 x 16 x 32 multiply-adds of the two products. Where the
// gather form's rows are equally spaced (a tile of neighbouring pixels in
// one image row: most tiles) they are loaded in place at that stride.
// Packing A per call rather than once per planner task keeps the planners
// and the pair contract unchanged; a planner that packed A once for all its
// weight blocks would avoid the repeat (not done: unmeasured without AMX).
//
// Tails: a run whose length is not a multiple of 16 ends in a product of
// fewer steps. Instead of a second tile configuration (LDTILECFG zeroes the
// tiles, so the C accumulators would have to be spilled), its A rows are
// packed zero-padded to 16 pairs and its B rows copied into a zero-padded
// buffer (the rows past the run may lie past the end of B): the padding
// multiplies zero by zero, which changes no sum. Each run starts a new
// product, so which steps share a TDPBF16PS depends only on the runs the
// planner passes (a planner that splits a run at a chunk end regroups its
// steps), never on the thread count.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.hpp"
#include "kernels/tier_kernels.hpp"

#ifdef CONVBWD_EMULATE_AMX
#include "kernels/amx/tile_emu.hpp"
#define CONVBWD_AMX_NS amx_emu
#else
#include "kernels/amx/tile_native.hpp"
#define CONVBWD_AMX_NS amx
#endif

namespace convbwd::detail::CONVBWD_AMX_NS {
namespace {

#ifdef CONVBWD_EMULATE_AMX
using Tiles = EmulatedTiles;
#else
using Tiles = NativeTiles;
#endif

constexpr int kMr = 16, kNr = 32;
constexpr int kSteps = 16;  // pair steps per TDPBF16PS: 64-byte A rows
constexpr int kC0 = 0, kC1 = 1, kA = 2, kB0 = 3, kB1 = 4;
static_assert(kMr <= kMaxMr && kNr <= kMaxNr);

// Every tile used is 16 rows of 64 bytes.
constexpr TileConfig gemm_tiles() {
  TileConfig c;
  c.palette = 1;
  for (int t : {kC0, kC1, kA, kB0, kB1}) {
    c.rows[t] = kTileRows;
    c.colsb[t] = kTileRowBytes;
  }
  return c;
}
constexpr TileConfig kGemmTiles = gemm_tiles();

template <bool Gather>
void kernel(const MicroArgs& p) {
  assert(!Gather || p.bs == kNr);
  ensure_tile_config<Tiles>(kGemmTiles);
  constexpr int64_t c_stride = kNr * 4;
  float* const acc = p.acc;
  if (p.accumulate) {
    Tiles::load<kC0>(acc, c_stride);
    Tiles::load<kC1>(acc + 16, c_stride);
  } else {
    Tiles::zero<kC0>();
    Tiles::zero<kC1>();
  }
  // The gather rows in place when they are equally spaced (tile rows past
  // the last pixel repeat the first one, so a short tile packs).
  int64_t row_step = 0;
  bool rows_in_place = false;
  if constexpr (Gather) {
    const auto at = [&](int i) { return reinterpret_cast<uintptr_t>(p.a[i]); };
    row_step = static_cast<int64_t>(at(1) - at(0));
    rows_in_place = true;
    for (int i = 2; i < kMr && rows_in_place; ++i)
      rows_in_place = static_cast<int64_t>(at(i) - at(0)) == row_step * i;
  }
  alignas(64) uint32_t a_pack[kMr][kSteps];
  alignas(64) uint32_t b_pad[kSteps][kNr];
  for (int64_t r = 0; r < p.runs; ++r) {
    const int64_t len = p.len[r];
    const int64_t bs = Gather ? kNr : p.bs;
    // Pairs are 32-bit words: the addressing is the fp32 kernels'.
    const uint32_t* const b = reinterpret_cast<const uint32_t*>(p.b + p.b_off[r]);
    for (int64_t t0 = 0; t0 < len; t0 += kSteps) {
      const int steps = static_cast<int>(std::min<int64_t>(kSteps, len - t0));
      const void* a_base = a_pack;
      int64_t a_stride = sizeof a_pack[0];
      if (Gather && rows_in_place && steps == kSteps) {
        a_base = p.a[0] + p.a_off[r] + t0;
        a_stride = row_step;
      } else if constexpr (Gather) {
        // Row i: `steps` consecutive pairs of its own pointer.
        for (int i = 0; i < kMr; ++i) {
          std::memcpy(a_pack[i], p.a[i] + p.a_off[r] + t0, static_cast<size_t>(steps) * 4);
          std::memset(a_pack[i] + steps, 0, static_cast<size_t>(kSteps - steps) * 4);
        }
      } else {
        // Step t holds the 16 rows' pairs side by side: a 16 x steps
        // transpose.
        for (int t = 0; t < steps; ++t) {
          const float* src = p.a[0] + p.a_off[r] + (t0 + t) * p.as;
          for (int i = 0; i < kMr; ++i) std::memcpy(&a_pack[i][t], src + i, 4);
        }
        for (int i = 0; i < kMr; ++i)
          for (int t = steps; t < kSteps; ++t) a_pack[i][t] = 0;
      }
      const uint32_t* b_base = b + t0 * bs;
      int64_t b_stride = bs * 4;
      if (steps < kSteps) {
        for (int t = 0; t < kSteps; ++t) {
          if (t < steps)
            std::memcpy(b_pad[t], b_base + t * bs, sizeof b_pad[t]);
          else
            std::memset(b_pad[t], 0, sizeof b_pad[t]);
        }
        b_base = &b_pad[0][0];
        b_stride = sizeof b_pad[0];
      }
      Tiles::load<kA>(a_base, a_stride);
      Tiles::load<kB0>(b_base, b_stride);
      Tiles::load<kB1>(b_base + 16, b_stride);
      Tiles::dpbf16ps<kC0, kA, kB0>();
      Tiles::dpbf16ps<kC1, kA, kB1>();
    }
  }
  Tiles::store<kC0>(acc, c_stride);
  Tiles::store<kC1>(acc + 16, c_stride);
}

}  // namespace

void bf16_gemm_16x32_gather(const MicroArgs& p) { kernel<true>(p); }
void bf16_gemm_16x32_strided(const MicroArgs& p) { kernel<false>(p); }

}  // namespace convbwd::detail::CONVBWD_AMX_NS
