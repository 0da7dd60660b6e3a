// The ISA versions of the output row store (kernels/gemm.hpp) give
// the same bits as the portable one, which float_formats_test checks against
// the formats' definitions: every fp32 pattern of a dense sweep (ties,
// subnormals, overflow, NaN payloads), every length around the 8- and 16-wide
// blocks, and strided rows that must leave the gaps between their elements
// alone.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include <string>

#include "kernels/config.hpp"
#include "kernels/tier_kernels.hpp"
#include "runtime/cpu.hpp"
#include "util/tiers.hpp"

namespace convbwd::detail {
namespace {

struct IsaStore {
  std::string name;
  StoreRow store;
};

// Every tier's row store this machine can run (native or emulated) but the
// portable one, which is the comparison: new tiers join by their config.
std::vector<IsaStore> isa_stores() {
  std::vector<IsaStore> v;
  for (Isa i : test::test_isas())
    if (i != Isa::scalar) v.push_back({test::tier_name(i), kernel_config(i).store_row});
  return v;
}

constexpr DataType kTypes[] = {DataType::f32, DataType::bf16, DataType::f16};

std::vector<float> sweep_values() {
  std::vector<float> v;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 997) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  // Both formats' rounding boundaries: every low half-word pattern that
  // decides a bf16 tie, and fp16's 13 dropped bits, on a spread of highs.
  for (uint32_t hi = 0; hi < 65536; hi += 7)
    for (uint32_t lo : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      v.push_back(std::bit_cast<float>((hi << 16) | lo));
  return v;
}

TEST(KernelStoreRow, SameBitsAsPortableOnSweep) {
  const std::vector<float> values = sweep_values();
  const std::vector<IsaStore> stores = isa_stores();
  if (stores.empty()) GTEST_SKIP() << "no vector tier runs here: only the portable store exists";
  for (const IsaStore& k : stores) {
    for (DataType dt : kTypes) {
      const size_t bytes = values.size() * size_of(dt);
      std::vector<unsigned char> want(bytes), got(bytes);
      scalar::store_row(values.data(), static_cast<int64_t>(values.size()), want.data(), dt, 0, 1);
      k.store(values.data(), static_cast<int64_t>(values.size()), got.data(), dt, 0, 1);
      for (size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(0, std::memcmp(want.data() + i * size_of(dt), got.data() + i * size_of(dt), size_of(dt)))
            << k.name << " dtype " << static_cast<int>(dt) << " value pattern 0x" << std::hex
            << std::bit_cast<uint32_t>(values[i]);
    }
  }
}

TEST(KernelStoreRow, LengthsStridesAndOffsetsWriteOnlyTheirElements) {
  std::vector<float> src(64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 1.0f / 3.0f * static_cast<float>(i + 1) - 7.0f;
  const std::vector<IsaStore> stores = isa_stores();
  if (stores.empty()) GTEST_SKIP() << "no vector tier runs here: only the portable store exists";
  for (const IsaStore& k : stores) {
    for (DataType dt : kTypes)
      for (int64_t n = 0; n <= 40; ++n)
        for (int64_t stride : {1, 2, 5})
          for (int64_t index : {0, 3}) {
            const size_t elems = static_cast<size_t>(index + 64 * stride + 8);
            std::vector<unsigned char> want(elems * size_of(dt), 0xA5), got(want);
            scalar::store_row(src.data(), n, want.data(), dt, index, stride);
            k.store(src.data(), n, got.data(), dt, index, stride);
            ASSERT_EQ(want, got) << k.name << " dtype " << static_cast<int>(dt) << " n " << n << " stride "
                                 << stride << " index " << index;
            // The portable store itself writes exactly its n elements.
            for (size_t e = 0; e < elems; ++e) {
              const bool mine = e >= static_cast<size_t>(index) && (e - index) % stride == 0 &&
                                (e - index) / stride < static_cast<size_t>(n);
              bool untouched = true;
              for (size_t b = 0; b < size_of(dt); ++b) untouched = untouched && want[e * size_of(dt) + b] == 0xA5;
              if (!mine) {
                ASSERT_TRUE(untouched) << "element " << e << " n " << n << " stride " << stride;
              }
            }
          }
  }
}

// The several-rows store of every tier (the portable one included): row i
// of the source, src_pitch floats apart, lands at index + i * row_stride,
// each row exactly as one portable row store puts it, and nothing between
// or around the rows is written. Row lengths cross the 8- and 16-wide blocks.
TEST(KernelStoreRow, RowsStoreEachRowAsTheRowStoreDoes) {
  std::vector<float> src(40 * 17);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 1.0f / 7.0f * static_cast<float>(i + 1) - 40.0f;
  for (Isa isa : test::test_isas()) {
    const StoreRows rows_store = kernel_config(isa).store_rows;
    ASSERT_NE(rows_store, nullptr) << test::tier_name(isa);
    for (DataType dt : kTypes)
      for (int64_t rows : {0, 1, 3, 32})
        for (int64_t n : {1, 7, 8, 9, 16, 17})
          for (int64_t row_stride : {n, n + 5}) {
            const int64_t index = 3, src_pitch = 17;
            const size_t elems = static_cast<size_t>(index + rows * row_stride + 8);
            std::vector<unsigned char> want(elems * size_of(dt), 0xA5), got(want);
            for (int64_t i = 0; i < rows; ++i)
              scalar::store_row(src.data() + i * src_pitch, n, want.data(), dt, index + i * row_stride, 1);
            rows_store(src.data(), src_pitch, rows, n, got.data(), dt, index, row_stride);
            ASSERT_EQ(want, got) << test::tier_name(isa) << " dtype " << static_cast<int>(dt) << " rows " << rows
                                 << " n " << n << " row_stride " << row_stride;
          }
  }
}

// The planar store of a channels-last block, every tier (the portable one
// included): element (w, c) of the source, src_pitch floats per pixel, lands
// at index + c * col_stride + w * pixel_step, rounded as the portable row
// store rounds it (sweep values: ties, subnormals, overflow, NaN payloads),
// and nothing between or around the channel runs, nor between the pixels of
// a run with pixel step 2 or 3 (another phase's), is written. Pixel counts
// and channel counts cross the 8- and 16-wide blocks.
TEST(KernelStoreRow, ColumnsStoreEachChannelsPixelsAsTheRowStoreDoes) {
  const std::vector<float> values = sweep_values();
  for (Isa isa : test::test_isas()) {
    const StoreColumns columns_store = kernel_config(isa).store_columns;
    ASSERT_NE(columns_store, nullptr) << test::tier_name(isa);
    size_t next = 0;
    for (DataType dt : kTypes)
      for (int64_t cols : {1, 7, 8, 9, 16, 17, 32})
        for (int64_t n : {0, 1, 7, 8, 9, 16, 17, 40})
          for (int64_t pixel_step : {1, 2, 3})
            for (int64_t col_stride : {n * pixel_step, n * pixel_step + 5}) {
              const int64_t index = 3, src_pitch = cols + 3;
              std::vector<float> src(static_cast<size_t>(n * src_pitch + 1));
              for (float& v : src) v = values[(next++ * 104729) % values.size()];  // spread over the sweep
              const size_t elems = static_cast<size_t>(index + cols * col_stride + 8);
              std::vector<unsigned char> want(elems * size_of(dt), 0xA5), got(want);
              for (int64_t c = 0; c < cols; ++c)
                for (int64_t w = 0; w < n; ++w)
                  scalar::store_row(src.data() + w * src_pitch + c, 1, want.data(), dt,
                                    index + c * col_stride + w * pixel_step, 1);
              columns_store(src.data(), src_pitch, n, cols, got.data(), dt, index, col_stride, pixel_step);
              ASSERT_EQ(want, got) << test::tier_name(isa) << " dtype " << static_cast<int>(dt) << " cols " << cols
                                   << " n " << n << " pixel_step " << pixel_step << " col_stride " << col_stride;
            }
  }
}

}  // namespace
}  // namespace convbwd::detail
