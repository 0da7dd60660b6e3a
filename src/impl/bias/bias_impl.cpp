// gradBias: the per-channel sum of gradOutput over N and space, vectorized
// along whichever summed dim is contiguous (or across channels when those
// are), in an order fixed by the problem, for any strided view.
#include <algorithm>
#include <memory>
#include <string>

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
    return p_.chunks > 1 ? static_cast<size_t>(p_.tasks) * sizeof(float) : 0;
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
  BiasPlan p;
  p.dtype = a.dtype;
  p.off = a.offset;
  p.channels = a.dims[1];
  p.cstride = a.strides[1];
  p.out_dtype = op.dst.dtype;
  p.out_off = op.dst.offset;
  p.out_stride = op.dst.strides[0];
  // Summed dims outermost first, extent-1 dims dropped, then merged where
  // the outer one steps exactly over the inner one.
  int nd = 0;
  for (int d = 0; d < a.rank; ++d) {
    if (d == 1 || a.dims[d] == 1) continue;
    if (nd > 0 && p.str[nd - 1] == a.dims[d] * a.strides[d]) {
      p.ext[nd - 1] *= a.dims[d];
      p.str[nd - 1] = a.strides[d];
      continue;
    }
    p.ext[nd] = a.dims[d];
    p.str[nd] = a.strides[d];
    ++nd;
  }
  if (nd == 0) {  // one element per channel
    p.ext[0] = 1;
    p.str[0] = 0;
    nd = 1;
  }
  p.nd = nd;
  const int64_t per_channel = reduction_length(op);
  if (p.str[nd - 1] == 1 && p.ext[nd - 1] >= 8)
    p.mode = BiasPlan::Mode::rows;
  else if (p.cstride == 1 && p.channels >= 8)
    p.mode = BiasPlan::Mode::channels_last;
  else
    p.mode = BiasPlan::Mode::generic;

  if (p.mode == BiasPlan::Mode::channels_last) {
    p.cblock = 64;
    p.tasks = (p.channels + p.cblock - 1) / p.cblock;
  } else {
    // Few channels with long sums: split ext[0] into fixed chunks of at least
    // 64K elements, at most 64 of them. This depends on the shape alone.
    if (p.channels < 16) p.chunks = std::clamp<int64_t>(per_channel / 65536, 1, std::min<int64_t>(64, p.ext[0]));
    p.tasks = p.channels * p.chunks;
  }
  const TaskFn fn = ctx.isa >= Isa::avx2 ? &bias_task_avx2 : &bias_task_scalar;
  return std::make_unique<BiasKernelOp>(p, fn, std::max(1, ctx.threads));
}

}  // namespace

const Implementation kBiasReduceImpl = {"bias_reduce", &plan_bias};

}  // namespace convbwd::detail
