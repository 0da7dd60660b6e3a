// Direct kernels for grouped convolutions whose groups are small (depthwise
// C = K = 1 above all, and e.g. ResNeXt's 8 channels per group), where a GEMM
// has nothing to block over. Planning sizes the per-thread scratch and picks
// the ISA's kernel; the kernels live in src/kernels/depthwise/.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "kernels/config.hpp"
#include "impl/bias/bias_plan.hpp"
#include "impl/depthwise/depthwise_cl.hpp"
#include "impl/gemm/common.hpp"
#include "kernels/depthwise/depthwise_cl_plan.hpp"
#include "kernels/depthwise/depthwise_plan.hpp"
#include "impl/implementation.hpp"
#include "impl/nonfinite/nonfinite.hpp"
#include "impl/operand_access.hpp"
#include "impl/registry_entries.hpp"
#include "numeric/float_formats.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail {

namespace {

// The extents of g as 3D, right-aligned: a 1D layer's are the width fields,
// its depth and height 1. (Validation has made every padding >= 0.)
void set_extents(DwExtents& e, const Geometry& g) {
  int64_t* const xs[3] = {&e.xd, &e.xh, &e.xw};
  int64_t* const ys[3] = {&e.yd, &e.yh, &e.yw};
  int64_t* const ks[3] = {&e.kd, &e.kh, &e.kw};
  int64_t* const ss[3] = {&e.sd, &e.sh, &e.sw};
  int64_t* const ds[3] = {&e.dd, &e.dh, &e.dw};
  int64_t* const ps[3] = {&e.pd, &e.ph, &e.pw};
  for (int i = 0; i < g.spatial; ++i) {
    const int j = 3 - g.spatial + i;
    *xs[j] = g.xsize[i];
    *ys[j] = g.ysize[i];
    *ks[j] = g.ksize[i];
    *ss[j] = g.stride[i];
    *ds[j] = g.dilation[i];
    *ps[j] = g.pad_before[i];
  }
}

// Groups up to this many channels per side take the direct path; larger ones
// have enough reuse for the GEMM implementations.
constexpr int64_t kMaxGroupChannels = 16;
// Groups of exactly 16 -> 16 channels in 2D and 3D go to the GEMM paths too:
// side by side on the Zen 5 machine (avx512, 2 threads, all gradients, CLI
// perf mode, min of three medians), direct / GEMM time: g8 128@28 3x3 1.21,
// g16 256@14 3x3 2.10, g8 128@28 3x3 s2 2.16, g8 128@28 1x1 2.81, g4 64@56
// 3x3 0.95; but 1D g16 256 L1000 k3 0.86 and 12 -> 12 channels (g8 96@28)
// 0.75, which stay here.
constexpr int64_t kGemmGroupChannels = 16;

using TaskFn = void (*)(const DwPlan&, const void*, const void*, void*, int64_t, float*);

class DepthwiseKernel final : public OpKernel {
 public:
  DepthwiseKernel(const DwPlan& p, TaskFn fn, int threads) : p_(p), fn_(fn), threads_(threads) {}
  size_t workspace_bytes() const override {
    return p_.scratch_floats * sizeof(float) * static_cast<size_t>(threads_);
  }
  void run(const OpArgs& args, ThreadPool& pool) const override {
    auto* ws = reinterpret_cast<float*>(args.workspace);
    // The flag travels in the plan's operand views, which every load reads
    // (a copy on the stack, in the rare case only).
    DwPlan flagged;
    if (args.zero_nonfinite) {
      flagged = p_;
      flagged.a.zero_nonfinite = flagged.b.zero_nonfinite = true;
    }
    const DwPlan& p = args.zero_nonfinite ? flagged : p_;
    pool.parallel_for(p_.tasks, threads_, [&](int64_t t, int th) {
      fn_(p, args.a, args.b, args.dst, t, ws + static_cast<size_t>(th) * p_.scratch_floats);
    });
  }

