// The last-level cache size the planners read (CpuFeatures::llc_bytes, from
// CPUID) against what Linux reports in sysfs, an independent reading of the
// same CPU: the size of the highest-level data or unified cache of cpu0.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "runtime/cpu.hpp"

namespace convbwd::detail {
namespace {

// Bytes of the highest-level non-instruction cache sysfs lists for cpu0,
// 0 where it lists none (no sysfs, or a kernel that does not say).
int64_t sysfs_llc_bytes() {
  int64_t bytes = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction" || level < best_level || size.empty()) continue;
    int64_t scale = 1;
    if (size.back() == 'K') scale = int64_t{1} << 10;
    if (size.back() == 'M') scale = int64_t{1} << 20;
    best_level = level;
    bytes = std::stoll(size) * scale;
  }
  return bytes;
}

TEST(CpuFeatures, LastLevelCacheMatchesSysfs) {
  const int64_t ours = cpu_features().llc_bytes;
  const int64_t linux_says = sysfs_llc_bytes();
  if (linux_says == 0) {
    // Nothing to compare with; a reported size must still be plausible.
    EXPECT_TRUE(ours == 0 || (ours >= (int64_t{64} << 10) && ours <= (int64_t{64} << 30))) << ours;
    return;
  }
  EXPECT_EQ(ours, linux_says) << "CPUID gives " << ours << " bytes, sysfs " << linux_says;
}

}  // namespace
}  // namespace convbwd::detail
