#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "convbwd/convbwd.hpp"
#include "impl/nonfinite/nonfinite.hpp"
#include "impl/registry_entries.hpp"
#include "kernels/config.hpp"
#include "plan/plan_state.hpp"
#include "problem/checked.hpp"
#include "runtime/env.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd {
namespace detail {

namespace {

// (The ordered lists hold copies of the Implementation records.)
bool is_reference(const Implementation* impl) { return impl && impl->plan == kReferenceImpl.plan; }

// Runs down the ordered list with the context's budget scale; the first
// implementation that accepts wins. With skip_reference, the reference is
// not tried (p.kernel stays null if nothing else accepts).
void choose(PlannedOp& p, const OpSpec& spec, const PlanContext& ctx, bool skip_reference) {
  static const bool verbose = detail::verbose();
  const char* const pass = ctx.budget_scale > 1 ? " (relaxed workspace budget)" : "";
  for (const Implementation& impl : implementations(spec.op)) {
    if (skip_reference && is_reference(&impl)) continue;
    std::string why;
    p.kernel = impl.plan(spec, ctx, &why);
    if (p.kernel) {
      p.impl = &impl;
      p.name = std::string(impl.name);
      if (p.kernel->uses_tier_kernels()) p.name += ":" + tier_name(kernel_config(ctx.isa));
      if (verbose)
        std::fprintf(stderr, "convbwd: %s: chose %s%s\n", std::string(to_string(spec.op)).c_str(), p.name.c_str(),
                     pass);
      return;
    }
    if (verbose)
      std::fprintf(stderr, "convbwd: %s: %.*s declined%s: %s\n", std::string(to_string(spec.op)).c_str(),
                   static_cast<int>(impl.name.size()), impl.name.data(), pass, why.c_str());
  }
}

}  // namespace

PlannedOp plan_op(const OpSpec& spec, const PlanContext& ctx) {
  PlannedOp p;
  p.active = true;
  p.spec = spec;
  p.every_tap_is_real = every_tap_is_real(spec.geo);
  choose(p, spec, ctx, false);
  // Only the reference accepted: typically a fast path's copies of one
  // large image exceed the workspace budget (one 512x512 image of 64
  // channels, fp32). The reference, single-threaded plain loops, took 344 s
  // where the GEMM paths take under a second, so a second pass lets the fast
  // paths ask for up to kRelaxedBudgetScale times the largest input: on that
  // layer 137 MB, while PyTorch's call added 196 MiB to its peak.
  if (is_reference(p.impl) && ctx.budget_scale == 1) {
    PlanContext relaxed = ctx;
    relaxed.budget_scale = kRelaxedBudgetScale;
    PlannedOp q;
    q.active = true;
    q.spec = spec;
    q.every_tap_is_real = p.every_tap_is_real;
    choose(q, spec, relaxed, true);
    if (q.kernel) return q;
  }
  return p;
}

namespace {

double op_flops(const OpSpec& op) {
  const Geometry& g = op.geo;
  const double pairs = static_cast<double>(g.n) * static_cast<double>(g.groups) * static_cast<double>(g.k) *
                       static_cast<double>(g.c) * static_cast<double>(g.k_spatial()) *
                       static_cast<double>(g.y_spatial());
  if (op.op == Op::bias) return static_cast<double>(op.a.elements());
  return 2 * pairs;  // an upper bound where padding cuts taps off; the usual convention
}

struct Range {
  uintptr_t lo = 0, hi = 0;  // [lo, hi)
  bool empty() const { return lo == hi; }
};

Range byte_range(const void* base, const View& v) {
  if (!base || v.empty()) return {};
  const int64_t last = v.last_index().value();
  const auto es = static_cast<int64_t>(size_of(v.dtype));
  const auto b = reinterpret_cast<uintptr_t>(base);
  return {b + static_cast<uintptr_t>(v.offset * es), b + static_cast<uintptr_t>((last + 1) * es)};
}

// Elements a view needs its buffer to hold: its largest element index + 1
// (0 for an empty view). Validation bounded the reach already; should the
// checked sum overflow anyway, no buffer is large enough.
int64_t elements_needed(const View& v) {
  if (v.empty()) return 0;
  return (v.last_index() + 1).value_or(std::numeric_limits<int64_t>::max());
}

bool overlap(Range a, Range b) { return !a.empty() && !b.empty() && a.lo < b.hi && b.lo < a.hi; }

bool is_8bit(DataType t) { return t == DataType::hif8 || t == DataType::f8e4m3; }

}  // namespace
}  // namespace detail

