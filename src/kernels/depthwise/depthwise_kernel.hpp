// Direct depthwise/grouped convolution kernels, written once over a vector
// type V of V::W lanes (VecScalar and VecAvx2: 8, VecAvx512: 16; the plan is
// sized for it, DwPlan::lanes) and instantiated per ISA by
// src/kernels/<isa>/depthwise_<isa>.cpp. Include only from those files, after
// the header defining V.
//
// The scheme, for every op: a task owns whole output rows (fwd, bwd_data:
// one (n, group); bwd_weights: one (group, block of out-channels) over all
// of N), converts the rows it reads into fp32 scratch (operand rounding
// applied there, width padding materialized as zeros, x rows split into
// stride phases), and vectorizes along the width. Every output element is a
// sum in a fixed order that depends only on the problem, so the bits do not
// depend on the number of threads.
#pragma once

#include "kernels/any_nonfinite.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/tier_kernels.hpp"
#include "kernels/depthwise/depthwise_view_rows.hpp"
#include "kernels/depthwise/depthwise_plan.hpp"

// Register-blocked loops must be fully unrolled, or the accumulators live in
// memory (GCC -O2 does not unroll them by itself).
#define CONVBWD_UNROLL _Pragma("GCC unroll 8")

namespace convbwd::detail {
namespace {

// Output index o of (t = i + pad - r*dilation) when t is a multiple of the
// stride and o < limit; strides 1 and 2 avoid a division.
inline bool dw_tap_hits(int64_t t, int64_t stride, int64_t limit, int64_t* o) {
  if (t < 0) return false;
  if (stride == 1) {
    *o = t;
    return t < limit;
  }
  if (stride == 2) {  // the other common stride: no division either
    *o = t >> 1;
    return (t & 1) == 0 && *o < limit;
  }
  if (t % stride != 0) return false;
  *o = t / stride;
  return *o < limit;
}

template <class V>
struct DwKernel : DwViewRows<V> {
  using R = typename V::R;
  static constexpr int64_t W = V::W;
  static constexpr int kMaxBlock = 8;  // accumulators per row block (of 16 ymm; zmm: 32)

  using DwViewRows<V>::load_row;
  using DwViewRows<V>::store_row;
  using DwViewRows<V>::prefetch;

  // Packs one row of `count` elements into `phases` phase rows of `len`
  // floats: padded column j = m*phases + q (j = i + pad for element i) goes to
  // out[q*len + m]; columns outside the row are zero. tmp: phases*len floats.
  static void pack_row(const void* base, const DwView& v, int64_t off, int64_t count, int64_t pad, int64_t phases,
                       int64_t len, OperandRounding rnd, float* out, float* tmp) {
    if (phases == 1) {
      const int64_t n = std::clamp<int64_t>(len - pad, 0, count);
      const int64_t head = std::min(pad, len);
      std::memset(out, 0, static_cast<size_t>(head) * sizeof(float));
      load_row(base, v, off, n, rnd, out + head);
      std::memset(out + head + n, 0, static_cast<size_t>(len - head - n) * sizeof(float));
      return;
    }
    // The padded row in tmp (phases*len columns), then split.
    const int64_t total = phases * len;
    const int64_t head = std::min(pad, total);
    const int64_t n = std::clamp<int64_t>(total - pad, 0, count);
    std::memset(tmp, 0, static_cast<size_t>(head) * sizeof(float));
    load_row(base, v, off, n, rnd, tmp + head);
    std::memset(tmp + head + n, 0, static_cast<size_t>(total - head - n) * sizeof(float));
    if (phases == 2) {
      V::deinterleave2(tmp, len, out, out + len);
      return;
    }
    for (int64_t q = 0; q < phases; ++q)
      for (int64_t m = 0; m < len; ++m) out[q * len + m] = tmp[m * phases + q];
  }

