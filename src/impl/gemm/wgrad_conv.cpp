// Weight gradient as one GEMM per kernel tap over channels-last copies:
//
//   dW[k, c, r] = sum over images n, output pixels o of
//                 dy[n, o, k] * xpad[n, o*s + r*d, c]
//
// A 6x16 tile is 6 output channels k (six consecutive floats of a dy pixel,
// broadcast) by 16 input channels c (one contiguous vector of the padded x
// pixel). One kernel call walks a chunk of image rows, so the accumulators
// stay in registers for hundreds of steps; between chunks they rest in an
// fp32 tile buffer in the workspace. Each output's sum runs over n, then
// output rows, then pixels, always in that order, whichever task or thread
// computes it, and tasks own disjoint sets of tiles: the bits do not depend
// on the thread count. Padding is stored zeros, so border products cost a
// little arithmetic and no branches.
//
// bf16 operands on a tier with bf16 pair kernels (KernelConfig::bf16) stay
// bf16: dy and x are copied as pairs of the elements that output pixels 2t
// and 2t+1 of a row read (PixelPairCopy, common.hpp), and each kernel step
// multiplies a pair, so a run (an image row) is half as many steps, the last
// one padded with a zero in dy when the row is odd. The order of the terms is
// the same fixed (n, row, pixel) order.
#include <cstring>
#include <memory>
#include <vector>

#include "impl/gemm/common.hpp"
#include "impl/registry_entries.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail::gemm {
namespace {

class WgradKernel final : public OpKernel {
 public:
  WgradKernel(const OpSpec& op, const PlanContext& ctx) : op_(op), threads_(ctx.threads) {}

