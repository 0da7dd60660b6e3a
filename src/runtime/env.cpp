#include "runtime/env.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "problem/printable.hpp"

namespace convbwd::detail {
namespace {

std::mutex g_mutex;
std::vector<std::string> g_reports;  // guarded by g_mutex

// The variable's value, or nullptr when unset or empty.
const char* value_of(const char* name) {
  const char* e = std::getenv(name);
  return e && *e ? e : nullptr;
}

void report_once(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const std::string& r : g_reports)
    if (r == message) return;
  g_reports.push_back(message);
  std::fprintf(stderr, "convbwd: %s\n", message.c_str());
}

}  // namespace

std::optional<int64_t> parse_int(std::string_view s, int64_t lo, int64_t hi, std::string* expected) {
  *expected = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) i = 1;
  if (i == s.size()) return std::nullopt;
  // Accumulated negatively, so INT64_MIN parses and overflow is caught.
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, int64_t{10}, &v) || __builtin_sub_overflow(v, int64_t{s[i] - '0'}, &v))
      return std::nullopt;
  }
  if (!negative) {
    if (v == INT64_MIN) return std::nullopt;
    v = -v;
  }
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

void report_invalid_env(const char* name, std::string_view value, const std::string& expected) {
  report_once(std::string(name) + "=" + printable(value) + " is invalid; expected " + expected);
}

void report_invalid_call(const char* call, std::string_view value, const std::string& expected) {
  report_once(std::string(call) + "(" + printable(value) + ") is invalid; expected " + expected);
}

std::vector<std::string> env_reports() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_reports;
}

std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi) {
  const char* e = value_of(name);
  if (!e) return std::nullopt;
  std::string expected;
  const std::optional<int64_t> v = parse_int(e, lo, hi, &expected);
  if (!v) report_invalid_env(name, e, expected);
  return v;
}

std::optional<bool> env_flag(const char* name) {
  const char* e = value_of(name);
  if (!e) return std::nullopt;
  const std::string_view s(e);
  if (s == "0") return false;
  if (s == "1") return true;
  report_invalid_env(name, s, "0 or 1");
  return std::nullopt;
}

std::optional<int> env_choice(const char* name, std::initializer_list<std::string_view> words) {
  const char* e = value_of(name);
  if (!e) return std::nullopt;
  int i = 0;
  std::string expected;
  for (const std::string_view w : words) {
    if (w == e) return i;
    expected += (i == 0 ? "" : i + 1 == static_cast<int>(words.size()) ? " or " : ", ") + std::string(w);
    ++i;
  }
  report_invalid_env(name, e, expected);
  return std::nullopt;
}

bool verbose() {
  return env_flag("CONVBWD_VERBOSE").value_or(false);
}

}  // namespace convbwd::detail
