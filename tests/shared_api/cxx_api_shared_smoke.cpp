// Links only libconvbwd.so and the public header. A 1x1 convolution with
// weight 1 and stride 1 has closed-form gradients: gradInput = gradOutput
// (one channel), gradWeight = sum(gradOutput * input), gradBias = sum(gradOutput).
#include <convbwd/convbwd.hpp>

#include <cstdio>
#include <vector>

int main() {
  auto problem = convbwd::Problem::parse("mb2ic1iw5oc1kw1");
  if (!problem) return std::puts(problem.error().message.c_str()), 1;
  auto plan = convbwd::Plan::create(problem.value());
  if (!plan) return std::puts(plan.error().message.c_str()), 1;
  std::vector<float> go = {1, 2, 3, 4, 5, -1, -2, -3, -4, -5}, x = {1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, w = {1};
  std::vector<float> gi(10, -7), gw(1, -7), gb(1, -7);
  std::vector<unsigned char> ws(plan->workspace_size());
  convbwd::Buffers b{go.data(), x.data(), w.data(), gi.data(), gw.data(), gb.data()};
  if (convbwd::Error e = plan->execute(b, ws.data(), ws.size())) return std::puts(e.message.c_str()), 1;
  float want_gw = 0, want_gb = 0;
  for (size_t i = 0; i < go.size(); ++i) {
    want_gw += go[i] * x[i];
    want_gb += go[i];
    if (gi[i] != go[i]) return std::printf("gradInput[%zu] = %g, want %g\n", i, gi[i], go[i]), 1;
  }
  if (gw[0] != want_gw || gb[0] != want_gb)
    return std::printf("gradWeight %g (want %g), gradBias %g (want %g)\n", gw[0], want_gw, gb[0], want_gb), 1;
  std::printf("ok: %s on %.*s, gradWeight via %.*s\n", plan->problem().descriptor().c_str(),
              static_cast<int>(convbwd::isa().size()), convbwd::isa().data(),
              static_cast<int>(plan->implementation(convbwd::Gradient::weight).size()),
              plan->implementation(convbwd::Gradient::weight).data());
  return 0;
}
