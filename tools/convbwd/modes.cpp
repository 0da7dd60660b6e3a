// Dispatch: single descriptors, batches, the no-argument default.
#include "modes.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <vector>

#include "problem/spec.hpp"
#include "runtime/env.hpp"
#include "report.hpp"

namespace convbwd::cli {

Workspace make_workspace(size_t bytes) {
  Workspace w;
  w.bytes = bytes;
  if (bytes > 0) {
    // aligned_alloc wants a multiple of the alignment.
    w.ptr = {static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free};
    if (!w.ptr) throw std::bad_alloc();
  }
  return w;
}

double needed_bytes(const Problem& p, Mode mode) {
  const bool check = mode != Mode::perf;
  auto bytes = [](const TensorDesc& d) {
    double n = static_cast<double>(size_of(d.dtype));
    for (int64_t x : d.dims) n *= static_cast<double>(x);
    return n;
  };
  // Inputs twice (values and absolute values), each output three times (the
  // plan's, the reference's, and sum|products| in fp32, at most 4 bytes).
  double total = (check ? 2 : 1) * (bytes(p.grad_output) + bytes(p.input) + bytes(p.weight));
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    double n = 1;
    for (int64_t x : p.gradient_dims(g)) n *= static_cast<double>(x);
    const double es = static_cast<double>(size_of(p.gradient_dtype(g)));
    total += n * (check ? 2 * es + 4 : es);
  }
  return total;
}

CaseResult run_case(const std::string& given, Mode mode, const Options& o) {
  CaseResult res;
  auto parsed = Problem::parse(given);
  if (!parsed) {
    print_error(parsed.error().message);
    std::printf("repro: convbwd --mode=%s %s\n", to_string(mode), given.c_str());
    return res;
  }
  // The case keeps the user's spelling (it parses to the same problem, so it
  // is a valid repro); -v also prints the canonical one.
  const std::string& desc = given;
  if (o.verbose) std::printf("canonical descriptor: %s\n", parsed->descriptor().c_str());
  // Validate before allocating anything: a bad or hostile descriptor gets the
  // library's message, not an allocation failure.
  // (validate, not Plan::create: choosing implementations here would print
  // CONVBWD_VERBOSE's report twice.)
  if (auto spec = detail::validate(parsed.value()); !spec) {
    print_error(desc + ": " + spec.error().message);
    std::printf("%s\n", repro_line(mode, desc, o).c_str());
    return res;
  }
  const double need = needed_bytes(parsed.value(), mode);
  if (need > kMemoryLimitBytes) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: needs %.1f GiB for its tensors, more than this tool's limit of %.0f GiB",
                  desc.c_str(), need / (1ull << 30), kMemoryLimitBytes / (1ull << 30));
    print_error(buf);
    return res;
  }
  // Under the limit, memory may still run out: say how much was asked for,
  // and let a batch go on with its next case.
  try {
    if (mode == Mode::check) return run_check(parsed.value(), desc, o);
    if (mode == Mode::perf) return run_perf(parsed.value(), desc, o);
    // all: check, then time.
    CaseResult c = run_check(parsed.value(), desc, o);
    if (c.outcome == Outcome::error) return c;
    CaseResult t = run_perf(parsed.value(), desc, o);
    c.median_ms = t.median_ms;
    c.gflops = t.gflops;
    if (t.outcome == Outcome::error) c.outcome = Outcome::error;
    return c;
  } catch (const std::bad_alloc&) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s: out of memory; its tensors need %.2f GiB in %s mode, plus the plan's workspace",
                  desc.c_str(), need / (1ull << 30), to_string(mode));
    print_error(buf);
    std::printf("%s\n", repro_line(mode, desc, o).c_str());
    return res;
  }
}

