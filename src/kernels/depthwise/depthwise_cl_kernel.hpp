// Channel-blocked depthwise kernels (plan: depthwise_cl_plan.hpp), written
// once over a vector type V of W lanes (8 on AVX2, 16 on AVX-512) and
// instantiated per ISA by src/kernels/<isa>/depthwise_<isa>.cpp. Include only
// from those files.
//
// Lane l of every vector is group W*block + l. A task converts the rows it
// reads to fp32 (operand rounding applied), transposes them W channels at a
// time into a zero-padded channels-last plane in scratch, and then every
// kernel tap is a constant offset from an output pixel's base: no bounds
// checks and no lane waste in the inner loops. Every output element is a sum
// in an order fixed by the problem alone (taps in (rd, rh, rw) order; for
// gradWeight over n, then pixels in order), so the bits do not depend on the
// thread count, nor on W: a tier's 8- and 16-lane bodies give the same bits.
#pragma once

#include "kernels/any_nonfinite.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/tier_kernels.hpp"
#include "kernels/depthwise/depthwise_view_rows.hpp"
#include "kernels/depthwise/depthwise_cl_plan.hpp"

// Register-blocked loops must be fully unrolled, or the accumulators live in
// memory (GCC -O2 does not unroll them by itself).
#define CONVBWD_DWCL_UNROLL _Pragma("GCC unroll 16")

namespace convbwd::detail {
namespace {

template <class V>
struct DwClKernel : DwViewRows<V> {
  using R = typename V::R;
  static constexpr int64_t W = V::W;
  static_assert(W <= kDwClMaxLanes);

  using DwViewRows<V>::load_row;
  using DwViewRows<V>::store_row;

  // Elements [0, count) of the rows of nv channels whose first starts at
  // element `first`, channels last into out: count rounded up to W pixels of
  // W lanes, lanes nv.. and pixels past count +0. Returns whether it wrote
  // a NaN or +-Inf, if `check` asks (the full blocks test their registers:
  // dw_load_w_rows).
  static bool load_rows_block(const void* base, const DwView& v, int64_t first, int64_t nv, int64_t count,
                              OperandRounding rnd, float* out, bool check) {
    int64_t rows[W];
    for (int64_t c = 0; c < nv; ++c) rows[c] = first + c * v.sc;
    // Zeroed, they hold none.
    check = check && !v.zero_nonfinite;
    bool found = false;
    if (v.sw == 1) {
      found = V::load_rows_transposed(base, v.dtype, rows, nv, count, rnd, out, check);
    } else {
      dw_load_rows_transposed_generic(base, v.dtype, rows, v.sw, nv, count, rnd, W, out);
      found = dw_rows_block_nonfinite<V>(out, count, check);
    }
    if (v.zero_nonfinite) zero_nonfinite(out, dw_round_up(count, W) * W);
    return found;
  }

  static void zero_pixels(float* out, int64_t pixels) {
    for (int64_t i = 0; i < pixels; ++i) V::store(out + i * W, V::zero());
  }

  // The input plane of channels [ch0, ch0+nv) of image n into the padded
  // channels-last plane `out` (ld x lh x rw pixels of W floats). Returns
  // whether it holds a NaN or +-Inf, if p.report_nonfinite asks.
  static bool pack_plane(const DwClPlan& p, const void* base, const DwView& v, int64_t n, int64_t ch0, int64_t nv,
                         float* out) {
    const int64_t row = p.rw * W;
    bool found = false;
    for (int64_t dp = 0; dp < p.ld; ++dp) {
      const int64_t d = dp - p.bd;
      for (int64_t hp = 0; hp < p.lh; ++hp) {
        const int64_t h = hp - p.bh;
        float* o = out + (dp * p.lh + hp) * row;
        if (d < 0 || d >= p.srcd || h < 0 || h >= p.srch) {
          zero_pixels(o, p.rw);
          continue;
        }
        zero_pixels(o, p.bw);
        // Columns past the row become the zero padding after it.
        found |= load_rows_block(base, v, v.off + n * v.sn + ch0 * v.sc + d * v.sd + h * v.sh, nv, p.srcw,
                                 p.rounding, o + p.bw * W, p.report_nonfinite);
        zero_pixels(o + (p.bw + p.srcw_round) * W, p.rw - p.bw - p.srcw_round);
      }
    }
    return found;  // the zero padding holds none
  }

  // The channels of block bk on the op's input and output side: W groups
  // (depthwise), or the channels of group bk (grouped).
  struct Chans {
    int64_t in0, nin, out0, nout;
  };
  static Chans chans(const DwClPlan& p, int64_t bk) {
    if (!p.grouped) {
      const int64_t c0 = bk * W, nv = std::min<int64_t>(W, p.groups - c0);
      return Chans{c0, nv, c0, nv};
    }
    return Chans{bk * p.cin, p.cin, bk * p.cout, p.cout};
  }

  // Grouped weights of group g: wg[t][i][lane o] for input-side channel i
  // and output-side channel o (fwd: i = c, o = k; bwd_data: i = k, o = c).
  static bool pack_wg(const DwClPlan& p, const void* base, int64_t g, float* out, float* wt) {
    const int64_t ks = p.kd * p.kh * p.kw;
    std::memset(out, 0, static_cast<size_t>(ks * p.cin * W) * sizeof(float));
    const bool nonfinite = load_wblock(p, base, g * p.kg, p.kg, wt);
    const bool fw = p.op == Op::fwd;
    for (int64_t i = 0; i < p.cin; ++i)
      for (int64_t o = 0; o < p.cout; ++o) {
        const int64_t kk = fw ? o : i, cc = fw ? i : o;
        const float* src = wt + (kk * p.cg + cc) * ks;
        for (int64_t t = 0; t < ks; ++t) out[(t * p.cin + i) * W + o] = src[t];
      }
    return nonfinite;
  }