  // Plans the kernel for op_ (planning is not construction): false, with
  // the reason in *why, when it declines; the factory then drops it.
  bool init(const PlanContext& ctx, std::string* why) {
    const OpSpec& op = op_;
    const Geometry& g = op.geo;
    sp_ = space_of(g);
    const KernelConfig& cfg = kernels_for(ctx.isa);
    // Rows of one output pixel would be all padding: half the pair
    // arithmetic wasted, and nothing gained over fp32. (bf16_pairs asks for
    // the gather kernel; this path runs the strided one.)
    pairs_ = bf16_pairs(op, cfg) && cfg.bf16.strided != nullptr && sp_.y[2] > 1;
    // x's channels are the tile's columns: groups of at most 16 input
    // channels take the narrow family (gemm_family; 2 threads, Zen 5, against
    // 8x32: g8 128@28 3x3 1.52x, g16 256@14 1.46x).
    const GemmKernels& family = gemm_family(cfg, pairs_, g.c);
    kern_ = family.strided;
    mr_ = family.mr;
    nr_ = family.nr;
    store_ = cfg.store_row;
    store_columns_ = cfg.store_columns;
    convert_ = cfg.to_channels_last;
    dst_ = strides_of(op.dst, g.spatial);
    groups_ = g.groups;
    n_ = g.n;
    k_ = g.k;
    c_ = g.c;

    // dy: channels-last, unpadded.
    dy_.v = op.a;
    dy_.spatial = g.spatial;
    dy_.rounding = op.rounding;
    dy_.groups = g.groups;
    dy_.cg = g.k;
    dy_.cp = mr_;
    dy_.convert = x_.convert = cfg.to_channels_last;
    dy_.check = x_.check = cfg.any_nonfinite;
    dy_.pairs_channels_last = x_.pairs_channels_last = cfg.bf16_pairs_channels_last;
    dy_.src = dy_.ext = sp_.y;
    // x: channels-last, padded, channels rounded up to whole 16-vectors.
    x_.v = op.b;
    x_.spatial = g.spatial;
    x_.rounding = op.rounding;
    x_.groups = g.groups;
    x_.cg = g.c;
    x_.cp = nr_;
    x_.src = sp_.x;
    for (int d = 0; d < 3; ++d) {
      x_.lo[d] = sp_.pb[d];
      x_.ext[d] = (sp_.y[d] - 1) * sp_.s[d] + (sp_.k[d] - 1) * sp_.d[d] + 1;
    }
    // Where runs start and step (build_runs): a row of dy, a row of x, the
    // first element of a tap column in an x row, the kernel's A and B steps.
    if (pairs_) {
      set_pair_copies(g, cfg);
    } else {
      // Stride 2 along rows: x stored by column phases (ImageCopy::col_step),
      // so that a tap's B steps are one pixel apart, and a column no tap
      // reads is not copied. Gradient alone, one thread of a Zen 3 against
      // the interleaved copy: DCGAN 4x4 s2 128->64 1/1.10 of the time, 3x3
      // s2 128@56 1/1.04, 1x1 s2 256->512 @56 1/1.11 (half the copy), UNet
      // 2x2 s2 1/1.06 (3D 2x2x2 level). (Other strides would copy planar
      // sources element by element: the vector converters read pixels one
      // or two elements apart.)
      if (sp_.s[2] == 2) x_.set_col_phases(2, sp_.k[2], sp_.d[2]);
      x_.convert_split = cfg.to_channels_last_split;
      dy_row_ = sp_.y[2] * dy_.cp;
      x_row_ = x_.row_floats();
      x_plane_ = x_.plane_floats();
      for (int64_t r = 0; r < sp_.k[2]; ++r) x_col_.push_back(x_.column_offset(r * sp_.d[2]));
      as_ = dy_.cp;
      bs_ = (x_.col_step > 1 ? 1 : sp_.s[2]) * x_.cp;
      row_steps_ = sp_.y[2];
    }
    kt_ = ceil_div(k_, mr_);
    ct_ = ceil_div(c_, nr_);
    tiles_ = groups_ * sp_.taps() * ct_ * kt_;
    // Rows per chunk: ~512 reduction steps, so a tile's 24 accumulator loads
    // and stores are noise against its FMAs, while the chunk's rows of dy and
    // x stay in L2 for all the tiles of a task.
    rows_per_chunk_ = std::clamp<int64_t>(ceil_div(chunk_steps(kChunkSteps), row_steps_), 1, kMaxRuns);
    // Two tasks per thread: some slack against a busy neighbour; each task
    // streams the whole chunk, so more tasks would cost L2 bandwidth.
    tasks_ = std::min<int64_t>(tiles_, 2 * std::max(threads_, 1));

    // Slack after the dy copy: the strided kernel reads 6 channels from the
    // last tile's first channel, which may run past the last pixel.
    image_floats_ = round_up(groups_ * (dy_image() + x_image()), kAlignFloats);
    const int64_t budget = workspace_budget(op, ctx) / static_cast<int64_t>(sizeof(float));
    // One pass: when the whole reduction (every image's rows) is short and
    // its copies fit at once, each tile's sum is one kernel call, stored
    // straight from a per-thread tile. Weight-heavy layers have short
    // reductions, and their fp32 tile buffer, the size of the weights
    // (4 MB on the 2048->512 1x1 layer), cost as much memory as the copies
    // and a round trip through L3 per chunk.
    const int64_t rows_all = n_ * sp_.y[0] * sp_.y[1];
    unit_stores_ = unit_stores_apply();
    acc_floats_ = round_up(std::max(threads_, 1) * unit_tile_floats(), kAlignFloats);
    // The pair copies' per-thread window (PixelPairCopy::copy_plane).
    scratch_floats_ = pairs_ ? std::max(threads_, 1) * round_up(std::max(dyp_.scratch_floats(), xp_.scratch_floats()),
                                                                  kAlignFloats)
                             : 0;
    const Checked tile_buffer = (Checked(tiles_) * (mr_ * nr_)).rounded_up(kAlignFloats);
    if (!tile_buffer.ok()) {
      *why = "the weight gradient's tile buffer overflows 64 bits";
      return false;
    }
    const Checked all_copies = Checked(n_) * image_floats_;
    // Every image's copies at once: within the batch rule, or within the
    // tile buffer they replace (DeepLab's 512->512: two images, 7 MB of
    // copies, 9.4 MB of tiles), so that one pass never asks for more.
    const bool copies_fit =
        batch_limit(n_, budget, acc_floats_ + kAlignFloats + scratch_floats_, image_floats_, sp_.y_pixels()) == n_ ||
        (all_copies.ok() && all_copies.value() <= tile_buffer.value() &&
         all_copies.value() <= budget - acc_floats_ - kAlignFloats - scratch_floats_);
    one_pass_ = rows_all <= kMaxRuns && rows_all * row_steps_ <= chunk_steps(kOnePassSteps) && copies_fit &&
                sp_.taps() * rows_all <= kMaxCachedRuns;
    if (one_pass_) {
      rows_per_chunk_ = rows_all;
      cache_tap_runs(rows_all);
    } else {
      unit_stores_ = false;
      acc_floats_ = tile_buffer.value();
    }
    // Chunked, the tiles rest in the buffer across batches, so a smaller
    // batch costs one more pass over them per batch and no re-copy: copies
    // of up to 2 MiB instead of 4. Measured gradWeight alone, 2 threads, 8
    // rounds (min; median): DCGAN 128->64 0.98x (1.14x), WaveNet 1.06x
    // (0.96x), 3x3 s2 128@56 1.02x (0.79x), 3x3 64@56 1.02x (1.02x), i.e.
    // within noise, for half the workspace (DCGAN 3.99 -> 2.27 MB, WaveNet
    // 4.19 -> 2.11 MB).
    batch_ = one_pass_ ? n_
                       : batch_limit(n_, budget, acc_floats_ + kAlignFloats + scratch_floats_, image_floats_,
                                     sp_.y_pixels(),
                                     kBatchFloats / 2);
    if (batch_ < 1) {
      *why = "one image's channels-last copies do not fit the workspace budget";
      return false;
    }
    return true;
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(acc_floats_ + scratch_floats_ + batch_ * image_floats_ + kAlignFloats) * sizeof(float);
  }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    float* const acc = reinterpret_cast<float*>(args.workspace);
    float* const scratch = acc + acc_floats_;    // per thread: the pair copies' window
    float* const xs = scratch + scratch_floats_;  // batch_ x-copies
    float* const dys = xs + batch_ * groups_ * x_image();
    NonfiniteSeen seen;
    for (int64_t n0 = 0; n0 < n_; n0 += batch_) {
      const int64_t nb = std::min(batch_, n_ - n0);
      const int64_t xplanes = pairs_ ? xp_.planes() : x_.planes(), yplanes = pairs_ ? dyp_.planes() : dy_.planes();
      float* const dy_end = dys + nb * groups_ * dy_image();
      std::fill(dy_end, dy_end + kAlignFloats, 0.0f);
      pool.parallel_for(nb * (xplanes + yplanes), threads_, [&](int64_t t, int thread) {
        const int64_t i = t / (xplanes + yplanes), pl = t % (xplanes + yplanes);
        bool nonfinite = false;
        bool* const check = args.found ? &nonfinite : nullptr;
        float* const x_dst = xs + i * groups_ * x_image();
        float* const dy_dst = dys + i * groups_ * dy_image();
        float* const window = scratch + thread * (scratch_floats_ / std::max(threads_, 1));
        if (pl < xplanes && pairs_)
          xp_.copy_plane(args.b, n0 + i, pl, x_dst, window, args.zero_nonfinite, check);
        else if (pl < xplanes)
          x_.copy_plane(args.b, n0 + i, pl, x_dst, args.zero_nonfinite, check);
        else if (pairs_)
          dyp_.copy_plane(args.a, n0 + i, pl - xplanes, dy_dst, window, args.zero_nonfinite, check);
        else
          dy_.copy_plane(args.a, n0 + i, pl - xplanes, dy_dst, args.zero_nonfinite, check);
        seen.add(nonfinite && pl >= xplanes, nonfinite && pl < xplanes);
      });
      if (one_pass_)
        pool.parallel_for(tasks_, threads_, [&](int64_t t, int thread) {
          compute_one_pass(acc + thread * unit_tile_floats(), xs, dys, t, args.dst);
        });
      else
        pool.parallel_for(tasks_, threads_, [&](int64_t t, int) { compute_chunked(acc, xs, dys, nb, n0 == 0, t); });
    }
    if (!one_pass_)
      pool.parallel_for(tasks_, threads_, [&](int64_t t, int) {
        for (int64_t tl = task_begin(t); tl < task_begin(t + 1); ++tl) store(args.dst, acc + tl * mr_ * nr_, tl);
      });
    seen.report(args.found);
  }
  // Every operand element it multiplies passes through its copies, which
  // it checks in cache (any_nonfinite) instead of execute's scan.
  NonfiniteMode nonfinite_mode() const override { return NonfiniteMode::report; }

