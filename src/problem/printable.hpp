// Text from users (descriptors, environment values) echoed into messages:
// control bytes and non-ASCII are shown as \xNN, so a message shows what was
// given without sending raw bytes to the terminal.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace convbwd::detail {

inline std::string printable(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace convbwd::detail
