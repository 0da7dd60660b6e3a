// The one rule for every environment variable convbwd reads. Unset or empty:
// the default. A value that does not parse as a whole is reported on stderr,
// once per variable and value, naming the variable, the value and what is
// accepted, and the default is used. The CLI asks env_reports() and exits 2
// when any variable was refused.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace convbwd::detail {

// The value of `name` as parsed, or nullopt (unset, empty, or refused).
//
// A decimal integer in [lo, hi]: digits only, an optional leading '-', no
// spaces, no suffix ("2x" and "1e3" are refused, not read as 2 and 1).
std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi);
// "0" or "1".
std::optional<bool> env_flag(const char* name);
// One of `words` (exact, case-sensitive): its index.
std::optional<int> env_choice(const char* name, std::initializer_list<std::string_view> words);

// The same parsers on a given string, for values that come from elsewhere
// (the CLI's flags): nullopt and `expected` says what is accepted.
std::optional<int64_t> parse_int(std::string_view s, int64_t lo, int64_t hi, std::string* expected);

// Reports `name`=`value` as refused (once per pair): "convbwd: NAME=VALUE is
// invalid; expected ...". For readers with rules of their own.
void report_invalid_env(const char* name, std::string_view value, const std::string& expected);
// The same for a setting made by a call: "convbwd: CALL(VALUE) is invalid;
// expected ...".
void report_invalid_call(const char* call, std::string_view value, const std::string& expected);
// Every report so far, in order, as printed (without the "convbwd: " prefix).
std::vector<std::string> env_reports();

// CONVBWD_VERBOSE: print at planning each implementation tried and why the
// others declined.
bool verbose();

}  // namespace convbwd::detail