 private:
  static constexpr int64_t kMaxRuns = 256;
  static constexpr int64_t kChunkSteps = 256;
  // The longest reduction done in one pass: its x panel (64 bytes a step)
  // then still stays in L2 across the k-tiles that share it. Measured (2
  // threads, gradWeight alone): 1568 steps in one pass, 0.95x (3x3 256@14)
  // and 0.86x (DeepLab) of the chunked time; 2048 steps (DCGAN 128->64),
  // 1.23x.
  static constexpr int64_t kOnePassSteps = 1600;
  // The most runs one pass caches (taps x rows, 24 bytes each: 768 KB),
  // so that a kernel of very many taps cannot make the plan large.
  static constexpr int64_t kMaxCachedRuns = 1 << 15;
  // The most floats a unit's tiles take per thread (64 KB): beyond, each
  // tile is stored alone.
  static constexpr int64_t kMaxUnitFloats = 1 << 14;

  // Tasks own whole (group, c-block, tap) units, all k-tiles of each, when
  // the units divide evenly among them, so a task's x panel stays in L1
  // across k-tiles. Otherwise they split k-tiles too, into equal shares:
  // whole units of uneven counts (3x3 64@56: 18 units, tasks of 4, 5, 4 and
  // 5 on 2 threads) left one thread idle for a tenth of the time, and a unit
  // split between two tasks streams its x panel once more.
  //
  // In one pass the taps are the innermost tiles instead, so the units are
  // (group, c-block, k-tile), their taps sharing the dy panel.
  int64_t task_begin(int64_t t) const {
    const int64_t inner = one_pass_ ? sp_.taps() : kt_;
    const int64_t units = tiles_ / inner;
    if (units % tasks_ == 0) return units * t / tasks_ * inner;
    return tiles_ * t / tasks_;
  }

