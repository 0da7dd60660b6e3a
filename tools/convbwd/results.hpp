// Machine-readable results: one row per case, written as CSV (--csv=FILE)
// and as a JSON array of objects (--json=FILE) from the same fields.
#pragma once

#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "modes.hpp"

namespace convbwd::cli {

struct ResultRow {
  std::string name;        // the descriptor's n"..."
  std::string descriptor;  // as reported
  std::string mode;        // check, perf, all
  std::string gradients;   // "gradInput+gradWeight+gradBias"; empty when the descriptor did not parse
  std::string dtype;       // "f32", or gradOutput:input:weight when they differ ("bf16:bf16:f32")
  std::string outcome;     // PASS, FAIL, ERROR
  std::optional<double> worst_scaled_error;  // check, when it ran
  std::optional<bool> subset;                // check: only a subset of elements was compared
  std::optional<double> median_ms, gflops;   // perf, when it ran
  std::string repro;
};

// The row of a case run in `mode`; `given` is the descriptor as the user
// wrote it, reported when the case has none (it did not parse).
ResultRow result_row(const CaseResult& r, Mode mode, const std::string& given);

// The CSV header line and one row (RFC 4180 quoting), each with its "\n".
std::string csv_header();
std::string csv_row(const ResultRow& row);

// A JSON string literal: quotes, backslashes and control bytes escaped;
// valid UTF-8 kept, any other byte replaced by U+FFFD (JSON text must be
// UTF-8; the repro field spells such bytes exactly, as \xNN).
std::string json_string(std::string_view s);
// A JSON number; the strings "inf", "-inf", "nan" for what JSON cannot
// represent as a number.
std::string json_number(double v);
std::string json_object(const ResultRow& row);
// "[\n  {...},\n  {...}\n]\n": one object per line.
std::string json_document(const std::vector<ResultRow>& rows);

// The --csv and --json files of a run.
class ResultFiles {
 public:
  // Creates the files before any case runs, so a bad path costs no work.
  // An error names the file and the flag.
  Error open(const std::string& csv_path, const std::string& json_path);
  // Records one case. The CSV row is appended and flushed. The JSON
  // document is written whole to FILE.tmp and renamed over FILE, so FILE
  // is always a complete document of the cases so far, even if a later case
  // kills the process. (A FILE that is not a regular file, such as a pipe or
  // /dev/stderr, gets the document once, from close().)
  void add(const ResultRow& row);
  void close();
  // A write failed (and was reported on stderr).
  bool failed() const { return failed_; }

 private:
  std::string write_json();  // the error, or empty
  void fail(const std::string& what);

  std::ofstream csv_;
  std::string csv_path_;
  std::string json_path_;
  bool json_streamed_ = false;  // not a regular file: written once, at close
  std::ofstream json_stream_;
  std::vector<ResultRow> rows_;
  bool failed_ = false;
};

}  // namespace convbwd::cli
