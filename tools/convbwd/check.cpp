// Check mode: the plan against the library's fp64 reference on seeded data.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "compare.hpp"
#include "host.hpp"
#include "impl/implementation.hpp"
#include "modes.hpp"
#include "oracle.hpp"
#include "problem/spec.hpp"
#include "progress.hpp"
#include "report.hpp"

namespace convbwd::cli {
namespace {

int oracle_threads(const Options& o) {
  if (o.threads) return *o.threads;
  return std::max(convbwd::num_threads(), 1);
}

}  // namespace

CaseResult run_check(const Problem& given, const std::string& desc, const Options& o) {
  CaseResult res;
  const auto t_start = std::chrono::steady_clock::now();
  // Outputs of 0xFF bytes, NaN in every float format: an element the plan
  // does not write cannot pass.
  HostProblem h = make_host_problem(given, o.fill, o.seed, 0xFF);
  const Problem& p = h.problem;
  const HostTensor &go = h.grad_output, &in = h.input, &w = h.weight;
  HostTensor(&outs)[3] = h.outs;
  auto plan = Plan::create(p);
  if (!plan) {
    print_error(desc + ": " + plan.error().message);
    std::printf("%s\n", repro_line(Mode::check, desc, o).c_str());
    return res;
  }
  Workspace ws = make_workspace(plan->workspace_size());
  const Bound bound = h.bound();
  const auto t0 = std::chrono::steady_clock::now();
  const Error e = plan->execute(bound.buffers, bound.sizes, ws.ptr.get(), ws.bytes);
  const double exec_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (e) {
    print_error(desc + ": execute failed: " + e.message);
    std::printf("%s\n", repro_line(Mode::check, desc, o).c_str());
    return res;
  }

  auto spec = detail::validate(p);
  if (!spec) {  // cannot happen after Plan::create succeeded; reported, not assumed
    print_error(desc + ": validate failed after Plan::create succeeded: " + spec.error().message);
    return res;
  }
  const HostTensor go_abs = abs_copy(go), in_abs = abs_copy(in), w_abs = abs_copy(w);
  OracleOptions oo;
  oo.threads = oracle_threads(o);
  oo.all = o.check_all;
  oo.seed = o.seed;

  std::printf("check %s  (seed %llu, %s data)\n", desc.c_str(), static_cast<unsigned long long>(o.seed),
              o.fill == Fill::uniform ? "uniform [-1,1]" : "integer [-3,3], fp32 exact");
  // The operations and their operands, as Plan::execute binds them.
  struct Job {
    Gradient g;
    detail::OpSpec op;
    const void *a, *b, *a_abs, *b_abs;
    double cost = 0;  // reference multiply-adds: values plus sum|products|
    double budget = 0;
  };
  std::vector<Job> jobs;
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    Job j{g, spec->op_for(g), go.data(), w.data(), go_abs.data(), w_abs.data()};
    if (g == Gradient::weight) {
      const bool tr = p.transposed;
      j.a = tr ? in.data() : go.data();
      j.b = tr ? go.data() : in.data();
      j.a_abs = tr ? in_abs.data() : go_abs.data();
      j.b_abs = tr ? go_abs.data() : in_abs.data();
    }
    j.op.dst = contiguous_view(j.op.dst, outs[i].dtype);
    j.cost = 2.0 * static_cast<double>(std::max<int64_t>(detail::reduction_length(j.op), 1)) *
             static_cast<double>(outs[i].elements());
    j.budget = j.cost;
    jobs.push_back(j);
  }
  // Share the budget: cheap gradients (e.g. gradBias) are checked in full, the
  // expensive ones split what is left equally (water-filling, cheapest first).
  double left = o.check_budget_gflop * 1e9 / 2;  // GFLOP -> multiply-adds
  std::vector<Job*> by_cost;
  for (Job& j : jobs) by_cost.push_back(&j);
  std::sort(by_cost.begin(), by_cost.end(), [](const Job* x, const Job* y) { return x->cost < y->cost; });
  for (size_t k = 0; k < by_cost.size(); ++k) {
    by_cost[k]->budget = std::min(by_cost[k]->cost, left / static_cast<double>(by_cost.size() - k));
    left -= by_cost[k]->budget;
  }

  // A check of a large problem can run for minutes: the terminal's line says
  // how far the reference is (nothing is printed for quick ones).
  StatusLine& line = status_line();
  if (line.enabled()) oo.progress = [&line](int64_t done, int64_t total) { line.update_task(done, total); };

  bool pass = true;
  const auto t_ref = std::chrono::steady_clock::now();
  for (const Job& job : jobs) {
    const Gradient g = job.g;
    const char* name = gradient_name(g);
    const HostTensor& out = outs[static_cast<int>(g)];
    std::string impl(plan->implementation(g));
    oo.budget = job.budget < job.cost ? job.budget : 0;
    line.begin_task(std::string("checking ") + name);
    const OracleResult ref = run_oracle(job.op, job.a, job.b, job.a_abs, job.b_abs, oo);
    const Comparison c = compare(name, out, ref, detail::reduction_length(job.op), o.fill == Fill::small_ints);
    line.end_task();  // before the report's line, which may go to the same terminal
    res.subset |= ref.subset();
    res.worst_scaled_error = std::max(res.worst_scaled_error, c.worst_scaled_error);
    pass &= c.pass();
    std::string checked = out.elements() == 0 ? "empty"
                          : ref.subset()      ? format_count(static_cast<double>(c.checked)) + " of " +
                                               format_count(static_cast<double>(out.elements())) + " (subset)"
                                              : "all " + format_count(static_cast<double>(c.checked));
    std::printf("  %-10s %-6s %-16s %-22s checked %-20s worst %-9.3g %s\n", name,
                std::string(to_string(out.dtype)).c_str(), format_dims(out.dims).c_str(), impl.c_str(),
                checked.c_str(), c.worst_scaled_error, c.pass() ? "ok" : "FAIL");
    if (!c.pass()) {
      std::printf("    %lld of %lld elements exceed the tolerance; first:\n", static_cast<long long>(c.failures),
                  static_cast<long long>(c.checked));
      for (const std::string& f : c.first_failures) std::printf("      %s\n", f.c_str());
    }
  }
  const double ref_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_ref).count();
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("  execute %s; reference %.2f s on %d thread%s; total %.2f s\n", format_ms(exec_ms).c_str(), ref_s,
              oo.threads, oo.threads == 1 ? "" : "s", total_s);
  if (res.subset)
    std::printf("  note: the reference work exceeds --check-budget=%g GFLOP, so a seeded random subset of output "
                "slices was checked; --check-all checks every element\n",
                o.check_budget_gflop);
  std::printf("%s  worst scaled error %.3g (|got-ref|/tolerance, must be <= 1)  %s\n", pass ? "PASS" : "FAIL",
              res.worst_scaled_error, desc.c_str());
  std::printf("%s\n", repro_line(Mode::check, desc, o).c_str());
  res.outcome = pass ? Outcome::pass : Outcome::fail;
  return res;
}

}  // namespace convbwd::cli
