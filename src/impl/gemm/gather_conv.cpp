// Forward (transposed gradInput) and data gradient (normal gradInput) as an
// implicit GEMM over channels-last copies:
//
//   out[pixel, col] = sum over taps r, reduced channels q of
//                     src[pixel position + shift(r), q] * Wpacked[r, q, col]
//
// Rows of an mr x nr tile are mr output pixels (any mr: a tile may wrap
// across image rows, so 7x7 images waste nothing but the last tile's tail);
// columns are nr output channels; the gather kernel keeps the accumulators in
// registers across all taps and channels, so each output is rounded once.
//
// The data gradient of a strided convolution is split into s^d phases (output
// positions i = phase + s*u): within one phase only the taps with
// (phase + pad - r*dilation) divisible by s reach it, and they read the
// gradient at u + (phase + pad - r*dilation)/s, a stride-1 window. So no
// product with an inserted zero is ever computed and nothing is scattered.
// The phases of the last dim that hold the same pixels run in one task
// (bundle_phases), so their outputs are stored as runs of neighbours.
//
// bf16 operands on a tier with bf16 pair kernels (KernelConfig::bf16) are
// copied and packed as bf16 pairs of reduced channels instead of fp32, and
// each kernel step multiplies a pair (kernels/gemm.hpp): the tables below
// then count pairs where they count reduced channels.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "impl/gemm/common.hpp"
#include "impl/registry_entries.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail::gemm {
namespace {

struct Phase {
  std::array<int64_t, 3> u{1, 1, 1};          // output pixels per dim
  std::array<int64_t, 3> out_first{0, 0, 0};  // output position of u = 0
  std::array<int64_t, 3> out_step{1, 1, 1};
  std::array<int64_t, 3> src_step{1, 1, 1};  // stored source position per u
  std::vector<int64_t> a_off, b_off, len;    // one run per tap reaching this phase, split at chunk ends
  // Planning only: each run's stored position per dim at u = 0 (the pixel
  // at u reads stored position tap_pos[d] + u * src_step[d]).
  std::vector<std::array<int64_t, 3>> tap_pos;
  std::vector<int64_t> chunk_ends;           // run index past each reduction chunk
  int64_t pixels = 0;  // per image
};

class GatherConvKernel final : public OpKernel {
 public:
  GatherConvKernel(const OpSpec& op, const PlanContext& ctx) : op_(op), threads_(ctx.threads) {}

