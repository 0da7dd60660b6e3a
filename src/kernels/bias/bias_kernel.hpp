// The per-channel sum of gradOutput, written once over a vector type V of
// V::W = 8 or 16 lanes and instantiated per ISA by
// src/kernels/<isa>/bias_<isa>.cpp. Include only from those files, after the
// header defining V.
//
// Every path sums in the one order BiasPlan describes (lane = width % W), in
// fp32, and rounds once into the output dtype, so the bits depend neither on
// the memory layout nor on the thread count (V only adds; tiers of equal W
// give equal bits). Lanes that get no element stay +0, and adding +0 to a sum
// that started at +0 changes nothing, so padding a row's tail with zeros is
// exact.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/bias/bias_plan.hpp"
#include "numeric/float_formats.hpp"

namespace convbwd::detail {
namespace {

template <class V>
struct BiasKernel {
  using R = typename V::R;
  static constexpr int64_t W = V::W;
  static_assert(W == 8 || W == 16);

  // The lanes added pairwise, halves first (BiasPlan).
  static float sum8(const float* l) { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }
  static float lanes_sum(const float* l) {
    if constexpr (W == 8)
      return sum8(l);
    else
      return sum8(l) + sum8(l + 8);
  }

  // Calls f(offset) for the start of every width row of chunk `chunk`, in
  // logical order (n, then the other outer dims).
  template <class F>
  static void for_rows(const BiasPlan& p, int64_t chunk, int64_t base, F&& f) {
    const int64_t lo = p.ext[0] * chunk / p.chunks, hi = p.ext[0] * (chunk + 1) / p.chunks;
    for (int64_t n = lo; n < hi; ++n) {
      const int64_t bn = base + n * p.str[0];
      if (p.no == 1) {
        f(bn);
      } else if (p.no == 2) {
        for (int64_t i = 0; i < p.ext[1]; ++i) f(bn + i * p.str[1]);
      } else {
        for (int64_t i = 0; i < p.ext[1]; ++i)
          for (int64_t j = 0; j < p.ext[2]; ++j) f(bn + i * p.str[1] + j * p.str[2]);
      }
    }
  }

  // One channel, element by element.
  static float channel_generic(const BiasPlan& p, const void* a, int64_t ch, int64_t chunk) {
    float lane[W] = {};
    for_rows(p, chunk, p.off + ch * p.cstride, [&](int64_t at) {
      for (int64_t w = 0; w < p.width; ++w) lane[w % W] += load_as_float(a, at + w * p.wstride, p.dtype);
    });
    return lanes_sum(lane);
  }

  // NC channels [c0, c0 + NC) whose width rows are contiguous, side by side:
  // NC independent dependency chains instead of one.
  template <int NC>
  static void channels_rows(const BiasPlan& p, const void* a, int64_t c0, int64_t chunk, float* out) {
    R acc[NC];
    for (R& r : acc) r = V::zero();
    const int64_t full = p.width / W * W, tail = p.width - full;
    for_rows(p, chunk, p.off + c0 * p.cstride, [&](int64_t at) {
      for (int64_t w = 0; w < full; w += W)
        for (int c = 0; c < NC; ++c) acc[c] = V::add(acc[c], V::from(a, p.dtype, at + c * p.cstride + w));
      if (tail)
        for (int c = 0; c < NC; ++c) acc[c] = V::add(acc[c], V::from_partial(a, p.dtype, at + c * p.cstride + full, tail));
    });
    for (int c = 0; c < NC; ++c) {
      alignas(64) float l[W];
      V::store(l, acc[c]);
      out[c] = lanes_sum(l);
    }
  }

  // W contiguous channels [c0, c0 + W): acc[l] holds lane l of each.
  static void block_channels_last(const BiasPlan& p, const void* a, int64_t c0, int64_t chunk, float* out) {
    R acc[W];
    for (R& r : acc) r = V::zero();
    for_rows(p, chunk, p.off + c0, [&](int64_t at) {
      for (int64_t w = 0; w < p.width; ++w) acc[w % W] = V::add(acc[w % W], V::from(a, p.dtype, at + w * p.wstride));
    });
    alignas(64) float l[W][W];
    for (int i = 0; i < W; ++i) V::store(l[i], acc[i]);
    for (int c = 0; c < W; ++c) {
      float lane[W];
      for (int i = 0; i < W; ++i) lane[i] = l[i][c];
      out[c] = lanes_sum(lane);
    }
  }

  static void task(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t t) {
    assert(p.lanes == W && "the plan was sized for another tier's vectors");
    const int64_t unit = t / p.chunks, chunk = t % p.chunks;
    auto put = [&](int64_t ch, float s) {
      if (p.chunks > 1)
        partials[ch * p.chunks + chunk] = s;
      else
        store_from_float(dst, p.out_off + ch * p.out_stride, p.out_dtype, s);
    };
    if (p.mode == BiasPlan::Mode::channels_last) {
      const int64_t c0 = unit * p.cblock;
      if (c0 + p.cblock <= p.channels) {
        float sums[W];
        block_channels_last(p, a, c0, chunk, sums);
        for (int64_t c = 0; c < p.cblock; ++c) put(c0 + c, sums[c]);
      } else {
        for (int64_t c = c0; c < p.channels; ++c) put(c, channel_generic(p, a, c, chunk));
      }
      return;
    }
    if (p.mode == BiasPlan::Mode::generic) {
      put(unit, channel_generic(p, a, unit, chunk));
      return;
    }
    const int64_t c0 = unit * p.cblock, nc = std::min(p.cblock, p.channels - c0);
    float sums[4];
    switch (nc) {
      case 1: channels_rows<1>(p, a, c0, chunk, sums); break;
      case 2: channels_rows<2>(p, a, c0, chunk, sums); break;
      case 3: channels_rows<3>(p, a, c0, chunk, sums); break;
      default: channels_rows<4>(p, a, c0, chunk, sums); break;
    }
    for (int64_t c = 0; c < nc; ++c) put(c0 + c, sums[c]);
  }
};

}  // namespace
}  // namespace convbwd::detail
