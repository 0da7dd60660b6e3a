// Direct kernels for grouped convolutions whose groups are small (depthwise
// C = K = 1 above all, and e.g. ResNeXt's 8 channels per group), where a GEMM
// has nothing to block over. Planning sizes the per-thread scratch and picks
// the ISA's kernel; the kernels live in depthwise_kernel.hpp.
#include <algorithm>
#include <memory>
#include <string>

#include "impl/depthwise/depthwise_plan.hpp"
#include "impl/implementation.hpp"
#include "impl/nonfinite/nonfinite.hpp"
#include "impl/registry_entries.hpp"
#include "numeric/float_formats.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail {

void dw_load_row_generic(const void* base, DataType dt, int64_t off, int64_t stride, int64_t n,
                         OperandRounding rounding, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = load_as_float(base, off + i * stride, dt);
    switch (rounding) {
      case OperandRounding::none: out[i] = v; break;
      case OperandRounding::hf32: out[i] = round_to_hf32(v); break;
      case OperandRounding::fp16: out[i] = round_to_fp16(v); break;
    }
  }
}

void dw_zero_nonfinite(float* p, int64_t n) { zero_nonfinite(p, n); }

void dw_store_row_generic(const float* in, int64_t n, void* base, DataType dt, int64_t off, int64_t stride) {
  for (int64_t i = 0; i < n; ++i) store_from_float(base, off + i * stride, dt, in[i]);
}

namespace {

// Groups up to this many channels per side take the direct path; larger ones
// have enough reuse for the GEMM implementations.
constexpr int64_t kMaxGroupChannels = 16;

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

size_t bytes_of(const View& v) { return static_cast<size_t>(v.elements()) * size_of(v.dtype); }

std::unique_ptr<OpKernel> plan_depthwise(const OpSpec& op, const PlanContext& ctx, std::string* why) {
  const Geometry& g = op.geo;
  if (op.op == Op::bias) {
    *why = "not a convolution";
    return nullptr;
  }
  for (const View* v : {&op.a, &op.b, &op.dst})
    if (!supported_dtype(v->dtype)) {
      *why = "dtype " + std::string(to_string(v->dtype)) + " is not f32, f16 or bf16";
      return nullptr;
    }
  if (g.c > kMaxGroupChannels || g.k > kMaxGroupChannels) {
    *why = "groups of " + std::to_string(g.c) + " -> " + std::to_string(g.k) + " channels exceed " +
           std::to_string(kMaxGroupChannels) + "; a GEMM path suits them";
    return nullptr;
  }
  if (g.ksize[g.spatial - 1] > kDwMaxKw || g.stride[g.spatial - 1] > kDwMaxKw) {
    *why = "kernel width " + std::to_string(g.ksize[g.spatial - 1]) + " or width stride " +
           std::to_string(g.stride[g.spatial - 1]) + " exceeds " + std::to_string(kDwMaxKw);
    return nullptr;
  }
  if (reduction_length(op) == 0 || op.a.empty() || op.b.empty() || op.dst.empty() || g.spatial < 1 ||
      g.spatial > 3) {
    *why = "empty extents are left to the zeros and reference paths";
    return nullptr;
  }

  DwPlan p;
  p.op = op.op;
  p.rounding = op.rounding;
  p.n = g.n;
  p.groups = g.groups;
  p.c = g.c;
  p.k = g.k;
  const int sp = g.spatial;
  int64_t* xs[3] = {&p.xd, &p.xh, &p.xw};
  int64_t* ys[3] = {&p.yd, &p.yh, &p.yw};
  int64_t* kss[3] = {&p.kd, &p.kh, &p.kw};
  int64_t* ss[3] = {&p.sd, &p.sh, &p.sw};
  int64_t* ds[3] = {&p.dd, &p.dh, &p.dw};
  int64_t* ps[3] = {&p.pd, &p.ph, &p.pw};
  for (int i = 0; i < sp; ++i) {
    const int j = 3 - sp + i;
    *xs[j] = g.xsize[i];
    *ys[j] = g.ysize[i];
    *kss[j] = g.ksize[i];
    *ss[j] = g.stride[i];
    *ds[j] = g.dilation[i];
    *ps[j] = g.pad_before[i];
  }
  if (p.kd * p.kh > kDwMaxRowTaps) {
    *why = "more than " + std::to_string(kDwMaxRowTaps) + " depth x height kernel taps";
    return nullptr;
  }
  p.a = view_of(op.a, sp);
  p.b = view_of(op.b, sp);
  p.dst = view_of(op.dst, sp);

  const int64_t W = kDwLanes;
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

  int64_t x_f = 0, y_f = 0, w_f = 0, acc_f = 0;
  if (op.op == Op::bwd_weights) {
    // Each task owns out-channels of one group over all of N, so no sum is
    // ever split between threads. Split K only when groups alone cannot
    // keep every thread busy.
    const int64_t want = std::min<int64_t>(p.k, (2 * threads + p.groups - 1) / p.groups);
    p.kblock = (p.k + want - 1) / want;
    p.tasks = p.groups * ((p.k + p.kblock - 1) / p.kblock);
    x_f = p.c * p.xd * p.xh * p.sw * p.lq;
    y_f = p.kblock * p.yd * p.yh * p.yw_pad;
    acc_f = p.kblock * p.c * ks * W;
  } else {
    p.tasks = p.n * p.groups;
    w_f = p.k * p.c * ks;
    if (op.op == Op::fwd)
      x_f = p.c * p.xd * p.xh * p.sw * p.lq;
    else
      y_f = p.k * p.yd * p.yh * p.ly;
  }
  p.row_len = dw_round_up(std::max({p.yw_pad, p.xw_pad, p.kw}) + 2 * W, 16);
  const int64_t row_f = 2 * p.row_len;
  // Also the tmp of packing: a padded x row of sw*lq columns, or an x row.
  const int64_t phase_f = std::max({p.sw * p.phase_pad, p.sw * p.lq, p.xw}) + W;
  // Regions start on 64-byte boundaries (relative to the scratch start).
  size_t at = 0;
  auto region = [&](int64_t floats) {
    const size_t start = at;
    at += static_cast<size_t>(dw_round_up(floats, 16));
    return start;
  };
  p.off_x = region(x_f);
  p.off_y = region(y_f);
  p.off_w = region(w_f);
  p.off_row = region(row_f);
  p.off_phase = region(phase_f);
  p.off_acc = region(acc_f);
  p.scratch_floats = at;

  const size_t budget = std::max<size_t>({bytes_of(op.a), bytes_of(op.b), size_t{64} << 20});
  if (p.scratch_floats * sizeof(float) * static_cast<size_t>(threads) > budget) {
    *why = "per-thread scratch of " + std::to_string(p.scratch_floats * sizeof(float)) +
           " bytes exceeds the workspace budget";
    return nullptr;
  }
  const TaskFn fn = ctx.isa >= Isa::avx2 ? &depthwise_task_avx2 : &depthwise_task_scalar;
  return std::make_unique<DepthwiseKernel>(p, fn, threads);
}

}  // namespace

const Implementation kDepthwiseDirectImpl = {"depthwise_direct", &plan_depthwise};

}  // namespace convbwd::detail