Result<Plan> Plan::create(const Problem& problem) {
  auto spec = detail::validate(problem);
  if (!spec) return spec.error();
  auto st = std::make_shared<detail::PlanState>();
  st->spec = std::move(spec.value());
  detail::PlanContext ctx;
  ctx.isa = detail::active_isa();
  ctx.threads = std::min(detail::configured_threads(), detail::ThreadPool::global().size());
  const detail::CpuFeatures& cpu = detail::cpu_features();
  ctx.llc_bytes = cpu.llc_bytes;
  ctx.zmm_in_halves = cpu.zmm_in_halves;
  st->threads = ctx.threads;
  for (int i = 0; i < 3; ++i) {
    if (!st->spec.mask[i] || st->spec.grads[i].empty()) continue;
    const detail::OpSpec op = st->spec.op_for(static_cast<Gradient>(i));
    st->ops[i] = detail::plan_op(op, ctx);
    st->workspace = std::max(st->workspace, st->ops[i].kernel->workspace_bytes());
    st->flops += detail::op_flops(op);
  }
  std::array<const detail::OpKernel*, 3> kernels{};
  for (int i = 0; i < 3; ++i) kernels[i] = st->ops[i].kernel.get();
  st->fused = detail::plan_fused(kernels);
  if (st->fused) {
    st->workspace = std::max(st->workspace, st->fused->workspace_bytes());
    st->fused_name = std::string(st->fused->name()) + ":" + detail::tier_name(detail::kernel_config(ctx.isa));
  }
  return Plan(std::move(st));
}

Result<Plan> Plan::create(std::string_view descriptor) {
  auto problem = Problem::parse(descriptor);
  if (!problem) return problem.error();
  return create(problem.value());
}

const Problem& Plan::problem() const { return s_->spec.problem; }
size_t Plan::workspace_size() const { return s_->workspace; }
double Plan::flops() const { return s_->flops; }

std::string_view Plan::implementation(Gradient g) const {
  const auto& op = s_->ops[static_cast<int>(g)];
  if (s_->fused && s_->fused->covers()[static_cast<size_t>(g)]) return s_->fused_name;
  if (op.impl) return op.name;
  if (s_->spec.mask[static_cast<int>(g)]) return "empty";  // requested, zero elements: nothing to do
  return "";
}

BufferSizes Plan::buffer_sizes() const {
  const detail::Spec& sp = s_->spec;
  // gradOutput feeds every gradient, input only gradWeight, weight only gradInput.
  const bool any = s_->ops[0].active || s_->ops[1].active || s_->ops[2].active;
  auto need = [](bool used, const detail::View& v) { return used ? detail::elements_needed(v) : 0; };
  return {need(any, sp.grad_output),       need(s_->ops[1].active, sp.input),
          need(s_->ops[0].active, sp.weight), need(s_->ops[0].active, sp.grads[0]),
          need(s_->ops[1].active, sp.grads[1]), need(s_->ops[2].active, sp.grads[2])};
}

Error Plan::check(const Buffers& b, const void* workspace, size_t workspace_bytes) const {
  return validate(b, nullptr, workspace, workspace_bytes);
}

Error Plan::execute(const Buffers& b, const BufferSizes& sizes, void* workspace, size_t workspace_bytes) const {
  // Everything is checked before anything is written.
  if (Error e = validate(b, &sizes, workspace, workspace_bytes)) return e;
  return run(b, workspace);
}

Error Plan::execute(const Buffers& b, void* workspace, size_t workspace_bytes) const {
  if (Error e = validate(b, nullptr, workspace, workspace_bytes)) return e;
  return run(b, workspace);
}

