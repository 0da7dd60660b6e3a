// Weight gradient of 1x1, stride-1, unpadded convolutions straight from
// planar (NCHW-like) tensors:
//
//   dW[g, k, c] = sum over images n, pixels p of dy[n, g, k, p] * x[n, g, c, p]
//
// A 6x16 tile is 6 output channels k by 16 input channels c. The gather
// kernel's six A rows are six dy channel rows, read where they lie (pixels
// are contiguous); only x is packed, per pixel chunk and 16-channel block,
// as [p][16] (an 8x8-transposing conversion of 16 x chunk floats into L1).
//
// Why: the general weight-gradient path first copies dy and x to blocked
// channels-last images. For 1x1 layers that copy (26 MB of dy on
// mb8ic64ih56oc256kh1) cost ~60% of the GEMM time.
//
// Tasks own disjoint ranges of k-tiles (all c-blocks of each), or, when x
// has more channels than dy, of c-blocks (all k-tiles of each): every task
// converts the x panels of its c-blocks, so splitting k-tiles converted all
// of x once per task (30% of the 1x1 256->64 layer at 2 threads, 4 tasks).
// Either way, tasks walk the pixels in one fixed order (n, then p
// ascending), so each output's sum has the same terms in the same order for
// any thread count. Between pixel chunks the tiles rest in fp32 in the
// workspace (exact).
//
// One pass: when the whole reduction is short (images of at most 256
// pixels, at most 1600 in the batch: the 7x7 and 14x14 layers), each tile is
// one kernel call with a run per image, stored straight from registers, and
// no fp32 copy of the weight gradient is kept. On 2048->512 @7 that copy was
// 4 MB, and the channels-last path the layer took before (its images are
// too small for chunks) copied all of x and dy: a 4 MB workspace for 0.25
// MB now (fp32; bf16 1 MB, with dy converted once for all tasks), and
// gradWeight in 0.81x the time.
//
// bf16 operands on a tier with bf16 pair kernels (KernelConfig::bf16) stay
// bf16: the dy rows and the x panels hold pairs of neighbouring pixels of a
// run (pack_pixel_pairs, common.hpp, and the tier's bf16 pair transpose), so each kernel step multiplies a pair
// and a run is half as many steps; an odd run (the last chunk of an odd
// image) ends in a pair padded with zero on both operands. dy is then
// copied: read in place, an odd run's last pair would take its high half
// from the next run, or from past the end of the tensor. With even runs
// only, dy's rows are the pair words as they stand and are read in place.
#include <algorithm>
#include <memory>

