// gradBias: the per-channel sum of gradOutput over N and space, vectorized
// along whichever summed dim is contiguous (or across channels when those
// are), in an order fixed by the problem, for any strided view.
#include <algorithm>
#include <memory>
#include <string>

#include "kernels/config.hpp"
#include "impl/bias/bias_plan.hpp"
#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"
#include "numeric/float_formats.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail {
namespace {

using TaskFn = void (*)(const BiasPlan&, const void*, void*, float*, int64_t);

class BiasKernelOp final : public OpKernel {
 public:
  BiasKernelOp(const BiasPlan& p, TaskFn fn, int threads) : p_(p), fn_(fn), threads_(threads) {}
  size_t workspace_bytes() const override {
    return p_.chunks > 1 ? static_cast<size_t>(p_.channels * p_.chunks) * sizeof(float) : 0;
  }
  void run(const OpArgs& args, ThreadPool& pool) const override {
    auto* partials = reinterpret_cast<float*>(args.workspace);
    pool.parallel_for(p_.tasks, threads_, [&](int64_t t, int) { fn_(p_, args.a, args.dst, partials, t); });
    if (p_.chunks == 1) return;
    for (int64_t ch = 0; ch < p_.channels; ++ch) {
      float s = 0;
      for (int64_t i = 0; i < p_.chunks; ++i) s += partials[ch * p_.chunks + i];
      store_from_float(args.dst, p_.out_off + ch * p_.out_stride, p_.out_dtype, s);
    }
  }
  const BiasPlan& plan() const { return p_; }

 private:
  BiasPlan p_;
  TaskFn fn_;
  int threads_;
};

std::unique_ptr<OpKernel> plan_bias(const OpSpec& op, const PlanContext& ctx, std::string* why) {
  if (op.op != Op::bias) {
    *why = "only the bias sum";
    return nullptr;
  }
  for (const View* v : {&op.a, &op.dst})
    if (v->dtype != DataType::f32 && v->dtype != DataType::f16 && v->dtype != DataType::bf16) {
      *why = "dtype " + std::string(to_string(v->dtype)) + " is not f32, f16 or bf16";
      return nullptr;
    }
  if (reduction_length(op) == 0 || op.dst.empty()) {
    *why = "empty sums are the zeros path's";
    return nullptr;
  }
  const View& a = op.a;
  const BiasKernels& kernels = kernel_config(ctx.isa).bias;
  BiasPlan p;
  p.lanes = kernels.lanes;
  p.dtype = a.dtype;
  p.off = a.offset;
  p.channels = a.dims[1];
  p.cstride = a.strides[1];
  p.out_dtype = op.dst.dtype;
  p.out_off = op.dst.offset;
  p.out_stride = op.dst.strides[0];
  // N, then the spatial dims but the last (extent 1 dropped); the last
  // spatial dim is the width. Nothing is merged: the order is logical.
  p.ext[0] = a.dims[0];
  p.str[0] = a.strides[0];
  p.no = 1;
  for (int d = 2; d + 1 < a.rank; ++d) {
    if (a.dims[d] == 1) continue;
    p.ext[p.no] = a.dims[d];
    p.str[p.no] = a.strides[d];
    ++p.no;
  }
  p.width = a.dims[a.rank - 1];
  p.wstride = a.strides[a.rank - 1];
  if (p.wstride == 1 || p.width == 1)
    p.mode = BiasPlan::Mode::rows;
  else if (p.cstride == 1 && p.channels >= p.lanes)
    p.mode = BiasPlan::Mode::channels_last;
  else
    p.mode = BiasPlan::Mode::generic;
  if (p.mode == BiasPlan::Mode::rows && p.width == 1) p.mode = BiasPlan::Mode::generic;

  // Few channels with long sums: split N into fixed chunks of at least 64K
  // elements (at most 64). This depends on the shape alone, never on the
  // layout or the threads.
  const int64_t per_channel = reduction_length(op);
  if (p.channels < 16) p.chunks = std::clamp<int64_t>(per_channel / 65536, 1, std::min<int64_t>(64, p.ext[0]));
  // Channels per task: one vector of contiguous ones (channels_last), 4 side
  // by side (rows), 1 (generic).
  p.cblock = p.mode == BiasPlan::Mode::channels_last ? p.lanes : p.mode == BiasPlan::Mode::rows ? 4 : 1;
  const int64_t units = (p.channels + p.cblock - 1) / p.cblock;
  p.tasks = units * p.chunks;
  return std::make_unique<BiasKernelOp>(p, kernels.task, std::max(1, ctx.threads));
}

}  // namespace

const BiasPlan* bias_plan_of(const OpKernel& k) {
  const auto* b = dynamic_cast<const BiasKernelOp*>(&k);
  return b ? &b->plan() : nullptr;
}

const Implementation kBiasReduceImpl = {"bias_reduce", &plan_bias};

}  // namespace convbwd::detail