namespace {

struct Tally {
  int pass = 0, fail = 0, error = 0;
  void add(Outcome o) { (o == Outcome::pass ? pass : o == Outcome::fail ? fail : error)++; }
  int exit_code() const { return error ? kExitError : fail ? kExitFail : kExitPass; }
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

int run_default(const Options& o) {
  std::printf(
      "convbwd: no arguments, so running the built-in default: the CANN 2D sample's problem\n"
      "  %s = N 4, C 30, 80x80 input, 320 filters 3x3, pad 1, stride 1, fp32,\n"
      "  all three gradients (gradInput, gradWeight, gradBias); checked against the fp64 reference, then timed.\n"
      "  (convbwd --help documents every mode, flag and the descriptor syntax.)\n\n",
      kDefaultDescriptor);
  const CaseResult r = run_case(kDefaultDescriptor, Mode::all, o);
  std::printf("\n");
  if (r.outcome == Outcome::error) {
    std::printf("ERROR: the default problem could not be run (see the message above)\n");
    return kExitError;
  }
  std::printf("summary: %s checked against the reference (worst scaled error %.3g%s) and timed (%s, %.2f GFLOP/s)\n",
              kDefaultDescriptor, r.worst_scaled_error, r.subset ? ", subset" : "", format_ms(r.median_ms).c_str(),
              r.gflops);
  std::printf("%s\n", r.outcome == Outcome::pass ? "PASS" : "FAIL");
  return r.outcome == Outcome::pass ? kExitPass : kExitFail;
}

}  // namespace

bool environment_refused() { return !convbwd::detail::env_reports().empty(); }

int run(const Options& o) {
  if (o.verbose) setenv("CONVBWD_VERBOSE", "1", 1);
  if (o.threads) convbwd::set_num_threads(*o.threads);
  // The variables read before any plan: an invalid one stops the run before
  // any work (the library has said which, the value and what it accepts).
  // Those read while planning are caught by main's check at exit.
  (void)convbwd::num_threads();
  (void)convbwd::isa();
  (void)convbwd::detail::verbose();
  if (environment_refused()) return kExitError;
  if (o.no_arguments) return run_default(o);
  const Mode mode = o.mode.value_or(Mode::check);
  if (mode == Mode::data) {
    const Outcome r = run_data(o);
    return r == Outcome::pass ? kExitPass : r == Outcome::fail ? kExitFail : kExitError;
  }

  // Cases: the positional descriptors, then the batch file's lines.
  struct Case {
    std::string descriptor, where;
  };
  std::vector<Case> cases;
  for (const std::string& d : o.descriptors) cases.push_back({d, ""});
  if (!o.batch_file.empty()) {
    // Say why a file cannot be read: a directory opens but fails on reading.
    std::error_code ec;
    if (std::filesystem::is_directory(o.batch_file, ec)) {
      print_error(o.batch_file + ": is a directory; expected a batch file with one descriptor per line");
      return kExitError;
    }
    errno = 0;
    std::ifstream f(o.batch_file);
    if (!f) {
      const int why = errno;
      print_error(o.batch_file + ": cannot open the batch file: " +
                  (why ? std::strerror(why) : "reason unknown"));
      return kExitError;
    }
    std::string line;
    for (int n = 1; std::getline(f, line); ++n) {
      const size_t hash = line.find('#');
      const std::string d = trim(hash == std::string::npos ? line : line.substr(0, hash));
      if (d.empty()) continue;
      if (d.find_first_of(" \t") != std::string::npos) {
        print_error(o.batch_file + ":" + std::to_string(n) + ": expected one descriptor per line, got '" + d + "'");
        return kExitError;
      }
      cases.push_back({d, o.batch_file + ":" + std::to_string(n)});
    }
    if (f.bad()) {
      print_error(o.batch_file + ": read error after " + counted(static_cast<int64_t>(cases.size()), "descriptor"));
      return kExitError;
    }
    if (cases.empty()) {
      print_error(o.batch_file + ": holds no descriptor");
      return kExitError;
    }
  }
  Tally tally;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i) std::printf("\n");
    if (!cases[i].where.empty()) std::printf("[%s]\n", cases[i].where.c_str());
    std::fflush(stdout);
    tally.add(run_case(cases[i].descriptor, mode, o).outcome);
    std::fflush(stdout);
  }
  if (cases.size() > 1)
    std::printf("\nsummary: %s, %d PASS, %d FAIL, %s\n", counted(static_cast<int64_t>(cases.size()), "case").c_str(),
                tally.pass, tally.fail, counted(tally.error, "error").c_str());
  return tally.exit_code();
}

}  // namespace convbwd::cli