 private:
  DwPlan p_;
  TaskFn fn_;
  int threads_;
};

bool supported_dtype(DataType t) { return t == DataType::f32 || t == DataType::f16 || t == DataType::bf16; }

DwView view_of(const View& v, int spatial) {
  DwView d;
  d.dtype = v.dtype;
  d.off = v.offset;
  d.sn = v.strides[0];
  d.sc = v.strides[1];
  int64_t* s[3] = {&d.sd, &d.sh, &d.sw};
  for (int i = 0; i < spatial; ++i) *s[3 - spatial + i] = v.strides[2 + i];
  return d;
}

// What both depthwise paths take: a convolution (not the bias sum) whose
// three tensors are f32, f16 or bf16.
bool convolution_with_narrow_floats(const OpSpec& op, std::string* why) {
  if (op.op == Op::bias) {
    *why = "not a convolution";
    return false;
  }
  for (const View* v : {&op.a, &op.b, &op.dst})
    if (!supported_dtype(v->dtype)) {
      *why = "dtype " + std::string(to_string(v->dtype)) + " is not f32, f16 or bf16";
      return false;
    }
  return true;
}

// Both depthwise paths keep a table per phase of the width stride, so a
// hostile stride (a fuzz finding: 2.4e10 allocated 2 GiB of tables at plan
// time) is declined; such layers are left to the GEMM and reference paths.
bool width_stride_fits(const Geometry& g, std::string* why) {
  const int64_t sw = g.stride[g.spatial - 1];
  if (sw <= kDwMaxKw) return true;
  *why = "width stride " + std::to_string(sw) + " exceeds " + std::to_string(kDwMaxKw);
  return false;
}

// The per-thread scratch of both paths: regions one after another, each
// starting on a 64-byte boundary (relative to the scratch start), sized in
// checked arithmetic. A region's offset is only meaningful once fits() said
// the whole layout is representable and within the workspace budget.
class ScratchLayout {
 public:
  size_t region(Checked floats) {
    const int64_t start = at_.value_or(0);
    at_ = at_ + floats.rounded_up(16);
    return static_cast<size_t>(start);
  }
  bool fits(const OpSpec& op, const PlanContext& ctx, int threads, std::string* why) const {
    const Checked bytes = at_ * static_cast<int64_t>(sizeof(float));
    if (!(bytes * threads).at_most(workspace_budget(op, ctx))) {
      *why = "per-thread scratch of " + (bytes.ok() ? std::to_string(bytes.value()) : std::string("over 2^63")) +
             " bytes exceeds the workspace budget";
      return false;
    }
    return true;
  }
  size_t floats() const { return static_cast<size_t>(at_.value()); }

