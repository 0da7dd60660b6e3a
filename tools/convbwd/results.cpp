#include "results.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "report.hpp"

namespace convbwd::cli {

namespace {

// RFC 4180: quoted when it holds a comma, a quote or a line break; quotes doubled.
std::string csv_field(const std::string& f) {
  if (f.find_first_of(",\"\n\r") == std::string::npos) return f;
  std::string q = "\"";
  for (const char c : f) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), 0 if there is none.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(k) < 0x80 || b(k) > 0xbf) return 0;
  return n;
}

}  // namespace

ResultRow result_row(const CaseResult& r, Mode mode, const std::string& given) {
  ResultRow row;
  row.name = r.name;
  row.descriptor = r.descriptor.empty() ? given : r.descriptor;
  row.mode = to_string(mode);
  row.gradients = r.gradients;
  row.dtype = r.dtype;
  row.outcome = r.outcome == Outcome::pass ? "PASS" : r.outcome == Outcome::fail ? "FAIL" : "ERROR";
  // A case that could not run has no figures (an all-mode case whose timing
  // failed keeps none either: its outcome is ERROR).
  if (r.outcome != Outcome::error) {
    if (mode != Mode::perf) {
      row.worst_scaled_error = r.worst_scaled_error;
      row.subset = r.subset;
    }
    if (mode != Mode::check) {
      row.median_ms = r.median_ms;
      row.gflops = r.gflops;
    }
  }
  row.repro = r.repro;
  return row;
}

std::string csv_header() {
  return "name,descriptor,mode,gradients,dtype,outcome,worst_scaled_error,subset,median_ms,gflops,repro\n";
}

std::string csv_row(const ResultRow& row) {
  auto num = [](const std::optional<double>& v) { return v ? format_exact(*v) : std::string(); };
  return csv_field(row.name) + "," + csv_field(row.descriptor) + "," + row.mode + "," + row.gradients + "," +
         row.dtype + "," + row.outcome + "," + num(row.worst_scaled_error) + "," +
         (row.subset ? (*row.subset ? "1" : "0") : "") + "," + num(row.median_ms) + "," + num(row.gflops) + "," +
         csv_field(row.repro) + "\n";
}

std::string json_string(std::string_view s) {
  std::string q = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      q += '\\';
      q += s[i++];
    } else if (c < 0x20 || c == 0x7f) {
      // DEL too: JSON allows it raw, but a terminal showing the file should not get it.
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      q += buf;
      ++i;
    } else if (c < 0x80) {
      q += s[i++];
    } else if (const size_t n = utf8_length(s, i)) {
      q.append(s.substr(i, n));
      i += n;
    } else {
      q += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    }
  }
  return q + "\"";
}

std::string json_number(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  return format_exact(v);
}

std::string json_object(const ResultRow& row) {
  auto num = [](const std::optional<double>& v) { return v ? json_number(*v) : std::string("null"); };
  return "{\"name\": " + json_string(row.name) + ", \"descriptor\": " + json_string(row.descriptor) +
         ", \"mode\": " + json_string(row.mode) + ", \"gradients\": " + json_string(row.gradients) +
         ", \"dtype\": " + json_string(row.dtype) + ", \"outcome\": " + json_string(row.outcome) +
         ", \"worst_scaled_error\": " + num(row.worst_scaled_error) +
         ", \"subset\": " + (row.subset ? (*row.subset ? "true" : "false") : "null") +
         ", \"median_ms\": " + num(row.median_ms) + ", \"gflops\": " + num(row.gflops) +
         ", \"repro\": " + json_string(row.repro) + "}";
}

std::string json_document(const std::vector<ResultRow>& rows) {
  std::string s = "[";
  for (size_t i = 0; i < rows.size(); ++i) s += (i ? ",\n  " : "\n  ") + json_object(rows[i]);
  return s + (rows.empty() ? "]\n" : "\n]\n");
}

Error ResultFiles::open(const std::string& csv_path, const std::string& json_path) {
  auto unwritable = [](const std::string& path, const char* flag) {
    return Error{Status::invalid_parameter, path + ": cannot open for writing (" + flag + ")"};
  };
  if (!csv_path.empty()) {
    csv_path_ = csv_path;
    csv_.open(csv_path);
    if (!csv_) return unwritable(csv_path, "--csv");
    csv_ << csv_header() << std::flush;
  }
  if (!json_path.empty()) {
    json_path_ = json_path;
    std::error_code ec;
    const auto st = std::filesystem::status(json_path, ec);
    json_streamed_ = std::filesystem::exists(st) && !std::filesystem::is_regular_file(st);
    if (json_streamed_) {
      json_stream_.open(json_path);
      if (!json_stream_) return unwritable(json_path, "--json");
    } else {
      // An empty document now: the path is known to work, and a run that
      // stops before its first case still leaves valid JSON.
      if (!write_json().empty()) return unwritable(json_path, "--json");
    }
  }
  return {};
}

void ResultFiles::fail(const std::string& what) {
  if (!failed_) print_error(what);  // once: the next cases would only repeat it
  failed_ = true;
}

std::string ResultFiles::write_json() {
  const std::string tmp = json_path_ + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  f << json_document(rows_);
  f.close();
  if (!f) {
    std::remove(tmp.c_str());
    return tmp + ": cannot write the JSON results (--json)";
  }
  if (std::rename(tmp.c_str(), json_path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return json_path_ + ": cannot replace it with " + tmp + " (--json): " + why;
  }
  return {};
}

void ResultFiles::add(const ResultRow& row) {
  if (csv_.is_open()) {
    csv_ << csv_row(row) << std::flush;
    if (!csv_) fail(csv_path_ + ": cannot write the CSV results (--csv)");
  }
  if (json_path_.empty()) return;
  rows_.push_back(row);
  if (json_streamed_) return;
  if (const std::string e = write_json(); !e.empty()) fail(e);
}

void ResultFiles::close() {
  if (json_stream_.is_open()) {
    json_stream_ << json_document(rows_) << std::flush;
    if (!json_stream_) fail(json_path_ + ": cannot write the JSON results (--json)");
    json_stream_.close();
  }
  if (csv_.is_open()) csv_.close();
}

}  // namespace convbwd::cli