Error Plan::validate(const Buffers& b, const BufferSizes* sizes, const void* workspace, size_t workspace_bytes) const {
  using detail::Range;
  const detail::Spec& sp = s_->spec;
  const char* const names[3] = {"gradInput", "gradWeight", "gradBias"};
  void* const outs[3] = {b.grad_input, b.grad_weight, b.grad_bias};
  // gradOutput feeds every gradient, input only gradWeight, weight only gradInput.
  const bool any = s_->ops[0].active || s_->ops[1].active || s_->ops[2].active;
  const struct {
    const char* name;
    const void* ptr;
    const detail::View* view;
    bool needed;
  } inputs[3] = {{"gradOutput", b.grad_output, &sp.grad_output, any && !sp.grad_output.empty()},
                 {"input", b.input, &sp.input, s_->ops[1].active && !sp.input.empty()},
                 {"weight", b.weight, &sp.weight, s_->ops[0].active && !sp.weight.empty()}};
  for (const auto& in : inputs)
    if (in.needed && !in.ptr) return Error{Status::null_pointer, std::string(in.name) + " buffer is null"};
  for (int i = 0; i < 3; ++i)
    if (s_->ops[i].active && !outs[i])
      return Error{Status::null_pointer, std::string(names[i]) + " is requested but its buffer is null"};
  if (sizes) {
    // Same order as the pointer checks: inputs, then outputs.
    const BufferSizes need = buffer_sizes();
    const int64_t given[6] = {sizes->grad_output, sizes->input,      sizes->weight,
                              sizes->grad_input,  sizes->grad_weight, sizes->grad_bias};
    const int64_t needed[6] = {need.grad_output, need.input,       need.weight,
                               need.grad_input,  need.grad_weight, need.grad_bias};
    const char* const all_names[6] = {"gradOutput", "input", "weight", "gradInput", "gradWeight", "gradBias"};
    const DataType dtypes[6] = {sp.grad_output.dtype, sp.input.dtype,    sp.weight.dtype,
                                sp.grads[0].dtype,    sp.grads[1].dtype, sp.grads[2].dtype};
    for (int i = 0; i < 6; ++i)
      if (given[i] < needed[i])
        return Error{Status::invalid_parameter, std::string(all_names[i]) + " buffer holds " +
                                                    std::to_string(given[i]) + " elements; its " +
                                                    std::string(to_string(dtypes[i])) + " view needs " +
                                                    std::to_string(needed[i])};
  }
  if (workspace_bytes < s_->workspace)
    return Error{Status::invalid_parameter, "workspace of " + std::to_string(workspace_bytes) +
                                                " bytes is smaller than the " + std::to_string(s_->workspace) +
                                                " bytes the plan needs"};
  if (s_->workspace > 0 && !workspace)
    return Error{Status::null_pointer, "workspace is null; the plan needs " + std::to_string(s_->workspace) + " bytes"};
  // The kernels keep fp32 (and may keep wider) values in the workspace; an
  // address malloc, new or aclrtMalloc gives is always aligned enough.
  if (const size_t mis = reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment; s_->workspace > 0 && mis != 0)
    return Error{Status::invalid_parameter, "workspace address is " + std::to_string(mis) + " bytes past a " +
                                                std::to_string(kWorkspaceAlignment) + "-byte boundary; expected a " +
                                                std::to_string(kWorkspaceAlignment) + "-byte aligned workspace"};
  // One rule for every pair of buffers: memory that execute writes (the
  // outputs and the workspace) may share no byte with any other buffer.
  // Inputs may share memory with each other: they are only read.
  // Listed outputs first, then the workspace, then the inputs, so that a
  // message names what is written first ("gradInput buffer overlaps input").
  struct Region {
    const char* name;
    Range range;
    bool written;
  };
  std::array<Region, 7> regions{};
  size_t count = 0;
  for (int i = 0; i < 3; ++i)
    if (s_->ops[i].active) regions[count++] = {names[i], detail::byte_range(outs[i], sp.grads[i]), true};
  if (s_->workspace > 0) {
    const auto w = reinterpret_cast<uintptr_t>(workspace);
    regions[count++] = {nullptr, Range{w, w + s_->workspace}, true};
  }
  for (const auto& in : inputs)
    if (in.ptr) regions[count++] = {in.name, detail::byte_range(in.ptr, *in.view), false};
  for (size_t i = 0; i < count; ++i)
    for (size_t j = i + 1; j < count; ++j)
      if ((regions[i].written || regions[j].written) && detail::overlap(regions[i].range, regions[j].range))
        return Error{Status::invalid_parameter,
                     (regions[i].name ? std::string(regions[i].name) + " buffer" : std::string("the workspace")) +
                         " overlaps " + (regions[j].name ? regions[j].name : "the workspace") +
                         "; outputs and the workspace must not alias any other buffer"};
  return {};
}

