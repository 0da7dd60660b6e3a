// The per-channel sum of gradOutput, written once over an 8-lane vector type V
// and instantiated per ISA by src/kernels/<isa>/bias_<isa>.cpp. Include only
// from those files, after the header defining V.
//
// Every channel's sum is taken in an order fixed by the problem alone (lanes,
// then chunks in order), in fp32, and rounded once into the output dtype.
// V only adds (no fused products), so the scalar and AVX2 builds give the
// same bits.
#pragma once

#include <algorithm>
#include <cstdint>

#include "impl/bias/bias_plan.hpp"
#include "numeric/float_formats.hpp"

namespace convbwd::detail {
namespace {

template <class V>
struct BiasKernel {
  using R = typename V::R;
  static constexpr int64_t W = V::W;

  // Calls f(offset) for every index of dims [0, m) in row-major order, dim 0
  // restricted to [lo, hi).
  template <class F>
  static void for_each(const BiasPlan& p, int m, int64_t lo, int64_t hi, int64_t base, F&& f) {
    if (m == 0) {
      f(base);
      return;
    }
    std::array<int64_t, 4> i{};
    i[0] = lo;
    if (lo >= hi) return;
    int64_t at = base + lo * p.str[0];
    for (;;) {
      f(at);
      int d = m - 1;
      for (; d >= 0; --d) {
        const int64_t end = d == 0 ? hi : p.ext[d];
        if (++i[d] < end) {
          at += p.str[d];
          break;
        }
        const int64_t start = d == 0 ? lo : 0;
        at -= (i[d] - 1 - start) * p.str[d];
        i[d] = start;
      }
      if (d < 0) return;
    }
  }

  // Sum of channel ch over chunk `chunk` of ext[0].
  static float channel_sum(const BiasPlan& p, const void* a, int64_t ch, int64_t chunk) {
    const int64_t lo = p.ext[0] * chunk / p.chunks, hi = p.ext[0] * (chunk + 1) / p.chunks;
    const int64_t base = p.off + ch * p.cstride;
    if (p.mode == BiasPlan::Mode::generic) {
      float acc = 0;
      for_each(p, p.nd, lo, hi, base, [&](int64_t at) { acc += load_as_float(a, at, p.dtype); });
      return acc;
    }
    // Rows: vector v of a row goes to accumulator v % 4 (four independent
    // dependency chains hide the add latency); the row tail is summed apart.
    R acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
    float tail = 0;
    const bool single = p.nd == 1;  // the row itself is chunked
    const int64_t len = single ? hi - lo : p.ext[p.nd - 1];
    const int64_t full = len / W * W;
    auto row = [&](int64_t at) {
      int64_t i = 0;
      for (; i + 4 * W <= full; i += 4 * W)
        for (int u = 0; u < 4; ++u) acc[u] = V::add(acc[u], V::from(a, p.dtype, at + i + u * W));
      for (int u = 0; i < full; i += W, ++u) acc[u] = V::add(acc[u], V::from(a, p.dtype, at + i));
      for (; i < len; ++i) tail += load_as_float(a, at + i, p.dtype);
    };
    if (single)
      row(base + lo);
    else
      for_each(p, p.nd - 1, lo, hi, base, row);
    return V::hsum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3]))) + tail;
  }

  // Channels [c0, c0 + nc) when channels are contiguous: position by
  // position, 8 channels per vector; each channel is a plain running sum.
  static void block_sums(const BiasPlan& p, const void* a, int64_t c0, int64_t nc, float* out) {
    R acc[8];
    float rest[8] = {};
    const int64_t nv = nc / W;
    for (int64_t v = 0; v < nv; ++v) acc[v] = V::zero();
    for_each(p, p.nd, 0, p.ext[0], p.off + c0, [&](int64_t at) {
      for (int64_t v = 0; v < nv; ++v) acc[v] = V::add(acc[v], V::from(a, p.dtype, at + v * W));
      for (int64_t c = nv * W; c < nc; ++c) rest[c - nv * W] += load_as_float(a, at + c, p.dtype);
    });
    for (int64_t v = 0; v < nv; ++v) V::store(out + v * W, acc[v]);
    for (int64_t c = nv * W; c < nc; ++c) out[c] = rest[c - nv * W];
  }

  static void task(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t t) {
    if (p.mode == BiasPlan::Mode::channels_last) {
      float sums[64];
      const int64_t c0 = t * p.cblock, nc = std::min(p.cblock, p.channels - c0);
      block_sums(p, a, c0, nc, sums);
      for (int64_t c = 0; c < nc; ++c) store_from_float(dst, p.out_off + (c0 + c) * p.out_stride, p.out_dtype, sums[c]);
      return;
    }
    const float s = channel_sum(p, a, t / p.chunks, t % p.chunks);
    if (p.chunks > 1)
      partials[t] = s;
    else
      store_from_float(dst, p.out_off + t * p.out_stride, p.out_dtype, s);
  }
};

}  // namespace
}  // namespace convbwd::detail
