#include "util/run.hpp"

#include <cstdlib>
#include <memory>

namespace convbwd::test {

RunResult run_problem(const Problem& given, const RunOptions& opt) {
  RunResult r;
  std::mt19937_64 rng(opt.seed);
  Problem p = given;
  r.go = make_tensor(given.grad_output.dtype, given.grad_output.dims, opt.in_layout);
  r.in = make_tensor(given.input.dtype, given.input.dims, opt.in_layout);
  r.w = make_tensor(given.weight.dtype, given.weight.dims, opt.in_layout);
  for (HostTensor* t : {&r.go, &r.in, &r.w}) fill(*t, opt.fill, rng);
  p.grad_output = r.go.desc;
  p.input = r.in.desc;
  p.weight = r.w.desc;
  TensorDesc* out_desc[3] = {&p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    // A 1-D gradBias has no channels-last form.
    const Layout l = i == 2 && opt.out_layout == Layout::channels_last ? Layout::contiguous : opt.out_layout;
    r.outs[i] = make_tensor(p.gradient_dtype(g), p.gradient_dims(g), l);
    *out_desc[i] = r.outs[i].desc;
  }
  auto plan = Plan::create(p);
  if (!plan) {
    r.error = plan.error();
    return r;
  }
  for (int i = 0; i < 3; ++i) r.implementation[i] = std::string(plan->implementation(static_cast<Gradient>(i)));
  r.workspace = plan->workspace_size();
  std::unique_ptr<unsigned char, decltype(&std::free)> ws(
      static_cast<unsigned char*>(r.workspace ? std::aligned_alloc(64, (r.workspace + 63) / 64 * 64) : nullptr),
      &std::free);
  const Buffers b{r.go.data(), r.in.data(), r.w.data(), r.outs[0].data(), r.outs[1].data(), r.outs[2].data()};
  r.error = plan->execute(b, ws.get(), r.workspace);
  return r;
}

std::string repro(const Problem& p, const RunOptions& o) {
  return p.descriptor() + " in=" + to_string(o.in_layout) + " out=" + to_string(o.out_layout) +
         " fill=" + (o.fill == Fill::small_ints ? "small_ints" : o.fill == Fill::uniform ? "uniform" : "fp16_subnormals") + " seed=" + std::to_string(o.seed);
}

}  // namespace convbwd::test