  // Tile index order: (g, c-block, tap, k-tile), k-tile fastest, so that
  // consecutive tiles share the x panel of one tap and c-block (in L1). The
  // taps come next because they sit next to each other in the weight
  // gradient (OIHW: a channel's taps are contiguous, the channel stride is
  // the tap count): a tile's stores write one element of each of its cache
  // lines, and the next tap writes the neighbouring element one sweep over
  // the k-tiles later (a c-block of the gradient: 1 MB on DCGAN 512->256,
  // near L2). With the taps outermost the lines came back once per sweep
  // over every c-block (DCGAN: 8 MB), and 28% of the time went to those
  // stores.
  //
  // In one pass, where every tile is stored as soon as its single kernel
  // call returns, the taps come last, (g, c-block, k-tile, tap): the next
  // tile writes the neighbouring element of the same lines, still in L1.
  // Through L2 the stores were a sixth of DCGAN 512->256's gradWeight on
  // one thread of a Zen 3 (a scalar store per element, each line missing
  // L1); the dy panel now stays in L1 across the taps and the x panel moves.
  struct Tile {
    int64_t g, cb, tap, kt;
  };
  Tile tile_at(int64_t tl) const {
    const int64_t taps = sp_.taps();
    if (one_pass_) {
      const int64_t tap = tl % taps, kt = (tl / taps) % kt_, cb = (tl / (kt_ * taps)) % ct_;
      return {tl / (kt_ * taps * ct_), cb, tap, kt};
    }
    const int64_t kt = tl % kt_, tap = (tl / kt_) % taps, cb = (tl / (kt_ * taps)) % ct_;
    return {tl / (kt_ * taps * ct_), cb, tap, kt};
  }

