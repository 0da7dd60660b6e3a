// Weight gradient of 1x1, stride-1, unpadded convolutions straight from
// planar (NCHW-like) tensors:
//
//   dW[g, k, c] = sum over images n, pixels p of dy[n, g, k, p] * x[n, g, c, p]
//
// A 6x16 tile is 6 channels of the A side by 16 of the B side. The gather
// kernel's six A rows are six channel rows, read where they lie (pixels are
// contiguous) or, for rounded or 16-bit operands, converted; the B side is
// packed per pixel chunk and 16-channel block as [p][16] (an 8x8-transposing
// conversion into L1). The A side is dy, tiles being of dW, except where x
// has more channels and can be read in place: the sum is symmetric in its
// operands, so x is then the A side and tiles are of dW^T, stored through
// swapped strides. Why: packing is the cost that grows with a side's
// channels, rows read in place cost nothing. With x packed, the fp32 1x1
// 256->64 @56 gradWeight spent 19% of one thread's samples in that
// conversion (x: 256 channels, dy: 64).
//
// Why read planar tensors at all: the general weight-gradient path first
// copies dy and x to blocked channels-last images. For 1x1 layers that copy
// (26 MB of dy on mb8ic64ih56oc256kh1) cost ~60% of the GEMM time.
//
// Tasks own disjoint ranges of A tiles (all B blocks of each), or, when the
// B side has more channels, of B blocks (all A tiles of each): every task
// packs the panels of its blocks, so splitting A tiles would pack all of the
// larger side once per task. Either way, tasks walk the pixels in one fixed
// order (n, then p ascending), so each output's sum has the same terms in
// the same order for any thread count (and dW^T's tiles the same products
// as dW's). Between pixel chunks the tiles rest in fp32 in the workspace
// (exact).
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
// bf16: the A rows and the B panels hold pairs of neighbouring pixels of a
// run (pack_pixel_pairs, common.hpp, and the tier's bf16 pair transpose), so
// each kernel step multiplies a pair and a run is half as many steps; an odd
// run (the last chunk of an odd image) ends in a pair padded with zero on
// both operands. The A rows are then copied: read in place, an odd run's
// last pair would take its high half from the next run, or from past the end
// of the tensor. With even runs only, the A rows are the pair words as they
// stand and are read in place.
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
    pixels_ = g.x_spatial();
    // One pass: every image's pixels in one kernel call per tile (a run per
    // image), stored straight from registers, when the whole reduction is
    // short (the 7x7 and 14x14 layers); otherwise chunks of up to kChunk
    // pixels of one image, with the tiles resting in fp32 in the workspace.
    one_pass_ = pixels_ <= kChunk && n_ <= kMaxRuns && n_ * pixels_ <= kOnePassSteps;
    run_len_ = one_pass_ ? pixels_ : kChunk;
    runs_ = one_pass_ ? n_ : 1;
    run_floats_ = pairs_ ? (run_len_ + 1) / 2 : run_len_;
    // The A rows can be read in place where their elements are the kernel's
    // operands as they stand: fp32 without rounding, and bf16 pairs whose
    // runs all have an even length (even images: every chunk is even then)
    // and, with several runs a pass, start a whole number of pair words
    // apart. Else they are converted (rounded, paired) into a copy of the
    // task's rows. Why the pairs: the copy of bit-identical words
    // (pack_pixel_pairs) was a tenth of the bf16 64->256 @56 gradWeight's
    // samples on a Zen 5; read in place, that gradient took 1/1.23 of the
    // time on 2 threads (1/1.17 on 1), 32->192 1/1.30 (1/1.21).
    const auto in_place = [&](const View& v) {
      const bool pairs_in_place = pairs_ && pixels_ % 2 == 0 && (runs_ == 1 || v.strides[0] % 2 == 0);
      return (v.dtype == DataType::f32 && op.rounding == OperandRounding::none) || pairs_in_place;
    };
    // x is the A side where it has more channels than dy and can be read in
    // place: tile (i, j) is then dW^T[c_i, k_j] (the strides below say so).
    // Rows that must be converted cost as much as packing them, and on one
    // thread of a Zen 3 the fp16 256->64 @56 gradWeight took 1.05x the time
    // with x as the converted A side. In one pass, tiles go straight from
    // registers to dW, and a dW^T tile's columns are rows of dW a power of
    // two apart on the usual layers: its stores missed L1 and L2 by set
    // conflicts (17% of 2048->512 @7's samples, 1.2x the time).
    transposed_ = !one_pass_ && g.c > g.k && in_place(op.b);
    a_ = transposed_ ? op.b : op.a;
    b_ = transposed_ ? op.a : op.b;
    a_ch_ = transposed_ ? g.c : g.k;
    b_ch_ = transposed_ ? g.k : g.c;
    const View& w = op.dst;  // [G*K, C, 1...]
    dst_group_ = g.k * w.strides[0];
    dst_row_ = w.strides[transposed_ ? 1 : 0];
    dst_col_ = w.strides[transposed_ ? 0 : 1];
    kt_ = ceil_div(a_ch_, mr_);
    cb_ = ceil_div(b_ch_, nr_);
    direct_ = in_place(a_);
    direct_pairs_ = direct_ && pairs_;
    // One task per thread: each task reads its A rows once and packs every
    // B chunk (of its blocks) once, so every further task is one more pass
    // over the B side (or, splitting blocks, over the A side). Two per
    // thread, as before, made the 64->256 @56 gradWeight 1.13x slower on 2
    // threads of a Zen 2, for load balance the even shares did not need.
    // Tasks split the B blocks where the B side is the larger (x, converted
    // rows): splitting A tiles, every task packed all of x (30% of the 1x1
    // 256->64 layer at 2 threads, 4 tasks).
    split_b_ = b_ch_ > a_ch_ && groups_ * cb_ >= 2 * threads_;
    tasks_ = std::min<int64_t>(groups_ * (split_b_ ? cb_ : kt_), threads_);
    acc_floats_ = one_pass_ ? 0 : round_up(groups_ * kt_ * cb_ * mr_ * nr_, kAlignFloats);
    // Converted A rows: the task's tiles, or (splitting B) one group's.
    const int64_t rows_per_task = (split_b_ ? kt_ : ceil_div(groups_ * kt_, tasks_)) * mr_;
    panel_floats_ = round_up(runs_ * run_floats_ * nr_, kAlignFloats);
    // The B panels of up to kPanelSetFloats at a time, so that each tile's A
    // rows meet all of them while in L1. In chunks, one panel at a time (in
    // L1) streamed the A rows once per block: with all of them, fp32 64->256
    // @56 took 1/1.06 of the time (1 thread), and 256->64 (x on the A side)
    // 1/1.16 against x packed.
    nb_ = std::clamp<int64_t>(kPanelSetFloats / panel_floats_, 1, cb_);
    // In one pass, converted A rows are made once for all tasks (each would
    // otherwise convert all of its group's rows, the whole A side when tasks
    // split B blocks); chunks convert per task, chunk by chunk.
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
  // Pixels per chunk: a 16-channel B panel of 256 pixels is 16 KB (L1), and
  // a tile's 256 steps make its accumulator loads and stores noise.
  static constexpr int64_t kChunk = 256;
  // One pass: at most this many steps (the B panel of one block, 64 bytes
  // a step, then stays in L2 across the k-tiles that share it; as for
  // wgrad_conv.cpp's one pass) and this many runs (images).
  static constexpr int64_t kOnePassSteps = 1600;
  static constexpr int64_t kMaxRuns = 256;
  // The B panels packed at a time in one pass: 128 KB, within L2 next to the
  // A rows. On 2048->512 (25 KB panels), gradWeight alone, 2 threads: one
  // panel at a time 1.11x the time of the channels-last path it replaces,
  // 128 KB 0.91x, 256 KB 0.90x, every panel at once 0.96x.
  static constexpr int64_t kPanelSetFloats = 32 * 1024;

  const void* a_data(const OpArgs& args) const { return transposed_ ? args.b : args.a; }
  const void* b_data(const OpArgs& args) const { return transposed_ ? args.a : args.b; }

  // The A side's element index of row i of unit u (a group's tile of rows),
  // image n, pixel p. Rows past the side's channels repeat a real row.
  int64_t a_index(int64_t u, int i, int64_t n, int64_t p) const {
    const int64_t row = std::min((u % kt_) * mr_ + i, a_ch_ - 1);
    return a_.offset + n * a_.strides[0] + ((u / kt_) * a_ch_ + row) * a_.strides[1] + p;
  }

  // Converts the A rows of units [u0, u1) for the runs of the pass at
  // image n0, pixel p0 (len pixels each) into rows [unit - u0][mr][run][run_floats_]
  // (fp32, or bf16 pixel pairs).
  void convert_rows(const OpArgs& args, int64_t u0, int64_t u1, int64_t n0, int64_t p0, int64_t len,
                    float* rows) const {
    for (int64_t u = u0; u < u1; ++u)
      for (int i = 0; i < mr_; ++i)
        for (int64_t r = 0; r < runs_; ++r) {
          const int64_t src = a_index(u, i, n0 + r, p0);
          float* const dst = rows + (((u - u0) * mr_ + i) * runs_ + r) * run_floats_;
          if (pairs_) {
            pack_pixel_pairs(static_cast<const uint16_t*>(a_data(args)) + src, len, reinterpret_cast<uint32_t*>(dst));
            continue;
          }
          // One "pixel" of len unit-stride "channels": the converter's
          // plain vector copy (its pixel stride is unused for one pixel).
          convert_(a_data(args), a_.dtype, op_.rounding, src, 1, kChunk, len, 1, dst, kChunk);
        }
  }

  // Task `task`: a range of (group, A tile) units with every B block of
  // each, or (split_b_) a range of (group, B block) columns with every A
  // tile of each.
  void compute(const OpArgs& args, float* acc, const float* shared_rows, float* scratch, int64_t task) const {
    const int64_t span = groups_ * (split_b_ ? cb_ : kt_);
    const int64_t lo = span * task / tasks_, hi = span * (task + 1) / tasks_;
    if (lo >= hi) return;
    float* const panel = scratch;  // B panels [slot][run][run_len_][nr]
    // Converted A rows [unit - rows_lo][mr][run][run_len_]: shared, or this task's.
    float* const own_rows = scratch + nb_ * panel_floats_;
    const float* const rows = shared_rows_ ? shared_rows : own_rows;
    const int64_t row_floats = runs_ * run_floats_;
    // Run r of a pass is image n0 + r, pixels [p0, p0 + len): the A rows
    // (in place or converted) and the B panel are r runs further on.
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
          a_off[r] = direct_ ? r * a_.strides[0] / (direct_pairs_ ? 2 : 1) : r * run_floats_;
          b_off[r] = r * run_floats_ * nr_;
          lens[r] = pairs_ ? (len + 1) / 2 : len;
        }
        ka.accumulate = !one_pass_ && !(n0 == 0 && p0 == 0);
        // B panel [run][step][nr] of channels cb*nr.. of group g; zero past
        // the side's channels.
        auto pack_panel = [&](int64_t g, int64_t cb, int64_t slot) {
          const int64_t nc = std::min<int64_t>(nr_, b_ch_ - cb * nr_);
          for (int64_t r = 0; r < runs_; ++r) {
            float* const out = panel + slot * panel_floats_ + b_off[r];
            const int64_t src = b_.offset + (n0 + r) * b_.strides[0] + (g * b_ch_ + cb * nr_) * b_.strides[1] + p0;
            if (pairs_) {
              uint32_t* const o32 = reinterpret_cast<uint32_t*>(out);
              pairs_channels_last_(static_cast<const uint16_t*>(b_data(args)) + src, b_.strides[1], nc, len, true, 0,
                                   false, o32, nr_);
              if (nc < nr_)
                for (int64_t t = 0; t < lens[r]; ++t) std::fill(o32 + t * nr_ + nc, o32 + (t + 1) * nr_, 0u);
              continue;
            }
            convert_(b_data(args), b_.dtype, op_.rounding, src, b_.strides[1], 1, nc, len, out, nr_);
            if (nc < nr_)
              for (int64_t p = 0; p < len; ++p) std::fill(out + p * nr_ + nc, out + (p + 1) * nr_, 0.0f);
          }
        };
        // Tile (unit u, B block cb) over this pass; rows_lo: the unit
        // whose converted rows start the rows buffer.
        auto tile_pass = [&](int64_t u, int64_t cb, int64_t rows_lo, int64_t slot) {
          for (int i = 0; i < mr_; ++i) {
            if (direct_) {
              const int64_t at = a_index(u, i, n0, p0);
              // A pair row is its bf16 elements seen as 32-bit words.
              ka.a[i] = direct_pairs_ ? reinterpret_cast<const float*>(static_cast<const uint16_t*>(a_data(args)) + at)
                                      : static_cast<const float*>(a_data(args)) + at;
            } else {
              ka.a[i] = rows + ((u - rows_lo) * mr_ + i) * row_floats;
            }
          }
          ka.b = panel + slot * panel_floats_;
          ka.acc = one_pass_ ? tile : acc + (u * cb_ + cb) * mr_ * nr_;
          kern_(ka);
          if (one_pass_) store(args.dst, tile, u, cb);
        };
        // nb_ blocks' panels at a time: each A tile's rows (a few KB, in L1)
        // then meet every panel of the set (in L2) before the next tile,
        // instead of the whole A side (beyond L2 on 2048->512) streaming
        // once per block.
        if (split_b_) {
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
    if (split_b_) {
      for (int64_t col = lo; col < hi; ++col)
        for (int64_t u = col / cb_ * kt_; u < (col / cb_ + 1) * kt_; ++u)
          store(args.dst, acc + (u * cb_ + col % cb_) * mr_ * nr_, u, col % cb_);
    } else {
      for (int64_t u = lo; u < hi; ++u)
        for (int64_t cb = 0; cb < cb_; ++cb) store(args.dst, acc + (u * cb_ + cb) * mr_ * nr_, u, cb);
    }
  }

  // Stores the finished tile (unit u, B block cb) into the weight gradient:
  // its rows are A-side channels, its columns B-side channels.
  void store(void* dst, const float* tile, int64_t u, int64_t cb) const {
    const int64_t g = u / kt_, i0 = (u % kt_) * mr_;
    const int rows_n = static_cast<int>(std::min<int64_t>(mr_, a_ch_ - i0));
    const int cols = static_cast<int>(std::min<int64_t>(nr_, b_ch_ - cb * nr_));
    const int64_t first = op_.dst.offset + g * dst_group_ + i0 * dst_row_ + cb * nr_ * dst_col_;
    int64_t row_base[kMaxMr];
    for (int i = 0; i < rows_n; ++i) row_base[i] = first + i * dst_row_;
    store_tile(store_, dst, op_.dst.dtype, tile, nr_, row_base, rows_n, dst_col_, cols);
  }

  OpSpec op_;
  int threads_ = 1;
  MicroKernel kern_ = nullptr;
  int mr_ = 0, nr_ = 0;  // the kernel\'s tile (kernel config)
  ToChannelsLast convert_ = nullptr;
  Bf16PairsChannelsLast pairs_channels_last_ = nullptr;
  StoreRow store_ = nullptr;
  bool transposed_ = false;  // x is the A side: tiles are of dW^T
  View a_, b_;               // [N, G*channels, pixels]: the A side (rows in place) and the B side (panels)
  int64_t a_ch_ = 0, b_ch_ = 0;  // channels per group of each side
  int64_t dst_group_ = 0, dst_row_ = 0, dst_col_ = 0;  // dW's strides for a group, a tile row, a tile column
  int64_t groups_ = 1, n_ = 0, pixels_ = 0, tasks_ = 1;
  int64_t kt_ = 0, cb_ = 0;         // tiles of mr A rows and blocks of nr B columns, per group
  int64_t run_len_ = 0, runs_ = 1;  // pixels per run (chunk, or image) and runs per pass
  int64_t run_floats_ = 0;          // floats per run in the A rows and B panels (pairs: half)
  int64_t nb_ = 1;                  // B panels packed at a time
  int64_t acc_floats_ = 0, shared_rows_floats_ = 0, panel_floats_ = 0, scratch_floats_ = 0;
  bool direct_ = false;        // the A rows read in place
  bool direct_pairs_ = false;  // ... as bf16 pair words
  bool pairs_ = false;  // bf16 pair kernels (kernels/gemm.hpp)
  bool one_pass_ = false;
  bool shared_rows_ = false;  // converted A rows made once, before the tasks
  bool split_b_ = false;      // tasks own B blocks (the B side has more channels)
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
