// Forward and data gradient of 1x1, stride-1, unpadded convolutions straight
// from planar (NCHW-like) tensors, with no channels-last copy of the image:
//
//   out[n, g, row, p] = sum over reduced channels t of W'[g, row, t] * src[n, g, t, p]
//
// (data gradient: rows are input channels c, t runs over output channels k;
// forward: rows are k, t runs over c). The pixels p of one channel are
// already contiguous, so a 6x16 tile is 6 output channels (broadcasts from
// the weights, packed [t][6]) by 16 pixels (two vectors of the source). A
// task is a strip of pixels (up to 256), taken a group of 16-pixel blocks
// at a time: the group's source (t rows of 16 pixels per block) is copied
// into a per-thread panel [block][t][16] that stays in L1 while every row
// tile of the output passes over it, and the next groups' source lines are
// prefetched meanwhile. A group is as many blocks as fit in 16 KB (one when
// t > 128).
//
// Why: the gather path transposes the whole gradient into a channels-last
// copy first. For 1x1 layers there is no tap reuse to pay for it: on
// mb8ic64ih56oc256kh1 the copy alone cost ~60% of the GEMM time, writing and
// re-reading 26 MB. Here the source is read once, in 16-pixel strips.
//
// bf16 operands on a tier with bf16 arithmetic stay bf16 (kernels/gemm.hpp):
// the weights pack as [t/2][mr] pairs of reduced channels, each panel as
// [16-pixel block][t/2][nr] pairs (channels 2s and 2s+1 of one pixel), a
// zero element past an odd reduction on both sides.
//
// Each output is one kernel call over the whole reduction, in channel
// order, whichever task or thread runs it: the bits do not depend on the
// thread count.
#include <algorithm>
#include <memory>

#include "impl/gemm/common.hpp"
#include "impl/registry_entries.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail::gemm {
namespace {

// The pixel stride of a [N, channels, spatial...] view whose spatial dims
// form one evenly strided sequence (1 when every spatial dim is 1), or 0
// when they do not. A broadcast sequence (stride 0) is not one: its pixels
// share an element. (Stride 0 once also meant "no dim seen yet", which made
// a broadcast gradOutput look contiguous to the panel copy, and it read past
// the one element stored: a fuzz finding.)
int64_t flat_pixel_stride(const View& v, int spatial) {
  bool seen = false;
  int64_t stride = 1;
  for (int d = spatial - 1; d >= 0; --d) {
    const int64_t dim = v.dims[2 + d], st = v.strides[2 + d];
    if (dim == 1) continue;
    if (!seen) {
      stride = st;
      seen = true;
      continue;
    }
    // The next outer non-trivial dim must continue where this one ends.
    Checked next(stride);
    for (int e = d + 1; e < spatial; ++e) next = next * v.dims[2 + e];
    if (!next.ok() || st != next.value()) return 0;
  }
  return stride;
}

class Nchw1x1Kernel final : public OpKernel {
 public:
  Nchw1x1Kernel(const OpSpec& op, const PlanContext& ctx) : op_(op), threads_(std::max(ctx.threads, 1)) {
    const Geometry& g = op.geo;
    const bool dgrad = op.op == Op::bwd_data;
    const KernelConfig& cfg = kernels_for(ctx.isa);
    pairs_ = bf16_pairs(op, cfg);
    const GemmKernels& family = wide_family(cfg, pairs_);  // tile columns are pixels: no narrow family
    kern_ = family.strided;
    half_kern_ = family.strided_half;
    mr_ = family.mr;
    nr_ = family.nr;
    convert_ = cfg.to_channels_last;
    store_ = cfg.store_row;
    store_rows_ = cfg.store_rows;
    interleave_ = cfg.interleave_pair_rows;
    groups_ = g.groups;
    n_ = g.n;
    cols_ = dgrad ? g.c : g.k;
    red_ = dgrad ? g.k : g.c;
    steps_ = pairs_ ? (red_ + 1) / 2 : red_;
    pixels_ = 1;
    for (int d = 0; d < g.spatial; ++d) pixels_ *= g.xsize[d];
    dst_px_ = flat_pixel_stride(op.dst, g.spatial);
    row_tiles_ = ceil_div(cols_, mr_);
    // Pixels per task: up to 256, as long as the task's pair panels
    // (reduced channels x pixels) stay within 256 KB of L2. Without pairs
    // the panel holds one block.
    strip_px_ = std::clamp<int64_t>((int64_t{1} << 16) / std::max<int64_t>(red_, 1) / nr_ * nr_, nr_, 256);
    group_ = pairs_ ? 1 : std::clamp<int64_t>(kGroupPanelBytes / (steps_ * nr_ * 4), 1, 16);
    panel_floats_ = round_up(steps_ * (pairs_ ? strip_px_ : group_ * nr_), kAlignFloats);
    weights_floats_ = round_up(groups_ * row_tiles_ * steps_ * mr_, kAlignFloats);
    strips_ = ceil_div(pixels_, strip_px_);
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(weights_floats_ + threads_ * panel_floats_) * sizeof(float);
  }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    float* const wpk = reinterpret_cast<float*>(args.workspace);
    float* const panels = wpk + weights_floats_;
    if (pair_steps_packed()) {
      const int64_t tasks = ceil_div(steps_, kPackSteps);
      pool.parallel_for(groups_ * tasks, threads_, [&](int64_t t, int) {
        const int64_t g = t / tasks, t0 = t % tasks * kPackSteps;
        pack_pair_steps(args.b, g, t0, std::min(steps_, t0 + kPackSteps), wpk + g * row_tiles_ * steps_ * mr_);
      });
    } else {
      pool.parallel_for(groups_ * row_tiles_, threads_, [&](int64_t t, int) {
        pack_rows(args.b, t / row_tiles_, t % row_tiles_, wpk + t * steps_ * mr_);
      });
    }
    pool.parallel_for(n_ * groups_ * strips_, threads_, [&](int64_t t, int thread) {
      compute(args, wpk, panels + thread * panel_floats_, t);
    });
  }

