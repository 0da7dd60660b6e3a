#include "report.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include <unistd.h>  // environ

#include "progress.hpp"

namespace convbwd::cli {

namespace {

// A word as a shell reads it back: bare when it is made of safe characters,
// else in single quotes; with control or non-ASCII bytes, bash's $'...' with
// \xNN escapes, so the line shows no raw bytes and still reruns exactly.
std::string shell_word(const std::string& w) {
  bool safe = !w.empty(), raw = false;
  for (const char ch : w) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) raw = true;
    if (!std::isalnum(c) && (c == 0 || !std::strchr("_-./:=,+@%", c))) safe = false;
  }
  if (safe) return w;
  if (raw) {
    std::string q = "$'";
    for (const char ch : w) {
      const auto c = static_cast<unsigned char>(ch);
      char buf[8];
      if (c < 0x20 || c >= 0x7f || ch == '\'' || ch == '\\') {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        q += buf;
      } else {
        q += ch;
      }
    }
    return q + "'";
  }
  std::string q = "'";
  for (const char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string format_exact(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string repro_line(Mode mode, const std::string& descriptor, const Options& o) {
  // The environment variables that change what runs (the instruction set,
  // the test knobs), as assignments before the command. The thread count is
  // given as --threads instead, CONVBWD_VERBOSE only prints, and the test
  // scripts' CONVBWD_SKIP_* switches are read by no library or CLI code.
  std::string env;
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    if (var.substr(0, 8) != "CONVBWD_" || var.substr(0, 20) == "CONVBWD_NUM_THREADS=" ||
        var.substr(0, 16) == "CONVBWD_VERBOSE=" || var.substr(0, 13) == "CONVBWD_SKIP_")
      continue;
    const size_t eq = var.find('=');
    if (eq == std::string_view::npos || eq + 1 == var.size()) continue;  // empty: the default
    env += std::string(var.substr(0, eq + 1)) + shell_word(std::string(var.substr(eq + 1))) + " ";
  }
  std::string s = "repro: " + env + "convbwd --mode=" + std::string(to_string(mode)) + " " + shell_word(descriptor);
  if (mode == Mode::data) {
    s += " --gradOutput=" + shell_word(o.grad_output_path);
    if (!o.input_path.empty()) s += " --input=" + shell_word(o.input_path);
    if (!o.weight_path.empty()) s += " --weight=" + shell_word(o.weight_path);
    s += " --out-dir=" + shell_word(o.out_dir);
  }
  if (mode == Mode::check || mode == Mode::all) {
    s += " --seed=" + std::to_string(o.seed);
    if (o.fill == Fill::small_ints) s += " --fill=ints";
    if (o.check_all) s += " --check-all";
    // The budget decides which elements a subset check compares.
    if (o.check_budget_gflop != Options{}.check_budget_gflop)
      s += " --check-budget=" + format_exact(o.check_budget_gflop);
  }
  if (mode == Mode::perf || mode == Mode::all) {
    if (o.warmup != Options{}.warmup) s += " --warmup=" + std::to_string(o.warmup);
    if (o.repeats) s += " --repeats=" + std::to_string(*o.repeats);
    if (o.cold_cache) s += " --cold-cache";
  }
  // Always: without --threads the count comes from the environment or the
  // core count, which differ between machines.
  s += " --threads=" + std::to_string(o.threads ? *o.threads : num_threads());
  return s;
}

std::string counted(int64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string format_dims(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string format_ms(double ms) {
  char buf[32];
  if (ms >= 100) std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  else if (ms >= 1) std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  else std::snprintf(buf, sizeof buf, "%.4f ms", ms);
  return buf;
}

std::string format_count(double v) {
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.3gG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

const char* gradient_name(Gradient g) {
  switch (g) {
    case Gradient::input: return "gradInput";
    case Gradient::weight: return "gradWeight";
    case Gradient::bias: return "gradBias";
  }
  return "?";
}

std::string dtype_text(DataType go, DataType in, DataType w) {
  if (go == in && in == w) return std::string(to_string(go));
  return std::string(to_string(go)) + ":" + std::string(to_string(in)) + ":" + std::string(to_string(w));
}

void print_error(const std::string& message) {
  std::fflush(stdout);
  status_line().interrupt();
  std::fprintf(stderr, "error: %s\n", message.c_str());
}

}  // namespace convbwd::cli