  // The copies are blocked (dy: 6 channels per block, x: 16), so a k-tile's
  // A operand and a c-block's B operand are contiguous along a row: the
  // kernel streams 24 and 64 bytes per step sequentially. With plain
  // channels-last copies each step touched two new cache lines at a large
  // pixel pitch, and the kernel ran latency-bound at half its speed.
  //
  // One pass: each tile's whole sum is one kernel call into the calling
  // thread's single tile, stored to dst as soon as the call returns.
  //
  // With unit stores (unit_stores_apply), tap r's tile is tile + r*mr*nr
  // instead, and the unit's taps are stored together once the last of them
  // (or the task's range) ends.
  void compute_one_pass(float* tile, const float* xs, const float* dys, int64_t task, void* dst) const {
    MicroArgs ka;
    ka.as = as_;
    ka.bs = bs_;
    ka.acc = tile;
    const int64_t begin = task_begin(task), end = task_begin(task + 1), taps = sp_.taps();
    int64_t unit_first_tap = 0;  // the first tap of the current unit this task computed
    for (int64_t tl = begin; tl < end; ++tl) {
      const Tile t = tile_at(tl);
      if (unit_stores_) {
        if (t.tap == 0 || tl == begin) unit_first_tap = t.tap;
        ka.acc = tile + t.tap * mr_ * nr_;
      }
      const TapRuns& r = tap_runs_[static_cast<size_t>(t.tap)];
      ka.a_off = r.a_off.data();
      ka.b_off = r.b_off.data();
      ka.len = r.len.data();
      ka.runs = static_cast<int64_t>(r.len.size());
      ka.a[0] = dy_panel(dys, t);
      ka.b = x_panel(xs, t);
      if (unit_stores_) prefetch_unit_rows(dst, t);
      kern_(ka);
      if (!unit_stores_)
        store(dst, tile, tl);
      else if (t.tap == taps - 1 || tl + 1 == end)
        store_unit(dst, tile, t, unit_first_tap, t.tap + 1);
    }
  }

  // Chunked: acc holds every tile, each summed chunk by chunk of rows.
  void compute_chunked(float* acc, const float* xs, const float* dys, int64_t nb, bool first_batch,
                       int64_t task) const {
    const int64_t lo = task_begin(task), hi = task_begin(task + 1);
    const int64_t rows_total = nb * sp_.y[0] * sp_.y[1];
    MicroArgs ka;
    ka.as = as_;
    ka.bs = bs_;
    int64_t a_off[kMaxRuns], b_off[kMaxRuns], len[kMaxRuns];
    ka.a_off = a_off;
    ka.b_off = b_off;
    ka.len = len;
    for (int64_t row0 = 0; row0 < rows_total; row0 += rows_per_chunk_) {
      const int64_t rows = std::min(rows_per_chunk_, rows_total - row0);
      int64_t built_for = -1;
      for (int64_t tl = lo; tl < hi; ++tl) {
        const Tile t = tile_at(tl);
        if (t.tap != built_for) {
          ka.runs = build_runs(row0, rows, t.tap, a_off, b_off, len);
          built_for = t.tap;
        }
        ka.a[0] = dy_panel(dys, t);
        ka.b = x_panel(xs, t);
        ka.acc = acc + tl * mr_ * nr_;
        ka.accumulate = !(first_batch && row0 == 0);
        kern_(ka);
      }
    }
  }

