// convbwd: the command-line tool. Parsing is in args.cpp, the modes in
// check.cpp, perf.cpp and data.cpp, dispatch in modes.cpp; the report lines
// in report.cpp, the --csv/--json files in results.cpp, the terminal's
// progress line in progress.cpp.
#include <cstdio>
#include <exception>
#include <new>

#include "args.hpp"
#include "modes.hpp"
#include "report.hpp"

int main(int argc, char** argv) {
  using namespace convbwd::cli;
  auto options = parse_args(argc, argv);
  if (!options) {
    print_error(options.error().message);
    return kExitError;
  }
  if (options->help) {
    std::fputs(help_text(), stdout);
    return kExitPass;
  }
  if (options->version) {
    std::printf("convbwd %.*s (isa %.*s)\n", static_cast<int>(convbwd::version().size()), convbwd::version().data(),
                static_cast<int>(convbwd::isa().size()), convbwd::isa().data());
    return kExitPass;
  }
  // Nothing should throw past the modes; if memory runs out or a library
  // throws anyway, say so instead of aborting.
  try {
    const int rc = run(options.value());
    // A variable read while planning (a test knob) refused on the way.
    return environment_refused() ? kExitError : rc;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
  } catch (const std::exception& e) {
    print_error(std::string("unexpected exception: ") + e.what());
  }
  return kExitError;
}
