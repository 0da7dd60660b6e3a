// The emulator back end of the tile interface (tile.hpp): plain C++ that
// follows the definitions ("Operation" sections) of the Intel 64 and IA-32
// Architectures Software Developer's Manual, Vol. 2, for LDTILECFG,
// STTILECFG, TILERELEASE, TILELOADD, TILESTORED, TILEZERO and TDPBF16PS.
// Used by the test build (the amx_emu kernels, tests/emulated/) and the
// emulator's own tests; never by the library.
//
// TDPBF16PS, per output row m and column n of C (A is m x k pairs, B is
// k x n pairs):
//   even := 0, odd := 0
//   for each pair k:   even += A[m][k].lo * B[k][n].lo
//                      odd  += A[m][k].hi * B[k][n].hi
//   C[m][n] := C[m][n] + (even + odd)
// Every += is an fp32 FMA (the bf16 product is not rounded on its own), and
// every operation rounds to nearest even, reads denormal inputs as zero and
// flushes denormal results to zero, whatever MXCSR says. So the low and the
// high halves of the pairs are summed apart over the k of one instruction,
// the two sums are added (one rounding) and then added to C (a second
// rounding): the pair is not summed into C in one step as vdpbf16ps does,
// and the result depends on how a reduction is cut into tile products (the
// kernels cut it the same way whatever the thread count).
//
// Where this may differ from the hardware: the manual's text is the only
// source here (no AMX CPU in this project's machines so far). The Intel
// Intrinsics Guide gives a different order for the same instruction (each
// product added to C in turn, low half first), and which one the silicon
// implements is unverified; kernel_gemm_test compares the native kernels
// with these bit for bit on random data wherever the CPU has AMX, which
// would show it. NaN results: the emulator's NaN payloads are std::fma's,
// not necessarily the hardware's (the kernels never see NaN operands: the
// dense paths zero them and handle them apart). Exceptions (#UD on a bad
// shape, #GP on a bad config) are asserts here. The emulator rounds with the
// host's fp32 arithmetic, so it assumes the default rounding mode (nearest
// even); it applies the denormal rules itself, so MXCSR's DAZ and FTZ bits
// change nothing.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/amx/tile.hpp"
#include "kernels/denormals.hpp"

namespace convbwd::detail {
namespace {

struct EmulatedTiles {
  // The thread's tile state, as the hardware keeps it per thread.
  struct State {
    TileConfig cfg;           // palette 0: not configured (init state)
    alignas(64) uint8_t t[kTiles][kTileRows][kTileRowBytes];
  };
  static State& state() {
    thread_local State s{};
    return s;
  }
  static bool configured() { return state().cfg.palette != 0; }

  // Denormal inputs read as zero and results flushed: daz and ftz of
  // kernels/denormals.hpp.

  static void load_config(const TileConfig* c) {
    // #GP on what palette 1 cannot hold.
    assert(c->palette <= 1);
    assert(c->start_row == 0);
    State& s = state();
    if (c->palette == 0) {
      release();
      return;
    }
    for (int i = 0; i < kTiles; ++i) {
      assert(c->colsb[i] <= kTileRowBytes && c->rows[i] <= kTileRows);
      assert((c->colsb[i] == 0) == (c->rows[i] == 0));
    }
    s.cfg = *c;
    std::memset(s.t, 0, sizeof s.t);  // LDTILECFG zeroes the tile data
  }
  static void store_config(TileConfig* c) {
    // Unconfigured: all zero.
    *c = configured() ? state().cfg : TileConfig{};
  }
  static void release() {
    State& s = state();
    s.cfg = TileConfig{};
    std::memset(s.t, 0, sizeof s.t);
  }

  // TILELOADD: rows x colsb bytes from base + row*stride; the rest of each
  // row and the rows past `rows` are zeroed.
  template <int N>
  static void load(const void* base, int64_t stride) {
    static_assert(N >= 0 && N < kTiles);
    assert(configured() && state().cfg.rows[N] > 0);  // #UD
    State& s = state();
    const int rows = s.cfg.rows[N], colsb = s.cfg.colsb[N];
    std::memset(s.t[N], 0, sizeof s.t[N]);
    for (int r = 0; r < rows; ++r)
      std::memcpy(s.t[N][r], static_cast<const uint8_t*>(base) + r * stride, static_cast<size_t>(colsb));
  }

  // TILESTORED: rows x colsb bytes to base + row*stride.
  template <int N>
  static void store(void* base, int64_t stride) {
    static_assert(N >= 0 && N < kTiles);
    assert(configured() && state().cfg.rows[N] > 0);
    const State& s = state();
    for (int r = 0; r < s.cfg.rows[N]; ++r)
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, s.t[N][r], s.cfg.colsb[N]);
  }

  // TILEZERO: the whole tile.
  template <int N>
  static void zero() {
    static_assert(N >= 0 && N < kTiles);
    assert(configured());
    std::memset(state().t[N], 0, sizeof state().t[N]);
  }

  template <int C, int A, int B>
  static void dpbf16ps() {
    static_assert(C != A && C != B && A != B, "TDPBF16PS takes three distinct tiles");
    State& s = state();
    const TileConfig& cfg = s.cfg;
    // The shape rules (#UD otherwise).
    assert(configured());
    assert(cfg.colsb[C] % 4 == 0 && cfg.colsb[A] % 4 == 0 && cfg.colsb[B] % 4 == 0);
    assert(cfg.colsb[C] == cfg.colsb[B]);
    assert(cfg.rows[A] == cfg.rows[C]);
    assert(cfg.colsb[A] / 4 == cfg.rows[B]);
    const int rows = cfg.rows[C], k_pairs = cfg.colsb[A] / 4, cols = cfg.colsb[C] / 4;
    constexpr int kPairs = kTileRowBytes / 4;
    // B's halves as fp32, decoded once for all rows.
    float b_lo[kTileRows][kPairs], b_hi[kTileRows][kPairs];
    for (int k = 0; k < k_pairs; ++k)
      for (int n = 0; n < cols; ++n) {
        uint32_t b;
        std::memcpy(&b, s.t[B][k] + 4 * n, 4);
        b_lo[k][n] = daz(b << 16);
        b_hi[k][n] = daz(b & 0xffff0000u);
      }
    for (int m = 0; m < rows; ++m) {
      float even[kPairs] = {}, odd[kPairs] = {};
      for (int k = 0; k < k_pairs; ++k) {
        uint32_t a;
        std::memcpy(&a, s.t[A][m] + 4 * k, 4);
        const float a_lo = daz(a << 16), a_hi = daz(a & 0xffff0000u);
        for (int n = 0; n < cols; ++n) {
          even[n] = ftz(std::fma(a_lo, b_lo[k][n], even[n]));
          odd[n] = ftz(std::fma(a_hi, b_hi[k][n], odd[n]));
        }
      }
      float c_row[kPairs] = {};
      for (int n = 0; n < cols; ++n) {
        float c;
        std::memcpy(&c, s.t[C][m] + 4 * n, 4);
        const float pair_sum = ftz(even[n] + odd[n]);
        c_row[n] = ftz(daz(c) + pair_sum);
      }
      // write_row_and_zero: the bytes past colsb are zeroed.
      std::memset(s.t[C][m], 0, kTileRowBytes);
      std::memcpy(s.t[C][m], c_row, static_cast<size_t>(cols) * 4);
    }
    // zero_upper_rows
    for (int m = rows; m < kTileRows; ++m) std::memset(s.t[C][m], 0, kTileRowBytes);
  }
};

}  // namespace
}  // namespace convbwd::detail
