// Dispatch: single descriptors, batches, the no-argument default.
#include "modes.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <regex>
#include <sstream>
#include <vector>

#include <unistd.h>  // isatty

#include "problem/printable.hpp"
#include "problem/spec.hpp"
#include "runtime/env.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "results.hpp"

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

CaseResult run_case(const std::string& given, Mode mode, const Options& o, const Knobs& knobs) {
  CaseResult res;
  // --deconv: the descriptor names a transposed convolution (tokens may come
  // in any order, so "tr_" in front is the same as "_tr" at the end).
  auto parsed = Problem::parse(knobs.deconv ? "tr_" + given : given);
  res.repro = repro_line(mode, given, o);
  if (!parsed) {
    print_error(parsed.error().message);
    std::printf("%s\n", res.repro.c_str());
    return res;
  }
  res.name = parsed->name;
  // The other knobs override the descriptor's minibatch, gradients and dtypes.
  Problem& pk = parsed.value();
  const bool knobbed = knobs.deconv || knobs.mb > 0 || knobs.dir || knobs.dt;
  if (knobs.mb > 0) pk.input.dims[0] = pk.grad_output.dims[0] = knobs.mb;
  if (knobs.dir) pk.output_mask = *knobs.dir;
  if (knobs.dt) {
    pk.grad_output.dtype = (*knobs.dt)[0];
    pk.input.dtype = (*knobs.dt)[1];
    pk.weight.dtype = (*knobs.dt)[2];
  }
  for (int i = 0; i < 3; ++i)
    if (pk.output_mask[i])
      res.gradients += (res.gradients.empty() ? "" : "+") + std::string(gradient_name(static_cast<Gradient>(i)));
  res.dtype = dtype_text(pk.grad_output.dtype, pk.input.dtype, pk.weight.dtype);
  if (!pk.name.empty()) std::printf("name: %s\n", pk.name.c_str());
  // The case keeps the user's spelling (it parses to the same problem, so it
  // is a valid repro) unless knobs changed it: then the canonical form, which
  // says everything the knobs did. -v prints the canonical one too.
  const std::string desc = knobbed ? pk.descriptor() : given;
  res.repro = repro_line(mode == Mode::all ? Mode::check : mode, desc, o);
  res.descriptor = desc;
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
    auto labelled = [&](CaseResult r) {
      r.name = res.name;
      r.repro = res.repro;
      r.descriptor = res.descriptor;
      r.gradients = res.gradients;
      r.dtype = res.dtype;
      return r;
    };
    if (mode == Mode::check) return labelled(run_check(parsed.value(), desc, o));
    if (mode == Mode::perf) return labelled(run_perf(parsed.value(), desc, o));
    // all: check, then time.
    CaseResult c = run_check(parsed.value(), desc, o);
    if (c.outcome == Outcome::error) return labelled(c);
    CaseResult t = run_perf(parsed.value(), desc, o);
    c.median_ms = t.median_ms;
    c.gflops = t.gflops;
    if (t.outcome == Outcome::error) c.outcome = Outcome::error;
    return labelled(c);
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

namespace {

struct Case {
  std::string descriptor, where;
  Knobs knobs;
};

bool matches(const Knobs& k, const std::string& descriptor) {
  return k.match.empty() || std::regex_search(descriptor, std::regex(k.match));
}

// Reads a batch file as benchdnn does: whitespace-separated words, '#' to the
// end of a line a comment; knobs change what follows (in nested files too),
// --batch=FILE reads FILE there (relative to this file's folder first).
bool read_batch(const std::string& path, Knobs& knobs, std::vector<Case>& cases, int depth) {
  if (depth > 16) {
    print_error(path + ": batch files nested more than 16 deep (does one include itself?)");
    return false;
  }
  // Say why a file cannot be read: a directory opens but fails on reading.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    print_error(path + ": is a directory; expected a batch file of descriptors and knobs");
    return false;
  }
  errno = 0;
  std::ifstream f(path);
  if (!f) {
    const int why = errno;
    print_error(path + ": cannot open the batch file: " + (why ? std::strerror(why) : "reason unknown"));
    return false;
  }
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    const size_t hash = line.find('#');
    std::istringstream words(hash == std::string::npos ? line : line.substr(0, hash));
    const std::string where = path + ":" + std::to_string(n);
    for (std::string w; words >> w;) {
      if (w.rfind("--batch=", 0) == 0) {
        std::string nested = w.substr(8);
        const std::filesystem::path beside = std::filesystem::path(path).parent_path() / nested;
        if (std::filesystem::path(nested).is_relative() && std::filesystem::exists(beside, ec)) nested = beside.string();
        if (!read_batch(nested, knobs, cases, depth + 1)) return false;
        continue;
      }
      if (w.rfind("--", 0) == 0) {
        auto k = apply_knob(w, knobs);
        if (!k) {
          print_error(where + ": " + k.error().message);
          return false;
        }
        if (!k.value()) {
          print_error(where + ": '" + w + "' is not a knob batch files take; expected --conv, --deconv, --dir=, "
                      "--dt=, --mb=, --match=, --reset or --batch=");
          return false;
        }
        continue;
      }
      if (matches(knobs, w)) cases.push_back({w, where, knobs});
    }
  }
  if (f.bad()) {
    print_error(path + ": read error after " + counted(static_cast<int64_t>(cases.size()), "descriptor"));
    return false;
  }
  return true;
}

}  // namespace