  // Packs the x planes of channels [ch0, ch0+nch) of image n:
  // x[c][d][h][q][lq].
  static void pack_x(const DwPlan& p, const void* base, const DwView& v, int64_t n, int64_t ch0, int64_t nch,
                     float* out, float* tmp) {
    const int64_t row = p.sw * p.lq;
    for (int64_t c = 0; c < nch; ++c)
      for (int64_t d = 0; d < p.xd; ++d)
        for (int64_t h = 0; h < p.xh; ++h) {
          const int64_t off = v.off + n * v.sn + (ch0 + c) * v.sc + d * v.sd + h * v.sh;
          pack_row(base, v, off, p.xw, p.pw, p.sw, p.lq, p.rounding, out + ((c * p.xd + d) * p.xh + h) * row, tmp);
        }
  }

  // Packs the dy planes of channels [ch0, ch0+nch) of image n into rows of
  // `len` floats with `pad` zeros on the left: y[c][d][h][len].
  static void pack_y(const DwPlan& p, const void* base, const DwView& v, int64_t n, int64_t ch0, int64_t nch,
                     int64_t pad, int64_t len, float* out, float* tmp) {
    for (int64_t c = 0; c < nch; ++c)
      for (int64_t d = 0; d < p.yd; ++d)
        for (int64_t h = 0; h < p.yh; ++h) {
          const int64_t off = v.off + n * v.sn + (ch0 + c) * v.sc + d * v.sd + h * v.sh;
          pack_row(base, v, off, p.yw, pad, 1, len, p.rounding, out + ((c * p.yd + d) * p.yh + h) * len, tmp);
        }
  }

  // Weights of group g, out-channels [k0, k0+nk): w[k][c][kd][kh][kw], rounded.
  static void pack_w(const DwPlan& p, const void* base, int64_t g, int64_t k0, int64_t nk, float* out) {
    const DwView& v = p.b;
    for (int64_t k = 0; k < nk; ++k)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t rd = 0; rd < p.kd; ++rd)
          for (int64_t rh = 0; rh < p.kh; ++rh) {
            const int64_t off = v.off + (g * p.k + k0 + k) * v.sn + c * v.sc + rd * v.sd + rh * v.sh;
            float* row = out + (((k * p.c + c) * p.kd + rd) * p.kh + rh) * p.kw;
            dw_load_row_generic(base, v.dtype, off, v.sw, p.kw, p.rounding, row);
            if (v.zero_nonfinite) zero_nonfinite(row, p.kw);
          }
  }

  // ---- fwd: y[k][o] = sum_{c, r} w[k][c][r] x[c][o*s - p + r*d] ----------

  // NB vectors of one y row starting at column o0.
  template <int NB>
  static void fwd_block(const DwPlan& p, const float* xbuf, const float* wk, int64_t od, int64_t oh, int64_t o0,
                        float* yrow) {
    R acc[NB];
    CONVBWD_UNROLL for (int j = 0; j < NB; ++j) acc[j] = V::zero();
    const int64_t row = p.sw * p.lq;
    for (int64_t c = 0; c < p.c; ++c) {
      for (int64_t rd = 0; rd < p.kd; ++rd) {
        const int64_t id = od * p.sd - p.pd + rd * p.dd;
        if (id < 0 || id >= p.xd) continue;
        for (int64_t rh = 0; rh < p.kh; ++rh) {
          const int64_t ih = oh * p.sh - p.ph + rh * p.dh;
          if (ih < 0 || ih >= p.xh) continue;
          const float* xr = xbuf + ((c * p.xd + id) * p.xh + ih) * row + o0;
          const float* wr = wk + ((c * p.kd + rd) * p.kh + rh) * p.kw;
          for (int64_t rw = 0; rw < p.kw; ++rw) {
            const float* xp = xr + p.xoff[rw];
            const R wv = V::bcast(wr + rw);
            CONVBWD_UNROLL for (int j = 0; j < NB; ++j) acc[j] = V::fma(wv, V::load(xp + j * W), acc[j]);
          }
        }
      }
    }
    CONVBWD_UNROLL for (int j = 0; j < NB; ++j) V::store(yrow + o0 + j * W, acc[j]);
  }

