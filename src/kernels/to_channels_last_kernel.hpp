// The channels-last converter (ToChannelsLast, kernels/gemm.hpp), written
// once over a vector tier's traits V and instantiated by
// src/kernels/<isa>/to_channels_last_<isa>.cpp; the portable converter
// (scalar/) handles every other layout. Include only from those files:
// everything here is in an unnamed namespace, so no copy compiled with one
// tier's flags can be linked into a caller of another.
//
// What V provides (W lanes of fp32 in an R):
//   zero(); load<T>(base, i): W elements of dtype T at base[i..] as fp32;
//   load_partial<T>(base, i, n): the first n (< W), the other lanes +0, with
//   nothing read past element i + n - 1; round<Rn>(v): the operand rounding
//   with numeric/float_formats.hpp's bits; transpose(r): r[i] lane j becomes
//   r[j] lane i for a W x W block in registers; even(a, b): the even lanes
//   of a, then those of b; store(p, v) and store_partial(p, v, n): W or the
//   first n (< W) lanes, nothing past them.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/format_dispatch.hpp"
#include "kernels/gemm.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail {
namespace {

template <class V>
struct ChannelsLastKernel {
  using R = typename V::R;
  static constexpr int64_t W = V::W;
  // Planar rows: each of the group's channel rows is prefetched this many
  // pixels ahead. Why: a group reads W rows a plane apart, more streams
  // than the hardware prefetchers follow with the kernels' own streams
  // beside them; side by side on a Zen 5 (2 threads), the UNet 2x2
  // transposed layer took 1/1.11 of the time, WaveNet 1/1.03, the others
  // measured (3x3, 3D, stem, 1D k3 s2, fp16) within noise, as did the avx2
  // tier.
  static constexpr int64_t kAheadPixels = 4 * W;

  // W pixels of a planar row from element i on, every `ws`-th (ws 1 or 2),
  // rounded; wn < W: only the first wn, nothing read past the last. more:
  // the row holds a pixel after them (so a whole second vector may be read).
  template <DataType T, OperandRounding Rn, int64_t Ws>
  static R load_pixels(const void* src, int64_t i, int64_t wn, bool more) {
    if constexpr (Ws == 1) {
      return V::template round<Rn>(wn == W ? V::template load<T>(src, i) : V::template load_partial<T>(src, i, wn));
    } else {
      // Elements i .. i + 2(wn - 1): the even lanes of two vectors.
      const int64_t need = 2 * wn - 1;
      const R lo = need >= W ? V::template load<T>(src, i) : V::template load_partial<T>(src, i, need);
      const R hi = need <= W ? V::zero()
                   : more    ? V::template load<T>(src, i + W)
                             : V::template load_partial<T>(src, i + W, need - W);
      return V::template round<Rn>(V::even(lo, hi));
    }
  }

