// What the fuzz targets share: the byte reader that turns the fuzzer's input
// into choices, and the failure report. Each target is a plain function
//   int convbwd_fuzz_<name>(const uint8_t* data, size_t size);
// called by libFuzzer (libfuzzer_main.cpp) and, without libFuzzer, by the
// replay test, which runs every committed corpus and regression input.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "problem/spec.hpp"

extern "C" int convbwd_fuzz_capi(const uint8_t* data, size_t size);
extern "C" int convbwd_fuzz_descriptor(const uint8_t* data, size_t size);
extern "C" int convbwd_fuzz_npy(const uint8_t* data, size_t size);
extern "C" int convbwd_fuzz_plan(const uint8_t* data, size_t size);

namespace convbwd::fuzz {

// A broken promise: print why and abort, so that libFuzzer saves the input
// as a crash and the replay test fails on it.
[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "\nconvbwd fuzz failure: %s\n", why.c_str());
  std::fflush(stderr);
  std::abort();
}
#define CONVBWD_FUZZ_CHECK(cond, why) \
  do {                                \
    if (!(cond)) ::convbwd::fuzz::fail(std::string(#cond " -- ") + (why)); \
  } while (0)

// Reads choices from the input; past its end every read gives 0, so any
// prefix of an input is an input too (the fuzzer can shrink freely).
class Bytes {
 public:
  Bytes(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  uint8_t u8() { return pos_ < n_ ? d_[pos_++] : 0; }
  bool flip(int one_in = 2) { return u8() % one_in == 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | u8();
    return v;
  }
  // Uniform-ish in [lo, hi] from one byte (two when the range is wider).
  int64_t range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    const uint64_t v = span <= 256 ? u8() : (static_cast<uint64_t>(u8()) << 8 | u8());
    return lo + static_cast<int64_t>(v % span);
  }
  // The values that break size arithmetic, or an arbitrary 64-bit one.
  int64_t hostile() {
    static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    static constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    static constexpr int64_t kValues[] = {0, -1, 1, 2, -2, kMax, kMin, kMax - 1, kMin + 1, int64_t{1} << 31,
                                          (int64_t{1} << 31) - 1, int64_t{1} << 32, int64_t{1} << 62,
                                          (int64_t{1} << 62) + 1, 3037000500 /* sqrt(2^63) */, 65535, 65536,
                                          -(int64_t{1} << 32), 1000000007};
    const uint8_t k = u8();
    if (k < sizeof kValues / sizeof kValues[0]) return kValues[k];
    if (k < 128) return static_cast<int64_t>(u64());
    return range(-4, 12);
  }
  std::string_view rest() {
    std::string_view r(reinterpret_cast<const char*>(d_ + pos_), n_ - pos_);
    pos_ = n_;
    return r;
  }
  size_t remaining() const { return n_ - pos_; }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
};

// Work of the fp64 reference oracle on a problem: every gradient element
// walks all taps and channels, padding and stride gaps included, so the
// count is taps x channels x the larger image, not the MACs. The fuzzers run
// the oracle only below kMaxOracleSteps, so that no input takes seconds
// under ASan.
inline double oracle_steps(const detail::Geometry& g) {
  return static_cast<double>(g.n) * static_cast<double>(g.groups) * static_cast<double>(g.c) *
         static_cast<double>(g.k) * static_cast<double>(g.k_spatial()) *
         std::max(static_cast<double>(g.y_spatial()), static_cast<double>(g.x_spatial()));
}
constexpr double kMaxOracleSteps = 1e5;

}  // namespace convbwd::fuzz