  template <class Block>
  static void for_blocks(int64_t begin, int64_t end, Block&& block, int64_t max_block = kMaxBlock) {
    // Whole vectors from begin up to end (end - begin a multiple of W).
    for (int64_t o = begin; o < end;) {
      const int64_t nb = std::min<int64_t>(max_block, (end - o) / W);
      block(o, nb);
      o += nb * W;
    }
  }

#define CONVBWD_DW_DISPATCH(nb, call)       \
  switch (nb) {                             \
    case 1: call(1); break;                 \
    case 2: call(2); break;                 \
    case 3: call(3); break;                 \
    case 4: call(4); break;                 \
    case 5: call(5); break;                 \
    case 6: call(6); break;                 \
    case 7: call(7); break;                 \
    default: call(8); break;                \
  }

  static void fwd(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task, float* s) {
    const int64_t n = task / p.groups, g = task % p.groups;
    float* xbuf = s + p.off_x;
    float* wbuf = s + p.off_w;
    float* yrow = s + p.off_row;
    pack_x(p, a, p.a, n, g * p.c, p.c, xbuf, s + p.off_phase);
    if (task + 1 < p.tasks)
      prefetch(a, p.a, (task + 1) / p.groups, (task + 1) % p.groups * p.c, p.c, p.xd, p.xh, p.xw);
    pack_w(p, b, g, 0, p.k, wbuf);
    const int64_t ks = p.kd * p.kh * p.kw;
    for (int64_t k = 0; k < p.k; ++k) {
      const float* wk = wbuf + k * p.c * ks;
      for (int64_t od = 0; od < p.yd; ++od)
        for (int64_t oh = 0; oh < p.yh; ++oh) {
          for_blocks(0, p.yw_pad, [&](int64_t o0, int64_t nb) {
#define CONVBWD_DW_CALL(NB) fwd_block<NB>(p, xbuf, wk, od, oh, o0, yrow)
            CONVBWD_DW_DISPATCH(nb, CONVBWD_DW_CALL)
#undef CONVBWD_DW_CALL
          });
          const DwView& v = p.dst;
          store_row(yrow, p.yw, dst, v, v.off + n * v.sn + (g * p.k + k) * v.sc + od * v.sd + oh * v.sh);
        }
    }
  }

  // ---- bwd_data: dx[c][i] = sum over (k, r, o) with o*s - p + r*d = i ----
  // Padded column j = i + pw, split as j = m*sw + q: tap rw contributes to
  // phase q = (rw*dw) % sw, reading dy column o = m - (rw*dw) / sw.

  // A (depth, height) tap of a dx row that hits a dy row: the dy row's
  // offset in a packed plane and the tap's weight offset.
  struct RowTap {
    int64_t y, w;
  };

  template <int NB>
  static void bwd_data_block(const DwPlan& p, const float* ybuf, const float* wc, const RowTap* taps, int64_t ntaps,
                             int64_t q, int64_t m0, float* out) {
    R acc[NB];
    CONVBWD_UNROLL for (int j = 0; j < NB; ++j) acc[j] = V::zero();
    const int64_t ks = p.kd * p.kh * p.kw, yplane = p.yd * p.yh * p.ly, wstride = p.c * ks;
    const int64_t tb = p.phase_tap_begin[q], te = p.phase_tap_begin[q + 1];
    for (int64_t k = 0; k < p.k; ++k) {
      const float* yk = ybuf + k * yplane + p.amax + m0;
      const float* wk = wc + k * wstride;
      for (int64_t t = 0; t < ntaps; ++t) {
        const float* yr = yk + taps[t].y;
        const float* wr = wk + taps[t].w;
        for (int64_t i = tb; i < te; ++i) {
          const int64_t rw = p.phase_taps[i];
          const float* yp = yr - p.tap_shift[rw];
          const R wv = V::bcast(wr + rw);
          CONVBWD_UNROLL for (int j = 0; j < NB; ++j) acc[j] = V::fma(wv, V::load(yp + j * W), acc[j]);
        }
      }
    }
    CONVBWD_UNROLL for (int j = 0; j < NB; ++j) V::store(out + j * W, acc[j]);
  }