  // Plans the kernel for op_ (planning is not construction): false, with
  // the reason in *why, when it declines; the factory then drops it.
  bool init(const PlanContext& ctx, std::string* why) {
    const OpSpec& op = op_;
    const Geometry& g = op.geo;
    const Space sp = space_of(g);
    const bool dgrad = op.op == Op::bwd_data;
    // bf16 operands on a tier with bf16 arithmetic stay bf16: copies and
    // packs hold pairs along the reduction, and each kernel step consumes one
    // pair (kernels/gemm.hpp); steps_ counts those steps per tap.
    const KernelConfig& cfg = kernels_for(ctx.isa);
    const bool pairs = bf16_pairs(op, cfg);
    cols_ = dgrad ? g.c : g.k;
    red_ = dgrad ? g.k : g.c;
    // Groups narrower than the tile take the narrow family (gemm_family;
    // 2 threads, Zen 5, against 8x32, data gradient: g8 128@28 3x3 1.22x).
    const GemmKernels& family = gemm_family(cfg, pairs, cols_);
    kern_ = family.gather;
    mr_ = family.gather_rows();
    nr_ = family.nr;
    store_ = cfg.store_row;
    store_columns_ = cfg.store_columns;
    const int64_t steps = pairs ? (red_ + 1) / 2 : red_;
    groups_ = g.groups;
    n_ = g.n;
    // Decline before building anything whose size follows the reduction: the
    // chunk tables below have one entry per 256 steps, so a hostile channel
    // count (2.5e10, a fuzz finding) made planning run for minutes. The
    // packed weights must fit the workspace anyway (double: no overflow).
    const double packed_weight_bytes = static_cast<double>(groups_) * static_cast<double>(sp.taps()) *
                                       static_cast<double>(red_) * static_cast<double>(round_up(cols_, nr_)) * 4.0;
    if (packed_weight_bytes > static_cast<double>(workspace_budget(op, ctx))) {
      *why = "the packed weights exceed the workspace budget";
      return false;
    }
    // The budget follows the tensors, so a hostile layer whose tensors would
    // not fit any memory still passes it: bound the chunk tables themselves
    // (a fuzz finding: 2.5e10 transposed channels planned for 19 s). The
    // largest real layers have a few thousand chunks.
    const double reduction_chunks = static_cast<double>(sp.taps()) * static_cast<double>(red_) / 256.0;
    if (reduction_chunks > static_cast<double>(kMaxReductionChunks)) {
      *why = "a reduction of " + std::to_string(sp.taps()) + " taps x " + std::to_string(red_) +
             " channels exceeds " + std::to_string(kMaxReductionChunks) + " chunks of 256 steps";
      return false;
    }

    wp_.v = op.b;
    wp_.spatial = g.spatial;
    wp_.rounding = op.rounding;
    wp_.check = kernels_for(ctx.isa).any_nonfinite;
    wp_.convert = kernels_for(ctx.isa).to_channels_last;
    wp_.groups = g.groups;
    wp_.k = g.k;
    wp_.c = g.c;
    wp_.taps = sp.taps();
    wp_.ks = sp.k;
    wp_.transpose = dgrad;
    wp_.flip_taps = dgrad;
    wp_.nr = nr_;
    wp_.pairs = pairs;

    src_.v = op.a;
    src_.spatial = g.spatial;
    src_.rounding = op.rounding;
    src_.groups = g.groups;
    src_.cg = red_;
    src_.pairs = pairs;
    src_.cp = pixel_pitch(steps);
    src_.convert = kernels_for(ctx.isa).to_channels_last;
    src_.check = kernels_for(ctx.isa).any_nonfinite;
    src_.pairs_channels_last = kernels_for(ctx.isa).bf16_pairs_channels_last;
    src_.src = dgrad ? sp.y : sp.x;

    if (!dgrad) {
      // y[o] reads x at o*s - pad + r*d: store x at position + pad, so the
      // tap offsets are r*d and nothing is negative.
      Phase ph;
      for (int d = 0; d < 3; ++d) {
        src_.lo[d] = sp.pb[d];
        src_.ext[d] = (sp.y[d] - 1) * sp.s[d] + (sp.k[d] - 1) * sp.d[d] + 1;
        ph.u[d] = sp.y[d];
        ph.src_step[d] = sp.s[d];
      }
      for (int64_t r0 = 0; r0 < sp.k[0]; ++r0)
        for (int64_t r1 = 0; r1 < sp.k[1]; ++r1)
          for (int64_t r2 = 0; r2 < sp.k[2]; ++r2) {
            const int64_t tap = (r0 * sp.k[1] + r1) * sp.k[2] + r2;
            ph.a_off.push_back(((r0 * sp.d[0] * src_.ext[1] + r1 * sp.d[1]) * src_.ext[2] + r2 * sp.d[2]) * src_.cp);
            ph.b_off.push_back(tap * steps * nr_);
            ph.len.push_back(steps);
            ph.tap_pos.push_back({r0 * sp.d[0], r1 * sp.d[1], r2 * sp.d[2]});
          }
      add_phase(std::move(ph));
    } else {
      // Shift of tap r in phase f: q = (f + pad - r*d)/s when divisible.
      // Stored gradient position = u + q - qmin, so offsets are >= 0.
      std::array<int64_t, 3> qmin{}, qmax{}, umax{};
      auto shift_ok = [&](int d, int64_t f, int64_t r, int64_t* q) {
        const int64_t t = f + sp.pb[d] - r * sp.d[d];
        const int64_t m = ((t % sp.s[d]) + sp.s[d]) % sp.s[d];
        if (m != 0) return false;
        *q = (t - m) / sp.s[d];
        return true;
      };
      // Loops here run over taps and over the phases that hold output
      // pixels (f < x), never over the whole stride: a hostile stride of
      // 9.2e6 took 0.4 s to plan (a fuzz finding).
      for (int d = 0; d < 3; ++d) {
        qmin[d] = INT64_MAX;
        qmax[d] = INT64_MIN;
        // Phase 0 holds the most pixels.
        umax[d] = ceil_div(sp.x[d], sp.s[d]);
        for (int64_t r = 0; r < sp.k[d]; ++r) {
          // Tap r reaches exactly one phase of [0, s): f = (r*d - pad) mod s.
          const int64_t f = ((r * sp.d[d] - sp.pb[d]) % sp.s[d] + sp.s[d]) % sp.s[d];
          int64_t q = 0;
          if (shift_ok(d, f, r, &q)) qmin[d] = std::min(qmin[d], q), qmax[d] = std::max(qmax[d], q);
        }
        if (qmin[d] > qmax[d]) qmin[d] = qmax[d] = 0;  // no tap reaches any phase: all zero
        src_.lo[d] = -qmin[d];
        src_.ext[d] = qmax[d] - qmin[d] + std::max<int64_t>(umax[d], 1);
      }
      // Phases f >= x hold no pixels.
      const std::array<int64_t, 3> phases{std::min(sp.s[0], sp.x[0]), std::min(sp.s[1], sp.x[1]),
                                          std::min(sp.s[2], sp.x[2])};
      for (int64_t f0 = 0; f0 < phases[0]; ++f0)
        for (int64_t f1 = 0; f1 < phases[1]; ++f1)
          for (int64_t f2 = 0; f2 < phases[2]; ++f2) {
            const std::array<int64_t, 3> f{f0, f1, f2};
            Phase ph;
            bool empty = false;
            for (int d = 0; d < 3; ++d) {
              ph.u[d] = f[d] < sp.x[d] ? ceil_div(sp.x[d] - f[d], sp.s[d]) : 0;
              ph.out_first[d] = f[d];
              ph.out_step[d] = sp.s[d];
              empty = empty || ph.u[d] == 0;
            }
            if (empty) continue;
            // The taps last to first, as the weights are packed (flip_taps):
            // the stored positions they read and their packed weights both
            // rise from run to run, so neighbouring taps join into one run
            // (merge_runs).
            std::array<int64_t, 3> q{};
            for (int64_t r0 = sp.k[0] - 1; r0 >= 0; --r0)
              for (int64_t r1 = sp.k[1] - 1; r1 >= 0; --r1)
                for (int64_t r2 = sp.k[2] - 1; r2 >= 0; --r2) {
                  if (!shift_ok(0, f0, r0, &q[0]) || !shift_ok(1, f1, r1, &q[1]) || !shift_ok(2, f2, r2, &q[2]))
                    continue;
                  const int64_t slot = sp.taps() - 1 - ((r0 * sp.k[1] + r1) * sp.k[2] + r2);
                  ph.a_off.push_back(
                      (((q[0] - qmin[0]) * src_.ext[1] + (q[1] - qmin[1])) * src_.ext[2] + (q[2] - qmin[2])) *
                      src_.cp);
                  ph.b_off.push_back(slot * steps * nr_);
                  ph.len.push_back(steps);
                  ph.tap_pos.push_back({q[0] - qmin[0], q[1] - qmin[1], q[2] - qmin[2]});
                }
            add_phase(std::move(ph));
          }
    }
    // Tiles per task: the A rows a task's tiles read (6 pixels x taps x
    // reduced channels each, at most) should stay in L2 while every weight
    // block passes over them, and a task must be long enough that handing it
    // out costs nothing.
    int64_t max_runs = 1;
    for (Phase& ph : phases_) {
      ph.pixels = ph.u[0] * ph.u[1] * ph.u[2];
      max_runs = std::max<int64_t>(max_runs, static_cast<int64_t>(ph.len.size()));
      merge_runs(ph, nr_);
      split_into_chunks(ph, chunk_steps(), nr_);
    }
    // Every task streams all weight blocks once, so at least 8 tiles (48
    // pixels) per task even when their A rows overflow L2: the dilated
    // 512-channel DeepLab layer ran ~15% faster with 8 than with 4.
    tile_group_ = std::clamp<int64_t>((512 << 10) / (mr_ * max_runs * steps * 4), 8, kMaxTileGroup);
    // CONVBWD_GEMM_NO_BUNDLES (test_knob) keeps every phase apart.
    if (dgrad && !test_knob("CONVBWD_GEMM_NO_BUNDLES")) bundle_phases(sp);

    // Workspace: packed weights, then as many image copies as fit.
    weights_floats_ = round_up(groups_ * wp_.group_floats(), kAlignFloats);
    image_floats_ = round_up(groups_ * src_.image_floats(), kAlignFloats);
    // Weight-heavy layers (packed weights past 2 MB and over twice all the
    // image copies: 1x1 2048->512, DCGAN 512->256, DeepLab's dilated
    // 512->512) pack in slabs instead: a task packs up to 256 KB of
    // neighbouring weight blocks into its thread's slab and runs every tile
    // of the batch over them. The packed
    // weights were the size of the weights (4 and 8 MB: the larger part of
    // the call's memory) and every task streamed all of them from L3; a slab
    // is packed once per batch and read from L2, and what streams instead is
    // the smaller image copy, once per slab. Each tile's sum is unchanged.
    // (3x3 256->256 @14, weights about the size of its copies, ran ~3%
    // slower in slabs; DeepLab, 2.2x, 0.83x the time.)
    // CONVBWD_GEMM_SLAB_BLOCKS (test_knob) forces slabs of that many blocks.
    const int64_t forced_slab = test_knob("CONVBWD_GEMM_SLAB_BLOCKS");
    if (forced_slab > 0 || (weights_floats_ > kSlabModeFloats && weights_floats_ > 2 * n_ * image_floats_)) {
      slab_blocks_ = std::clamp<int64_t>(forced_slab > 0 ? forced_slab : kPackTaskFloats / wp_.block_floats(), 1,
                                         wp_.blocks());
      weights_floats_ = std::max(threads_, 1) * round_up(slab_blocks_ * wp_.block_floats(), kAlignFloats);
    }
    const int64_t budget = workspace_budget(op, ctx) / static_cast<int64_t>(sizeof(float));
    int64_t pixels_per_image = 0;
    for (const Phase& ph : phases_) pixels_per_image += ph.pixels;
    batch_ = batch_limit(n_, budget, weights_floats_, image_floats_, pixels_per_image);
    if (batch_ < 1) {
      *why = "one image's channels-last copy does not fit the workspace budget";
      return false;
    }
    // At least four tasks per thread where the tiles allow: with one or two
    // per thread the last task decides the time (the 7x7 2048->512 data
    // gradient made 2 tasks, of 42 and 24 tiles, for 2 threads). Which task
    // computes a tile does not change its sums, so neither do the bits.
    int64_t batch_tiles = 0;
    for (const Phase& ph : phases_) batch_tiles += ceil_div(batch_ * ph.pixels, mr_);
    const int64_t min_tasks = 4 * static_cast<int64_t>(threads_);
    if (threads_ > 1 && ceil_div(batch_tiles, tile_group_) < min_tasks)
      tile_group_ = std::clamp<int64_t>(ceil_div(batch_tiles, min_tasks), kMinBalancedTileGroup, tile_group_);
    // A bundle's task runs the same tiles of each member: as many tiles in
    // all as a phase's task.
    member_tiles_ = std::max<int64_t>(1, tile_group_ / bundle_);
    // Running task counts per bundle (one phase, or bundle_ of them) for the
    // two batch sizes run() uses, so a task finds its bundle by binary
    // search: a large stride makes thousands of one-pixel phases, and a
    // linear walk per task was quadratic (a 30 s fuzzer timeout on
    // mb5ic1ih208sh2100).
    for (const int64_t nb : {batch_, n_ % batch_}) {
      std::vector<int64_t>& ends = nb == batch_ ? task_ends_full_ : task_ends_tail_;
      int64_t total = 0;
      for (size_t b = 0; b < phases_.size(); b += static_cast<size_t>(bundle_))
        ends.push_back(total += ceil_div(ceil_div(nb * phases_[b].pixels, mr_), member_tiles_));
    }
    return true;
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(weights_floats_ + batch_ * image_floats_) * sizeof(float);
  }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    float* const wpk = reinterpret_cast<float*>(args.workspace);
    float* const img = wpk + weights_floats_;
    const int64_t blocks = wp_.blocks();
    // Each task packs a range of neighbouring blocks (pack reads them row by
    // row), as many as stay in L2 for its NaN/Inf check, and no more than
    // leave every thread a share; in slab mode that range is a slab, packed
    // by the task that uses it.
    const int64_t per_range =
        slab_blocks_ > 0 ? slab_blocks_
                         : std::clamp<int64_t>(kPackTaskFloats / wp_.block_floats(), 1,
                                               ceil_div(groups_ * blocks, std::max(threads_, 1)));
    const int64_t ranges = ceil_div(blocks, per_range);
    NonfiniteSeen seen;
    auto pack_range = [&](int64_t t, float* dst) {
      bool nonfinite = false;
      const int64_t g = t / ranges, blk0 = t % ranges * per_range;
      wp_.pack(args.b, g, blk0, std::min(per_range, blocks - blk0), dst, args.zero_nonfinite,
               args.found ? &nonfinite : nullptr);
      seen.add(false, nonfinite);
    };
    if (slab_blocks_ == 0)
      pool.parallel_for(groups_ * ranges, threads_,
                        [&](int64_t t, int) { pack_range(t, wpk + (t / ranges * blocks + t % ranges * per_range) *
                                                                      wp_.block_floats()); });
    for (int64_t n0 = 0; n0 < n_; n0 += batch_) {
      const int64_t nb = std::min(batch_, n_ - n0);
      const int64_t planes = src_.planes();
      pool.parallel_for(nb * planes, threads_, [&](int64_t t, int) {
        const int64_t i = t / planes;
        bool nonfinite = false;
        src_.copy_plane(args.a, n0 + i, t % planes, img + i * image_floats_, args.zero_nonfinite,
                        args.found ? &nonfinite : nullptr);
        seen.add(nonfinite, false);
      });
      // Tiles run over the pixels of the whole batch, so small images
      // (7x7) fill whole tiles and each weight block is read once per task
      // rather than once per image.
      const int64_t per_group = tasks_per_group(nb);
      if (slab_blocks_ > 0) {
        const int64_t slab_floats = weights_floats_ / std::max(threads_, 1);
        pool.parallel_for(groups_ * ranges, threads_, [&](int64_t t, int thread) {
          float* const slab = wpk + thread * slab_floats;
          pack_range(t, slab);
          const int64_t g = t / ranges, blk0 = t % ranges * per_range;
          for (int64_t rest = 0; rest < per_group; ++rest)
            compute(args, slab, blk0, std::min(blocks, blk0 + per_range), img, n0, nb, per_group,
                    g * per_group + rest);
        });
      } else {
        pool.parallel_for(groups_ * per_group, threads_, [&](int64_t t, int) {
          compute(args, wpk + t / per_group * blocks * wp_.block_floats(), 0, blocks, img, n0, nb, per_group, t);
        });
      }
    }
    seen.report(args.found);
  }
  // Every operand element it multiplies passes through its copies, which
  // it checks in cache (any_nonfinite) instead of execute's scan.
  NonfiniteMode nonfinite_mode() const override { return NonfiniteMode::report; }

