// The tiers' channels-last converters and NaN/Inf checks against the
// portable ones (which gemm and nonfinite tests hold to their definitions):
// the same bytes for every dtype and operand rounding, on random bit
// patterns with NaN payloads, infinities and subnormals among them; exact
// tiles, channel and pixel tails, sub-tiles, both fast layouts (unit pixel or
// channel stride) and the strided one, source offsets, and a destination
// pitch whose gaps must stay untouched.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/config.hpp"
#include "kernels/tier_kernels.hpp"
#include "util/tiers.hpp"

namespace convbwd::detail {
namespace {

using test::test_isas;
using test::tier_name;

// Every tier that runs here but the portable one, which is the comparison.
std::vector<Isa> vector_tiers() {
  std::vector<Isa> v;
  for (Isa i : test_isas())
    if (i != Isa::scalar) v.push_back(i);
  return v;
}

constexpr DataType kTypes[] = {DataType::f32, DataType::bf16, DataType::f16};
constexpr OperandRounding kRoundings[] = {OperandRounding::none, OperandRounding::hf32, OperandRounding::fp16};

// Random bit patterns: a quarter of them NaN, Inf or subnormal.
std::vector<unsigned char> source(DataType dt, size_t elems, std::mt19937_64& rng) {
  std::vector<unsigned char> s(elems * size_of(dt));
  for (size_t i = 0; i < elems; ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (dt == DataType::f32) {
      switch (u % 8) {
        case 0: u = (u & 0x807fffffu) | 0x7f800000u; break;        // NaN (or Inf if the payload is 0)
        case 1: u &= 0x807fffffu; break;                          // subnormal
        case 2: u = (u & 0x80000000u) | 0x7f800000u; break;        // +-Inf
        default: break;
      }
      std::memcpy(s.data() + i * 4, &u, 4);
    } else {
      auto h = static_cast<uint16_t>(u);
      if (u % 8 == 0) h = static_cast<uint16_t>(h | (dt == DataType::bf16 ? 0x7f80u : 0x7c00u));  // NaN or Inf
      std::memcpy(s.data() + i * 2, &h, 2);
    }
  }
  return s;
}

struct Layout2 {
  const char* name;
  int64_t cs, ws;  // element strides of channels and pixels
};

TEST(KernelToChannelsLast, SameBitsAsPortable) {
  const std::vector<Isa> tiers = vector_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no vector tier runs here: only the portable converter exists";
  std::mt19937_64 rng(7);
  const int64_t kChannels[] = {1, 5, 6, 8, 9, 15, 16, 17, 33};
  const int64_t kPixels[] = {1, 3, 7, 8, 9, 15, 16, 17, 40};
  for (Isa isa : tiers) {
    const ToChannelsLast convert = kernel_config(isa).to_channels_last;
    for (DataType dt : kTypes)
      for (OperandRounding rnd : kRoundings)
        for (int64_t nc : kChannels)
          for (int64_t nw : kPixels) {
            // Pixels contiguous (planar rows, slack after each), channels
            // contiguous (a channels-last image, slack after each pixel),
            // and neither (the portable path on every tier).
            const Layout2 layouts[] = {{"planar", nw + 3, 1}, {"channels_last", 1, nc + 2}, {"strided", 2, 2 * nc + 1}};
            for (const Layout2& l : layouts)
              for (int64_t index : {0, 5}) {
                const int64_t extent = index + (nc - 1) * l.cs + (nw - 1) * l.ws + 1;
                const std::vector<unsigned char> src = source(dt, static_cast<size_t>(extent), rng);
                const int64_t pitch = nc + 3;
                const size_t dst_floats = static_cast<size_t>(nw * pitch + 4);
                std::vector<float> want(dst_floats), got(dst_floats);
                std::memset(want.data(), 0xA5, dst_floats * sizeof(float));
                std::memset(got.data(), 0xA5, dst_floats * sizeof(float));
                scalar::to_channels_last(src.data(), dt, rnd, index, l.cs, l.ws, nc, nw, want.data(), pitch);
                convert(src.data(), dt, rnd, index, l.cs, l.ws, nc, nw, got.data(), pitch);
                ASSERT_EQ(0, std::memcmp(want.data(), got.data(), dst_floats * sizeof(float)))
                    << tier_name(isa) << " dtype " << to_string(dt) << " rounding " << static_cast<int>(rnd) << " "
                    << l.name << " nc " << nc << " nw " << nw << " index " << index;
                // The portable converter writes exactly its nc x nw elements.
                for (size_t e = 0; e < dst_floats; ++e) {
                  const auto w = static_cast<int64_t>(e) / pitch, c = static_cast<int64_t>(e) % pitch;
                  const bool mine = w < nw && c < nc;
                  uint32_t u;
                  std::memcpy(&u, &want[e], 4);
                  if (!mine) {
                    ASSERT_EQ(u, 0xA5A5A5A5u) << "element " << e << " written, nc " << nc << " nw " << nw;
                  }
                }
              }
          }
  }
}

TEST(KernelAnyNonfinite, SameAnswerAsPortableAtEveryPositionAndLength) {
  const std::vector<Isa> tiers = vector_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no vector tier runs here: only the portable check exists";
  const float kInf = std::numeric_limits<float>::infinity();
  const float kSpecial[] = {std::numeric_limits<float>::quiet_NaN(), std::bit_cast<float>(0x7f800001u),
                            std::bit_cast<float>(0xffc00000u), kInf, -kInf};
  // Finite values next to the boundary: largest, smallest subnormal, -0.
  const float kFinite[] = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                           std::bit_cast<float>(0x00000001u), -0.0f};
  for (Isa isa : tiers) {
    const AnyNonfinite check = kernel_config(isa).any_nonfinite;
    for (int64_t start : {0, 1, 3})  // unaligned starts
      for (int64_t n = 0; n <= 70; ++n) {
        // All finite, an Inf right past the end that must not count.
        std::vector<float> v(static_cast<size_t>(start + n + 1));
        for (size_t i = 0; i < v.size(); ++i) v[i] = kFinite[i % std::size(kFinite)];
        v[static_cast<size_t>(start + n)] = kInf;
        const float* p = v.data() + start;
        ASSERT_FALSE(scalar::any_nonfinite(p, n));
        ASSERT_FALSE(check(p, n)) << tier_name(isa) << " n " << n << " start " << start << ": the element past the end";
        for (int64_t at = 0; at < n; ++at)
          for (float s : kSpecial) {
            const float keep = v[static_cast<size_t>(start + at)];
            v[static_cast<size_t>(start + at)] = s;
            ASSERT_TRUE(scalar::any_nonfinite(p, n));
            ASSERT_TRUE(check(p, n)) << tier_name(isa) << " n " << n << " start " << start << " at " << at
                                     << " value 0x" << std::hex << std::bit_cast<uint32_t>(s);
            v[static_cast<size_t>(start + at)] = keep;
          }
      }
  }
}

}  // namespace
}  // namespace convbwd::detail