 private:
  Checked at_{0};
};

std::unique_ptr<OpKernel> plan_depthwise(const OpSpec& op, const PlanContext& ctx, std::string* why) {
  const Geometry& g = op.geo;
  if (!convolution_with_narrow_floats(op, why)) return nullptr;
  if (g.c > kMaxGroupChannels || g.k > kMaxGroupChannels) {
    *why = "groups of " + std::to_string(g.c) + " -> " + std::to_string(g.k) + " channels exceed " +
           std::to_string(kMaxGroupChannels) + "; a GEMM path suits them";
    return nullptr;
  }
  if (g.c >= kGemmGroupChannels && g.k >= kGemmGroupChannels && g.spatial >= 2) {
    *why = "groups of " + std::to_string(g.c) + " -> " + std::to_string(g.k) +
           " channels in 2D/3D run faster on a GEMM path";
    return nullptr;
  }
  if (g.ksize[g.spatial - 1] > kDwMaxKw) {
    *why = "kernel width " + std::to_string(g.ksize[g.spatial - 1]) + " exceeds " + std::to_string(kDwMaxKw);
    return nullptr;
  }
  if (!width_stride_fits(g, why)) return nullptr;
  if (reduction_length(op) == 0 || op.a.empty() || op.b.empty() || op.dst.empty() || g.spatial < 1 ||
      g.spatial > 3) {
    *why = "empty extents are left to the zeros and reference paths";
    return nullptr;
  }
  if (!tap_indices_fit(g, why)) return nullptr;

  DwPlan p;
  p.op = op.op;
  p.rounding = op.rounding;
  p.n = g.n;
  p.groups = g.groups;
  p.c = g.c;
  p.k = g.k;
  const int sp = g.spatial;
  set_extents(p, g);
  if (p.kd * p.kh > kDwMaxRowTaps) {
    *why = "more than " + std::to_string(kDwMaxRowTaps) + " depth x height kernel taps";
    return nullptr;
  }
  p.a = view_of(op.a, sp);
  p.b = view_of(op.b, sp);
  p.dst = view_of(op.dst, sp);

  // The tier's vector width: the kernels tile rows by it.
  const DepthwiseKernels& kernels = kernel_config(ctx.isa).depthwise;
  const int64_t W = kernels.lanes;
  p.lanes = W;
  const int64_t ks = p.kd * p.kh * p.kw;
  p.yw_pad = dw_round_up(p.yw, W);
  p.amax = (p.kw - 1) * p.dw / p.sw;
  p.lq = p.yw_pad + p.amax;
  p.ly = (p.pw + p.xw - 1) / p.sw + 1 + W + p.amax;
  p.phase_pad = dw_round_up(p.xw / p.sw + 1, W);
  p.xw_pad = dw_round_up(p.xw, W);
  for (int64_t rw = 0; rw < p.kw; ++rw) {
    const int64_t t = rw * p.dw;
    p.tap_phase[rw] = t % p.sw;
    p.tap_shift[rw] = t / p.sw;
    p.xoff[rw] = p.tap_phase[rw] * p.lq + p.tap_shift[rw];
  }
  {
    // oh*sh - ph >= 0 and oh*sh - ph + (kh-1)*dh <= xh - 1.
    p.inner_lo = std::min(p.yh, (p.ph + p.sh - 1) / p.sh);
    const int64_t top = p.xh - 1 + p.ph - (p.kh - 1) * p.dh;
    p.inner_hi = top < 0 ? 0 : std::min(p.yh, top / p.sh + 1);
    p.inner_hi = std::max(p.inner_hi, p.inner_lo);
  }
  int64_t ntap = 0;
  for (int64_t q = 0; q < p.sw; ++q) {
    p.phase_tap_begin[q] = ntap;
    for (int64_t rw = 0; rw < p.kw; ++rw)
      if (p.tap_phase[rw] == q) p.phase_taps[ntap++] = rw;
  }
  p.phase_tap_begin[p.sw] = ntap;
  for (int64_t q = 0; q < p.sw; ++q) {
    // Padded columns j = m*sw + q inside [pw, pw + xw).
    const int64_t lo = q >= p.pw ? 0 : (p.pw - q + p.sw - 1) / p.sw;
    const int64_t end = p.pw + p.xw - q;  // columns j - q < end
    const int64_t hi = end > 0 ? (end - 1) / p.sw + 1 : 0;
    p.phase_lo[q] = lo;
    p.phase_count[q] = std::max<int64_t>(0, hi - lo);
  }
  const int threads = std::max(1, ctx.threads);

  // Scratch sizes in checked arithmetic: a broadcast view of 2^57 pixels
  // wrapped c*xd*xh*sw*lq to 0 (a heap overflow at execute).
  Checked x_f(0), y_f(0), w_f(0), acc_f(0);
  if (op.op == Op::bwd_weights) {
    // Each task owns out-channels of one group over all of N, so no sum is
    // ever split between threads. Split K only when groups alone cannot
    // keep every thread busy.
    const int64_t want = std::min<int64_t>(p.k, (2 * threads + p.groups - 1) / p.groups);
    p.kblock = (p.k + want - 1) / want;
    p.tasks = p.groups * ((p.k + p.kblock - 1) / p.kblock);
    x_f = Checked(p.c) * p.xd * p.xh * p.sw * p.lq;
    y_f = Checked(p.kblock) * p.yd * p.yh * p.yw_pad;
    acc_f = Checked(p.kblock) * p.c * ks * W;
  } else {
    p.tasks = p.n * p.groups;
    w_f = Checked(p.k) * p.c * ks;
    if (op.op == Op::fwd)
      x_f = Checked(p.c) * p.xd * p.xh * p.sw * p.lq;
    else
      y_f = Checked(p.k) * p.yd * p.yh * p.ly;
  }
  p.row_len = dw_round_up(std::max({p.yw_pad, p.xw_pad, p.kw}) + 2 * W, 16);
  const int64_t row_f = 2 * p.row_len;
  // Also the tmp of packing: a padded x row of sw*lq columns, or an x row.
  const int64_t phase_f = std::max({p.sw * p.phase_pad, p.sw * p.lq, p.xw}) + W;
  // Regions start on 64-byte boundaries (relative to the scratch start).
  ScratchLayout layout;
  p.off_x = layout.region(x_f);
  p.off_y = layout.region(y_f);
  p.off_w = layout.region(w_f);
  p.off_row = layout.region(Checked(row_f));
  p.off_phase = layout.region(Checked(phase_f));
  p.off_acc = layout.region(acc_f);
  if (!layout.fits(op, ctx, threads, why)) return nullptr;
  p.scratch_floats = layout.floats();
  return std::make_unique<DepthwiseKernel>(p, kernels.task, threads);
}

class DepthwiseClKernel final : public OpKernel {
 public:
  DepthwiseClKernel(DwClPlan p, const DwClKernels& kernels, Isa isa, int threads)
      : p_(std::move(p)), kernels_(kernels), isa_(isa), threads_(threads) {
    // The variants are built here, so that execute copies nothing (the plan
    // holds vectors: a copy would allocate).
    p_nonfinite_ = p_;
    p_nonfinite_.a.zero_nonfinite = p_nonfinite_.b.zero_nonfinite = true;
    p_report_ = p_;
    p_report_.report_nonfinite = true;
  }
  size_t workspace_bytes() const override {
    return p_.scratch_floats * sizeof(float) * static_cast<size_t>(threads_);
  }
  // Every task checks the fp32 planes it packs (any_nonfinite), in cache.
  NonfiniteMode nonfinite_mode() const override { return NonfiniteMode::report; }
  void run(const OpArgs& args, ThreadPool& pool) const override {
    auto* ws = reinterpret_cast<float*>(args.workspace);
    const DwClPlan& p = args.zero_nonfinite ? p_nonfinite_ : args.found ? p_report_ : p_;
    NonfiniteSeen seen;
    pool.parallel_for(p_.tasks, threads_, [&](int64_t t, int th) {
      const unsigned f =
          kernels_.task(p, args.a, args.b, args.dst, t, ws + static_cast<size_t>(th) * p_.scratch_floats);
      seen.add((f & kNonfiniteA) != 0, (f & kNonfiniteB) != 0);
    });
    seen.report(args.found);
  }

