// The per-ISA reruns of scripts/test.sh (CONVBWD_ISA=<tier> ctest -L isa)
// prove themselves: under CONVBWD_ISA the ISA in use must be the one asked
// for, by name, so a rerun that silently ran the default path again fails
// instead of passing twice. Tier names come from the library, so a new tier
// needs no edit here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "runtime/cpu.hpp"

namespace convbwd::detail {
namespace {

// Every tier this CPU runs, lowest first, named by the library.
std::vector<std::string> tiers_up_to_detected() {
  std::vector<std::string> v;
  for (int i = 0; i <= static_cast<int>(detected_isa()); ++i) v.emplace_back(to_string(static_cast<Isa>(i)));
  return v;
}

TEST(IsaOverride, RequestedIsaIsInUse) {
  const char* e = std::getenv("CONVBWD_ISA");
  if (e == nullptr || *e == '\0') {
    // Nothing requested: the best the CPU has.
    EXPECT_EQ(isa(), to_string(detected_isa()));
    return;
  }
  EXPECT_EQ(std::string(isa()), std::string(e))
      << "CONVBWD_ISA=" << e << " was not honoured: this rerun tests the " << isa() << " path, not the one it names";
  EXPECT_EQ(to_string(active_isa()), isa());
}

// The same check in child processes, one per tier of this CPU (the choice is
// made once per process), so the default ctest run fails too when the
// override is ignored, not only the reruns.
TEST(IsaOverride, EveryTierOfThisCpuCanBeForced) {
  char exe[PATH_MAX] = {};
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(len, 0) << "cannot find this test's executable";
  for (const std::string& tier : tiers_up_to_detected()) {
    ASSERT_NE(tier, "?");
    const std::string cmd = "CONVBWD_ISA=" + tier + " '" + std::string(exe, static_cast<size_t>(len)) +
                            "' --gtest_filter=IsaOverride.RequestedIsaIsInUse >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "under CONVBWD_ISA=" << tier << " the library ran another ISA";
  }
}

}  // namespace
}  // namespace convbwd::detail