 private:
  // Whether the bf16 pair pack goes step by step (pack_pair_steps): the data
  // gradient's W' rows are w's columns, so where those are unit-stride, pair
  // t of every row tile is w's rows 2t and 2t + 1, interleaved across them.
  bool pair_steps_packed() const { return pairs_ && op_.op == Op::bwd_data && op_.b.strides[1] == 1; }
  static constexpr int64_t kPackSteps = 8;   // pair steps per packing task
  static constexpr int64_t kPackWords = 512;  // columns interleaved per call

  // Pair steps [t0, t1) of every row tile of group g (its tiles from dst on,
  // steps_ * mr_ words each): each step's two rows of w interleaved by the
  // tier kernel up to kPackWords columns at a time, then cut into the tiles'
  // mr-word rows, zero past the last column. Why: packed tile by tile, row
  // by row, element by element (each load a whole row of w apart), the pack
  // was 15% of the bf16 1x1 512->128 @14 data gradient (perf, Zen 5). That
  // gradient took 1/1.11 of the time with the tier interleave called per
  // tile (8 columns a call, the calls then 7% of it), and 1/1.03 again
  // with the calls across the tiles (2 threads).
  void pack_pair_steps(const void* w, int64_t g, int64_t t0, int64_t t1, float* dst) const {
    const View& v = op_.b;  // [G*K, C, 1...]
    const int64_t s0 = v.strides[0];
    const uint16_t* const first = static_cast<const uint16_t*>(w) + v.offset + g * op_.geo.k * s0;
    uint32_t* const d = reinterpret_cast<uint32_t*>(dst);
    alignas(64) uint32_t row[kPackWords];
    static_assert(kPackWords % kMaxMr == 0);
    // Whole row tiles per call, so that no tile straddles two calls.
    const int64_t cols_per_call = kPackWords / mr_ * mr_;
    for (int64_t t = t0; t < t1; ++t) {
      const uint16_t* const even = first + 2 * t * s0;
      const uint16_t* const odd = 2 * t + 1 < red_ ? even + s0 : nullptr;
      for (int64_t c0 = 0; c0 < cols_; c0 += cols_per_call) {
        const int64_t n = std::min<int64_t>(cols_per_call, cols_ - c0);
        interleave_(even + c0, odd ? odd + c0 : nullptr, n, row);
        for (int64_t i = 0; i < n; i += mr_) {
          uint32_t* const o = d + ((c0 + i) / mr_ * steps_ + t) * mr_;
          const int64_t m = std::min<int64_t>(mr_, n - i);
          std::copy(row + i, row + i + m, o);
          std::fill(o + m, o + mr_, 0u);
        }
      }
    }
  }