  // For fuse_depthwise_cl.
  const DwClPlan& reporting_plan() const { return p_report_; }
  const DwClKernels& kernels() const { return kernels_; }
  Isa isa() const { return isa_; }
  int threads() const { return threads_; }

 private:
  // p_nonfinite_ reads NaN and +-Inf as 0 (OpArgs::zero_nonfinite);
  // p_report_ checks for them (OpArgs::found).
  DwClPlan p_, p_nonfinite_, p_report_;
  DwClKernels kernels_;
  Isa isa_;
  int threads_;
};

using ClFusedFn = decltype(DwClKernels::fused);

// depthwise_cl's gradients in one pass: one task per channel block over
// every image (the weight gradient's tasks), each image's dy plane packed
// once for all of them (see DwClKernel::fused).
class DepthwiseClFusedKernel final : public FusedKernel {
 public:
  DepthwiseClFusedKernel(DwClFusedPlan p, ClFusedFn fn, int threads) : p_(std::move(p)), fn_(fn), threads_(threads) {}
  std::string_view name() const override { return "depthwise_cl_fused"; }
  size_t workspace_bytes() const override { return p_.scratch_floats() * sizeof(float) * static_cast<size_t>(threads_); }
  std::array<bool, 3> covers() const override { return {true, true, p_.bias}; }
  bool run(const FusedArgs& args, ThreadPool& pool) const override {
    auto* ws = reinterpret_cast<float*>(args.workspace);
    std::atomic<bool> nonfinite{false};
    pool.parallel_for(p_.data.blocks, threads_, [&](int64_t t, int th) {
      if (fn_(p_, args.grad_output, args.input, args.weight, args.dst.data(), t,
              ws + static_cast<size_t>(th) * p_.scratch_floats()))
        nonfinite.store(true, std::memory_order_relaxed);
    });
    return !nonfinite.load();
  }

 private:
  DwClFusedPlan p_;
  ClFusedFn fn_;
  int threads_;
};

// Grouped layers take the channel-blocked path when a group has 6 to 8
// channels on both sides (ResNeXt: 8 -> 8), in 8-lane blocks (see
// channel_blocks_for), whose lanes they fill at least 6 of; on a tier
// with 16-lane blocks also 6 to 16 a side with more than 8 on one, in those
// (wide_groups_fit). Smaller groups waste lanes there and vectorize better
// along the rows (depthwise_direct).
constexpr int64_t kClMinGroup = 6, kClMaxGroup = 8, kClMaxWideGroup = 16;

// The least time a tier's wide channel blocks save per lane over its 8-lane
// ones (see depthwise_cl_kernels_for).
constexpr double kClWideGain = 1.1;

}  // namespace