#include "impl/gemm/common.hpp"
#include "impl/registry_entries.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail::gemm {
namespace {

// True when the spatial dims of a [N, channels, spatial...] view are one
// sequence of contiguous pixels.
bool contiguous_pixels(const View& v, int spatial) {
  int64_t expect = 1;
  for (int d = spatial - 1; d >= 0; --d) {
    if (v.dims[2 + d] != 1 && v.strides[2 + d] != expect) return false;
    expect *= v.dims[2 + d];
  }
  return true;
}

class Wgrad1x1Kernel final : public OpKernel {
 public:
  Wgrad1x1Kernel(const OpSpec& op, const PlanContext& ctx) : op_(op), threads_(std::max(ctx.threads, 1)) {
    const Geometry& g = op.geo;
    const KernelConfig& cfg = kernels_for(ctx.isa);
    pairs_ = bf16_pairs(op, cfg);
    const GemmKernels& family = wide_family(cfg, pairs_);  // tile columns are pixels: no narrow family
    kern_ = family.gather;
    mr_ = family.gather_rows();
    nr_ = family.nr;
    convert_ = cfg.to_channels_last;
    pairs_channels_last_ = cfg.bf16_pairs_channels_last;
    store_ = cfg.store_row;
    groups_ = g.groups;
    n_ = g.n;
    k_ = g.k;
    c_ = g.c;
    pixels_ = g.x_spatial();
    kt_ = ceil_div(k_, mr_);
    cb_ = ceil_div(c_, nr_);
    // One pass: every image's pixels in one kernel call per tile (a run per
    // image), stored straight from registers, when the whole reduction is
    // short (the 7x7 and 14x14 layers); otherwise chunks of up to kChunk
    // pixels of one image, with the tiles resting in fp32 in the workspace.
    one_pass_ = pixels_ <= kChunk && n_ <= kMaxRuns && n_ * pixels_ <= kOnePassSteps;
    run_len_ = one_pass_ ? pixels_ : kChunk;
    runs_ = one_pass_ ? n_ : 1;
    run_floats_ = pairs_ ? (run_len_ + 1) / 2 : run_len_;
    // dy is read in place where its elements are the kernel's operands as
    // they stand: fp32 without rounding, and bf16 pairs whose runs all have
    // an even length (even images: every chunk is even then) and, with
    // several runs a pass, start a whole number of pair words apart. Else
    // it is converted (rounded, paired) into a copy of the task's dy rows.
    // Why the pairs: the copy of bit-identical words (pack_pixel_pairs) was
    // a tenth of the bf16 64->256 @56 gradWeight's samples on a Zen 5; read
    // in place, that gradient took 1/1.23 of the time on 2 threads (1/1.17
    // on 1), 32->192 1/1.30 (1/1.21); 256->64, whose tasks split c-blocks
    // and read dy once each, within noise.
    direct_pairs_ = pairs_ && pixels_ % 2 == 0 && (runs_ == 1 || op.a.strides[0] % 2 == 0);
    direct_ = (op.a.dtype == DataType::f32 && op.rounding == OperandRounding::none) || direct_pairs_;
    // One task per thread: each task reads its dy rows once and packs every
    // x chunk (of its c-blocks) once, so every further task is one more
    // pass over x (or, splitting c-blocks, over dy). Two per thread, as
    // before, made the 64->256 @56 gradWeight 1.13x slower on 2 threads of
    // a Zen 2, for load balance the even shares did not need.
    split_c_ = c_ > k_ && groups_ * cb_ >= 2 * threads_;
    tasks_ = std::min<int64_t>(groups_ * (split_c_ ? cb_ : kt_), threads_);
    acc_floats_ = one_pass_ ? 0 : round_up(groups_ * kt_ * cb_ * mr_ * nr_, kAlignFloats);
    // Converted dy rows: the task's k-tiles, or (splitting c) one group's.
    const int64_t rows_per_task = (split_c_ ? kt_ : ceil_div(groups_ * kt_, tasks_)) * mr_;
    panel_floats_ = round_up(runs_ * run_floats_ * nr_, kAlignFloats);
    nb_ = one_pass_ ? std::clamp<int64_t>(kPanelSetFloats / panel_floats_, 1, cb_) : 1;
    // In one pass, converted dy rows are made once for all tasks (each
    // would otherwise convert all of its group's rows, the whole dy when
    // tasks split c-blocks); chunks convert per task, chunk by chunk.
    shared_rows_ = one_pass_ && !direct_;
    shared_rows_floats_ = shared_rows_ ? round_up(groups_ * kt_ * mr_ * runs_ * run_floats_, kAlignFloats) : 0;
    const bool own_rows = !direct_ && !shared_rows_;
    scratch_floats_ =
        round_up(nb_ * panel_floats_ + (own_rows ? rows_per_task * runs_ * run_floats_ : 0), kAlignFloats);
  }