  // Packs W' rows [tile*mr, tile*mr + mr) of group g as [t][mr] (zero rows
  // past the last), converted to fp32 with the operand rounding; or, pairs,
  // as [t/2][mr] bf16 pairs, bit for bit.
  void pack_rows(const void* w, int64_t g, int64_t tile, float* dst) const {
    const bool dgrad = op_.op == Op::bwd_data;
    const View& v = op_.b;  // [G*K, C, 1...]
    const int64_t s0 = v.strides[0], s1 = v.strides[1];
    if (!pairs_) {
      // The tile's rows as the converter's "channels" and t as its
      // "pixels": one call writes the [t][mr] panel (a transpose for the
      // forward's rows, a copy of mr neighbours per t for the data
      // gradient's). Row by row, each element went through a one-lane
      // partial load and store: a fifth of the 512->128 data gradient.
      const int64_t rows = std::min<int64_t>(mr_, cols_ - tile * mr_);
      const int64_t base = v.offset + (dgrad ? g * op_.geo.k * s0 + tile * mr_ * s1 : (g * op_.geo.k + tile * mr_) * s0);
      convert_(w, v.dtype, op_.rounding, base, dgrad ? s1 : s0, dgrad ? s0 : s1, rows, red_, dst, mr_);
      if (rows < mr_)
        for (int64_t t = 0; t < steps_; ++t) std::fill(dst + t * mr_ + rows, dst + (t + 1) * mr_, 0.0f);
      return;
    }
    for (int i = 0; i < mr_; ++i) {
      const int64_t row = tile * mr_ + i;
      if (row >= cols_) {
        for (int64_t t = 0; t < steps_; ++t) dst[t * mr_ + i] = 0.0f;
        continue;
      }
      // Element (row, t) of W' is w[g*K + k, c] with (k, c) = dgrad ? (t, row) : (row, t).
      const int64_t base = v.offset + (dgrad ? g * op_.geo.k * s0 + row * s1 : (g * op_.geo.k + row) * s0);
      const int64_t step = dgrad ? s0 : s1;
      const uint16_t* const src = static_cast<const uint16_t*>(w) + base;
      uint32_t* const d = reinterpret_cast<uint32_t*>(dst);
      for (int64_t t = 0; t < steps_; ++t) {
        const uint32_t hi = 2 * t + 1 < red_ ? src[(2 * t + 1) * step] : 0u;
        d[t * mr_ + i] = src[2 * t * step] | hi << 16;
      }
    }
  }