  // Two channels c, c+1 at once (stride-1 width): each dy vector loaded
  // feeds both, halving the loads per FMA. Same order per element as
  // bwd_data_block, so the same bits.
  template <int NB>
  static void bwd_data_block2(const DwPlan& p, const float* ybuf, const float* wc, const RowTap* taps,
                              int64_t ntaps, int64_t m0, float* out0, float* out1) {
    R acc0[NB], acc1[NB];
    CONVBWD_UNROLL for (int j = 0; j < NB; ++j) acc0[j] = acc1[j] = V::zero();
    const int64_t ks = p.kd * p.kh * p.kw, yplane = p.yd * p.yh * p.ly, wstride = p.c * ks;
    for (int64_t k = 0; k < p.k; ++k) {
      const float* yk = ybuf + k * yplane + p.amax + m0;
      const float* wk = wc + k * wstride;
      for (int64_t t = 0; t < ntaps; ++t) {
        const float* yr = yk + taps[t].y;
        const float* wr = wk + taps[t].w;
        for (int64_t rw = 0; rw < p.kw; ++rw) {
          const float* yp = yr - p.tap_shift[rw];
          const R w0 = V::bcast(wr + rw), w1 = V::bcast(wr + ks + rw);
          CONVBWD_UNROLL for (int j = 0; j < NB; ++j) {
            const R y = V::load(yp + j * W);
            acc0[j] = V::fma(w0, y, acc0[j]);
            acc1[j] = V::fma(w1, y, acc1[j]);
          }
        }
      }
    }
    CONVBWD_UNROLL for (int j = 0; j < NB; ++j) {
      V::store(out0 + j * W, acc0[j]);
      V::store(out1 + j * W, acc1[j]);
    }
  }