  // Weights of groups [ch0, ch0+nv) as wcl[t][lane], t the flattened tap.
  static bool pack_w(const DwClPlan& p, const void* base, int64_t ch0, int64_t nv, float* out, float* wt) {
    const int64_t ks = p.kd * p.kh * p.kw;
    std::memset(out, 0, static_cast<size_t>(ks * W) * sizeof(float));
    const bool nonfinite = load_wblock(p, base, ch0, nv, wt);
    for (int64_t c = 0; c < nv; ++c)
      for (int64_t t = 0; t < ks; ++t) out[t * W + c] = wt[c * ks + t];
    return nonfinite;
  }

  // The weights block bk's tasks multiply, packed into w.
  static bool pack_weights(const DwClPlan& p, const void* b, int64_t bk, const Chans& ch, float* w, float* s) {
    return p.grouped ? pack_wg(p, b, bk, w, s + p.off_wtmp) : pack_w(p, b, ch.in0, ch.nin, w, s + p.off_wtmp);
  }

  // Weights of out-channels [k0, k0+nk) as wt[(k*C + c)*ks + t], rounded: one
  // vector load of the block when the view is dense (the usual case), as a
  // per-element path costs more than a small group's whole task. Returns
  // whether they hold a NaN or +-Inf, if p.report_nonfinite asks.
  static bool load_wblock(const DwClPlan& p, const void* base, int64_t k0, int64_t nk, float* wt) {
    const DwView& v = p.b;
    const int64_t ks = p.kd * p.kh * p.kw;
    if (p.w_dense) {
      V::load_row(base, v.dtype, v.off + k0 * v.sn, nk * p.cg * ks, p.rounding, wt);
    } else {
      for (int64_t k = 0; k < nk; ++k)
        for (int64_t c = 0; c < p.cg; ++c)
          for (int64_t rd = 0; rd < p.kd; ++rd)
            for (int64_t rh = 0; rh < p.kh; ++rh)
              dw_load_row_generic(base, v.dtype, v.off + (k0 + k) * v.sn + c * v.sc + rd * v.sd + rh * v.sh, v.sw,
                                  p.kw, p.rounding, wt + ((k * p.cg + c) * p.kd + rd) * p.kh * p.kw + rh * p.kw);
    }
    if (v.zero_nonfinite) zero_nonfinite(wt, nk * p.cg * ks);
    return p.report_nonfinite && V::any_nonfinite(wt, nk * p.cg * ks);
  }

  // Plane mode with an output that stays in the cache (not streamed) and a
  // full block of channels: the transposed rows go straight into the output
  // planes, each row's vector tail spilling into the rows after it in its
  // own plane, which are written next. The last rows, whose tail would
  // reach past the plane (into the next channel's, or past the tensor), go
  // through tmp as in row mode. Why: copying the finished planes out was a
  // fifth of the fp32 depthwise layer's time on one thread; written in
  // place, dw 96@56 N4 ran 1.08x and its gradInput 1.15x-1.2x, dw s2 192@28
  // N8 1.07x-1.11x (2 threads, Zen 4, alternated).
  static bool direct_planes(const DwClPlan& p, int64_t nv) {
    return p.plane_stride && !p.stream_planes && nv == W && p.dst.dtype == DataType::f32;
  }

  // A channels-last row of `count` pixels (row r of `rows`) back to NCHW:
  // straight into the output planes (direct_planes), into row r of each
  // channel's plane buffer (plane mode otherwise), or through tmp into the
  // view (row mode).
  static void unpack_row(const DwClPlan& p, const float* row, int64_t count, int64_t count_round, void* dst, int64_t off,
                         int64_t nv, float* tmp, int64_t r, float* planes, int64_t rows) {
    if (direct_planes(p, nv) && r * count + count_round <= rows * count) {
      float* const out = static_cast<float*>(dst) + off;
      for (int64_t j = 0; j < count_round; j += W) V::transpose_block(row + j * W, W, out + j, p.dst.sc);
      return;
    }
    if (p.plane_stride && !direct_planes(p, nv)) {
      // The columns past `count` land on row r+1, written next, or in the
      // slack after the plane.
      for (int64_t j = 0; j < count_round; j += W)
        V::transpose_block(row + j * W, W, planes + r * count + j, p.plane_stride);
      return;
    }
    for (int64_t j = 0; j < count_round; j += W) V::transpose_block(row + j * W, W, tmp + j, count_round);
    if (p.dst.sw == 1 && p.dst.dtype != DataType::f32) {
      // One call for the block's channel rows (a call per row, each a few
      // vectors long, was most of a 16-bit row's store).
      p.store_rows(tmp, count_round, nv, count, dst, p.dst.dtype, off, p.dst.sc);
      return;
    }
    for (int64_t c = 0; c < nv; ++c) store_row(tmp + c * count_round, count, dst, p.dst, off + c * p.dst.sc);
  }