  void compute(const OpArgs& args, const float* wpk, float* panel, int64_t task) const {
    const int64_t strip = task % strips_, ng = task / strips_;
    const int64_t g = ng % groups_, n = ng / groups_;
    const View& a = op_.a;
    const View& dv = op_.dst;
    const int64_t p_lo = strip * strip_px_;
    const int64_t np_all = std::min(strip_px_, pixels_ - p_lo);
    const int64_t full = np_all / nr_, rem = np_all % nr_;
    const int64_t cstride = a.strides[1];
    const int64_t src0 = a.offset + n * a.strides[0] + g * red_ * cstride + p_lo;  // pixels contiguous (plan_1x1)
    const int64_t pitch = steps_ * nr_;
    if (pairs_)  // every pair panel of the strip up front, [block][t/2][nr]
      pack_pair_panels(static_cast<const uint16_t*>(args.a) + src0, cstride, np_all,
                       reinterpret_cast<uint32_t*>(panel));
    MicroArgs ka;
    const int64_t zero = 0;
    ka.a_off = &zero;
    ka.b_off = &zero;
    ka.len = &steps_;
    ka.runs = 1;
    ka.as = mr_;
    ka.bs = nr_;
    alignas(64) float tile[kMaxMr * kMaxNr];
    ka.acc = tile;
    int64_t row_base[kMaxMr];
    const int64_t elem = static_cast<int64_t>(size_of(a.dtype));
    const int64_t out_elem = static_cast<int64_t>(size_of(dv.dtype));
    const int64_t prefetch_rows = ceil_div(red_, row_tiles_);  // per row tile
    const int64_t blocks = full + (rem > 0);
    for (int64_t b0 = 0; b0 < blocks; b0 += group_) {
      const int64_t nb = std::min(group_, blocks - b0);
      const float* const group_panels = pairs_ ? panel + b0 * pitch : panel;
      if (!pairs_)
        for (int64_t b = 0; b < nb; ++b) {
          const int64_t np = std::min<int64_t>(nr_, np_all - (b0 + b) * nr_);
          float* const o = panel + b * pitch;
          convert_(args.a, a.dtype, op_.rounding, src0 + (b0 + b) * nr_, 1, cstride, np, red_, o, nr_);
          if (np < nr_)
            for (int64_t t = 0; t < red_; ++t) std::fill(o + t * nr_ + np, o + (t + 1) * nr_, 0.0f);
        }
      // Prefetched: the source of the group after next, a few rows per row
      // tile, every line of each row (a group need not start on a cache
      // line). Why: copying a whole strip up front left the FMAs idle while
      // the copy waited on memory, and on 2 threads both threads tended to
      // copy at once, then compute at once; copied group by group without
      // the prefetch, every source line is a miss (lines in each of `red`
      // channel planes, more streams than the hardware prefetchers follow).
      // On a Zen 2, mb8ic64ih56oc256kh1's data gradient took 1/1.22 of the
      // strip copy's time on 2 threads and 1/1.10 on 1; one group ahead or
      // four were slower than two.
      //
      // Why groups: with one block, each row tile's weights (t x 6) come
      // back from L2 for every 16 pixels, and each output row gets one line
      // per visit. A group reuses them over several blocks while the
      // group's panels stay in L1: mb8ic256ih56oc64kh1 (t = 64, 4 blocks)
      // gradInput 1.15x on 1 thread of a Zen 2, 1.13x on 2; at t = 256
      // (64->256) groups of 2 or more blocks were 0.85x, the panels no
      // longer fitting in L1 beside the weights.
      //
      // The pair panels (bf16 tiers) copy whole strips, a block per group,
      // with rows prefetched ahead instead (pack_pair_panels): on a Zen 5,
      // pair panels in groups were 0.94x-1.00x, and block by block no
      // faster in both the minima and the medians.
      const int64_t ahead = p_lo + (b0 + kPrefetchGroups * group_) * nr_;
      const bool prefetch = !pairs_ && ahead < pixels_;
      const int64_t ahead_bytes = (std::min<int64_t>(group_ * nr_, pixels_ - ahead) - 1) * elem;
      const char* const next =
          static_cast<const char*>(args.a) + (a.offset + n * a.strides[0] + g * red_ * cstride + ahead) * elem;
      for (int64_t rt = 0; rt < row_tiles_; ++rt) {
        if (prefetch)
          for (int64_t t = rt * prefetch_rows, end = std::min(red_, t + prefetch_rows); t < end; ++t) {
            prefetch_lines<false>(next + t * cstride * elem, ahead_bytes);
          }
        ka.a[0] = wpk + (g * row_tiles_ + rt) * steps_ * mr_;
        const int rows = static_cast<int>(std::min<int64_t>(mr_, cols_ - rt * mr_));
        for (int64_t b = 0; b < nb; ++b) {
          const int64_t p0 = p_lo + (b0 + b) * nr_;
          const int np = static_cast<int>(std::min<int64_t>(nr_, np_all - (b0 + b) * nr_));
          ka.b = group_panels + b * pitch;
          const int64_t first =
              dv.offset + n * dv.strides[0] + (g * cols_ + rt * mr_) * dv.strides[1] + p0 * dst_px_;
          // The tile's output lines, fetched for writing while the kernel
          // runs. Why: with a short reduction the stores, not the products,
          // set the pace. On mb8ic256ih56oc64kh1 (t = 64, a 25.7 MB fp32
          // gradInput) each store waited for its line to come from memory,
          // the row store a third of the bf16 data gradient's samples on a
          // Zen 5; with this, that gradient took 1/1.33 of the time on 1
          // thread (fp32 and bf16) and 1/1.33 (fp32), 1/1.16 (bf16) on 2,
          // and 1/1.22 on the avx2 tier. At t = 192 or 256 the kernel hides
          // the fetches anyway (within noise). Fetching the next tile's
          // lines instead was no better.
          if (dst_px_ == 1) {
            const char* const o = static_cast<const char*>(args.dst) + first * out_elem;
            const int64_t last = (np - 1) * out_elem;
            for (int i = 0; i < rows; ++i) prefetch_lines<true>(o + i * dv.strides[1] * out_elem, last);
          }
          // A pixel tail of at most nr/2 (196-pixel images: six 32-pixel
          // blocks and 4) through the half-width kernel where the tier has
          // one: a seventh of the 8x32 kernel's work on 1x1 512->128 @14
          // was padding. Its columns are the same sums, so the same bits.
          const bool half = half_kern_ && np <= nr_ / 2;
          const int tile_pitch = half ? nr_ / 2 : nr_;
          (half ? half_kern_ : kern_)(ka);
          if (dst_px_ == 1 && dv.dtype != DataType::f32) {
            // The tile's rows are runs of one channel's pixels: one call for
            // all of them (a call per row was most of the row store's cost).
            store_rows_(tile, tile_pitch, rows, np, args.dst, dv.dtype, first, dv.strides[1]);
            continue;
          }
          for (int i = 0; i < rows; ++i) row_base[i] = first + i * dv.strides[1];
          store_tile(store_, args.dst, dv.dtype, tile, tile_pitch, row_base, rows, dst_px_, np);
        }
      }
    }
  }

