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
    kern_ = kernels_for(ctx.isa).gather;
    convert_ = kernels_for(ctx.isa).convert;
    store_ = kernels_for(ctx.isa).store;
    groups_ = g.groups;
    n_ = g.n;
    k_ = g.k;
    c_ = g.c;
    pixels_ = 1;
    for (int d = 0; d < g.spatial; ++d) pixels_ *= g.xsize[d];
    kt_ = ceil_div(k_, kMr);
    cb_ = ceil_div(c_, kNr);
    // fp32 operands without rounding are read in place; anything else is
    // converted (and rounded) into a per-thread copy of the task's dy rows.
    direct_ = op.a.dtype == DataType::f32 && op.rounding == OperandRounding::none;
    // Two tasks per thread when there are enough k-tiles (c-blocks): each
    // task reads its dy rows once and packs every x chunk (of its c-blocks)
    // once.
    split_c_ = c_ > k_ && groups_ * cb_ >= 2 * threads_;
    tasks_ = std::min<int64_t>(groups_ * (split_c_ ? cb_ : kt_), 2 * threads_);
    acc_floats_ = round_up(groups_ * kt_ * cb_ * kMr * kNr, kAlignFloats);
    // Converted dy rows: the task's k-tiles, or (splitting c) one group's.
    const int64_t rows_per_task = (split_c_ ? kt_ : ceil_div(groups_ * kt_, tasks_)) * kMr;
    scratch_floats_ = round_up(kChunk * kNr + (direct_ ? 0 : rows_per_task * kChunk), kAlignFloats);
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(acc_floats_ + threads_ * scratch_floats_) * sizeof(float);
  }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    float* const acc = reinterpret_cast<float*>(args.workspace);
    float* const scratch = acc + acc_floats_;
    pool.parallel_for(tasks_, threads_, [&](int64_t t, int thread) {
      compute(args, acc, scratch + thread * scratch_floats_, t);
    });
  }

 private:
  // Pixels per chunk: a 16-channel x panel of 256 pixels is 16 KB (L1), and
  // a tile's 256 steps make its accumulator loads and stores noise.
  static constexpr int64_t kChunk = 256;

  // Task `task`: a range of (group, k-tile) units with every c-block of
  // each, or (split_c_) a range of (group, c-block) columns with every
  // k-tile of each.
  void compute(const OpArgs& args, float* acc, float* scratch, int64_t task) const {
    const int64_t span = groups_ * (split_c_ ? cb_ : kt_);
    const int64_t lo = span * task / tasks_, hi = span * (task + 1) / tasks_;
    if (lo >= hi) return;
    const View& a = op_.a;  // dy [N, G*K, pixels]
    const View& b = op_.b;  // x  [N, G*C, pixels]
    float* const panel = scratch;
    float* const rows = scratch + kChunk * kNr;  // converted dy rows [unit - rows_lo][6][kChunk]
    MicroArgs ka;
    const int64_t zero = 0;
    int64_t len = 0;
    ka.a_off = &zero;
    ka.b_off = &zero;
    ka.len = &len;
    ka.runs = 1;
    ka.bs = kNr;
    ka.b = panel;
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t p0 = 0; p0 < pixels_; p0 += kChunk) {
        len = std::min(kChunk, pixels_ - p0);
        ka.accumulate = !(n == 0 && p0 == 0);
        // Converts the dy rows of units [u0, u1) (unless read in place).
        auto convert_rows = [&](int64_t u0, int64_t u1) {
          for (int64_t u = u0; u < u1; ++u)
            for (int i = 0; i < kMr; ++i) {
              const int64_t k = std::min((u % kt_) * kMr + i, k_ - 1);  // rows past K repeat a real row
              const int64_t src = a.offset + n * a.strides[0] + ((u / kt_) * k_ + k) * a.strides[1] + p0;
              // One "pixel" of len unit-stride "channels": the converter's
              // plain vector copy (its pixel stride is unused for one pixel).
              convert_(args.a, a.dtype, op_.rounding, src, 1, kChunk, len, 1, rows + ((u - u0) * kMr + i) * kChunk,
                       kChunk);
            }
        };
        // x panel [p][16] of channels cb*16.. of group g; zero past C.
        auto pack_panel = [&](int64_t g, int64_t cb) {
          const int64_t nc = std::min<int64_t>(kNr, c_ - cb * kNr);
          convert_(args.b, b.dtype, op_.rounding, b.offset + n * b.strides[0] + (g * c_ + cb * kNr) * b.strides[1] + p0,
                   b.strides[1], 1, nc, len, panel, kNr);
          if (nc < kNr)
            for (int64_t p = 0; p < len; ++p) std::fill(panel + p * kNr + nc, panel + (p + 1) * kNr, 0.0f);
        };
        // Tile (unit u, c-block cb) over this chunk; rows_lo: the unit
        // whose converted rows start the rows buffer.
        auto tile = [&](int64_t u, int64_t cb, int64_t rows_lo) {
          for (int i = 0; i < kMr; ++i) {
            if (direct_) {
              const int64_t k = std::min((u % kt_) * kMr + i, k_ - 1);
              ka.a[i] = static_cast<const float*>(args.a) + a.offset + n * a.strides[0] +
                        ((u / kt_) * k_ + k) * a.strides[1] + p0;
            } else {
              ka.a[i] = rows + ((u - rows_lo) * kMr + i) * kChunk;
            }
          }
          ka.acc = acc + (u * cb_ + cb) * kMr * kNr;
          kern_(ka);
        };
        if (split_c_) {
          int64_t rows_g = -1;
          for (int64_t col = lo; col < hi; ++col) {
            const int64_t g = col / cb_, cb = col % cb_;
            pack_panel(g, cb);
            if (!direct_ && g != rows_g) convert_rows(g * kt_, (g + 1) * kt_), rows_g = g;
            for (int64_t u = g * kt_; u < (g + 1) * kt_; ++u) tile(u, cb, g * kt_);
          }
        } else {
          if (!direct_) convert_rows(lo, hi);
          for (int64_t cb = 0; cb < cb_; ++cb) {
            int64_t g_panel = -1;
            for (int64_t u = lo; u < hi; ++u) {
              if (u / kt_ != g_panel) pack_panel(g_panel = u / kt_, cb);
              tile(u, cb, lo);
            }
          }
        }
      }
    // Store this task's tiles.
    if (split_c_) {
      for (int64_t col = lo; col < hi; ++col)
        for (int64_t u = col / cb_ * kt_; u < (col / cb_ + 1) * kt_; ++u) store(args.dst, acc, u, col % cb_);
    } else {
      for (int64_t u = lo; u < hi; ++u)
        for (int64_t cb = 0; cb < cb_; ++cb) store(args.dst, acc, u, cb);
    }
  }

  // Stores tile (unit u, c-block cb) into the weight gradient.
  void store(void* dst, const float* acc, int64_t u, int64_t cb) const {
    const View& w = op_.dst;  // [G*K, C, 1...]
    const int64_t g = u / kt_, k0 = (u % kt_) * kMr;
    const int rows_n = static_cast<int>(std::min<int64_t>(kMr, k_ - k0));
    const int cols = static_cast<int>(std::min<int64_t>(kNr, c_ - cb * kNr));
    int64_t row_base[kMr];
    for (int i = 0; i < rows_n; ++i) row_base[i] = w.offset + (g * k_ + k0 + i) * w.strides[0] + cb * kNr * w.strides[1];
    store_tile(store_, dst, w.dtype, acc + (u * cb_ + cb) * kMr * kNr, row_base, rows_n, w.strides[1], cols);
  }

  OpSpec op_;
  int threads_ = 1;
  MicroKernel kern_ = nullptr;
  ToChannelsLast convert_ = nullptr;
  StoreRow store_ = nullptr;
  int64_t groups_ = 1, n_ = 0, k_ = 0, c_ = 0, pixels_ = 0, kt_ = 0, cb_ = 0, tasks_ = 1;
  int64_t acc_floats_ = 0, scratch_floats_ = 0;
  bool direct_ = false;
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
      if (static_cast<int64_t>(k->workspace_bytes()) > workspace_budget(op)) {
        *why = "the fp32 tiles of the whole weight gradient exceed the workspace budget";
        return nullptr;
      }
      return k;
    }};

}  // namespace convbwd::detail