  bool one_pass() const { return one_pass_; }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(acc_floats_ + shared_rows_floats_ + threads_ * scratch_floats_) * sizeof(float);
  }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    float* const acc = reinterpret_cast<float*>(args.workspace);
    float* const shared_rows = acc + acc_floats_;
    float* const scratch = shared_rows + shared_rows_floats_;
    if (shared_rows_)
      pool.parallel_for(groups_ * kt_, threads_, [&](int64_t u, int) {
        convert_rows(args, u, u + 1, 0, 0, pixels_, shared_rows + u * mr_ * runs_ * run_floats_);
      });
    pool.parallel_for(tasks_, threads_, [&](int64_t t, int thread) {
      compute(args, acc, shared_rows, scratch + thread * scratch_floats_, t);
    });
  }

 private:
  // Pixels per chunk: a 16-channel x panel of 256 pixels is 16 KB (L1), and
  // a tile's 256 steps make its accumulator loads and stores noise.
  static constexpr int64_t kChunk = 256;
  // One pass: at most this many steps (the x panel of one c-block, 64 bytes
  // a step, then stays in L2 across the k-tiles that share it; as for
  // wgrad_conv.cpp's one pass) and this many runs (images).
  static constexpr int64_t kOnePassSteps = 1600;
  static constexpr int64_t kMaxRuns = 256;
  // The x panels packed at a time in one pass: 128 KB, within L2 next to the
  // dy rows. On 2048->512 (25 KB panels), gradWeight alone, 2 threads: one
  // panel at a time 1.11x the time of the channels-last path it replaces,
  // 128 KB 0.91x, 256 KB 0.90x, every panel at once 0.96x.
  static constexpr int64_t kPanelSetFloats = 32 * 1024;

  // Converts the dy rows of units [u0, u1) for the runs of the pass at
  // image n0, pixel p0 (len pixels each) into rows [unit - u0][mr][run][run_floats_]
  // (fp32, or bf16 pixel pairs).
  void convert_rows(const OpArgs& args, int64_t u0, int64_t u1, int64_t n0, int64_t p0, int64_t len,
                    float* rows) const {
    const View& a = op_.a;
    for (int64_t u = u0; u < u1; ++u)
      for (int i = 0; i < mr_; ++i) {
        const int64_t k = std::min((u % kt_) * mr_ + i, k_ - 1);  // rows past K repeat a real row
        for (int64_t r = 0; r < runs_; ++r) {
          const int64_t src = a.offset + (n0 + r) * a.strides[0] + ((u / kt_) * k_ + k) * a.strides[1] + p0;
          float* const dst = rows + (((u - u0) * mr_ + i) * runs_ + r) * run_floats_;
          if (pairs_) {
            pack_pixel_pairs(static_cast<const uint16_t*>(args.a) + src, len, reinterpret_cast<uint32_t*>(dst));
            continue;
          }
          // One "pixel" of len unit-stride "channels": the converter's
          // plain vector copy (its pixel stride is unused for one pixel).
          convert_(args.a, a.dtype, op_.rounding, src, 1, kChunk, len, 1, dst, kChunk);
        }
      }
  }

  // Task `task`: a range of (group, k-tile) units with every c-block of
  // each, or (split_c_) a range of (group, c-block) columns with every
  // k-tile of each.
  void compute(const OpArgs& args, float* acc, const float* shared_rows, float* scratch, int64_t task) const {
    const int64_t span = groups_ * (split_c_ ? cb_ : kt_);
    const int64_t lo = span * task / tasks_, hi = span * (task + 1) / tasks_;
    if (lo >= hi) return;
    const View& a = op_.a;  // dy [N, G*K, pixels]
    const View& b = op_.b;  // x  [N, G*C, pixels]
    float* const panel = scratch;                        // x panels [slot][run][run_len_][16]
    // Converted dy rows [unit - rows_lo][6][run][run_len_]: shared, or this task's.
    float* const own_rows = scratch + nb_ * panel_floats_;
    const float* const rows = shared_rows_ ? shared_rows : own_rows;
    const int64_t row_floats = runs_ * run_floats_;
    // Run r of a pass is image n0 + r, pixels [p0, p0 + len): the A rows
    // (dy, in place or converted) and the x panel are r runs further on.
    int64_t a_off[kMaxRuns], b_off[kMaxRuns], lens[kMaxRuns];
    MicroArgs ka;
    ka.a_off = a_off;
    ka.b_off = b_off;
    ka.len = lens;
    ka.runs = runs_;
    ka.bs = nr_;
    alignas(64) float tile[kMaxMr * kMaxNr];
    // The passes: one over every image (one_pass_), or one per chunk.
    for (int64_t n0 = 0; n0 < n_; n0 += runs_)
      for (int64_t p0 = 0; p0 < pixels_; p0 += run_len_) {
        const int64_t len = std::min(run_len_, pixels_ - p0);
        for (int64_t r = 0; r < runs_; ++r) {
          a_off[r] = direct_ ? r * a.strides[0] / (direct_pairs_ ? 2 : 1) : r * run_floats_;
          b_off[r] = r * run_floats_ * nr_;
          lens[r] = pairs_ ? (len + 1) / 2 : len;
        }
        ka.accumulate = !one_pass_ && !(n0 == 0 && p0 == 0);
        // x panel [run][step][nr] of channels cb*nr.. of group g; zero past C.
        auto pack_panel = [&](int64_t g, int64_t cb, int64_t slot) {
          const int64_t nc = std::min<int64_t>(nr_, c_ - cb * nr_);
          for (int64_t r = 0; r < runs_; ++r) {
            float* const out = panel + slot * panel_floats_ + b_off[r];
            if (pairs_) {
              uint32_t* const o32 = reinterpret_cast<uint32_t*>(out);
              const uint16_t* const src = static_cast<const uint16_t*>(args.b) + b.offset + (n0 + r) * b.strides[0] +
                                          (g * c_ + cb * nr_) * b.strides[1] + p0;
              pairs_channels_last_(src, b.strides[1], nc, len, true, 0, false, o32, nr_);
              if (nc < nr_)
                for (int64_t t = 0; t < lens[r]; ++t) std::fill(o32 + t * nr_ + nc, o32 + (t + 1) * nr_, 0u);
              continue;
            }
            convert_(args.b, b.dtype, op_.rounding,
                     b.offset + (n0 + r) * b.strides[0] + (g * c_ + cb * nr_) * b.strides[1] + p0, b.strides[1], 1,
                     nc, len, out, nr_);
            if (nc < nr_)
              for (int64_t p = 0; p < len; ++p) std::fill(out + p * nr_ + nc, out + (p + 1) * nr_, 0.0f);
          }
        };
        // Tile (unit u, c-block cb) over this pass; rows_lo: the unit
        // whose converted rows start the rows buffer.
        auto tile_pass = [&](int64_t u, int64_t cb, int64_t rows_lo, int64_t slot) {
          for (int i = 0; i < mr_; ++i) {
            if (direct_) {
              const int64_t k = std::min((u % kt_) * mr_ + i, k_ - 1);
              const int64_t at = a.offset + n0 * a.strides[0] + ((u / kt_) * k_ + k) * a.strides[1] + p0;
              // A pair row is its bf16 elements seen as 32-bit words.
              ka.a[i] = direct_pairs_ ? reinterpret_cast<const float*>(static_cast<const uint16_t*>(args.a) + at)
                                      : static_cast<const float*>(args.a) + at;
            } else {
              ka.a[i] = rows + ((u - rows_lo) * mr_ + i) * row_floats;
            }
          }
          ka.b = panel + slot * panel_floats_;
          ka.acc = one_pass_ ? tile : acc + (u * cb_ + cb) * mr_ * nr_;
          kern_(ka);
          if (one_pass_) store(args.dst, tile, u, cb);
        };
        // In one pass, nb_ c-blocks' panels at a time: each k-tile's dy
        // rows (a few KB, in L1) then meet every panel of the set (in L2)
        // before the next k-tile, instead of the whole dy (beyond L2 on
        // 2048->512) streaming once per c-block.
        if (split_c_) {
          int64_t rows_g = -1;
          for (int64_t col0 = lo; col0 < hi;) {
            const int64_t g = col0 / cb_;
            const int64_t col1 = std::min({hi, (g + 1) * cb_, col0 + nb_});
            for (int64_t col = col0; col < col1; ++col) pack_panel(g, col % cb_, col - col0);
            if (!direct_ && !shared_rows_ && g != rows_g)
              convert_rows(args, g * kt_, (g + 1) * kt_, n0, p0, len, own_rows), rows_g = g;
            const int64_t rows_lo = shared_rows_ ? 0 : g * kt_;
            for (int64_t u = g * kt_; u < (g + 1) * kt_; ++u)
              for (int64_t col = col0; col < col1; ++col) tile_pass(u, col % cb_, rows_lo, col - col0);
            col0 = col1;
          }
        } else {
          if (!direct_ && !shared_rows_) convert_rows(args, lo, hi, n0, p0, len, own_rows);
          const int64_t rows_lo = shared_rows_ ? 0 : lo;
          for (int64_t cb0 = 0; cb0 < cb_; cb0 += nb_) {
            const int64_t cb1 = std::min(cb_, cb0 + nb_);
            int64_t g_panel = -1;
            for (int64_t u = lo; u < hi; ++u) {
              if (u / kt_ != g_panel) {
                g_panel = u / kt_;
                for (int64_t cb = cb0; cb < cb1; ++cb) pack_panel(g_panel, cb, cb - cb0);
              }
              for (int64_t cb = cb0; cb < cb1; ++cb) tile_pass(u, cb, rows_lo, cb - cb0);
            }
          }
        }
      }
    if (one_pass_) return;
    // Store this task's tiles.
    if (split_c_) {
      for (int64_t col = lo; col < hi; ++col)
        for (int64_t u = col / cb_ * kt_; u < (col / cb_ + 1) * kt_; ++u)
          store(args.dst, acc + (u * cb_ + col % cb_) * mr_ * nr_, u, col % cb_);
    } else {
      for (int64_t u = lo; u < hi; ++u)
        for (int64_t cb = 0; cb < cb_; ++cb) store(args.dst, acc + (u * cb_ + cb) * mr_ * nr_, u, cb);
    }
  }

  // Stores the finished tile (unit u, c-block cb) into the weight gradient.
  void store(void* dst, const float* tile, int64_t u, int64_t cb) const {
    const View& w = op_.dst;  // [G*K, C, 1...]
    const int64_t g = u / kt_, k0 = (u % kt_) * mr_;
    const int rows_n = static_cast<int>(std::min<int64_t>(mr_, k_ - k0));
    const int cols = static_cast<int>(std::min<int64_t>(nr_, c_ - cb * nr_));
    int64_t row_base[kMaxMr];
    for (int i = 0; i < rows_n; ++i) row_base[i] = w.offset + (g * k_ + k0 + i) * w.strides[0] + cb * nr_ * w.strides[1];
    store_tile(store_, dst, w.dtype, tile, nr_, row_base, rows_n, w.strides[1], cols);
  }

  OpSpec op_;
  int threads_ = 1;
  MicroKernel kern_ = nullptr;
  int mr_ = 0, nr_ = 0;  // the kernel\'s tile (kernel config)
  ToChannelsLast convert_ = nullptr;
  Bf16PairsChannelsLast pairs_channels_last_ = nullptr;
  StoreRow store_ = nullptr;
  int64_t groups_ = 1, n_ = 0, k_ = 0, c_ = 0, pixels_ = 0, kt_ = 0, cb_ = 0, tasks_ = 1;
  int64_t run_len_ = 0, runs_ = 1;  // pixels per run (chunk, or image) and runs per pass
  int64_t run_floats_ = 0;          // floats per run in the dy rows and x panels (pairs: half)
  int64_t nb_ = 1;                  // c-block panels packed at a time
  int64_t acc_floats_ = 0, shared_rows_floats_ = 0, panel_floats_ = 0, scratch_floats_ = 0;
  bool direct_ = false;        // dy read in place
  bool direct_pairs_ = false;  // ... as bf16 pair words
  bool pairs_ = false;  // bf16 pair kernels (kernels/gemm.hpp)
  bool one_pass_ = false;
  bool shared_rows_ = false;  // converted dy rows made once, before the tasks
  bool split_c_ = false;  // tasks own c-blocks (x has more channels than dy)
};

}  // namespace
}  // namespace convbwd::detail::gemm

