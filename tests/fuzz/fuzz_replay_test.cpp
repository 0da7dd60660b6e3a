// Runs the fuzz targets without libFuzzer, in the normal test suite: every
// committed seed (corpus/<target>/) and every input that once found a bug
// (regressions/<target>/, kept after the fix), plus a batch of pseudo-random
// inputs so that the targets' own checks run on every build with any
// compiler. A failure aborts with "convbwd fuzz failure: ..." after the name
// of the input is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "fuzz_common.hpp"

namespace {

namespace fs = std::filesystem;
using Entry = int (*)(const uint8_t*, size_t);

int replay_dir(const fs::path& dir, Entry entry) {
  if (!fs::is_directory(dir)) return 0;
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.is_regular_file()) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s\n", f.string().c_str());
    entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  return static_cast<int>(files.size());
}

// Pseudo-random inputs: CONVBWD_FUZZ_RANDOM_INPUTS of them (default 300).
void random_inputs(Entry entry, uint64_t seed) {
  const char* env = std::getenv("CONVBWD_FUZZ_RANDOM_INPUTS");
  const int count = env ? std::atoi(env) : 300;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    std::vector<uint8_t> bytes(rng() % 160);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    entry(bytes.data(), bytes.size());
  }
}

void replay(const char* target, Entry entry) {
  const fs::path root = CONVBWD_FUZZ_DIR;
  const int seeds = replay_dir(root / "corpus" / target, entry);
  const int regressions = replay_dir(root / "regressions" / target, entry);
  std::printf("%s: %d seeds, %d regression inputs replayed\n", target, seeds, regressions);
  EXPECT_GT(seeds, 0) << "no seed corpus for " << target;
}

TEST(FuzzReplay, CApi) { replay("capi", convbwd_fuzz_capi); }
TEST(FuzzReplay, Descriptor) { replay("descriptor", convbwd_fuzz_descriptor); }
TEST(FuzzRandom, CApi) { random_inputs(convbwd_fuzz_capi, 1); }
TEST(FuzzRandom, Descriptor) { random_inputs(convbwd_fuzz_descriptor, 2); }
TEST(FuzzReplay, Plan) { replay("plan", convbwd_fuzz_plan); }
TEST(FuzzRandom, Plan) { random_inputs(convbwd_fuzz_plan, 4); }
#ifdef CONVBWD_FUZZ_HAVE_NPY
TEST(FuzzReplay, Npy) { replay("npy", convbwd_fuzz_npy); }
TEST(FuzzRandom, Npy) { random_inputs(convbwd_fuzz_npy, 3); }
#endif

}  // namespace