// The channel-blocked kernels for a depthwise layer, on a tier that has two
// widths: the wide blocks unless the fused pass's tasks (one per block)
// would then leave threads idle for longer than the wide kernels gain: one
// 16-lane block took 1.03x-1.32x less time than two 8-lane ones (1 thread,
// 7x7 to 112x112 planes, 1D and 3D), but 144 channels make 9 blocks of 16
// for 2 threads, 5 rounds against 4.5 (0.88x measured). The two widths give
// the same bits, so choosing by the thread count keeps results independent
// of it. Where narrow_planes_suit, the narrow blocks.
const DwClKernels& depthwise_cl_kernels_for(int64_t groups, int threads, const DepthwiseKernels& k,
                                            bool narrow_planes) {
  if (k.cl_narrow.lanes == 0) return k.cl;
  if (narrow_planes) return k.cl_narrow;
  auto rounds = [&](int64_t lanes) { return ceil_div(ceil_div(groups, lanes), threads); };
  const double wide = static_cast<double>(rounds(k.cl.lanes) * k.cl.lanes);
  const double narrow = static_cast<double>(rounds(k.cl_narrow.lanes) * k.cl_narrow.lanes);
  return wide <= kClWideGain * narrow ? k.cl : k.cl_narrow;
}

// On a CPU that runs 512-bit operations in halves (Zen 4), a 16-lane block
// does per element what an 8-lane one does, on planes twice the size: from
// 56x56 pixels per channel up, the 8-lane blocks ran faster there
// (alternated, 2 threads, all gradients, fp32: 56x56 1.05x-1.11x, 112x112
// 1.20x, 112x112 stride 2 1.03x-1.15x, 3D 16x28x28 1.11x-1.15x, 1D 4000
// 1.05x; bf16 112x112 1.04x-1.09x and 56x56 1.02x-1.03x on one thread), and
// smaller ones slower (28x28 even, 14x14 0.89x, 7x7 0.96x, 1D 1000 0.97x, 28x28
// stride 2 0.88x). On a Zen 5 the 16-lane blocks were the faster at every
// size (56x56 1.10x, 112x112 1.08x, one thread).
constexpr int64_t kNarrowPlanePixels = 56 * 56;
// The most bytes of 16-bit output planes buffered in fp32 (about L1).
constexpr int64_t kL1PlaneBytes = 32 * 1024;

bool narrow_planes_suit(const Geometry& g, const PlanContext& ctx) {
  return ctx.zmm_in_halves && g.x_spatial() >= kNarrowPlanePixels;
}