  // Runs of one chunk of output rows for a tap: one run per row, merged
  // when a row continues exactly where the previous one ended (1x1 stride-1
  // unpadded layers become a single run per chunk). Offsets are group 0's:
  // a group's copies follow the previous group's, a whole image further on
  // (dy_panel, x_panel), so every group's runs are the same.
  int64_t build_runs(int64_t row0, int64_t rows, int64_t tap, int64_t* a_off, int64_t* b_off, int64_t* len) const {
    const int64_t r2 = tap % sp_.k[2], r1 = (tap / sp_.k[2]) % sp_.k[1], r0 = tap / (sp_.k[2] * sp_.k[1]);
    const int64_t ys = sp_.y[0] * sp_.y[1];
    const int64_t dy_img = dy_image(), x_img = x_image();
    int64_t runs = 0;
    for (int64_t row = row0; row < row0 + rows; ++row) {
      const int64_t i = row / ys, o01 = row % ys, o0 = o01 / sp_.y[1], o1 = o01 % sp_.y[1];
      // A row whose x row lies in the copy's zero padding adds only zero
      // products (the operands are finite: nonfinite.hpp reruns otherwise,
      // and +-0 added to a sum that started at +0 keeps its bits), so it
      // has no run: the first and last rows of a 3x3 pad-1 layer's edge taps.
      const int64_t x0 = o0 * sp_.s[0] + r0 * sp_.d[0] - x_.lo[0], x1 = o1 * sp_.s[1] + r1 * sp_.d[1] - x_.lo[1];
      if (x0 < 0 || x0 >= x_.src[0] || x1 < 0 || x1 >= x_.src[1]) continue;
      const int64_t a = i * groups_ * dy_img + (o0 * sp_.y[1] + o1) * dy_row_;
      const int64_t b = i * groups_ * x_img +
                        (o0 * sp_.s[0] + r0 * sp_.d[0]) * x_plane_ + (o1 * sp_.s[1] + r1 * sp_.d[1]) * x_row_ +
                        x_col_[static_cast<size_t>(r2)];
      if (runs > 0 && a == a_off[runs - 1] + len[runs - 1] * as_ && b == b_off[runs - 1] + len[runs - 1] * bs_) {
        len[runs - 1] += row_steps_;
        continue;
      }
      a_off[runs] = a;
      b_off[runs] = b;
      len[runs] = row_steps_;
      ++runs;
    }
    return runs;
  }

  // One pass: every tap's runs over all rows, built once here instead of
  // per tile, since with the taps innermost the runs change every tile.
  void cache_tap_runs(int64_t rows_all) {
    int64_t a_off[kMaxRuns], b_off[kMaxRuns], len[kMaxRuns];
    tap_runs_.resize(static_cast<size_t>(sp_.taps()));
    for (int64_t tap = 0; tap < sp_.taps(); ++tap) {
      const int64_t runs = build_runs(0, rows_all, tap, a_off, b_off, len);
      TapRuns& r = tap_runs_[static_cast<size_t>(tap)];
      r.a_off.assign(a_off, a_off + runs);
      r.b_off.assign(b_off, b_off + runs);
      r.len.assign(len, len + runs);
    }
  }

  int64_t dy_image() const { return pairs_ ? dyp_.image_floats() : dy_.image_floats(); }
  int64_t x_image() const { return pairs_ ? xp_.image_floats() : x_.image_floats(); }
  // Where tile t's A (its k-tile's dy block) and B (its c-block's x block)
  // start in the first image's copies of its group; the runs add the rest.
  const float* dy_panel(const float* dys, const Tile& t) const {
    return dys + t.g * dy_image() + t.kt * (pairs_ ? dyp_.block_floats() : dy_.block_floats());
  }
  const float* x_panel(const float* xs, const Tile& t) const {
    return xs + t.g * x_image() + t.cb * (pairs_ ? xp_.block_floats() : x_.block_floats());
  }

  // The pair copies (bf16 pair kernels), with the extents of the fp32 ones:
  // dy as pairs of neighbouring pixels (8 channels a block on the AVX512_BF16
  // kernel's 8x32 tile), x as pairs s columns apart, classed by tap column.
  void set_pair_copies(const Geometry& g, const KernelConfig& cfg) {
    dyp_.v = dy_.v;
    dyp_.spatial = xp_.spatial = g.spatial;
    dyp_.groups = xp_.groups = g.groups;
    dyp_.cg = dy_.cg;
    dyp_.cp = dy_.cp;
    dyp_.src = dyp_.ext = dy_.src;
    dyp_.step = 1;
    dyp_.convert = xp_.convert = dy_.convert;
    dyp_.pairs_channels_last = xp_.pairs_channels_last = dy_.pairs_channels_last;
    dyp_.shift_pair_words = xp_.shift_pair_words = cfg.shift_pair_words;
    dyp_.check = xp_.check = dy_.check;
    dyp_.set_columns(1, 1, sp_.y[2]);
    xp_.v = x_.v;
    xp_.cg = x_.cg;
    xp_.cp = x_.cp;
    xp_.src = x_.src;
    xp_.ext = x_.ext;
    xp_.lo = x_.lo;
    xp_.step = sp_.s[2];
    xp_.set_columns(sp_.k[2], sp_.d[2], sp_.y[2]);
    dy_row_ = dyp_.row_floats();
    x_row_ = xp_.row_floats();
    x_plane_ = x_.ext[1] * x_row_;
    for (int64_t r = 0; r < sp_.k[2]; ++r) x_col_.push_back(xp_.column_offset(r));
    as_ = dyp_.cp;
    bs_ = xp_.cp;
    row_steps_ = dyp_.slots;
  }