 private:
  const std::vector<int64_t>& task_ends(int64_t nb) const { return nb == batch_ ? task_ends_full_ : task_ends_tail_; }
  int64_t tasks_per_group(int64_t nb) const { return task_ends(nb).empty() ? 0 : task_ends(nb).back(); }

  // Task `task` of a batch: its tiles against weight blocks [b0, b1) of its
  // group, packed from w on (block b0 first).
  void compute(const OpArgs& args, const float* w, int64_t b0, int64_t b1, const float* img, int64_t n0, int64_t nb,
               int64_t per_group, int64_t task) const {
    const int64_t g = task / per_group;
    const std::vector<int64_t>& ends = task_ends(nb);
    int64_t rest = task % per_group;
    const size_t bundle = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), rest) - ends.begin());
    if (bundle > 0) rest -= ends[bundle - 1];
    // The bundle's members (bundle_phases): the same pixels u, so the same
    // tiles, rows and positions; member q's outputs lie q columns on.
    const Phase* const members = &phases_[bundle * static_cast<size_t>(bundle_)];
    const Phase& ph = members[0];
    const int64_t batch_pixels = nb * ph.pixels;
    const int64_t tile_count = ceil_div(batch_pixels, mr_);
    const float* src = img + g * src_.image_floats();
    const Strides ds = strides_of(op_.dst, op_.geo.spatial);
    const int64_t dst_ch0 = ds.offset + n0 * ds.n + g * cols_ * ds.ch;
    const int64_t tile_lo = rest * member_tiles_, tile_hi = std::min(tile_count, tile_lo + member_tiles_);

    MicroArgs ka;
    ka.as = 1;
    ka.bs = nr_;
    // The task's tiles: row pointers and output positions, computed once.
    // Member q's tiles follow member q-1's (bundle_ * member_tiles_ <=
    // kMaxTileGroup).
    alignas(64) float tiles[kMaxTileGroup * kMaxMr * kMaxNr];
    const int64_t member_floats = member_tiles_ * mr_ * nr_;
    alignas(64) float interleaved[kMaxRunPixels * kMaxNr];  // a bundle's run of tiles
    const float* rows_a[kMaxTileGroup][kMaxMr];
    int64_t row_base[kMaxTileGroup][kMaxMr];
    int row_count[kMaxTileGroup];
    bool spaced[kMaxTileGroup];  // the tile's pixels are `spacing` apart in the output
    // The task's pixels are consecutive: their coordinates are found by
    // division once, then stepped with carries, and so are their source and
    // output offsets, from steps held in locals. Five divisions per row were
    // a fifth of the g8 128@28 data gradient (16-column groups make short
    // tiles, and every group's tasks repeat the walk); after them the
    // products, recomputed per row from the phase's fields in memory, were
    // still 8%.
    const std::array<int64_t, 3> u = ph.u;
    const std::array<int64_t, 3> a_step{ph.src_step[0] * src_.ext[1] * src_.ext[2] * src_.cp,
                                        ph.src_step[1] * src_.ext[2] * src_.cp, ph.src_step[2] * src_.cp};
    const std::array<int64_t, 3> d_step{ph.out_step[0] * ds.sp[0], ph.out_step[1] * ds.sp[1],
                                        ph.out_step[2] * ds.sp[2]};
    // Each carry rewinds the dim it leaves (u steps) and steps the next one.
    const int64_t a_carry1 = a_step[1] - u[2] * a_step[2], d_carry1 = d_step[1] - u[2] * d_step[2];
    const int64_t a_carry0 = a_step[0] - u[1] * a_step[1], d_carry0 = d_step[0] - u[1] * d_step[1];
    const int64_t a_carry_image = image_floats_ - u[0] * a_step[0], d_carry_image = ds.n - u[0] * d_step[0];
    int64_t at[3] = {0, 0, 0}, a_at = 0, d_at = 0;
    // Output pixels of one image row: neighbours (NCHW), or every other one
    // in a phase of a stride-2 data gradient; else 0 (stored pixel by pixel).
    // A bundle's members interleave: each member's pixels are bundle_ apart,
    // and together they are neighbours.
    const int64_t pixel_step = ds.sp[2] == 1 && ph.out_step[2] <= 2 ? ph.out_step[2] : 0;
    const int64_t spacing = bundle_ > 1 ? bundle_ : pixel_step;
    {
      const int64_t first = tile_lo * mr_;
      const int64_t at_image = first / ph.pixels;
      const int64_t px = first % ph.pixels;
      at[2] = px % u[2];
      at[1] = px / u[2] % u[1];
      at[0] = px / (u[2] * u[1]);
      a_at = at_image * image_floats_ + at[0] * a_step[0] + at[1] * a_step[1] + at[2] * a_step[2];
      d_at = dst_ch0 + at_image * ds.n + ph.out_first[0] * ds.sp[0] + ph.out_first[1] * ds.sp[1] +
             ph.out_first[2] * ds.sp[2] + at[0] * d_step[0] + at[1] * d_step[1] + at[2] * d_step[2];
    }
    for (int64_t tl = tile_lo; tl < tile_hi; ++tl) {
      const int64_t j = tl - tile_lo;
      row_count[j] = static_cast<int>(std::min<int64_t>(mr_, batch_pixels - tl * mr_));
      for (int r = 0; r < row_count[j]; ++r) {
        rows_a[j][r] = src + a_at;
        row_base[j][r] = d_at;
        a_at += a_step[2];
        d_at += d_step[2];
        if (++at[2] == u[2]) {
          at[2] = 0;
          a_at += a_carry1;
          d_at += d_carry1;
          if (++at[1] == u[1]) {
            at[1] = 0;
            a_at += a_carry0;
            d_at += d_carry0;
            if (++at[0] == u[0]) {
              at[0] = 0;
              a_at += a_carry_image;
              d_at += d_carry_image;
            }
          }
        }
      }
      // Rows past the last pixel recompute the tile's first; they are not stored.
      for (int r = row_count[j]; r < mr_; ++r) {
        rows_a[j][r] = rows_a[j][0];
        row_base[j][r] = row_base[j][0];
      }
      spaced[j] = spacing > 0;
      for (int r = 1; r < row_count[j]; ++r)
        spaced[j] = spaced[j] && row_base[j][r] == row_base[j][0] + r * spacing;
    }
    const int64_t out_elem = static_cast<int64_t>(size_of(op_.dst.dtype));
    // Weight block outermost, then reduction chunk, then tiles: a chunk's B
    // sub-panel (<= chunk_steps() x 16 floats) is read from L2 once per task
    // and stays in L1 while every tile of the task passes over it. Before,
    // each tile ran the whole reduction, so a panel larger than L1 (256
    // channels x 9 taps = 147 KB) streamed from L2 once per 6 pixels. Chunks
    // only cut the same run/step sequence into consecutive pieces and the
    // tiles rest in fp32 between them, so every output's sum has the same
    // terms in the same order: the bits do not depend on the chunking.
    for (int64_t blk = b0; blk < b1; ++blk) {
      ka.b = w + (blk - b0) * wp_.block_floats();
      const int cols = static_cast<int>(std::min<int64_t>(nr_, cols_ - blk * nr_));
      for (int64_t q = 0; q < bundle_; ++q) {
        const Phase& mph = members[q];
        float* const mtiles = tiles + q * member_floats;
        const int64_t chunks = static_cast<int64_t>(mph.chunk_ends.size());
        for (int64_t ch = 0; ch < chunks; ++ch) {
          const size_t first = ch == 0 ? 0 : static_cast<size_t>(mph.chunk_ends[static_cast<size_t>(ch) - 1]);
          ka.a_off = mph.a_off.data() + first;
          ka.b_off = mph.b_off.data() + first;
          ka.len = mph.len.data() + first;
          ka.runs = mph.chunk_ends[static_cast<size_t>(ch)] - static_cast<int64_t>(first);
          ka.accumulate = ch > 0;
          for (int64_t tl = tile_lo; tl < tile_hi; ++tl) {
            const int64_t j = tl - tile_lo;
            for (int r = 0; r < mr_; ++r) ka.a[r] = rows_a[j][r];
            ka.acc = mtiles + j * mr_ * nr_;
            // The last chunk (of the last member): the tile's output lines
            // (each channel's run of pixels) fetched for writing while the
            // kernel runs. Why: a stride-2 phase's fp32 pixels were stored
            // one by one, every other element, and each store waited for
            // its line: that store loop was a quarter of
            // mb8ic128ih56oc128kh3sh2ph1's gradInput samples on a Zen 5,
            // which then took 1/1.10 of the time (1 and 2 threads);
            // WaveNet's gradInput 1/1.06. bf16 and the stride-1 layers
            // measured within noise.
            if (q == bundle_ - 1 && ch == chunks - 1 && spaced[j]) {
              const char* const o =
                  static_cast<const char*>(args.dst) + (row_base[j][0] + blk * nr_ * ds.ch) * out_elem;
              const int64_t last = ((row_count[j] - 1) * spacing + bundle_ - 1) * out_elem;
              for (int c = 0; c < cols; ++c) prefetch_lines<true>(o + c * ds.ch * out_elem, last);
            }
            kern_(ka);
          }
        }
        // No tap reaches this phase.
        if (chunks == 0) std::fill(mtiles, mtiles + (tile_hi - tile_lo) * mr_ * nr_, 0.0f);
      }
      const int64_t ntiles = tile_hi - tile_lo;
      for (int64_t j = 0; j < ntiles;) {
        float* const tile = tiles + j * mr_ * nr_;
        // Tiles whose pixels continue one run of neighbours (or of every
        // other pixel) in an output whose pixels are contiguous (NCHW): the
        // tiles lie back to back in `tiles`, so the run is one [pixel][nr]
        // block, and each channel's pixels are stored whole; fp32
        // neighbours through the channels-last converter run backwards (the
        // pixels as its channels). A bundle's run is its members' tiles
        // interleaved pixel by pixel into one such block of neighbours.
        int64_t end = j + 1, pixels = row_count[j];
        if (spaced[j])
          while (end < ntiles && pixels == (end - j) * mr_ && (pixels + row_count[end]) * bundle_ <= kMaxRunPixels &&
                 spaced[end] && row_base[end][0] == row_base[j][0] + pixels * spacing)
            pixels += row_count[end++];
        const int64_t first = row_base[j][0] + blk * nr_ * ds.ch;
        const float* run = tile;
        int64_t run_pixels = pixels, run_step = pixel_step;
        if (bundle_ > 1 && spaced[j]) {
          for (int64_t i = 0; i < pixels; ++i)
            for (int64_t q = 0; q < bundle_; ++q) {
              const float* from = tile + q * member_floats + i * nr_;
              float* to = interleaved + (i * bundle_ + q) * nr_;
              for (int c = 0; c < nr_; ++c) to[c] = from[c];
            }
          run = interleaved;
          run_pixels = pixels * bundle_;
          run_step = 1;
        }
        if (spaced[j] && run_step == 1 && op_.dst.dtype == DataType::f32) {
          src_.convert(run, DataType::f32, OperandRounding::none, 0, nr_, 1, run_pixels, cols,
                       static_cast<float*>(args.dst) + first, ds.ch);
          j = end;
          continue;
        }
        if (spaced[j] && op_.dst.dtype != DataType::f32 &&
            (run_pixels >= kMinRunPixels16 || channel_stride_aliases(ds.ch))) {
          // 16-bit: transposed and rounded in registers, a channel's run of pixels at a time.
          store_columns_(run, nr_, run_pixels, cols, args.dst, op_.dst.dtype, first, ds.ch, run_step);
          j = end;
          continue;
        }
        // Pixel by pixel, each pixel's channels at the channel stride.
        for (int64_t q = 0; q < bundle_; ++q) {
          int64_t out_base[kMaxMr];
          for (int r = 0; r < mr_; ++r) out_base[r] = row_base[j][r] + q + blk * nr_ * ds.ch;
          store_tile(store_, args.dst, op_.dst.dtype, tile + q * member_floats, nr_, out_base, row_count[j], ds.ch,
                     cols);
        }
        ++j;
      }
    }
  }

  // Whether a 16-bit output's channel stride is a multiple of 1 KiB: then a
  // pixel's channels, stored one by one, share the low 12 address bits every
  // 4 channels or fewer, and the stores 4K-alias. Side by side (fp16 3x3
  // gradInput, 2 threads, Zen 5), storing whole channel runs of one tile
  // instead: 64x64 images 1.87x, 32x32 1.17x, the 16^3 3D transposed layer
  // 1.76x faster; but 60x60 and 28x28, which do not alias, 3% slower (the
  // transposed copy and one partial store per 8-pixel run cost more than
  // they save there). Runs that continue across a task's tiles (at least
  // kMinRunPixels16) pay that once per 16 to 128 pixels, and took 1.04x-1.19x
  // less time on every planar bf16 gradInput measured, aliasing or not
  // (1 thread: 3x3 128@28 1.06x, 64@56 1.05x, WaveNet 1.04x, g8 1.14x, the
  // UNet 2x2 transposed layer 1.19x; fp32's runs, stored straight into the
  // output, 1.04x-1.09x).
  static bool channel_stride_aliases(int64_t ch_elements) { return (ch_elements * 2) % 1024 == 0; }

  // The longest run of pixels stored at once (64 measured 1-2% slower, when
  // 16-bit runs went through a transposed copy), and the shortest 16-bit one
  // that takes the run store where the channel stride does not alias.
  static constexpr int64_t kMaxRunPixels = 128;
  static constexpr int64_t kMinRunPixels16 = 16;

  // Reduction steps per chunk: 256 steps x 16 floats = 16 KB of packed
  // weights, half of the 32 KB L1 of Zen 4, leaving room for the A rows and
  // the task's tiles (lowered by CONVBWD_GEMM_CHUNK_STEPS, common.hpp).
  static int64_t chunk_steps() { return gemm::chunk_steps(256); }

  // Data gradient strided along the last dim, into an output whose pixels
  // along it are neighbours (NCHW): the s phases of that dim (with the same
  // phase, and box, along the outer dims) hold the same pixels u when s
  // divides the width, and together every pixel of their output rows. Such
  // phases become one bundle, ordered by their last-dim phase, whose tasks
  // run the same tiles of each: the tiles' outputs interleave into runs of
  // neighbours, stored as a stride-1 layer's are. Alone, each phase stored
  // every s-th element one by one: on a Zen 3 those stores were ~11% of the
  // stride-2 3x3 gradInputs (1 thread, timed with and without them).
  // Bundles change which task computes a tile, never its sums. Any phase
  // without its full set of partners leaves every phase alone.
  void bundle_phases(const Space& sp) {
    const int64_t s = sp.s[2];
    if (s < 2 || s > kMaxBundle || strides_of(op_.dst, op_.geo.spatial).sp[2] != 1) return;
    // Bundles by (u, outer output positions), each member's slot its
    // last-dim phase out_first[2], in order of first appearance.
    std::map<std::array<int64_t, 5>, size_t> bundle_of;
    std::vector<std::array<int64_t, kMaxBundle>> bundles;  // phase index + 1 per slot, 0: empty
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      const int64_t f = ph.out_first[2];
      if (ph.out_step[2] != s || f < 0 || f >= s) return;
      const std::array<int64_t, 5> key{ph.u[0], ph.u[1], ph.u[2], ph.out_first[0], ph.out_first[1]};
      const auto [it, added] = bundle_of.emplace(key, bundles.size());
      if (added) bundles.push_back({});
      int64_t& slot = bundles[it->second][static_cast<size_t>(f)];
      if (slot != 0) return;
      slot = static_cast<int64_t>(i) + 1;
    }
    for (const auto& b : bundles)
      if (std::count(b.begin(), b.begin() + s, 0) > 0) return;
    std::vector<Phase> ordered;
    ordered.reserve(phases_.size());
    for (const auto& b : bundles)
      for (int64_t f = 0; f < s; ++f)
        ordered.push_back(std::move(phases_[static_cast<size_t>(b[static_cast<size_t>(f)] - 1)]));
    phases_ = std::move(ordered);
    bundle_ = s;
  }
  static constexpr int64_t kMaxBundle = 4;

  // Adds a phase, split into boxes where its outer image rows read padding.
  //
  // A tap whose stored position falls in the copy's zero padding for every
  // pixel of a box adds only zero products there (every operand is finite:
  // a NaN or Inf found by the copies makes execute rerun with them zeroed,
  // nonfinite.hpp), and an accumulator that starts at +0 keeps its bits when
  // +-0 is added, so such taps are left out of the box's runs. Along the two
  // outer dims (never the last: tiles wrap across its rows) the pixels u
  // are cut into segments over which the set of taps that read the image
  // is constant (3x3 pad 1: the first row, the middle, the last), and each
  // product of segments becomes a phase of its own. On 14x14 images the
  // padding taps are 9% of the products, on 28x28 5%, and PyTorch (oneDNN)
  // skips them.
  void add_phase(Phase&& ph) {
    // Sizes past 2^40 (hostile layers the fast paths take when everything
    // else about them is small) stay whole, so the bounds below cannot overflow.
    constexpr int64_t kBig = int64_t{1} << 40;
    bool small = true;
    for (int d = 0; d < 2; ++d)
      small = small && std::abs(src_.lo[d]) < kBig && src_.src[d] < kBig && ph.src_step[d] < kBig && ph.u[d] < kBig;
    for (const auto& pos : ph.tap_pos) small = small && pos[0] < kBig && pos[1] < kBig;
    if (!small) {
      ph.tap_pos.clear();
      phases_.push_back(std::move(ph));
      return;
    }
    std::array<std::vector<int64_t>, 2> cuts;  // segment starts along dims 0 and 1, then u[d]
    for (int d = 0; d < 2; ++d) {
      std::vector<int64_t>& c = cuts[static_cast<size_t>(d)];
      c.push_back(0);
      // Tap t reads the image for u in [ua, ub) (`reads` below): those
      // bounds are where the set of taps that read it changes.
      if (ph.u[d] > 1)
        for (const auto& pos : ph.tap_pos) {
          const int64_t step = ph.src_step[d], first = pos[static_cast<size_t>(d)] - src_.lo[d];
          for (const int64_t bound : {ceil_div(std::max<int64_t>(-first, 0), step),
                                      ceil_div(std::max<int64_t>(src_.src[d] - first, 0), step)})
            if (bound > 0 && bound < ph.u[d]) c.push_back(bound);
        }
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
      c.push_back(ph.u[d]);
    }
    // Only a few boxes (a hostile kernel size would make thousands of
    // phases, and this count's loops below would run for minutes).
    const size_t boxes = (cuts[0].size() - 1) * (cuts[1].size() - 1);
    if (boxes == 1 || boxes > kMaxBoxes) {
      ph.tap_pos.clear();
      phases_.push_back(std::move(ph));
      return;
    }
    // Whether a tap reads the image anywhere in [lo, hi) along dim d: it
    // does for u in [ua, ub), from source index first + u * step in [0, src).
    auto reads = [&](const std::array<int64_t, 3>& pos, int d, int64_t lo, int64_t hi) {
      const int64_t step = ph.src_step[d], first = pos[static_cast<size_t>(d)] - src_.lo[d];
      const int64_t ua = ceil_div(std::max<int64_t>(-first, 0), step);
      const int64_t ub = ceil_div(std::max<int64_t>(src_.src[d] - first, 0), step);
      return std::max(ua, lo) < std::min(ub, hi);
    };
    // The products left out, against all of them (in double: u[0] * u[1]
    // may pass 2^63): boxes only where they save 1% (each box's last tile
    // and task may run part empty).
    const double total =
        static_cast<double>(ph.tap_pos.size()) * static_cast<double>(ph.u[0]) * static_cast<double>(ph.u[1]);
    double dropped = 0;
    for (size_t i = 0; i + 1 < cuts[0].size(); ++i)
      for (size_t j = 0; j + 1 < cuts[1].size(); ++j) {
        const double pixels = static_cast<double>(cuts[0][i + 1] - cuts[0][i]) *
                              static_cast<double>(cuts[1][j + 1] - cuts[1][j]);
        for (const auto& pos : ph.tap_pos)
          if (!reads(pos, 0, cuts[0][i], cuts[0][i + 1]) || !reads(pos, 1, cuts[1][j], cuts[1][j + 1]))
            dropped += pixels;
      }
    if (dropped < 0.01 * total) {
      ph.tap_pos.clear();
      phases_.push_back(std::move(ph));
      return;
    }
    for (size_t i = 0; i + 1 < cuts[0].size(); ++i)
      for (size_t j = 0; j + 1 < cuts[1].size(); ++j) {
        const int64_t lo0 = cuts[0][i], lo1 = cuts[1][j];
        Phase box;
        box.u = {cuts[0][i + 1] - lo0, cuts[1][j + 1] - lo1, ph.u[2]};
        box.out_step = ph.out_step;
        box.src_step = ph.src_step;
        box.out_first = {ph.out_first[0] + lo0 * ph.out_step[0], ph.out_first[1] + lo1 * ph.out_step[1],
                         ph.out_first[2]};
        // The box's pixel u reads what the phase's pixel u + origin read.
        const int64_t origin = (lo0 * ph.src_step[0] * src_.ext[1] + lo1 * ph.src_step[1]) * src_.ext[2] * src_.cp;
        for (size_t t = 0; t < ph.tap_pos.size(); ++t) {
          if (!reads(ph.tap_pos[t], 0, lo0, cuts[0][i + 1]) || !reads(ph.tap_pos[t], 1, lo1, cuts[1][j + 1]))
            continue;
          box.a_off.push_back(ph.a_off[t] + origin);
          box.b_off.push_back(ph.b_off[t]);
          box.len.push_back(ph.len[t]);
        }
        phases_.push_back(std::move(box));
      }
  }
  static constexpr size_t kMaxBoxes = 64;

  // Joins each run to the one before it where it continues it in both A and
  // B: neighbouring taps along the last dim when the copy's pitch is the
  // reduction (16-channel groups, 32, 64, 128 channels). The step sequence,
  // and so every sum, is unchanged; the kernel sets up fewer, longer runs.
  // Why: the bf16 g8 128@28 data gradient ran 9 runs of 8 pairs per tile,
  // and with them joined into 3 of 24 took 1/1.08 of the time (2 threads,
  // Zen 5); the other layers it joins measured level (0.98-1.05).
  static void merge_runs(Phase& ph, int64_t nr) {
    size_t out = 0;
    for (size_t r = 0; r < ph.len.size(); ++r) {
      if (out > 0 && ph.a_off[r] == ph.a_off[out - 1] + ph.len[out - 1] &&
          ph.b_off[r] == ph.b_off[out - 1] + ph.len[out - 1] * nr) {
        ph.len[out - 1] += ph.len[r];
        continue;
      }
      ph.a_off[out] = ph.a_off[r];
      ph.b_off[out] = ph.b_off[r];
      ph.len[out] = ph.len[r];
      ++out;
    }
    ph.a_off.resize(out);
    ph.b_off.resize(out);
    ph.len.resize(out);
  }

  // Cuts the phase's runs into consecutive chunks of at most `steps` steps,
  // splitting a run that crosses a chunk boundary into two runs (same A and
  // B positions, continued), so the concatenated run/step sequence is
  // unchanged.
  static void split_into_chunks(Phase& ph, int64_t steps, int64_t nr) {
    std::vector<int64_t> a_off, b_off, len;
    int64_t in_chunk = 0;
    for (size_t r = 0; r < ph.len.size(); ++r) {
      int64_t done = 0;
      while (done < ph.len[r]) {
        const int64_t take = std::min(ph.len[r] - done, steps - in_chunk);
        a_off.push_back(ph.a_off[r] + done);
        b_off.push_back(ph.b_off[r] + done * nr);
        len.push_back(take);
        done += take;
        in_chunk += take;
        if (in_chunk == steps) {
          ph.chunk_ends.push_back(static_cast<int64_t>(len.size()));
          in_chunk = 0;
        }
      }
    }
    if (in_chunk > 0) ph.chunk_ends.push_back(static_cast<int64_t>(len.size()));
    ph.a_off = std::move(a_off);
    ph.b_off = std::move(b_off);
    ph.len = std::move(len);
  }

  static constexpr int64_t kMaxTileGroup = 64;
  // Fewest tiles per task when balancing threads: every task streams all
  // weight blocks, and 24 pixels per pass still outpace that stream.
  static constexpr int64_t kMinBalancedTileGroup = 4;
  // A task's tiles fit its buffer: bundle_ * member_tiles_ <= tile_group_.
  static_assert(kMaxBundle <= kMinBalancedTileGroup);
  static constexpr int64_t kMaxReductionChunks = int64_t{1} << 16;
  // Packed floats per weight-packing task and per slab: 256 KB, half of a
  // Zen 3 L2.
  static constexpr int64_t kPackTaskFloats = int64_t{1} << 16;
  // Packed weights past which a layer whose copies are smaller packs in
  // slabs (2 MB: past L2, so every task streamed them from L3).
  static constexpr int64_t kSlabModeFloats = int64_t{1} << 19;

  OpSpec op_;
  int threads_ = 1;
  MicroKernel kern_ = nullptr;
  StoreRow store_ = nullptr;
  StoreColumns store_columns_ = nullptr;
  int mr_ = 0, nr_ = 0;  // the kernel's tile (kernel config)
  int64_t cols_ = 0, red_ = 0, groups_ = 1, n_ = 0;
  WeightPack wp_;
  ImageCopy src_;
  std::vector<Phase> phases_;
  std::vector<int64_t> task_ends_full_, task_ends_tail_;  // running task counts per bundle
  int64_t tile_group_ = 16;
  int64_t bundle_ = 1;        // phases per bundle (bundle_phases)
  int64_t member_tiles_ = 16;  // tiles per task of each member
  int64_t weights_floats_ = 0, image_floats_ = 0, batch_ = 0;
  int64_t slab_blocks_ = 0;  // > 0: slab mode, blocks per slab (see init)
};

std::unique_ptr<OpKernel> plan_gather(const OpSpec& op, const PlanContext& ctx, std::string* why, Op want) {
  if (op.op != want) {
    *why = "not this operation";
    return nullptr;
  }
  if (!supported(op, why)) return nullptr;
  auto k = std::make_unique<GatherConvKernel>(op, ctx);
  if (!k->init(ctx, why)) return nullptr;
  return k;
}

}  // namespace
}  // namespace convbwd::detail::gemm

namespace convbwd::detail {

const Implementation kGemmFwdImpl = {
    "gemm_fwd_nhwc", [](const OpSpec& op, const PlanContext& ctx, std::string* why) {
      return gemm::plan_gather(op, ctx, why, Op::fwd);
    }};
const Implementation kGemmBwdDataImpl = {
    "gemm_dgrad_phase_nhwc", [](const OpSpec& op, const PlanContext& ctx, std::string* why) {
      return gemm::plan_gather(op, ctx, why, Op::bwd_data);
    }};

}  // namespace convbwd::detail