Error Plan::run(const Buffers& b, void* workspace) const {
  const detail::Spec& sp = s_->spec;
  void* const outs[3] = {b.grad_input, b.grad_weight, b.grad_bias};

  auto& pool = detail::ThreadPool::global();
  // Whether each input tensor (gradOutput, input, weight) holds NaN/Inf,
  // scanned at most once per execute (-1: not yet). See nonfinite.hpp.
  int nonfinite[3] = {-1, -1, -1};
  auto scan = [&](int tensor, const void* ptr, const detail::View& v) {
    if (nonfinite[tensor] < 0)
      nonfinite[tensor] = detail::has_nonfinite(ptr, v, sp.rounding, &pool, s_->threads) ? 1 : 0;
    return nonfinite[tensor] == 1;
  };
  // The fused pass, if any; when it met a NaN or Inf its gradients are
  // computed again below, one by one, each with its own NaN handling.
  std::array<bool, 3> done{};
  if (s_->fused) {
    detail::FusedArgs fa;
    fa.grad_output = b.grad_output;
    fa.input = b.input;
    fa.weight = b.weight;
    fa.workspace = static_cast<std::byte*>(workspace);
    const std::array<bool, 3> covers = s_->fused->covers();
    for (int i = 0; i < 3; ++i) fa.dst[static_cast<size_t>(i)] = covers[static_cast<size_t>(i)] ? outs[i] : nullptr;
    if (s_->fused->run(fa, pool)) done = covers;
  }
  for (int i = 0; i < 3; ++i) {
    const auto& op = s_->ops[i];
    if (!op.active || done[static_cast<size_t>(i)]) continue;
    detail::OpArgs args;
    args.dst = outs[i];
    args.workspace = static_cast<std::byte*>(workspace);
    const bool tr = sp.problem.transposed;
    int ta = 0, tb = 0;  // which input tensors a and b are
    switch (static_cast<Gradient>(i)) {
      case Gradient::input:
        args.a = b.grad_output;
        args.b = b.weight;
        tb = 2;
        break;
      case Gradient::weight:
        args.a = tr ? b.input : b.grad_output;
        args.b = tr ? b.grad_output : b.input;
        ta = tr ? 1 : 0;
        tb = tr ? 0 : 1;
        break;
      case Gradient::bias: args.a = b.grad_output; break;
    }
    // gradBias is a plain sum (no taps, no padding): IEEE sums already give
    // the reference's NaN/Inf. Every path for 8-bit operands skips missing
    // taps itself, and an 8-bit output without Inf (e4m3fn) could not carry
    // the event pass's partial result.
    const detail::OpSpec& os = op.spec;
    bool na = false, nb = false;
    if (os.op != detail::Op::bias && !detail::is_8bit(os.a.dtype) && !detail::is_8bit(os.b.dtype) &&
        !detail::is_8bit(os.dst.dtype) && !op.every_tap_is_real &&
        op.kernel->nonfinite_mode() != detail::NonfiniteMode::native) {
      if (op.kernel->nonfinite_mode() == detail::NonfiniteMode::report) {
        // The kernel checks what it reads; the common case is done in one run.
        detail::NonfiniteFound found;
        args.found = &found;
        op.kernel->run(args, pool);
        args.found = nullptr;
        if (!found.a && !found.b) continue;
        // Elements it did not read reach no output through a real tap, so
        // its answer is exact for this operation; only "found" says anything
        // about the whole tensor, for the scans of later operations.
        na = found.a;
        nb = found.b;
        if (na) nonfinite[ta] = 1;
        if (nb) nonfinite[tb] = 1;
      } else {
        na = scan(ta, args.a, os.a);
        nb = scan(tb, args.b, os.b);
      }
    }
    args.zero_nonfinite = na || nb;
    op.kernel->run(args, pool);
    if (args.zero_nonfinite) detail::add_nonfinite_terms(os, args.a, args.b, args.dst, na, nb, pool, s_->threads);
  }
  return {};
}

}  // namespace convbwd