  // Plane mode: each channel's finished plane goes out in one contiguous
  // row. Streamed (p.stream_planes), its non-temporal stores skip the
  // read-for-ownership of lines that are overwritten whole (a third of a
  // depthwise gradInput's memory traffic). An output that fits in the
  // last-level cache stays there for its reader: written in place
  // (direct_planes), or copied here for a block short of W channels.
  static void flush_planes(const DwClPlan& p, const float* planes, void* dst, int64_t n, int64_t ch0, int64_t nv,
                           int64_t plane) {
    if (!p.plane_stride || direct_planes(p, nv)) return;
    const DwView& v = p.dst;
    if (v.dtype != DataType::f32) {
      p.store_rows(planes, p.plane_stride, nv, plane, dst, v.dtype, v.off + n * v.sn + ch0 * v.sc, v.sc);
      return;
    }
    float* const out = static_cast<float*>(dst) + v.off + n * v.sn + ch0 * v.sc;
    if (!p.stream_planes) {
      for (int64_t c = 0; c < nv; ++c)
        std::memcpy(out + c * v.sc, planes + c * p.plane_stride, static_cast<size_t>(plane) * sizeof(float));
      return;
    }
    for (int64_t c = 0; c < nv; ++c) V::stream_row(planes + c * p.plane_stride, plane, out + c * v.sc);
    V::store_fence();
  }

  // ---- fwd: y[o] = sum_t w[t] x[o*s + tap t] ----------------------------
  // MB output pixels at a time: each weight vector feeds MB FMAs.
  template <int MB>
  static void fwd_cols(const float* xp, int64_t step, const float* w, const int64_t* toff, int64_t ntaps,
                       float* out) {
    R acc[MB];
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::zero();
    for (int64_t t = 0; t < ntaps; ++t) {
      const R wv = V::load(w + t * W);
      const float* x = xp + toff[t];
      CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::fma(wv, V::load(x + j * step), acc[j]);
    }
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) V::store(out + j * W, acc[j]);
  }

  // Grouped: lane o sums w[t][i][o] x[i] over taps t, then channels i.
  template <int MB>
  static void gfwd_cols(const float* xp, int64_t step, const float* w, const int64_t* toff, int64_t ntaps,
                        int64_t cin, float* out) {
    R acc[MB];
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::zero();
    for (int64_t t = 0; t < ntaps; ++t) {
      const float* x = xp + toff[t];
      const float* wt = w + t * cin * W;
      for (int64_t i = 0; i < cin; ++i) {
        const R wv = V::load(wt + i * W);
        CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::fma(V::bcast(x + j * step + i), wv, acc[j]);
      }
    }
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) V::store(out + j * W, acc[j]);
  }

  static unsigned fwd(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t task, float* s) {
    const int64_t n = task / p.blocks, bk = task % p.blocks;
    const Chans ch = chans(p, bk);
    float* in = s + p.off_in;
    float* w = s + p.off_w;
    float* orow = s + p.off_row;
    float* tmp = s + p.off_tmp;
    unsigned nonfinite = pack_plane(p, a, p.a, n, ch.in0, ch.nin, in) ? kNonfiniteA : 0;
    if (pack_weights(p, b, bk, ch, w, s)) nonfinite |= kNonfiniteB;
    const int64_t ks = p.kd * p.kh * p.kw, row = p.rw * W, step = p.sw * W;
    const int64_t* toff = p.toff.data();
    const int64_t ci = p.cin;
    for (int64_t od = 0; od < p.yd; ++od)
      for (int64_t oh = 0; oh < p.yh; ++oh) {
        const float* xr = in + (od * p.sd * p.lh + oh * p.sh) * row;
        int64_t o = 0;
        if (p.grouped) {
          for (; o + 8 <= p.yw; o += 8) gfwd_cols<8>(xr + o * step, step, w, toff, ks, ci, orow + o * W);
          if (o + 4 <= p.yw) gfwd_cols<4>(xr + o * step, step, w, toff, ks, ci, orow + o * W), o += 4;
          if (o + 2 <= p.yw) gfwd_cols<2>(xr + o * step, step, w, toff, ks, ci, orow + o * W), o += 2;
          if (o < p.yw) gfwd_cols<1>(xr + o * step, step, w, toff, ks, ci, orow + o * W);
        } else {
          for (; o + 8 <= p.yw; o += 8) fwd_cols<8>(xr + o * step, step, w, toff, ks, orow + o * W);
          if (o + 4 <= p.yw) fwd_cols<4>(xr + o * step, step, w, toff, ks, orow + o * W), o += 4;
          if (o + 2 <= p.yw) fwd_cols<2>(xr + o * step, step, w, toff, ks, orow + o * W), o += 2;
          if (o < p.yw) fwd_cols<1>(xr + o * step, step, w, toff, ks, orow + o * W);
        }
        const DwView& v = p.dst;
        // tmp rows are rewritten in full (yw_round columns) before each store.
        unpack_row(p, orow, p.yw, p.yw_round, dst, v.off + n * v.sn + ch.out0 * v.sc + od * v.sd + oh * v.sh, ch.nout,
                   tmp, od * p.yh + oh, s + p.off_plane, p.yd * p.yh);
      }
    flush_planes(p, s + p.off_plane, dst, n, ch.out0, ch.nout, p.yd * p.yh * p.yw);
    return nonfinite;
  }

  // ---- bwd_data: dx[i] = sum over taps r with (i + p - r*d) % s == 0 of
  // w[r] dy[(i + p - r*d) / s] -------------------------------------------
  struct RowTap {
    int64_t y, w;  // float offset of the dy row in the plane; first tap index
  };