  // One pass, unit stores: where the gradient holds a channel's taps as one
  // unit-stride run in tap order (OIHW, and its 1D and 3D kin) and the
  // channels of a tile row are not themselves contiguous, a unit's taps are
  // stored together, tile row by tile row: [tap][column] becomes the row's
  // [column][tap] run by register transposes (fp32 through the tier's
  // channels-last converter, 16-bit formats through its column store).
  // Why: a tile stored alone writes one element per cache line, each a
  // scalar store (the column stride is the tap count): on DCGAN 512->256
  // (16 taps, a 256-step reduction) those stores were 13.6% of the
  // gradWeight's samples on one thread of a Zen 3, and fetching the lines
  // for writing ahead did not shorten them. Stored by units, that gradient
  // took 1/1.14 of the time on one thread (bf16 operands 1/1.11, ResNet's
  // 3x3 512@7 1/1.07) and 1/1.01 (1/1.13, 1/1.14) on two: minima of 12
  // alternations, the medians within this host's noise.
  bool unit_stores_apply() const {
    // (Divided, not multiplied: a hostile kernel's tap count can be near 2^62.)
    if (sp_.taps() < 2 || dst_.ch == 1 || sp_.taps() > kMaxUnitFloats / (mr_ * nr_)) return false;
    int64_t expect = 1;  // the stride tap order asks of each spatial dim, innermost first
    for (int d = 2; d >= 0; --d) {
      if (sp_.k[static_cast<size_t>(d)] == 1) continue;
      if (dst_.sp[static_cast<size_t>(d)] != expect) return false;
      expect *= sp_.k[static_cast<size_t>(d)];
    }
    return true;
  }
  int64_t unit_tile_floats() const { return (unit_stores_ ? sp_.taps() : 1) * mr_ * nr_; }

  // The output lines of unit t's tile rows i with i % taps == t.tap,
  // fetched for writing while that tap's kernel runs, so that by the unit's
  // last tap every row's lines are in cache. Why: the unit's rows are lines
  // no tile wrote before, and without this each store of the transposed
  // runs waited for its line (DCGAN 512->256's gradWeight: the first store
  // of each transposed block held a fifth of the converter's samples); with
  // it, that gradWeight took 1/1.04 of the time on one thread, 3x3 512@7
  // 1/1.06 (minima of 12 alternations; two threads 0.99 and 1.20, bf16
  // 1.00 and 1.03). All rows at the first tap stalled on the prefetches
  // themselves instead.
  void prefetch_unit_rows(void* dst, const Tile& t) const {
    const int64_t rows = std::min<int64_t>(mr_, k_ - t.kt * mr_);
    const int64_t cols = std::min<int64_t>(nr_, c_ - t.cb * nr_);
    if (cols <= 0) return;
    const int64_t elem = static_cast<int64_t>(size_of(op_.dst.dtype));
    const int64_t last = ((cols - 1) * dst_.ch + sp_.taps() - 1) * elem;
    for (int64_t i = t.tap; i < rows; i += sp_.taps())
      prefetch_lines<true>(static_cast<const char*>(dst) + row_first(t, i) * elem, last);
  }

