#include "convbwd/convbwd.hpp"

namespace convbwd {
// CMake's project(VERSION), passed by the build, so the library, the package
// files and the CLI's --version cannot disagree.
std::string_view version() { return CONVBWD_VERSION_STRING; }
}  // namespace convbwd