namespace {

bool both_sides_in(const Geometry& g, int64_t lo, int64_t hi) {
  return g.c >= lo && g.c <= hi && g.k >= lo && g.k <= hi;
}

// Whether the 16-lane blocks of a tier that has them take a grouped layer
// of 6 to 16 channels a side with more than 8 on one (g8 128@28: 16 -> 16),
// one group per block. All three gradients, 2 threads, against the 16x16
// GEMM tiles (16 -> 16 in 2D/3D) or the row-vectorized direct kernels (the
// rest): g8 128@28 fp32 1.13x, fp16 1.16x; 9 to 12 channels 1.6x-1.9x; 8 ->
// 16 1.31x, 16 -> 8 2.06x; 1D 1.2x-1.8x; 3D 1.23x. bf16 operands that the
// GEMMs multiply as pairs (vdpbf16ps) ran 0.92x here, widened to fp32, so
// they stay there.
bool wide_groups_fit(const OpSpec& op, const KernelConfig& cfg) {
  return cfg.depthwise.cl.lanes >= kClMaxWideGroup && both_sides_in(op.geo, kClMinGroup, kClMaxWideGroup) &&
         !both_sides_in(op.geo, kClMinGroup, kClMaxGroup) && !gemm::bf16_pairs(op, cfg);
}

// The channel blocks a layer runs in, or nullptr when its groups fit none:
// depthwise by depthwise_cl_kernels_for; groups of 6 to 8 channels a side in
// the 8-lane blocks, whose lanes they fill at least 6 of (in 16 lanes
// ResNeXt g32 ran 0.90x); larger ones where wide_groups_fit says.
const DwClKernels* channel_blocks_for(const OpSpec& op, const KernelConfig& cfg, const PlanContext& ctx,
                                     int threads) {
  const Geometry& g = op.geo;
  const DepthwiseKernels& k = cfg.depthwise;
  if (g.c == 1 && g.k == 1) return &depthwise_cl_kernels_for(g.groups, threads, k, narrow_planes_suit(g, ctx));
  if (wide_groups_fit(op, cfg)) return &k.cl;
  if (both_sides_in(g, kClMinGroup, kClMaxGroup)) return k.cl_narrow.lanes ? &k.cl_narrow : &k.cl;
  return nullptr;
}

// Whether a depthwise output of `bytes` is written with ordinary stores, to
// stay in the last-level cache for the layer that reads it next, rather than
// streamed past it: when the pass's working set (the output, dy and x, each
// at most about its size) fits in half that cache. Alternated against
// streaming on a Zen 4 (32 MiB L3, 2 threads, all gradients, warm caches):
// 4.8 MB outputs (MobileNet dw 96@56 N4, dw s2 192@28 N8) ran 1.05x-1.11x
// faster; 7.2 MB (dw 144@56 N4) 0.96x-1.00x, 9.6 MB 0.86x-0.94x and 14.4 MB
// 0.85x-0.87x, so those stream.
bool fits_in_cache(Checked bytes, const PlanContext& ctx) {
  return ctx.llc_bytes > 0 && bytes.at_most(ctx.llc_bytes / 6);
}

// Channel-blocked plan for depthwise and small-group layers (see
// kernels/depthwise/depthwise_cl_plan.hpp).
std::unique_ptr<OpKernel> plan_depthwise_cl(const OpSpec& op, const PlanContext& ctx, std::string* why) {
  const Geometry& g = op.geo;
  if (!convolution_with_narrow_floats(op, why)) return nullptr;
  const KernelConfig& cfg = kernel_config(ctx.isa);
  const int threads = std::max(1, ctx.threads);
  const DwClKernels* blocks = channel_blocks_for(op, cfg, ctx, threads);
  if (!blocks) {
    *why = "groups of " + std::to_string(g.c) + " -> " + std::to_string(g.k) +
           " channels; this path takes one channel per group, 6 to 8 on each side, or up to 16 on a tier "
           "with 16-lane blocks unless the GEMMs multiply the operands as bf16 pairs";
    return nullptr;
  }
  if (reduction_length(op) == 0 || op.a.empty() || op.b.empty() || op.dst.empty() || g.spatial < 1 ||
      g.spatial > 3) {
    *why = "empty extents are left to the zeros and reference paths";
    return nullptr;
  }
  if (!width_stride_fits(g, why)) return nullptr;
  // Strides or paddings of 2^56 and more overflowed the padded plane's
  // extents below (wrong results, reads out of bounds).
  if (!tap_indices_fit(g, why)) return nullptr;
  const bool grouped = !(g.c == 1 && g.k == 1);
  const DwClKernels& kernels = *blocks;
  const int64_t W = kernels.lanes;
  DwClPlan p;
  p.lanes = W;
  p.store_rows = cfg.store_rows;
  p.op = op.op;
  p.rounding = op.rounding;
  p.n = g.n;
  p.groups = g.groups;
  p.blocks = grouped ? g.groups : (g.groups + W - 1) / W;
  p.grouped = grouped;
  p.cg = g.c;
  p.kg = g.k;
  p.cin = op.op == Op::bwd_data ? g.k : g.c;
  p.cout = op.op == Op::fwd ? g.k : g.c;
  const int sp = g.spatial;
  set_extents(p, g);
  const int64_t ks = p.kd * p.kh * p.kw;
  if (p.kd * p.kh > kDwMaxRowTaps || ks > 4096) {
    *why = "more than " + std::to_string(kDwMaxRowTaps) + " depth x height kernel taps or 4096 taps";
    return nullptr;
  }
  p.a = view_of(op.a, sp);
  p.b = view_of(op.b, sp);
  p.dst = view_of(op.dst, sp);
  p.yw_round = dw_round_up(p.yw, W);
  p.xw_round = dw_round_up(p.xw, W);
  // Padded extent of x read by the taps: (y-1)*s + (k-1)*d + 1.
  auto xspan = [](int64_t y, int64_t s, int64_t k, int64_t d) { return (y - 1) * s + (k - 1) * d + 1; };
  // dy leading padding A = ceil(max(0, (k-1)*d - p) / s), so that every tap
  // reads dy column (i + p - r*d)/s + A >= 0; extent (x-1+p)/s + A + 1.
  auto ylead = [](int64_t s, int64_t k, int64_t d, int64_t pad) {
    return std::max<int64_t>(0, (k - 1) * d - pad + s - 1) / s;
  };
  if (op.op == Op::bwd_data) {
    p.bd = ylead(p.sd, p.kd, p.dd, p.pd);
    p.bh = ylead(p.sh, p.kh, p.dh, p.ph);
    p.bw = ylead(p.sw, p.kw, p.dw, p.pw);
    // Every dy row, also those that padding after the data keeps out of
    // dx's reach: the fused pass's weight gradient and bias read them here.
    p.ld = std::max((p.xd - 1 + p.pd) / p.sd + p.bd + 1, p.bd + p.yd);
    p.lh = std::max((p.xh - 1 + p.ph) / p.sh + p.bh + 1, p.bh + p.yh);
    const int64_t lw = (p.xw - 1 + p.pw) / p.sw + p.bw + 1;
    p.srcd = p.yd;
    p.srch = p.yh;
    p.srcw = p.yw;
    p.srcw_round = p.yw_round;
    p.rw = std::max(lw, p.bw + p.srcw_round);
    for (int64_t q = 0; q < p.sw; ++q) {
      // dx columns i = m*sw + q - pw in [0, xw).
      const int64_t lo = q >= p.pw ? 0 : (p.pw - q + p.sw - 1) / p.sw;
      const int64_t end = p.pw + p.xw - q;
      const int64_t hi = end > 0 ? (end - 1) / p.sw + 1 : 0;
      p.phase_lo.push_back(lo);
      p.phase_count.push_back(std::max<int64_t>(0, hi - lo));
      p.phase_begin.push_back(static_cast<int64_t>(p.phase_tap.size()));
      for (int64_t r = 0; r < p.kw; ++r)
        if (r * p.dw % p.sw == q) {
          p.phase_tap.push_back(r);
          p.phase_shift.push_back(p.bw - (r * p.dw - q) / p.sw);
        }
    }
    p.phase_begin.push_back(static_cast<int64_t>(p.phase_tap.size()));
  } else {
    p.bd = p.pd;
    p.bh = p.ph;
    p.bw = p.pw;
    p.ld = xspan(p.yd, p.sd, p.kd, p.dd);
    p.lh = xspan(p.yh, p.sh, p.kh, p.dh);
    const int64_t lw = xspan(p.yw, p.sw, p.kw, p.dw);
    p.srcd = p.xd;
    p.srch = p.xh;
    p.srcw = p.xw;
    p.srcw_round = p.xw_round;
    p.rw = std::max(lw, p.bw + p.srcw_round);
    // Each tap's offset lies inside the padded plane, so the plane's size
    // bounds them: check it first (a fuzz finding: 2^31 * 2^36 overflowed).
    if (!(Checked(p.ld) * p.lh * p.rw * W).ok()) {
      *why = "the padded plane's size overflows 64 bits";
      return nullptr;
    }
    for (int64_t rd = 0; rd < p.kd; ++rd)
      for (int64_t rh = 0; rh < p.kh; ++rh)
        for (int64_t r = 0; r < p.kw; ++r)
          p.toff.push_back(((rd * p.dd * p.lh + rh * p.dh) * p.rw + r * p.dw) * W);
  }
  p.tasks = op.op == Op::bwd_weights ? p.blocks : p.n * p.blocks;
  ScratchLayout layout;
  const bool wgrad = op.op == Op::bwd_weights;
  const int64_t out_row = op.op == Op::fwd ? p.yw_round : p.xw_round;
  p.off_in = layout.region(Checked(p.ld) * p.lh * p.rw * W);
  p.off_y = layout.region(wgrad ? Checked(p.yd) * p.yh * p.yw_round * W : Checked(0));
  p.off_w = layout.region(Checked(wgrad ? 0 : ks * p.cin * W));
  p.off_row = layout.region(Checked(wgrad ? 0 : out_row * W));
  // tmp: an output row on its way back to NCHW (W channel rows of yw_round or
  // xw_round), or a weight row's kw values. Packing reads straight into registers.
  p.off_tmp = layout.region(Checked(W) * std::max({p.yw_round, p.xw_round, dw_round_up(p.kw, W)}));
  p.off_acc = layout.region(Checked(wgrad ? ks * p.kg * W : 0));
  p.off_wtmp = layout.region(Checked(wgrad ? 0 : (grouped ? p.kg : W) * p.cg * ks));
  {
    const DwView& v = p.b;
    p.w_dense = (p.kw == 1 || v.sw == 1) && (p.kh == 1 || v.sh == p.kw) && (p.kd == 1 || v.sd == p.kh * p.kw) &&
                (p.cg == 1 || v.sc == ks) && v.sn == p.cg * ks;
  }
  if (op.op != Op::bwd_weights) {
    const int64_t od = op.op == Op::fwd ? p.yd : p.xd, oh = op.op == Op::fwd ? p.yh : p.xh;
    const int64_t ow = op.op == Op::fwd ? p.yw : p.xw;
    const bool planes_contiguous = p.dst.sw == 1 && (oh == 1 || p.dst.sh == ow) && (od == 1 || p.dst.sd == oh * ow);
    // W planes plus the slack one row's vector tail spills into; beyond
    // about 1 MiB the buffer would leave L2 and row mode is as good.
    const Checked stride = (Checked(od) * oh * ow).rounded_up(16) + 16;
    // A 16-bit output's planes narrow whole, as one row each, where row
    // mode narrows each output row apart with its pixel tail through a
    // partial store; but only while the buffer stays in L1, since it costs
    // a pass of its own. fp16 gradInputs, 1 thread of a Zen 3, against row
    // mode: dw s2 192@28 (25 KB of planes) 1.11x, 384@14 1.16x, 960@7
    // 1.19x; 96@56 (100 KB) 0.95x, 96@57 level, 32@112 (400 KB) 0.86x.
    const int64_t max_floats = p.dst.dtype == DataType::f32 ? (int64_t{1} << 20) / 4
                               : p.dst.dtype == DataType::f16 || p.dst.dtype == DataType::bf16 ? kL1PlaneBytes / 4
                                                                                               : 0;
    if (planes_contiguous && stride.at_most(max_floats / W)) {
      p.plane_stride = stride.value();
      p.off_plane = layout.region(Checked(W) * stride);
      p.stream_planes =
          p.dst.dtype == DataType::f32 && !fits_in_cache(Checked(p.n) * p.groups * p.cout * od * oh * ow * 4, ctx);
    }
  }
  if (!layout.fits(op, ctx, threads, why)) return nullptr;
  p.scratch_floats = layout.floats();
  return std::make_unique<DepthwiseClKernel>(std::move(p), kernels, ctx.isa, threads);
}

}  // namespace