  // The pair panels of a strip of `np` pixels whose channel rows start at
  // src, `cstride` apart (pixels contiguous, plan_1x1): word (blk, s, j) =
  // channels 2s (low half) and 2s+1 of pixel blk*nr + j; zero past the
  // strip's last pixel and past an odd reduction. Pixels innermost on both
  // sides, and each pair of channel rows is read once, sequentially.
  void pack_pair_panels(const uint16_t* src, int64_t cstride, int64_t np, uint32_t* panel) const {
    const int64_t pitch = steps_ * nr_, blocks = ceil_div(np, static_cast<int64_t>(nr_));
    const int64_t last = (np - 1) * static_cast<int64_t>(sizeof(uint16_t));  // a row's last byte
    for (int64_t s = 0; s < steps_; ++s) {
      const uint16_t* const even = src + 2 * s * cstride;
      const uint16_t* const odd = 2 * s + 1 < red_ ? even + cstride : nullptr;
      // The rows kPairRowsAhead steps on, prefetched. Why: the strip
      // reads two rows per step a plane apart, up to 256 streams, and
      // without this the copy waited on memory (its loads held most of
      // its perf samples): with it, the bf16 data gradient of 64->256 @56
      // took 1/1.13 of the time on 2 threads of a Zen 5 (1/1.24 on 1),
      // 32->192 1/1.17, 256->64 1/1.08 (1/1.04); 8 steps ahead was slower
      // at 256->64.
      for (int64_t r = 2 * (s + kPairRowsAhead); r < std::min(red_, 2 * (s + kPairRowsAhead + 1)); ++r)
        prefetch_lines<false>(reinterpret_cast<const char*>(src + r * cstride), last);
      for (int64_t blk = 0; blk < blocks; ++blk) {
        uint32_t* const o = panel + blk * pitch + s * nr_;
        const int64_t p0 = blk * nr_, n = std::min<int64_t>(nr_, np - p0);
        interleave_(even + p0, odd ? odd + p0 : nullptr, n, o);
        std::fill(o + n, o + nr_, 0u);
      }
    }
  }

