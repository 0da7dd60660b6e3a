// The C++ API in the README, compiled and run by CTest: the README shows the
// lines between the two "README" markers verbatim (example_cpp_api_in_readme
// checks that they agree), so the snippet cannot go stale.
//   example_cpp_api [DESCRIPTOR]   exit 0 and "PASS cpp_api", or 2 and the message
#include <convbwd/convbwd.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int run(const char* descriptor) {
  // README begin
  auto alloc = [](int64_t n) { return std::vector<float>(static_cast<size_t>(n), 1.0f); };  // fill with data
  auto held = [](const std::vector<float>& v) { return static_cast<int64_t>(v.size()); };
  auto plan = convbwd::Plan::create(descriptor);  // parse, validate, plan (or create(Problem))
  if (!plan) {                                    // a typo or an invalid problem: status + message
    std::fprintf(stderr, "%s\n", plan.error().message.c_str());
    return 2;
  }
  const convbwd::BufferSizes need = plan->buffer_sizes();  // elements each buffer must hold
  std::vector<float> dy = alloc(need.grad_output), x = alloc(need.input), w = alloc(need.weight);
  std::vector<float> dx = alloc(need.grad_input), dw = alloc(need.grad_weight), db = alloc(need.grad_bias);
  std::vector<std::byte> workspace(plan->workspace_size());
  const convbwd::Buffers buffers{dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data()};
  const convbwd::BufferSizes given{held(dy), held(x), held(w), held(dx), held(dw), held(db)};
  if (convbwd::Error e = plan->execute(buffers, given, workspace.data(), workspace.size())) {
    std::fprintf(stderr, "%s\n", e.message.c_str());  // e.g. a buffer smaller than its view
    return 1;
  }
  std::printf("gradWeight by %s\n", std::string(plan->implementation(convbwd::Gradient::weight)).c_str());
  // README end
  // With gradOutput all ones, each gradBias element counts gradOutput's
  // elements per channel: N times the output's spatial size.
  const std::vector<int64_t>& go = plan->problem().grad_output.dims;
  int64_t per_channel = go[0];
  for (size_t i = 2; i < go.size(); ++i) per_channel *= go[i];
  for (float v : db)
    if (v != static_cast<float>(per_channel)) {
      std::printf("FAIL cpp_api: gradBias %g, expected %lld\n", static_cast<double>(v),
                  static_cast<long long>(per_channel));
      return 1;
    }
  std::printf("PASS cpp_api\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc > 1 ? argv[1] : "mb4ic30ih80oc320kh3ph1"); }