namespace convbwd::detail {

const Implementation kGemm1x1BwdWeightsImpl = {
    "gemm_wgrad_1x1_nchw",
    [](const OpSpec& op, const PlanContext& ctx, std::string* why) -> std::unique_ptr<OpKernel> {
      if (op.op != Op::bwd_weights) {
        *why = "not this operation";
        return nullptr;
      }
      if (!gemm::supported(op, why)) return nullptr;
      const Geometry& g = op.geo;
      if (!gemm::planar_1x1(g, why)) return nullptr;
      if (!gemm::contiguous_pixels(op.a, g.spatial) || !gemm::contiguous_pixels(op.b, g.spatial)) {
        *why = "the pixels of dy or x are not contiguous (channels-last: the blocked-copy path reads them)";
        return nullptr;
      }
      auto k = std::make_unique<gemm::Wgrad1x1Kernel>(op, ctx);
      if (!k->one_pass() && g.x_spatial() < gemm::kPlanarMinPixels) {
        *why = "fewer than 64 pixels per image, and too many steps for one pass";
        return nullptr;
      }
      if (static_cast<int64_t>(k->workspace_bytes()) > workspace_budget(op, ctx)) {
        *why = "the fp32 tiles of the whole weight gradient exceed the workspace budget";
        return nullptr;
      }
      return k;
    }};

}  // namespace convbwd::detail