  // MB dx columns m0.. of one width phase.
  template <int MB>
  static void bwd_data_cols(const float* ybuf, const float* w, const RowTap* rt, int64_t nrt, const int64_t* taps,
                            const int64_t* shift, int64_t ntaps, int64_t m0, float* out, int64_t ostep) {
    R acc[MB];
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::zero();
    for (int64_t t = 0; t < nrt; ++t) {
      const float* yr = ybuf + rt[t].y + m0 * W;
      const float* wr = w + rt[t].w * W;
      for (int64_t u = 0; u < ntaps; ++u) {
        const R wv = V::load(wr + taps[u] * W);
        const float* y = yr + shift[u] * W;
        CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::fma(wv, V::load(y + j * W), acc[j]);
      }
    }
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) V::store(out + j * ostep, acc[j]);
  }

  // Grouped: lane o sums w[r][i][o] dy[i] over row taps, width taps, then
  // channels i.
  template <int MB>
  static void gbwd_data_cols(const float* ybuf, const float* w, const RowTap* rt, int64_t nrt, const int64_t* taps,
                             const int64_t* shift, int64_t ntaps, int64_t cin, int64_t m0, float* out,
                             int64_t ostep) {
    R acc[MB];
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::zero();
    for (int64_t t = 0; t < nrt; ++t) {
      const float* yr = ybuf + rt[t].y + m0 * W;
      for (int64_t u = 0; u < ntaps; ++u) {
        const float* wr = w + (rt[t].w + taps[u]) * cin * W;
        const float* y = yr + shift[u] * W;
        for (int64_t i = 0; i < cin; ++i) {
          const R wv = V::load(wr + i * W);
          CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::fma(V::bcast(y + j * W + i), wv, acc[j]);
        }
      }
    }
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) V::store(out + j * ostep, acc[j]);
  }

  // A phase's width taps whose dy columns are consecutive (shift[u] =
  // shift[0] - u: width dilation 1), NT of them, for MB dx columns m0..:
  // each dy column of the window is loaded (depthwise) or broadcast
  // (grouped) once and feeds every tap that reads it, instead of once per
  // tap. The grouped kernel was bound by those loads (one broadcast per FMA);
  // here 3 taps x 8 columns take 10 broadcasts and 3 weight loads per 24 FMAs.
  template <bool Grouped, int MB, int NT>
  static void bwd_data_run_cols(const float* ybuf, const float* w, const RowTap* rt, int64_t nrt,
                                const int64_t* taps, int64_t shift0, int64_t cin, int64_t m0, float* out,
                                int64_t ostep) {
    constexpr int kCols = MB + NT - 1;  // dy columns the MB outputs read
    R acc[MB];
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) acc[j] = V::zero();
    for (int64_t t = 0; t < nrt; ++t) {
      // Column e of the window is dy column m0 + shift0 - (NT - 1) + e; it
      // meets tap u at output j = e - (NT - 1) + u.
      const float* y = ybuf + rt[t].y + (m0 + shift0 - (NT - 1)) * W;
      for (int64_t i = 0; i < cin; ++i) {
        R wv[NT];
        CONVBWD_DWCL_UNROLL for (int u = 0; u < NT; ++u) wv[u] = V::load(w + ((rt[t].w + taps[u]) * cin + i) * W);
        CONVBWD_DWCL_UNROLL for (int e = 0; e < kCols; ++e) {
          const R yv = Grouped ? V::bcast(y + e * W + i) : V::load(y + e * W);
          CONVBWD_DWCL_UNROLL for (int u = 0; u < NT; ++u) {
            const int j = e - (NT - 1) + u;
            if (j >= 0 && j < MB) acc[j] = V::fma(wv[u], yv, acc[j]);
          }
        }
      }
    }
    CONVBWD_DWCL_UNROLL for (int j = 0; j < MB; ++j) V::store(out + j * ostep, acc[j]);
  }

  // The cnt columns of one such phase, 8 at a time, then the tail.
  template <bool Grouped, int NT>
  static void bwd_data_run(const float* ybuf, const float* w, const RowTap* rt, int64_t nrt, const int64_t* taps,
                           int64_t shift0, int64_t cin, int64_t lo, int64_t cnt, float* out, int64_t ostep) {
    int64_t m = 0;
#define CONVBWD_DWCL_R(MB) \
  bwd_data_run_cols<Grouped, MB, NT>(ybuf, w, rt, nrt, taps, shift0, cin, lo + m, out + m * ostep, ostep)
    for (; m + 8 <= cnt; m += 8) CONVBWD_DWCL_R(8);
    if (m + 4 <= cnt) CONVBWD_DWCL_R(4), m += 4;
    if (m + 2 <= cnt) CONVBWD_DWCL_R(2), m += 2;
    if (m < cnt) CONVBWD_DWCL_R(1);
#undef CONVBWD_DWCL_R
  }

  // Whether a phase's taps suit bwd_data_run (and how many there are).
  static bool consecutive_taps(const int64_t* shift, int64_t nt) {
    if (nt < 1 || nt > 3) return false;
    for (int64_t u = 1; u < nt; ++u)
      if (shift[u] != shift[0] - u) return false;
    return true;
  }

  template <bool Grouped>
  static void bwd_data_run_any(int64_t nt, const float* ybuf, const float* w, const RowTap* rt, int64_t nrt,
                               const int64_t* taps, int64_t shift0, int64_t cin, int64_t lo, int64_t cnt, float* out,
                               int64_t ostep) {
    switch (nt) {
      case 1: bwd_data_run<Grouped, 1>(ybuf, w, rt, nrt, taps, shift0, cin, lo, cnt, out, ostep); return;
      case 2: bwd_data_run<Grouped, 2>(ybuf, w, rt, nrt, taps, shift0, cin, lo, cnt, out, ostep); return;
      default: bwd_data_run<Grouped, 3>(ybuf, w, rt, nrt, taps, shift0, cin, lo, cnt, out, ostep); return;
    }
  }

  static unsigned bwd_data(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t task, float* s) {
    const int64_t n = task / p.blocks, bk = task % p.blocks;
    const Chans ch = chans(p, bk);
    float* in = s + p.off_in;
    float* w = s + p.off_w;
    unsigned nonfinite = pack_plane(p, a, p.a, n, ch.in0, ch.nin, in) ? kNonfiniteA : 0;
    if (pack_weights(p, b, bk, ch, w, s)) nonfinite |= kNonfiniteB;
    bwd_data_rows(p, dst, n, ch, in, w, s);
    return nonfinite;
  }

  // dx of image n, channels ch, from the packed dy plane `in` and weights
  // `w`: row by row, then the plane flush. No kernel here prefetches the
  // next task's or image's rows: on a Zen 4 such prefetches made the data
  // gradient 1.04x-1.16x slower (dw 96@56, 144@56, s2 192@28, 384@14), and
  // once the loader ran unrolled (2735df1) the weight gradient's and the
  // forward kernel's cost 1.04x-1.34x on a Zen 3 and 1.05x-1.23x on a Zen 4
  // (16-lane blocks; the 8-lane ones level), the hardware prefetchers
  // keeping up (bench/RESULTS.md, sessions 34 and 35).
  static void bwd_data_rows(const DwClPlan& p, void* dst, int64_t n, const Chans& ch, const float* in,
                            const float* w, float* s) {
    float* xrow = s + p.off_row;
    float* tmp = s + p.off_tmp;
    const int64_t ci = p.cin;
    const int64_t row = p.rw * W, ostep = p.sw * W;
    RowTap rt[kDwMaxRowTaps];
    for (int64_t id = 0; id < p.xd; ++id)
      for (int64_t ih = 0; ih < p.xh; ++ih) {
        // (rd, rh) taps that land on a dy row; the plane's leading padding
        // makes u >= 0 and the dy row u / s in range.
        int64_t nrt = 0;
        for (int64_t rd = 0; rd < p.kd; ++rd) {
          const int64_t ud = id + p.pd - rd * p.dd + p.bd * p.sd;
          if (ud % p.sd != 0) continue;
          for (int64_t rh = 0; rh < p.kh; ++rh) {
            const int64_t uh = ih + p.ph - rh * p.dh + p.bh * p.sh;
            if (uh % p.sh != 0) continue;
            rt[nrt++] = RowTap{(ud / p.sd * p.lh + uh / p.sh) * row, (rd * p.kh + rh) * p.kw};
          }
        }
        for (int64_t q = 0; q < p.sw; ++q) {
          const int64_t lo = p.phase_lo[static_cast<size_t>(q)], cnt = p.phase_count[static_cast<size_t>(q)];
          const int64_t tb = p.phase_begin[static_cast<size_t>(q)];
          const int64_t nt = p.phase_begin[static_cast<size_t>(q) + 1] - tb;
          const int64_t* taps = p.phase_tap.data() + tb;
          const int64_t* shift = p.phase_shift.data() + tb;
          // dx column of phase column m: m*sw + q - pw.
          float* out = xrow + ((lo * p.sw + q - p.pw) * W);
          if (consecutive_taps(shift, nt)) {
            if (p.grouped)
              bwd_data_run_any<true>(nt, in, w, rt, nrt, taps, shift[0], ci, lo, cnt, out, ostep);
            else
              bwd_data_run_any<false>(nt, in, w, rt, nrt, taps, shift[0], 1, lo, cnt, out, ostep);
            continue;
          }
          int64_t m = 0;
          if (p.grouped) {
#define CONVBWD_DWCL_G(MB) gbwd_data_cols<MB>(in, w, rt, nrt, taps, shift, nt, ci, lo + m, out + m * ostep, ostep)
            for (; m + 8 <= cnt; m += 8) CONVBWD_DWCL_G(8);
            if (m + 4 <= cnt) CONVBWD_DWCL_G(4), m += 4;
            if (m + 2 <= cnt) CONVBWD_DWCL_G(2), m += 2;
            if (m < cnt) CONVBWD_DWCL_G(1);
#undef CONVBWD_DWCL_G
            continue;
          }
          for (; m + 8 <= cnt; m += 8) bwd_data_cols<8>(in, w, rt, nrt, taps, shift, nt, lo + m, out + m * ostep, ostep);
          if (m + 4 <= cnt) bwd_data_cols<4>(in, w, rt, nrt, taps, shift, nt, lo + m, out + m * ostep, ostep), m += 4;
          if (m + 2 <= cnt) bwd_data_cols<2>(in, w, rt, nrt, taps, shift, nt, lo + m, out + m * ostep, ostep), m += 2;
          if (m < cnt) bwd_data_cols<1>(in, w, rt, nrt, taps, shift, nt, lo + m, out + m * ostep, ostep);
        }
        const DwView& v = p.dst;
        unpack_row(p, xrow, p.xw, p.xw_round, dst, v.off + n * v.sn + ch.out0 * v.sc + id * v.sd + ih * v.sh, ch.nout,
                   tmp, id * p.xh + ih, s + p.off_plane, p.xd * p.xh);
      }
    flush_planes(p, s + p.off_plane, dst, n, ch.out0, ch.nout, p.xd * p.xh * p.xw);
  }

  // gradWeight passes over an image's dy rows in chunks, each chunk once per
  // group of taps (and, grouped, of out-channels), so that the chunk's x and
  // dy rows are read again from L1. Per output the order of the terms does
  // not depend on the chunks (the sums go through memory as fp32 between
  // them).
  static constexpr int64_t kRowChunk = 8;

  // ---- bwd_weights: dw[t] = sum_{n, o} dy[o] x[o*s + tap t] ---------------
  // A packed dy plane as the weight gradient reads it: pixel (od, oh, ow) at
  // base + od*plane + oh*row + ow*W. Its own copy (pack_dy) is unpadded; the
  // fused pass reads the data gradient's padded plane instead.
  struct YPlane {
    const float* base;
    int64_t plane, row;
  };
  static YPlane own_dy(const DwClPlan& p, const float* ybuf) { return {ybuf, p.yh * p.yw_round * W, p.yw_round * W}; }

  // NT taps' accumulators stay in registers over a chunk of dy rows; each dy
  // vector is loaded once per NT taps. Per tap the order is n, then pixels.
  static constexpr int kMaxTaps = 12;

  template <int NT>
  static void bwd_weights_taps(const DwClPlan& p, const float* xbuf, const YPlane& y, const int64_t* toff,
                               int64_t r0, int64_t r1, float* accmem) {
    R acc[NT];
    CONVBWD_DWCL_UNROLL for (int t = 0; t < NT; ++t) acc[t] = V::load(accmem + t * W);
    const int64_t row = p.rw * W, step = p.sw * W;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t od = r / p.yh, oh = r % p.yh;
      const float* xr = xbuf + (od * p.sd * p.lh + oh * p.sh) * row;
      const float* yr = y.base + od * y.plane + oh * y.row;
      for (int64_t o = 0; o < p.yw; ++o) {
        const R dy = V::load(yr + o * W);
        const float* x = xr + o * step;
        CONVBWD_DWCL_UNROLL for (int t = 0; t < NT; ++t) acc[t] = V::fma(dy, V::load(x + toff[t]), acc[t]);
      }
    }
    CONVBWD_DWCL_UNROLL for (int t = 0; t < NT; ++t) V::store(accmem + t * W, acc[t]);
  }

  // ---- grouped bwd_weights: dw[k][c][t] = sum_{n, o} dy[o][k] x[o*s + t][c]
  // Lanes are c. KB out-channels x NT taps of accumulators: per pixel NT x
  // vectors and KB dy broadcasts feed KB*NT FMAs. Per (k, t) the order is
  // n, then pixels, as for depthwise.
  template <int KB, int NT>
  static void gw_block(const DwClPlan& p, const float* xbuf, const YPlane& y, const int64_t* toff, int64_t k0,
                       int64_t r0, int64_t r1, float* acc) {
    R a[KB][NT];
    CONVBWD_DWCL_UNROLL for (int k = 0; k < KB; ++k)
      CONVBWD_DWCL_UNROLL for (int t = 0; t < NT; ++t) a[k][t] = V::load(acc + (t * p.kg + k0 + k) * W);
    const int64_t row = p.rw * W, step = p.sw * W;
    int64_t to[NT];
    for (int t = 0; t < NT; ++t) to[t] = toff[t];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t od = r / p.yh, oh = r % p.yh;
      const float* xr = xbuf + (od * p.sd * p.lh + oh * p.sh) * row;
      const float* yr = y.base + od * y.plane + oh * y.row + k0;
      for (int64_t o = 0; o < p.yw; ++o) {
        R x[NT];
        CONVBWD_DWCL_UNROLL for (int t = 0; t < NT; ++t) x[t] = V::load(xr + o * step + to[t]);
        CONVBWD_DWCL_UNROLL for (int k = 0; k < KB; ++k) {
          const R dy = V::bcast(yr + o * W + k);
          CONVBWD_DWCL_UNROLL for (int t = 0; t < NT; ++t) a[k][t] = V::fma(dy, x[t], a[k][t]);
        }
      }
    }
    CONVBWD_DWCL_UNROLL for (int k = 0; k < KB; ++k)
      CONVBWD_DWCL_UNROLL for (int t = 0; t < NT; ++t) V::store(acc + (t * p.kg + k0 + k) * W, a[k][t]);
  }

  template <int KB>
  static void gw_taps(const DwClPlan& p, const float* xbuf, const YPlane& y, const int64_t* toff, int64_t nt,
                      int64_t k0, int64_t r0, int64_t r1, float* acc) {
    switch (nt) {
      case 1: gw_block<KB, 1>(p, xbuf, y, toff, k0, r0, r1, acc); break;
      case 2: gw_block<KB, 2>(p, xbuf, y, toff, k0, r0, r1, acc); break;
      default: gw_block<KB, 3>(p, xbuf, y, toff, k0, r0, r1, acc); break;
    }
  }

  // The x and dy channels of weight-gradient task t: W groups (depthwise), or group t's channels (grouped).
  struct WChans {
    int64_t x0, nx, y0, ny;
  };
  static WChans weight_chans(const DwClPlan& p, int64_t t) {
    if (p.grouped) return WChans{t * p.cg, p.cg, t * p.kg, p.kg};
    const int64_t c0 = t * W, nv = std::min<int64_t>(W, p.groups - c0);
    return WChans{c0, nv, c0, nv};
  }
  static int64_t weight_acc_floats(const DwClPlan& p) {
    return p.kd * p.kh * p.kw * (p.grouped ? p.kg : 1) * W;
  }

  static unsigned bwd_weights(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t task, float* s) {
    const WChans wc = weight_chans(p, task);
    float* xbuf = s + p.off_in;
    float* ybuf = s + p.off_y;
    float* acc = s + p.off_acc;
    float* tmp = s + p.off_tmp;
    std::memset(acc, 0, static_cast<size_t>(weight_acc_floats(p)) * sizeof(float));
    unsigned nonfinite = 0;
    for (int64_t n = 0; n < p.n; ++n) {
      if (pack_plane(p, b, p.b, n, wc.x0, wc.nx, xbuf)) nonfinite |= kNonfiniteB;
      if (pack_dy(p, a, n, wc.y0, wc.ny, ybuf)) nonfinite |= kNonfiniteA;
      weights_image(p, xbuf, own_dy(p, ybuf), acc);
    }
    store_weights(p, dst, task, acc, tmp);
    return nonfinite;
  }

  // Adds image n's terms into acc, from its packed x plane and dy plane y.
  // Per output the order is n, then pixels: the same bits whichever plane
  // the dy values come from.
  static void weights_image(const DwClPlan& p, const float* xbuf, const YPlane& y, float* acc) {
    const int64_t ks = p.kd * p.kh * p.kw;
    const int64_t rows = p.yd * p.yh;
    for (int64_t r0 = 0; r0 < rows; r0 += kRowChunk) {
      const int64_t r1 = std::min(rows, r0 + kRowChunk);
      if (p.grouped) {
        for (int64_t t0 = 0; t0 < ks; t0 += 3) {
          const int64_t nt = std::min<int64_t>(3, ks - t0);
          for (int64_t k0 = 0; k0 < p.kg; k0 += 4) {
            const int64_t* toff = p.toff.data() + t0;
            float* am = acc + t0 * p.kg * W;
            switch (std::min<int64_t>(4, p.kg - k0)) {
              case 1: gw_taps<1>(p, xbuf, y, toff, nt, k0, r0, r1, am); break;
              case 2: gw_taps<2>(p, xbuf, y, toff, nt, k0, r0, r1, am); break;
              case 3: gw_taps<3>(p, xbuf, y, toff, nt, k0, r0, r1, am); break;
              default: gw_taps<4>(p, xbuf, y, toff, nt, k0, r0, r1, am); break;
            }
          }
        }
        continue;
      }
      for (int64_t t0 = 0; t0 < ks; t0 += kMaxTaps) {
        const int64_t* toff = p.toff.data() + t0;
        float* am = acc + t0 * W;
        switch (std::min<int64_t>(kMaxTaps, ks - t0)) {
#define CONVBWD_DWCL_CASE(NT) \
  case NT: bwd_weights_taps<NT>(p, xbuf, y, toff, r0, r1, am); break;
          CONVBWD_DWCL_CASE(1) CONVBWD_DWCL_CASE(2) CONVBWD_DWCL_CASE(3) CONVBWD_DWCL_CASE(4)
          CONVBWD_DWCL_CASE(5) CONVBWD_DWCL_CASE(6) CONVBWD_DWCL_CASE(7) CONVBWD_DWCL_CASE(8)
          CONVBWD_DWCL_CASE(9) CONVBWD_DWCL_CASE(10) CONVBWD_DWCL_CASE(11)
#undef CONVBWD_DWCL_CASE
          default: bwd_weights_taps<12>(p, xbuf, y, toff, r0, r1, am); break;
        }
      }
    }
  }

  // Task t's finished sums into dw (vals: kw floats of scratch).
  static void store_weights(const DwClPlan& p, void* dst, int64_t t, const float* acc, float* vals) {
    const DwView& v = p.dst;
    const WChans wc = weight_chans(p, t);
    const int64_t nk = p.grouped ? p.kg : wc.nx, nc = p.grouped ? p.cg : 1;
    for (int64_t k = 0; k < nk; ++k)
      for (int64_t c = 0; c < nc; ++c)
        for (int64_t rd = 0; rd < p.kd; ++rd)
          for (int64_t rh = 0; rh < p.kh; ++rh) {
            const int64_t t0 = (rd * p.kh + rh) * p.kw;
            // Depthwise: lane k of tap vectors; grouped: lane c of (tap, k).
            for (int64_t r = 0; r < p.kw; ++r)
              vals[r] = p.grouped ? acc[((t0 + r) * p.kg + k) * W + c] : acc[(t0 + r) * W + k];
            store_row(vals, p.kw, dst, v, v.off + (wc.y0 + k) * v.sn + c * v.sc + rd * v.sd + rh * v.sh);
          }
  }

  // ---- the gradients of block bk in one pass -------------------------------
  // The data and weight gradients (p.data, p.weights: the layer's bwd_data
  // and bwd_weights plans), and gradBias if p.bias. Each image's dy plane is
  // packed once, padded as the data gradient reads it, and the weight
  // gradient and the bias read the same plane (YPlane). Every gradient keeps
  // its own kernel's summation order, so the bits equal separate runs.
  // Returns whether a packed operand held a NaN or +-Inf (the plans report).
  static bool fused(const DwClFusedPlan& p, const void* dy, const void* x, const void* w, void* const* dst,
                    int64_t bk, float* scratch) {
    const DwClPlan& pd = p.data;
    const DwClPlan& pw = p.weights;
    float* const sd = scratch;
    float* const sw = sd + pd.scratch_floats;
    float* const lanes = sw + pw.scratch_floats;  // gradBias: bias_lanes vectors, lane = channel
    const Chans ch = chans(pd, bk);
    const WChans wc = weight_chans(pw, bk);
    float* in = sd + pd.off_in;
    float* wpk = sd + pd.off_w;
    float* xbuf = sw + pw.off_in;
    float* acc = sw + pw.off_acc;
    std::memset(acc, 0, static_cast<size_t>(weight_acc_floats(pw)) * sizeof(float));
    std::memset(lanes, 0, static_cast<size_t>(p.bias_lanes * W) * sizeof(float));
    bool nonfinite = pack_weights(pd, w, bk, ch, wpk, sd);
    const YPlane y{in + ((pd.bd * pd.lh + pd.bh) * pd.rw + pd.bw) * W, pd.lh * pd.rw * W, pd.rw * W};
    for (int64_t n = 0; n < pd.n; ++n) {
      nonfinite |= pack_plane(pd, dy, pd.a, n, ch.in0, ch.nin, in);
      bwd_data_rows(pd, dst[0], n, ch, in, wpk, sd);
      if (p.bias && p.bias_lanes == 16)
        bias_image<16>(pd, y, lanes);
      else if (p.bias)
        bias_image<8>(pd, y, lanes);
      nonfinite |= pack_plane(pw, x, pw.b, n, wc.x0, wc.nx, xbuf);
      weights_image(pw, xbuf, y, acc);
    }
    store_weights(pw, dst[1], bk, acc, sw + pw.off_tmp);
    if (p.bias) {
      // The lane vectors added as bias_reduce adds its lanes: pairwise,
      // halves first.
      auto sum8 = [&](const float* at) {
        R l[8];
        CONVBWD_DWCL_UNROLL for (int j = 0; j < 8; ++j) l[j] = V::load(at + j * W);
        return V::add(V::add(V::add(l[0], l[1]), V::add(l[2], l[3])), V::add(V::add(l[4], l[5]), V::add(l[6], l[7])));
      };
      const R sum = p.bias_lanes == 16 ? V::add(sum8(lanes), sum8(lanes + 8 * W)) : sum8(lanes);
      float* vals = sw + pw.off_tmp;
      V::store(vals, sum);
      store_row(vals, ch.nin, dst[2], p.bias_out, p.bias_out.off + ch.in0 * p.bias_out.sw);
    }
    return nonfinite;
  }

  // Adds image n's dy values into the L lane vectors of gradBias: the value
  // at width o into vector o % L, rows in (d, h) order, as bias_reduce sums
  // (L = its plan's lanes).
  template <int L>
  static void bias_image(const DwClPlan& pd, const YPlane& y, float* lanes) {
    R l[L];
    CONVBWD_DWCL_UNROLL for (int j = 0; j < L; ++j) l[j] = V::load(lanes + j * W);
    for (int64_t od = 0; od < pd.yd; ++od)
      for (int64_t oh = 0; oh < pd.yh; ++oh) {
        const float* yr = y.base + od * y.plane + oh * y.row;
        int64_t o = 0;
        for (; o + L <= pd.yw; o += L)
          CONVBWD_DWCL_UNROLL for (int j = 0; j < L; ++j) l[j] = V::add(l[j], V::load(yr + (o + j) * W));
        for (int j = 0; o < pd.yw; ++o, ++j) l[j] = V::add(l[j], V::load(yr + o * W));
      }
    CONVBWD_DWCL_UNROLL for (int j = 0; j < L; ++j) V::store(lanes + j * W, l[j]);
  }

  // dy planes of channels [ch0, ch0+nv): ybuf[od][oh][yw_round][lane], unpadded.
  // Returns whether they hold a NaN or +-Inf, if p.report_nonfinite asks.
  static bool pack_dy(const DwClPlan& p, const void* base, int64_t n, int64_t ch0, int64_t nv, float* out) {
    const DwView& v = p.a;
    bool found = false;
    for (int64_t od = 0; od < p.yd; ++od)
      for (int64_t oh = 0; oh < p.yh; ++oh)
        found |= load_rows_block(base, v, v.off + n * v.sn + ch0 * v.sc + od * v.sd + oh * v.sh, nv, p.yw,
                                 p.rounding, out + (od * p.yh + oh) * p.yw_round * W, p.report_nonfinite);
    return found;
  }

  static unsigned task(const DwClPlan& p, const void* a, const void* b, void* dst, int64_t t, float* s) {
    switch (p.op) {
      case Op::fwd: return fwd(p, a, b, dst, t, s);
      case Op::bwd_data: return bwd_data(p, a, b, dst, t, s);
      case Op::bwd_weights: return bwd_weights(p, a, b, dst, t, s);
      case Op::bias: return 0;
    }
    return 0;
  }
};

}  // namespace
}  // namespace convbwd::detail