  static void bwd_data(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task, float* s) {
    const int64_t n = task / p.groups, g = task % p.groups;
    float* ybuf = s + p.off_y;
    float* wbuf = s + p.off_w;
    float* xrow = s + p.off_row;
    float* phase = s + p.off_phase;
    pack_y(p, a, p.a, n, g * p.k, p.k, p.amax, p.ly, ybuf, xrow);
    if (task + 1 < p.tasks)
      prefetch(a, p.a, (task + 1) / p.groups, (task + 1) % p.groups * p.k, p.k, p.yd, p.yh, p.yw);
    pack_w(p, b, g, 0, p.k, wbuf);
    const int64_t ks = p.kd * p.kh * p.kw;
    RowTap taps[kDwMaxRowTaps];
    for (int64_t id = 0; id < p.xd; ++id)
      for (int64_t ih = 0; ih < p.xh; ++ih) {
        // The (rd, rh) taps that reach a dy row from this dx row, in tap order.
        int64_t ntaps = 0;
        for (int64_t rd = 0; rd < p.kd; ++rd) {
          int64_t od = 0;
          if (!dw_tap_hits(id + p.pd - rd * p.dd, p.sd, p.yd, &od)) continue;
          for (int64_t rh = 0; rh < p.kh; ++rh) {
            int64_t oh = 0;
            if (!dw_tap_hits(ih + p.ph - rh * p.dh, p.sh, p.yh, &oh)) continue;
            taps[ntaps++] = RowTap{(od * p.yh + oh) * p.ly, (rd * p.kh + rh) * p.kw};
          }
        }
        int64_t c = 0;
        if (p.sw == 1) {
          float* xrow1 = xrow + p.row_len;
          for (; c + 2 <= p.c; c += 2) {
            const float* wc = wbuf + c * ks;
            for_blocks(0, dw_round_up(p.xw, W), [&](int64_t o0, int64_t nb) {
              switch (nb) {
                case 1: bwd_data_block2<1>(p, ybuf, wc, taps, ntaps, p.pw + o0, xrow + o0, xrow1 + o0); break;
                case 2: bwd_data_block2<2>(p, ybuf, wc, taps, ntaps, p.pw + o0, xrow + o0, xrow1 + o0); break;
                case 3: bwd_data_block2<3>(p, ybuf, wc, taps, ntaps, p.pw + o0, xrow + o0, xrow1 + o0); break;
                default: bwd_data_block2<4>(p, ybuf, wc, taps, ntaps, p.pw + o0, xrow + o0, xrow1 + o0); break;
              }
            }, 4);
            const DwView& v = p.dst;
            const int64_t off = v.off + n * v.sn + (g * p.c + c) * v.sc + id * v.sd + ih * v.sh;
            store_row(xrow, p.xw, dst, v, off);
            store_row(xrow1, p.xw, dst, v, off + v.sc);
          }
        }
        for (; c < p.c; ++c) {
          const float* wc = wbuf + c * ks;
          for (int64_t q = 0; q < p.sw; ++q) {
            const int64_t count = p.phase_count[q];
            if (count <= 0) continue;
            float* out = p.sw == 1 ? xrow : phase + q * p.phase_pad;
            for_blocks(0, dw_round_up(count, W), [&](int64_t o0, int64_t nb) {
#define CONVBWD_DW_CALL(NB) bwd_data_block<NB>(p, ybuf, wc, taps, ntaps, q, p.phase_lo[q] + o0, out + o0)
              CONVBWD_DW_DISPATCH(nb, CONVBWD_DW_CALL)
#undef CONVBWD_DW_CALL
            });
          }
          // Column x = sw*i + e is element i of phase (pw + e) % sw.
          if (p.sw == 2) {
            const int64_t q0 = p.pw % 2;
            V::interleave2(phase + q0 * p.phase_pad, phase + (1 - q0) * p.phase_pad, (p.xw + 1) / 2, xrow);
          } else if (p.sw > 2) {
            for (int64_t e = 0; e < p.sw && e < p.xw; ++e) {
              const float* ph = phase + ((p.pw + e) % p.sw) * p.phase_pad;
              for (int64_t i = 0, x = e; x < p.xw; ++i, x += p.sw) xrow[x] = ph[i];
            }
          }
          const DwView& v = p.dst;
          store_row(xrow, p.xw, dst, v, v.off + n * v.sn + (g * p.c + c) * v.sc + id * v.sd + ih * v.sh);
        }
      }
  }

  // ---- bwd_weights: dw[k][c][r] = sum_{n, o} dy[k][o] x[c][o*s - p + r*d] --
  // Lane l of an accumulator sums columns o = l (mod W), over n, then rows,
  // then columns; the lanes are added in a fixed order at the end.

  // Taps rw0 .. rw0+NR-1 of one (rd, rh) over dy rows oh in [oh0, oh1).
  template <int NR>
  static void bwd_weights_taps(const DwPlan& p, const float* xbuf, const float* ybuf, int64_t kk, int64_t c,
                               int64_t rd, int64_t rh, int64_t rw0, int64_t oh0, int64_t oh1, float* accmem) {
    // Accumulators live in scratch between calls; unaligned loads and stores,
    // since the caller's workspace alignment is only recommended.
    R acc[NR];
    CONVBWD_UNROLL for (int j = 0; j < NR; ++j) acc[j] = V::load(accmem + j * W);
    const int64_t* xoff = p.xoff.data() + rw0;
    const int64_t row = p.sw * p.lq;
    const int64_t full = p.yw / W * W;
    const int64_t tail = p.yw - full;
    for (int64_t od = 0; od < p.yd; ++od) {
      const int64_t id = od * p.sd - p.pd + rd * p.dd;
      if (id < 0 || id >= p.xd) continue;
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        const int64_t ih = oh * p.sh - p.ph + rh * p.dh;
        if (ih < 0 || ih >= p.xh) continue;
        const float* xr = xbuf + ((c * p.xd + id) * p.xh + ih) * row;
        const float* yr = ybuf + ((kk * p.yd + od) * p.yh + oh) * p.yw_pad;
        for (int64_t o = 0; o < full; o += W) {
          const R dy = V::load(yr + o);
          CONVBWD_UNROLL for (int j = 0; j < NR; ++j) acc[j] = V::fma(dy, V::load(xr + xoff[j] + o), acc[j]);
        }
        if (tail) {
          const R dy = V::load(yr + full);
          CONVBWD_UNROLL for (int j = 0; j < NR; ++j)
            acc[j] = V::fma(dy, V::keep_first(V::load(xr + xoff[j] + full), tail), acc[j]);
        }
      }
    }
    CONVBWD_UNROLL for (int j = 0; j < NR; ++j) V::store(accmem + j * W, acc[j]);
  }

