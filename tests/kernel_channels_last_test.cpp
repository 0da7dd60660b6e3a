// The tiers' channels-last converters, NaN/Inf checks and row adds against
// the portable ones (which gemm and nonfinite tests hold to their definitions):
// the same bytes for every dtype and operand rounding (an fp16 signaling NaN
// excepted, which the vector tiers' F16C decode quiets), on random bit
// patterns with NaN payloads, infinities and subnormals among them; exact
// tiles, channel and pixel tails, sub-tiles, the fast layouts (pixels one or
// two elements apart, or channels one apart) and the strided one, source offsets, and a destination
// pitch whose gaps must stay untouched.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
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

// Whether a vector tier's word `got` is the portable converter's `want`: the
// same bits, but that F16C's decode (the vector tiers' fast layouts; strided
// ones take the portable path) quiets an fp16 signaling NaN, setting fp32
// bit 22 and nothing else. No result can show that: every converted value
// feeds arithmetic, which quiets a NaN anyway and picks the NaN it returns by
// operand position, not by kind. fp32 and bf16 NaNs keep their bits.
bool same_word(DataType src, uint32_t want, uint32_t got) {
  const bool nan = (want & 0x7fffffffu) > 0x7f800000u;
  return got == want || (src == DataType::f16 && nan && got == (want | 0x00400000u));
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
  const int64_t kPixels[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40};
  for (Isa isa : tiers) {
    const ToChannelsLast convert = kernel_config(isa).to_channels_last;
    for (DataType dt : kTypes)
      for (OperandRounding rnd : kRoundings)
        for (int64_t nc : kChannels)
          for (int64_t nw : kPixels) {
            // Pixels contiguous (planar rows, slack after each), every
            // other pixel of planar rows (a stride-2 column phase), channels
            // contiguous (a channels-last image, slack after each pixel),
            // and neither (the portable path on every tier). The source
            // ends at the last element read: the sanitizer builds catch a
            // read past it.
            const Layout2 layouts[] = {{"planar", nw + 3, 1},
                                       {"planar_every_other", 2 * nw + 1, 2},
                                       {"channels_last", 1, nc + 2},
                                       {"strided", 2, 2 * nc + 1}};
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
                for (size_t e = 0; e < dst_floats; ++e)
                  ASSERT_TRUE(same_word(dt, std::bit_cast<uint32_t>(want[e]), std::bit_cast<uint32_t>(got[e])))
                      << std::hex << "want " << std::bit_cast<uint32_t>(want[e]) << " got "
                      << std::bit_cast<uint32_t>(got[e]) << std::dec << " "
                      << tier_name(isa) << " dtype " << to_string(dt) << " rounding " << static_cast<int>(rnd) << " "
                      << l.name << " nc " << nc << " nw " << nw << " index " << index << " element " << e;
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

// Each tier's two-phase converter (ToChannelsLastSplit) against the portable
// converter run on every other pixel from 0 and from 1: the same words in
// both phase buffers, the gaps of their pitch and the words past their last
// pixel untouched, over channel and pixel tails around each tier's W x W
// transpose (odd and even pixel counts), source offsets and every dtype and
// rounding. The source ends at its last element: the sanitizer builds catch
// a read past it.
TEST(KernelToChannelsLastSplit, SameBitsAsPortableEveryOtherPixel) {
  std::mt19937_64 rng(9);
  const int64_t kChannels[] = {1, 6, 8, 9, 16, 17};
  const int64_t kPixels[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 34, 63, 64, 65, 70};
  for (Isa isa : test_isas()) {
    const ToChannelsLastSplit split = kernel_config(isa).to_channels_last_split;
    ASSERT_NE(split, nullptr) << tier_name(isa);
    for (DataType dt : kTypes)
      for (OperandRounding rnd : kRoundings)
        for (int64_t nc : kChannels)
          for (int64_t nw : kPixels)
            for (int64_t index : {0, 3}) {
              const int64_t cs = nw + 2;
              const int64_t extent = index + (nc - 1) * cs + nw;
              const std::vector<unsigned char> src = source(dt, static_cast<size_t>(extent), rng);
              const int64_t pitch = nc + 3;
              const size_t floats = static_cast<size_t>(((nw + 1) / 2) * pitch + 4);
              std::vector<float> want_even(floats), want_odd(floats), got_even(floats), got_odd(floats);
              for (auto* b : {&want_even, &want_odd, &got_even, &got_odd})
                std::memset(b->data(), 0xA5, floats * sizeof(float));
              scalar::to_channels_last(src.data(), dt, rnd, index, cs, 2, nc, (nw + 1) / 2, want_even.data(), pitch);
              scalar::to_channels_last(src.data(), dt, rnd, index + 1, cs, 2, nc, nw / 2, want_odd.data(), pitch);
              split(src.data(), dt, rnd, index, cs, nc, nw, got_even.data(), got_odd.data(), pitch);
              for (size_t e = 0; e < floats; ++e) {
                const std::string where = tier_name(isa) + " dtype " + std::string(to_string(dt)) + " rounding " +
                                          std::to_string(static_cast<int>(rnd)) + " nc " + std::to_string(nc) +
                                          " nw " + std::to_string(nw) + " index " + std::to_string(index) +
                                          " element " + std::to_string(e);
                ASSERT_TRUE(same_word(dt, std::bit_cast<uint32_t>(want_even[e]), std::bit_cast<uint32_t>(got_even[e])))
                    << "even phase, " << where;
                ASSERT_TRUE(same_word(dt, std::bit_cast<uint32_t>(want_odd[e]), std::bit_cast<uint32_t>(got_odd[e])))
                    << "odd phase, " << where;
              }
            }
  }
}

// The bf16 pair transpose of every tier, the portable one included, against
// its definition (kernels/gemm.hpp) written out here: both pairings, tails
// of rows and of elements around each tier's 16 x 16 block, odd rows and
// lengths (zero high halves), a leading zero half (lead 1: every pair
// straddles two 32-bit words of the row), a row stride with slack and an
// odd source offset (pairs on 16-bit boundaries), NaN and Inf halves kept or
// zeroed and reported, an Inf right before and right after each row that
// must be neither read nor reported, and a destination pitch whose gaps must
// stay untouched.
TEST(KernelBf16PairsChannelsLast, MatchesItsDefinitionOnEveryTier) {
  std::mt19937_64 rng(11);
  const int64_t kRows[] = {1, 2, 3, 9, 14, 15, 16, 17, 31, 32, 33, 70};
  const int64_t kLens[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 34, 65, 257};
  for (Isa isa : test_isas()) {
    const Bf16PairsChannelsLast run = kernel_config(isa).bf16_pairs_channels_last;
    ASSERT_NE(run, nullptr) << tier_name(isa);
    for (const auto& [pair_elements, lead] : {std::pair{false, 0}, std::pair{true, 0}, std::pair{true, 1}})
      for (bool zero_nonfinite : {false, true})
        for (int64_t rows : kRows)
          for (int64_t len : kLens)
            for (int64_t offset : {0, 1})
              for (bool with_special : {false, true}) {
                const int64_t cstride = len + 3;
                std::vector<uint16_t> src(static_cast<size_t>(offset + rows * cstride + 8));
                for (uint16_t& h : src) {
                  h = static_cast<uint16_t>(rng());
                  if ((h & 0x7f80u) == 0x7f80u) h = static_cast<uint16_t>(h & 0xbfffu);  // finite unless placed
                }
                if (with_special) {
                  // A NaN and an Inf somewhere in the block, and an Inf in
                  // each row's slack, which must be neither read nor reported.
                  src[static_cast<size_t>(offset + (rng() % rows) * cstride + rng() % len)] = 0x7fc1;
                  src[static_cast<size_t>(offset + (rng() % rows) * cstride + rng() % len)] = 0xff80;
                }
                for (int64_t j = 0; j < rows; ++j) src[static_cast<size_t>(offset + j * cstride + len)] = 0x7f80;
                for (int64_t j = offset > 0 ? 0 : 1; j < rows; ++j)
                  src[static_cast<size_t>(offset + j * cstride - 1)] = 0xff80;
                const uint16_t* const block = src.data() + offset;
                const int64_t slots = pair_elements ? (lead + len + 1) / 2 : len;
                const int64_t lanes = pair_elements ? rows : (rows + 1) / 2;
                const int64_t pitch = lanes + 3;
                std::vector<uint32_t> want(static_cast<size_t>(slots * pitch + 5), 0xA5A5A5A5u), got = want;
                bool want_found = false;
                auto half = [&](int64_t j, int64_t e) -> uint32_t {
                  if (j >= rows || e < 0 || e >= len) return 0;
                  const uint16_t v = block[j * cstride + e];
                  const bool special = (v & 0x7f80u) == 0x7f80u;
                  want_found = want_found || special;
                  return special && zero_nonfinite ? 0u : uint32_t{v};
                };
                for (int64_t sl = 0; sl < slots; ++sl)
                  for (int64_t l = 0; l < lanes; ++l)
                    want[static_cast<size_t>(sl * pitch + l)] =
                        pair_elements ? half(l, 2 * sl - lead) | half(l, 2 * sl + 1 - lead) << 16
                                      : half(2 * l, sl) | half(2 * l + 1, sl) << 16;
                const bool found =
                    run(block, cstride, rows, len, pair_elements, lead, zero_nonfinite, got.data(), pitch);
                const std::string where = tier_name(isa) + (pair_elements ? " pairs of elements" : " pairs of rows") +
                                          " lead " + std::to_string(lead) + " rows " + std::to_string(rows) +
                                          " len " + std::to_string(len) +
                                          " offset " + std::to_string(offset) +
                                          (zero_nonfinite ? " zeroing" : "") + (with_special ? " special" : "");
                ASSERT_EQ(want_found, with_special) << where;
                ASSERT_EQ(found, want_found) << where;
                ASSERT_EQ(want, got) << where;
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

// The row add (kernels/add_row.hpp): each sum is one IEEE addition, so
// every tier must give the portable build's bits (a NaN only as a NaN: which
// operand's payload survives is the compiler's choice of operand order);
// lengths across the vector tails, unaligned starts, and the elements just
// before and after the row untouched.
TEST(KernelAddRow, SameBitsAsPortableWithNothingOutsideWritten) {
  const std::vector<Isa> tiers = vector_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no vector tier runs here: only the portable add exists";
  std::mt19937_64 rng(7);
  for (Isa isa : tiers) {
    const AddRow add = kernel_config(isa).add_row;
    ASSERT_NE(add, nullptr) << tier_name(isa);
    for (int64_t start : {1, 2, 5})
      for (int64_t n = 0; n <= 70; ++n) {
        const size_t len = static_cast<size_t>(start + n + 1);
        std::vector<unsigned char> a_bytes = source(DataType::f32, len, rng), b_bytes = source(DataType::f32, len, rng);
        std::vector<float> a(len), b(len);
        std::memcpy(a.data(), a_bytes.data(), len * 4);
        std::memcpy(b.data(), b_bytes.data(), len * 4);
        std::vector<float> want = a, got = a;
        scalar::add_row(want.data() + start, b.data() + start, n);
        add(got.data() + start, b.data() + start, n);
        for (size_t i = 0; i < len; ++i) {
          const bool inside = static_cast<int64_t>(i) >= start && static_cast<int64_t>(i) < start + n;
          if (inside && std::isnan(want[i]) && std::isnan(got[i])) continue;
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(inside ? want[i] : a[i]))
              << tier_name(isa) << " n " << n << " start " << start << " element " << i
              << (inside ? "" : " (outside the row)");
        }
      }
  }
}

// The shifted pair words (kernels/interleave_pairs.hpp), on the portable
// build and every vector tier: word i is word i's high half over word i +
// pitch's low half, the last `pitch` words with a zero high half, checked
// against that definition element by element (halves chosen so that a
// swapped or unshifted half shows), over lengths across the vector tails,
// pitches below, at and past a vector, unaligned starts, and nothing written
// outside the row.
TEST(KernelShiftPairWords, EachWordJoinsItsHighHalfToTheLowHalfAPitchOn) {
  std::vector<std::pair<std::string, ShiftPairWords>> kernels = {{"portable", scalar::shift_pair_words}};
  for (Isa isa : vector_tiers()) kernels.emplace_back(tier_name(isa), kernel_config(isa).shift_pair_words);
  std::mt19937_64 rng(12);
  for (const auto& [name, shift] : kernels) {
    ASSERT_NE(shift, nullptr) << name;
    for (int64_t pitch : {1, 7, 16, 19})
      for (int64_t start : {0, 1, 3})
        for (int64_t n = 0; n <= 80; ++n) {
          const size_t len = static_cast<size_t>(start + n + 1);
          std::vector<uint32_t> src(len), got(len);
          for (uint32_t& w : src) w = static_cast<uint32_t>(rng());
          for (uint32_t& w : got) w = static_cast<uint32_t>(rng());
          const std::vector<uint32_t> canary = got;
          shift(src.data() + start, n, pitch, got.data() + start);
          for (size_t i = 0; i < len; ++i) {
            const int64_t k = static_cast<int64_t>(i) - start;
            uint32_t expect = canary[i];
            if (k >= 0 && k < n) {
              const uint32_t high_half_of_this = src[i] >> 16;
              const uint32_t low_half_pitch_on = k + pitch < n ? src[i + static_cast<size_t>(pitch)] & 0xffffu : 0u;
              expect = high_half_of_this | low_half_pitch_on << 16;
            }
            ASSERT_EQ(got[i], expect) << name << " n " << n << " pitch " << pitch << " start " << start << " word "
                                      << k << (k >= 0 && k < n ? "" : " (outside the row)");
          }
        }
  }
}

// The pair-row interleave (kernels/interleave_pairs.hpp): it moves bits, so
// every tier must give the portable build's words (NaN payloads and
// subnormals as they are), with and without the odd row, over lengths across
// the vector tails and from unaligned starts, and write nothing before or
// after the row.
TEST(KernelInterleavePairRows, SameWordsAsPortableWithNothingOutsideWritten) {
  const std::vector<Isa> tiers = vector_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no vector tier runs here: only the portable interleave exists";
  std::mt19937_64 rng(11);
  for (Isa isa : tiers) {
    const InterleavePairRows interleave = kernel_config(isa).interleave_pair_rows;
    ASSERT_NE(interleave, nullptr) << tier_name(isa);
    for (bool with_odd : {true, false})
      for (int64_t start : {0, 1, 3})
        for (int64_t n = 0; n <= 70; ++n) {
          const size_t len = static_cast<size_t>(start + n + 1);
          std::vector<uint16_t> even(len), odd(len);
          for (size_t i = 0; i < len; ++i) {
            even[i] = static_cast<uint16_t>(rng());
            odd[i] = static_cast<uint16_t>(rng());
          }
          std::vector<uint32_t> canary(len);
          for (uint32_t& w : canary) w = static_cast<uint32_t>(rng());
          std::vector<uint32_t> want = canary, got = canary;
          const uint16_t* const o = with_odd ? odd.data() + start : nullptr;
          scalar::interleave_pair_rows(even.data() + start, o, n, want.data() + start);
          interleave(even.data() + start, o, n, got.data() + start);
          for (size_t i = 0; i < len; ++i) {
            const bool inside = static_cast<int64_t>(i) >= start && static_cast<int64_t>(i) < start + n;
            const uint32_t expect = inside ? (uint32_t{even[i]} | (with_odd ? uint32_t{odd[i]} << 16 : 0u)) : canary[i];
            ASSERT_EQ(want[i], expect) << "portable, n " << n << " start " << start << " element " << i;
            ASSERT_EQ(got[i], expect) << tier_name(isa) << " n " << n << " start " << start << " element " << i
                                      << (with_odd ? "" : " (no odd row)") << (inside ? "" : " (outside the row)");
          }
        }
  }
}

}  // namespace
}  // namespace convbwd::detail
