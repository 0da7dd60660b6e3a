// The modes of the convbwd tool. Each prints its own report and repro line
// and returns an Outcome; run() maps outcomes to the exit status.
#pragma once

#include <memory>
#include <string>

#include "args.hpp"

namespace convbwd::cli {

enum class Outcome { pass, fail, error };

struct CaseResult {
  Outcome outcome = Outcome::error;
  double worst_scaled_error = 0;  // check
  bool subset = false;            // check: only a subset of elements was compared
  double median_ms = 0, gflops = 0;  // perf
  std::string name;        // the descriptor's n"..."
  std::string descriptor;  // as reported (canonical when knobs changed it)
  std::string gradients;   // "gradInput+gradBias": those computed (empty until parsed)
  std::string dtype;       // "f32", or gradOutput:input:weight when they differ
  std::string repro;  // the case's repro line
};

// One descriptor in check, perf or all mode. Prints a block ending in a repro line.
CaseResult run_case(const std::string& descriptor, Mode mode, const Options& options, const Knobs& knobs = {});
CaseResult run_check(const Problem& problem, const std::string& descriptor, const Options& options);
CaseResult run_perf(const Problem& problem, const std::string& descriptor, const Options& options);
// Data mode (.npy in, .npy out).
Outcome run_data(const Options& options);

// Everything the parsed command line asks for; returns the exit status.
int run(const Options& options);

// Whether the library refused an environment variable (or a setting) so far:
// it printed why; the CLI then exits 2.
bool environment_refused();

// Memory a problem's tensors need in a mode (check: inputs, their absolute
// copies, outputs and the reference's; perf: inputs and outputs), so huge
// descriptors get a clear error instead of an allocation failure.
double needed_bytes(const Problem& problem, Mode mode);
constexpr double kMemoryLimitBytes = 16.0 * (1ull << 30);

// 64-byte aligned scratch for Plan::execute.
struct Workspace {
  std::unique_ptr<unsigned char, void (*)(void*)> ptr{nullptr, nullptr};
  size_t bytes = 0;
};
Workspace make_workspace(size_t bytes);

}  // namespace convbwd::cli