  // All NT = kh*kw taps of a 1D/2D (out-channel, channel) pair over dy rows
  // [oh0, oh1), where every tap's x row exists: NT independent accumulators
  // (a few would leave the FMA pipes waiting on latency) and each dy vector
  // loaded once. Per tap the order (rows, then columns) is the same as in
  // bwd_weights_taps, so mixing the two keeps the bits.
  static constexpr int kMaxAllTaps = 12;

  template <int NT>
  static void bwd_weights_rows(const DwPlan& p, const float* xbuf, const float* ybuf, int64_t kk, int64_t c,
                               int64_t oh0, int64_t oh1, float* accmem) {
    R acc[NT];
    CONVBWD_UNROLL for (int t = 0; t < NT; ++t) acc[t] = V::load(accmem + t * W);
    const int64_t row = p.sw * p.lq;
    int64_t toff[NT];
    for (int t = 0; t < NT; ++t) toff[t] = (t / p.kw * p.dh - p.ph) * row + p.xoff[t % p.kw];
    const int64_t full = p.yw / W * W;
    const int64_t tail = p.yw - full;
    const float* xc = xbuf + c * p.xd * p.xh * row;  // depth row id = 0 (see all_taps)
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const float* xr = xc + oh * p.sh * row;
      const float* yr = ybuf + (kk * p.yh + oh) * p.yw_pad;
      for (int64_t o = 0; o < full; o += W) {
        const R dy = V::load(yr + o);
        CONVBWD_UNROLL for (int t = 0; t < NT; ++t) acc[t] = V::fma(dy, V::load(xr + toff[t] + o), acc[t]);
      }
      if (tail) {
        const R dy = V::load(yr + full);
        CONVBWD_UNROLL for (int t = 0; t < NT; ++t)
          acc[t] = V::fma(dy, V::keep_first(V::load(xr + toff[t] + full), tail), acc[t]);
      }
    }
    CONVBWD_UNROLL for (int t = 0; t < NT; ++t) V::store(accmem + t * W, acc[t]);
  }

  // KB out-channels x NR width taps of one (channel, rh) over interior dy
  // rows [oh0, oh1): each x vector feeds KB channels and each dy vector NR
  // taps, so loads stay well under the FMAs and the working set (one x plane,
  // KB dy planes) stays in L1. Same per-tap order as bwd_weights_rows.
  template <int KB, int NR>
  static void bwd_weights_kblock(const DwPlan& p, const float* xbuf, const float* ybuf, int64_t kk0, int64_t c,
                                 int64_t rh, int64_t oh0, int64_t oh1, float* acc) {
    const int64_t ks = p.kh * p.kw;  // kd == 1 here
    R a[KB][NR];
    CONVBWD_UNROLL for (int i = 0; i < KB; ++i)
      CONVBWD_UNROLL for (int j = 0; j < NR; ++j) a[i][j] = V::load(acc + (((kk0 + i) * p.c + c) * ks + rh * p.kw + j) * W);
    const int64_t row = p.sw * p.lq;
    const int64_t full = p.yw / W * W;
    const int64_t tail = p.yw - full;
    int64_t xoff[NR];
    for (int j = 0; j < NR; ++j) xoff[j] = p.xoff[j];
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const float* xr = xbuf + (c * p.xd * p.xh + oh * p.sh - p.ph + rh * p.dh) * row;
      const float* yr = ybuf + (kk0 * p.yh + oh) * p.yw_pad;
      const int64_t yplane = p.yh * p.yw_pad;
      for (int64_t o = 0; o < full; o += W) {
        R x[NR];
        CONVBWD_UNROLL for (int j = 0; j < NR; ++j) x[j] = V::load(xr + xoff[j] + o);
        CONVBWD_UNROLL for (int i = 0; i < KB; ++i) {
          const R dy = V::load(yr + i * yplane + o);
          CONVBWD_UNROLL for (int j = 0; j < NR; ++j) a[i][j] = V::fma(dy, x[j], a[i][j]);
        }
      }
      if (tail) {
        R x[NR];
        CONVBWD_UNROLL for (int j = 0; j < NR; ++j) x[j] = V::keep_first(V::load(xr + xoff[j] + full), tail);
        CONVBWD_UNROLL for (int i = 0; i < KB; ++i) {
          const R dy = V::load(yr + i * yplane + full);
          CONVBWD_UNROLL for (int j = 0; j < NR; ++j) a[i][j] = V::fma(dy, x[j], a[i][j]);
        }
      }
    }
    CONVBWD_UNROLL for (int i = 0; i < KB; ++i)
      CONVBWD_UNROLL for (int j = 0; j < NR; ++j) V::store(acc + (((kk0 + i) * p.c + c) * ks + rh * p.kw + j) * W, a[i][j]);
  }

  // Per-tap passes over dy rows [oh0, oh1) for every tap of a pair.
  static void bwd_weights_pair_taps(const DwPlan& p, const float* xbuf, const float* ybuf, int64_t kk, int64_t c,
                                    int64_t oh0, int64_t oh1, float* am) {
    if (oh0 >= oh1) return;
    for (int64_t rd = 0; rd < p.kd; ++rd)
      for (int64_t rh = 0; rh < p.kh; ++rh)
        for (int64_t rw0 = 0; rw0 < p.kw; rw0 += kMaxBlock) {
          float* at = am + ((rd * p.kh + rh) * p.kw + rw0) * W;
#define CONVBWD_DW_CALL(NR) bwd_weights_taps<NR>(p, xbuf, ybuf, kk, c, rd, rh, rw0, oh0, oh1, at)
          CONVBWD_DW_DISPATCH(std::min<int64_t>(kMaxBlock, p.kw - rw0), CONVBWD_DW_CALL)
#undef CONVBWD_DW_CALL
        }
  }

  static void bwd_weights(const DwPlan& p, const void* a, const void* b, void* dst, int64_t task, float* s) {
    const int64_t nkb = (p.k + p.kblock - 1) / p.kblock;
    const int64_t g = task / nkb, k0 = task % nkb * p.kblock;
    const int64_t nk = std::min(p.kblock, p.k - k0);
    float* xbuf = s + p.off_x;
    float* ybuf = s + p.off_y;
    float* tmp = s + p.off_phase;
    float* acc = s + p.off_acc;
    const int64_t ks = p.kd * p.kh * p.kw;
    std::memset(acc, 0, static_cast<size_t>(nk * p.c * ks * W) * sizeof(float));
    // The fast interior paths know one depth tap reading x depth row 0.
    const bool all_taps = p.kd == 1 && p.yd == 1 && p.pd == 0 && ks <= kMaxAllTaps && p.inner_lo < p.inner_hi;
    for (int64_t n = 0; n < p.n; ++n) {
      pack_x(p, b, p.b, n, g * p.c, p.c, xbuf, tmp);
      pack_y(p, a, p.a, n, g * p.k + k0, nk, 0, p.yw_pad, ybuf, tmp);
      if (n + 1 < p.n) {
        prefetch(b, p.b, n + 1, g * p.c, p.c, p.xd, p.xh, p.xw);
        prefetch(a, p.a, n + 1, g * p.k + k0, nk, p.yd, p.yh, p.yw);
      }
      if (!all_taps) {
        for (int64_t kk = 0; kk < nk; ++kk)
          for (int64_t c = 0; c < p.c; ++c) bwd_weights_pair_taps(p, xbuf, ybuf, kk, c, 0, p.yh, acc + (kk * p.c + c) * ks * W);
        continue;
      }
      // Out-channels in blocks of 4 (3-wide kernels): per height tap, every
      // dy row whose x row exists, in ascending order, in one pass.
      const int64_t kb_end = p.kw == 3 ? nk / 4 * 4 : 0;
      for (int64_t kk = 0; kk < kb_end; kk += 4)
        for (int64_t c = 0; c < p.c; ++c)
          for (int64_t rh = 0; rh < p.kh; ++rh) {
            // oh*sh - ph + rh*dh in [0, xh).
            const int64_t lo_t = p.ph - rh * p.dh, hi_t = p.xh - 1 + p.ph - rh * p.dh;
            const int64_t lo = lo_t <= 0 ? 0 : (lo_t + p.sh - 1) / p.sh;
            const int64_t hi = hi_t < 0 ? 0 : std::min(p.yh, hi_t / p.sh + 1);
            if (lo < hi) bwd_weights_kblock<4, 3>(p, xbuf, ybuf, kk, c, rh, lo, hi, acc);
          }
      // The other out-channels: border rows tap by tap, then the rows where
      // every tap hits x, then the bottom border; each tap still sums its
      // rows in ascending order.
      for (int64_t kk = kb_end; kk < nk; ++kk)
        for (int64_t c = 0; c < p.c; ++c) {
          float* am = acc + (kk * p.c + c) * ks * W;
          bwd_weights_pair_taps(p, xbuf, ybuf, kk, c, 0, p.inner_lo, am);
          switch (ks) {
#define CONVBWD_DW_CASE(NT) \
  case NT: bwd_weights_rows<NT>(p, xbuf, ybuf, kk, c, p.inner_lo, p.inner_hi, am); break;
            CONVBWD_DW_CASE(1) CONVBWD_DW_CASE(2) CONVBWD_DW_CASE(3) CONVBWD_DW_CASE(4)
            CONVBWD_DW_CASE(5) CONVBWD_DW_CASE(6) CONVBWD_DW_CASE(7) CONVBWD_DW_CASE(8)
            CONVBWD_DW_CASE(9) CONVBWD_DW_CASE(10) CONVBWD_DW_CASE(11) CONVBWD_DW_CASE(12)
#undef CONVBWD_DW_CASE
            default: break;
          }
          bwd_weights_pair_taps(p, xbuf, ybuf, kk, c, p.inner_hi, p.yh, am);
        }
    }
    const DwView& v = p.dst;
    for (int64_t kk = 0; kk < nk; ++kk)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t rd = 0; rd < p.kd; ++rd)
          for (int64_t rh = 0; rh < p.kh; ++rh) {
            const float* am = acc + ((((kk * p.c + c) * p.kd + rd) * p.kh + rh) * p.kw) * W;
            float* sums = s + p.off_row;
            for (int64_t rw = 0; rw < p.kw; ++rw) sums[rw] = V::hsum(V::load(am + rw * W));
            store_row(sums, p.kw, dst, v, v.off + (g * p.k + k0 + kk) * v.sn + c * v.sc + rd * v.sd + rh * v.sh);
          }
  }

#undef CONVBWD_DW_DISPATCH

  static void task(const DwPlan& p, const void* a, const void* b, void* dst, int64_t t, float* s) {
    assert(p.lanes == W && "the plan was sized for another tier's vectors");
    switch (p.op) {
      case Op::fwd: fwd(p, a, b, dst, t, s); return;
      case Op::bwd_data: bwd_data(p, a, b, dst, t, s); return;
      case Op::bwd_weights: bwd_weights(p, a, b, dst, t, s); return;
      case Op::bias: return;
    }
  }
};

}  // namespace
}  // namespace convbwd::detail