std::unique_ptr<FusedKernel> fuse_depthwise_cl(const OpKernel& data, const OpKernel& weights, const OpKernel* bias) {
  const auto* kd = dynamic_cast<const DepthwiseClKernel*>(&data);
  const auto* kw = dynamic_cast<const DepthwiseClKernel*>(&weights);
  if (!kd || !kw) return nullptr;
  DwClFusedPlan p;
  p.data = kd->reporting_plan();
  p.weights = kw->reporting_plan();
  const DwClPlan& pd = p.data;
  const DwClPlan& pw = p.weights;
  // A transposed layer's data gradient is a forward convolution (Op::fwd),
  // which reads x-shaped planes: nothing to share. The weight gradient reads
  // the data gradient's dy values, so they must be rounded alike.
  if (pd.op != Op::bwd_data || pw.op != Op::bwd_weights || pd.grouped != pw.grouped || pd.lanes != pw.lanes ||
      pd.blocks != pw.blocks || pd.rounding != pw.rounding || pd.a.dtype != pw.a.dtype || kd->isa() != kw->isa() ||
      kd->threads() != kw->threads())
    return nullptr;
  // The weight gradient and the bias read every dy row of the data plane.
  if (pd.ld < pd.bd + pd.yd || pd.lh < pd.bh + pd.yh) return nullptr;
  // gradBias too when its sum is bias_reduce's single-chunk order over the
  // same fp32 values (no operand rounding: the bias sums dy as it is).
  if (const BiasPlan* b = bias ? bias_plan_of(*bias) : nullptr;
      b && b->chunks == 1 && b->dtype == pd.a.dtype && pd.rounding == OperandRounding::none) {
    p.bias = true;
    p.bias_lanes = b->lanes;
    p.bias_out.dtype = b->out_dtype;
    p.bias_out.off = b->out_off;
    p.bias_out.sw = b->out_stride;
  }
  // Every thread's scratch, within what every workspace budget allows.
  const double bytes = static_cast<double>(p.scratch_floats()) * sizeof(float) * kd->threads();
  if (bytes > static_cast<double>(kWorkspaceBudgetFloor)) return nullptr;
  return std::make_unique<DepthwiseClFusedKernel>(std::move(p), kd->kernels().fused, kd->threads());
}

const Implementation kDepthwiseDirectImpl = {"depthwise_direct", &plan_depthwise};
const Implementation kDepthwiseClImpl = {"depthwise_cl", &plan_depthwise_cl};

}  // namespace convbwd::detail
