// Perf mode: times Plan::execute on seeded data.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "host.hpp"
#include "modes.hpp"
#include "report.hpp"

namespace convbwd::cli {

CaseResult run_perf(const Problem& given, const std::string& desc, const Options& o) {
  CaseResult res;
  HostProblem h = make_host_problem(given, Fill::uniform, o.seed);
  const Problem& p = h.problem;
  auto plan = Plan::create(p);
  if (!plan) {
    print_error(desc + ": " + plan.error().message);
    std::printf("%s\n", repro_line(Mode::perf, desc, o).c_str());
    return res;
  }
  Workspace ws = make_workspace(plan->workspace_size());
  const Bound bound = h.bound();
  // --cold-cache: a buffer twice the size of a large L3, rewritten before
  // each run. One byte is read back so the writes cannot be dropped.
  std::vector<unsigned char> evict(o.cold_cache ? size_t{64} << 20 : 0);
  static volatile unsigned char sink;
  auto run_once = [&](double& ms) -> bool {
    if (!evict.empty()) {
      std::memset(evict.data(), static_cast<int>(sink) + 1, evict.size());
      sink = evict[evict.size() / 2];
    }
    const auto t0 = std::chrono::steady_clock::now();
    const Error e = plan->execute(bound.buffers, bound.sizes, ws.ptr.get(), ws.bytes);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (e) print_error(desc + ": execute failed: " + e.message);
    return !e;
  };
  double first_ms = 0;
  for (int i = 0; i < o.warmup; ++i)
    if (!run_once(first_ms)) return res;
  // Without --repeats: 5 runs, or 3 when a run takes over a second (a slow
  // implementation, e.g. the reference, should not make a perf run take minutes).
  std::vector<double> times;
  int repeats = o.repeats.value_or(5);
  for (int i = 0; i < repeats; ++i) {
    double ms = 0;
    if (!run_once(ms)) return res;
    times.push_back(ms);
    if (!o.repeats && i == 0 && std::max(ms, first_ms) > 1000) repeats = 3;
  }
  std::sort(times.begin(), times.end());
  const size_t m = times.size();
  res.median_ms = m % 2 ? times[m / 2] : (times[m / 2 - 1] + times[m / 2]) / 2;
  const double min_ms = times.front();
  res.gflops = res.median_ms > 0 ? plan->flops() / (res.median_ms * 1e6) : 0;

  std::string impls;
  for (int i = 0; i < 3; ++i) {
    const auto g = static_cast<Gradient>(i);
    if (!p.output_mask[i]) continue;
    impls += std::string(impls.empty() ? "" : " ") + gradient_name(g) + "=" + std::string(plan->implementation(g));
  }
  std::printf(
      "perf  %s  median %s  min %s  %.2f GFLOP/s  (%.3g GFLOP; %s after %s%s; %s; isa %s)\n",
      desc.c_str(), format_ms(res.median_ms).c_str(), format_ms(min_ms).c_str(), res.gflops, plan->flops() / 1e9,
      counted(static_cast<int64_t>(m), "run").c_str(), counted(o.warmup, "warm-up").c_str(),
      o.cold_cache ? ", cold cache" : "", counted(convbwd::num_threads(), "thread").c_str(),
      std::string(convbwd::isa()).c_str());
  std::printf("  implementations: %s\n", impls.c_str());
  std::printf("%s\n", repro_line(Mode::perf, desc, o).c_str());
  res.outcome = Outcome::pass;
  return res;
}

}  // namespace convbwd::cli