  // Taps [tap_lo, tap_hi) of unit t, their tiles at tile + tap * mr*nr.
  void store_unit(void* dst, const float* tile, const Tile& t, int64_t tap_lo, int64_t tap_hi) const {
    const int rows = static_cast<int>(std::min<int64_t>(mr_, k_ - t.kt * mr_));
    const int64_t cols = std::min<int64_t>(nr_, c_ - t.cb * nr_);
    if (cols <= 0) return;
    const int64_t pitch = mr_ * nr_, ntaps = tap_hi - tap_lo;
    for (int i = 0; i < rows; ++i) {
      const int64_t first = row_first(t, i) + tap_lo;
      const float* const src = tile + tap_lo * pitch + i * nr_;
      if (op_.dst.dtype == DataType::f32)
        // Taps as the converter's channels (pitch apart), columns as its pixels.
        convert_(src, DataType::f32, OperandRounding::none, 0, pitch, 1, ntaps, cols, static_cast<float*>(dst) + first,
                 dst_.ch);
      else
        // Taps as the column store's pixels (unit step), columns as its channels.
        store_columns_(src, pitch, ntaps, cols, dst, op_.dst.dtype, first, dst_.ch, 1);
    }
  }

  // Stores the fp32 tile of tile index tl into the weight gradient.
  void store(void* dst, const float* tile, int64_t tl) const {
    const Tile t = tile_at(tl);
    const int64_t r2 = t.tap % sp_.k[2], r1 = (t.tap / sp_.k[2]) % sp_.k[1], r0 = t.tap / (sp_.k[2] * sp_.k[1]);
    const int rows = static_cast<int>(std::min<int64_t>(mr_, k_ - t.kt * mr_));
    const int cols = static_cast<int>(std::min<int64_t>(nr_, c_ - t.cb * nr_));
    if (cols <= 0) return;
    const int64_t tap_offset = r0 * dst_.sp[0] + r1 * dst_.sp[1] + r2 * dst_.sp[2];
    int64_t row_base[kMaxMr];
    for (int i = 0; i < rows; ++i) row_base[i] = row_first(t, i) + tap_offset;
    store_tile(store_, dst, op_.dst.dtype, tile, nr_, row_base, rows, dst_.ch, cols);
  }

  // The gradient's index of tile t's row i, column 0, tap 0.
  int64_t row_first(const Tile& t, int64_t i) const {
    return dst_.offset + (t.g * k_ + t.kt * mr_ + i) * dst_.n + t.cb * nr_ * dst_.ch;
  }

  OpSpec op_;
  int threads_ = 1;
  Space sp_;
  MicroKernel kern_ = nullptr;
  StoreRow store_ = nullptr;
  StoreColumns store_columns_ = nullptr;
  ToChannelsLast convert_ = nullptr;
  Strides dst_;  // the weight gradient's strides (strides_of)
  int mr_ = 0, nr_ = 0;  // the kernel's tile (kernel config)
  int64_t groups_ = 1, n_ = 0, k_ = 0, c_ = 0;
  ImageCopy dy_, x_;
  bool pairs_ = false;  // bf16 pair kernels: the copies are dyp_ and xp_
  PixelPairCopy dyp_, xp_;
  // Floats per stored row of dy and x, to each tap column's first element in
  // an x row, per kernel step in dy (A) and x (B), and steps per output row.
  int64_t dy_row_ = 0, x_row_ = 0, x_plane_ = 0, as_ = 1, bs_ = 1, row_steps_ = 1;
  std::vector<int64_t> x_col_;
  int64_t kt_ = 0, ct_ = 0, tiles_ = 0, rows_per_chunk_ = 1, tasks_ = 1;
  int64_t acc_floats_ = 0, scratch_floats_ = 0, image_floats_ = 0, batch_ = 0;
  bool one_pass_ = false;
  bool unit_stores_ = false;  // one pass: a unit's taps stored together (unit_stores_apply)
  // One pass: each tap's runs (cache_tap_runs).
  struct TapRuns {
    std::vector<int64_t> a_off, b_off, len;
  };
  std::vector<TapRuns> tap_runs_;
};

}  // namespace
}  // namespace convbwd::detail::gemm

namespace convbwd::detail {

const Implementation kGemmBwdWeightsImpl = {
    "gemm_wgrad_nhwc", [](const OpSpec& op, const PlanContext& ctx, std::string* why) -> std::unique_ptr<OpKernel> {
      if (op.op != Op::bwd_weights) {
        *why = "not this operation";
        return nullptr;
      }
      if (!gemm::supported(op, why)) return nullptr;
      auto k = std::make_unique<gemm::WgradKernel>(op, ctx);
      if (!k->init(ctx, why)) return nullptr;
      return k;
    }};

}  // namespace convbwd::detail