bool environment_refused() { return !convbwd::detail::env_reports().empty(); }

int run(const Options& o) {
  if (o.verbose) setenv("CONVBWD_VERBOSE", "1", 1);
  if (progress_wanted(o.progress, isatty(STDERR_FILENO))) {
    StatusLine::Config c;
    c.out = stderr;
    // --progress=always is for logs and tests: it shows every task at once.
    if (o.progress == Progress::always) c.delay_s = 0;
    c.width = terminal_columns(STDERR_FILENO);
    status_line().configure(c);
  }
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

  // Cases: descriptors and batch files in the order given, each with the
  // knobs in force there.
  std::vector<Case> cases;
  for (const Source& src : o.sources) {
    Knobs knobs = src.knobs;
    if (!src.batch) {
      if (matches(knobs, src.text)) cases.push_back({src.text, "", knobs});
      continue;
    }
    const size_t before = cases.size();
    if (!read_batch(src.text, knobs, cases, 0)) return kExitError;
    if (cases.size() == before) {
      print_error(src.text + ": holds no descriptor" + (knobs.match.empty() ? "" : " matching --match"));
      return kExitError;
    }
  }
  // --csv, --json: created before any case runs, so a bad path costs no work.
  ResultFiles results;
  if (const Error e = results.open(o.csv_path, o.json_path)) {
    print_error(e.message);
    return kExitError;
  }
  Tally tally;
  std::vector<std::string> failed;  // "where name: repro" of each case that did not pass
  // Progress through a batch whose report goes to a file: one line on the
  // terminal, rewritten per case. (On a terminal the report itself shows it.)
  StatusLine& line = status_line();
  const bool progress = cases.size() > 1 && line.enabled() && !isatty(STDOUT_FILENO);
  for (size_t i = 0; i < cases.size(); ++i) {
    if (progress)
      line.set_case("case " + std::to_string(i + 1) + "/" + std::to_string(cases.size()) + ", " +
                        std::to_string(tally.fail) + " FAIL, " + counted(tally.error, "error") + " so far",
                    detail::printable(cases[i].descriptor));
    if (i) std::printf("\n");
    if (!cases[i].where.empty()) std::printf("[%s]\n", cases[i].where.c_str());
    std::fflush(stdout);
    const CaseResult r = run_case(cases[i].descriptor, mode, o, cases[i].knobs);
    tally.add(r.outcome);
    results.add(result_row(r, mode, cases[i].descriptor));
    if (r.outcome != Outcome::pass)
      failed.push_back(std::string(r.outcome == Outcome::fail ? "FAIL  " : "ERROR ") +
                       (cases[i].where.empty() ? "" : cases[i].where + " ") +
                       (r.name.empty() ? "" : "n\"" + r.name + "\" ") + r.repro);
    std::fflush(stdout);
  }
  results.close();
  if (progress) line.finish(counted(static_cast<int64_t>(cases.size()), "case") + " done");
  if (cases.size() > 1) {
    std::printf("\nsummary: %s, %d PASS, %d FAIL, %s\n", counted(static_cast<int64_t>(cases.size()), "case").c_str(),
                tally.pass, tally.fail, counted(tally.error, "error").c_str());
    for (const std::string& f : failed) std::printf("  %s\n", f.c_str());
  }
  // A results file that could not be written is an error, as a bad path is.
  return results.failed() ? kExitError : tally.exit_code();
}

}  // namespace convbwd::cli
