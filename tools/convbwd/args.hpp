// Command-line flags of the convbwd tool, and its --help text.
#pragma once

#include <cstdint>
#include <array>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "host.hpp"
#include "progress.hpp"

namespace convbwd::cli {

enum class Mode {
  check,  // run on seeded data, compare with the reference
  perf,   // time Plan::execute
  all,    // check, then perf (the no-argument default)
  data,   // .npy in, .npy out
};
const char* to_string(Mode);

// The process exit codes.
enum Exit : int {
  kExitPass = 0,
  kExitFail = 1,   // a check found an error above tolerance
  kExitError = 2,  // bad flag, descriptor, file or problem
};

// benchdnn's knobs: each applies to the descriptors after it, on the command
// line and in batch files (which read like more arguments); --reset restores
// these defaults.
struct Knobs {
  bool deconv = false;                        // --deconv: transposed (--conv: normal)
  std::optional<std::array<bool, 3>> dir;     // --dir=BWD_D|BWD_W|BWD_WB: the gradients
  std::optional<std::array<DataType, 3>> dt;  // --dt=: gradOutput, input, weight
  int64_t mb = 0;                             // --mb=N (0: the descriptor's)
  std::string match;                          // --match=REGEX: only matching descriptors
};

// Applies `arg` to `knobs` if it is one of them: true when consumed, false
// when `arg` is not a knob, an Error naming the value otherwise.
Result<bool> apply_knob(std::string_view arg, Knobs& knobs);

// A descriptor or a batch file, with the knobs in force where it was given.
struct Source {
  std::string text;
  bool batch = false;
  Knobs knobs;
};

struct Options {
  std::optional<Mode> mode;  // unset: check when a descriptor or batch is given
  std::vector<std::string> descriptors;  // positional arguments
  std::string batch_file;                // the last --batch
  std::vector<Source> sources;           // descriptors and batch files, in order
  uint64_t seed = 1;
  Fill fill = Fill::uniform;
  std::optional<int> repeats;  // perf: timed runs (default 5, or 3 when one run is slow)
  int warmup = 1;
  bool cold_cache = false;     // perf: evict the caches before every run
  std::optional<int> threads;  // convbwd::set_num_threads; unset: library default
  bool check_all = false;      // check every element even for huge problems
  double check_budget_gflop = 1;  // reference work above which a subset is checked
  std::string grad_output_path, input_path, weight_path, out_dir;
  std::string csv_path;   // --csv=FILE: one row per case, for machines
  std::string json_path;  // --json=FILE: the same rows as one JSON array
  Progress progress = Progress::auto_;  // --progress: the line on stderr
  bool verbose = false;
  bool help = false;
  bool version = false;  // --version: print it and exit
  bool no_arguments = false;  // argv had nothing: run the built-in default
};

// Parses argv. Errors name the flag and what was expected.
Result<Options> parse_args(int argc, const char* const* argv);

// The full --help text: flags, descriptor syntax, environment variables.
const char* help_text();

// The CANN 2D sample's problem, the no-argument default.
constexpr const char* kDefaultDescriptor = "mb4ic30ih80oc320kh3ph1";

}  // namespace convbwd::cli