  // Planar rows (pixels ws = 1 or 2 elements apart): groups of up to W
  // channels x W pixels through one register transpose; a partial group
  // (the 6-channel blocks of the weight gradient's dy copy, or a channel
  // tail) loads only its own rows and stores only its own lanes, and a
  // row's last pixels load as a partial vector and store only their own
  // pixels (rows of 7 pixels, the 7x7 layers, would otherwise go wholly to
  // the portable copy). ws = 2: one column phase of a stride-2 weight
  // gradient's x copy (ImageCopy::col_step), which went element by element
  // through the portable copy.
  //
  // Split (ws = 1): both column phases (ToChannelsLastSplit), pixel w
  // stored at (w even ? dst : odd) + (w / 2) * pitch. The transpose leaves
  // one register per pixel, so the phases cost their store addresses and
  // no lane shuffles.
  template <DataType T, OperandRounding Rn, int64_t Ws, bool Split = false>
  static void planar(const void* src, int64_t s0, int64_t cs, int64_t nc, int64_t nw, float* dst, int64_t pitch,
                     float* odd = nullptr) {
    for (int64_t c0 = 0; c0 < nc; c0 += W) {
      const int64_t cn = std::min<int64_t>(W, nc - c0);
      const int64_t s = s0 + c0 * cs;
      for (int64_t w0 = 0; w0 < nw; w0 += W) {
        const int64_t wn = std::min<int64_t>(W, nw - w0);
        R r[W];
        constexpr int64_t kElem = T == DataType::f32 ? 4 : 2;
        if (w0 + kAheadPixels < nw)
          for (int64_t c = 0; c < cn; ++c)
            __builtin_prefetch(static_cast<const char*>(src) + (s + c * cs + (w0 + kAheadPixels) * Ws) * kElem);
        for (int c = 0; c < W; ++c)
          r[c] = c < cn ? load_pixels<T, Rn, Ws>(src, s + c * cs + w0 * Ws, wn, w0 + W < nw) : V::zero();
        V::transpose(r);  // r[w] lane c: pixel w's channels
        if constexpr (Split) {
          // W is even, so pixel w0 is even: the group's even pixels are
          // r[0], r[2], ..., its odd ones r[1], r[3], ...
          float* const oe = dst + (w0 / 2) * pitch + c0;
          float* const oo = odd + (w0 / 2) * pitch + c0;
          const auto put = [&](float* p, const R& v) { cn == W ? V::store(p, v) : V::store_partial(p, v, cn); };
          for (int w = 0; w < wn; w += 2) put(oe + w / 2 * pitch, r[w]);
          for (int w = 1; w < wn; w += 2) put(oo + w / 2 * pitch, r[w]);
        } else {
          float* const o = dst + w0 * pitch + c0;
          if (cn == W)
            for (int w = 0; w < wn; ++w) V::store(o + w * pitch, r[w]);
          else
            for (int w = 0; w < wn; ++w) V::store_partial(o + w * pitch, r[w], cn);
        }
      }
    }
  }

  static void run_split(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t nc,
                        int64_t nw, float* even, float* odd, int64_t pitch) {
    dispatch(dt, r, [&]<DataType T, OperandRounding Rn>() {
      planar<T, Rn, 1, true>(src, s0, cs, nc, nw, even, pitch, odd);
    });
  }

  template <DataType T, OperandRounding Rn>
  static void convert(const void* src, int64_t s0, int64_t cs, int64_t ws, int64_t nc, int64_t nw, float* dst,
                      int64_t pitch) {
    if (ws == 2 && cs != 1) {
      planar<T, Rn, 2>(src, s0, cs, nc, nw, dst, pitch);
      return;
    }
    if (ws == 1) {
      planar<T, Rn, 1>(src, s0, cs, nc, nw, dst, pitch);
      return;
    }
    if (cs == 1) {
      // Rows of nc contiguous elements; a tail (the 6-pixel rows of the
      // small-channel band copy) through a partial load and store.
      const int64_t full = nc / W * W;
      for (int64_t w = 0; w < nw; ++w) {
        const int64_t s = s0 + w * ws;
        float* o = dst + w * pitch;
        for (int64_t c0 = 0; c0 < full; c0 += W)
          V::store(o + c0, V::template round<Rn>(V::template load<T>(src, s + c0)));
        if (full < nc)
          V::store_partial(o + full, V::template round<Rn>(V::template load_partial<T>(src, s + full, nc - full)),
                           nc - full);
      }
      return;
    }
    scalar::to_channels_last(src, T, Rn, s0, cs, ws, nc, nw, dst, pitch);
  }

  static void run(const void* src, DataType dt, OperandRounding r, int64_t s0, int64_t cs, int64_t ws, int64_t nc,
                  int64_t nw, float* dst, int64_t pitch) {
    dispatch(dt, r, [&]<DataType T, OperandRounding Rn>() { convert<T, Rn>(src, s0, cs, ws, nc, nw, dst, pitch); });
  }
};

}  // namespace
}  // namespace convbwd::detail