  static constexpr int64_t kPrefetchGroups = 2;
  static constexpr int64_t kPairRowsAhead = 4;
  static constexpr int64_t kGroupPanelBytes = 16384;

  OpSpec op_;
  bool pairs_ = false;
  int threads_ = 1;
  MicroKernel kern_ = nullptr;
  MicroKernel half_kern_ = nullptr;  // GemmKernels::strided_half, or null
  int mr_ = 0, nr_ = 0;  // the kernel\'s tile (kernel config)
  ToChannelsLast convert_ = nullptr;
  StoreRow store_ = nullptr;
  StoreRows store_rows_ = nullptr;
  InterleavePairRows interleave_ = nullptr;
  int64_t groups_ = 1, n_ = 0, cols_ = 0, red_ = 0, steps_ = 0, pixels_ = 0;  // steps_: kernel steps (pairs: (red+1)/2)
  int64_t dst_px_ = 1, row_tiles_ = 0, strip_px_ = 16, strips_ = 0, group_ = 1;
  int64_t panel_floats_ = 0, weights_floats_ = 0;
};

std::unique_ptr<OpKernel> plan_1x1(const OpSpec& op, const PlanContext& ctx, std::string* why, Op want) {
  if (op.op != want) {
    *why = "not this operation";
    return nullptr;
  }
  if (!supported(op, why)) return nullptr;
  const Geometry& g = op.geo;
  if (!planar_1x1(g, why)) return nullptr;
  if (g.x_spatial() < kPlanarMinPixels) {
    *why = "fewer than 64 pixels per image";
    return nullptr;
  }
  if (flat_pixel_stride(op.a, g.spatial) != 1) {
    *why = "the source pixels are not contiguous (channels-last input: the gather path reads it directly)";
    return nullptr;
  }
  if (flat_pixel_stride(op.dst, g.spatial) == 0) {
    *why = "the output's spatial dims are not one evenly strided sequence";
    return nullptr;
  }
  const int64_t red = op.op == Op::bwd_data ? g.k : g.c;
  // The per-thread panel (reduced channels x 16 pixels) should stay in L1/L2.
  if (red > 2048) {
    *why = "more than 2048 reduced channels";
    return nullptr;
  }
  return std::make_unique<Nchw1x1Kernel>(op, ctx);
}

}  // namespace
}  // namespace convbwd::detail::gemm

namespace convbwd::detail {

const Implementation kGemm1x1FwdImpl = {
    "gemm_fwd_1x1_nchw", [](const OpSpec& op, const PlanContext& ctx, std::string* why) {
      return gemm::plan_1x1(op, ctx, why, Op::fwd);
    }};
const Implementation kGemm1x1BwdDataImpl = {
    "gemm_dgrad_1x1_nchw", [](const OpSpec& op, const PlanContext& ctx, std::string* why) {
      return gemm::plan_1x1(op, ctx, why, Op::bwd_data);
    }};

}  // namespace convbwd::detail
