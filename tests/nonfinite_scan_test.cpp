// The NaN/Inf scan that decides whether execute takes the special-values
// path (impl/nonfinite/nonfinite.hpp) finds a single non-finite element
// wherever it sits: in every chunk of the parallel split, on each side of
// every chunk boundary, at any thread count and in each dtype; and finds
// nothing in finite tensors, including values that only overflow under an
// operand rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "impl/nonfinite/nonfinite.hpp"
#include "numeric/float_formats.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail {
namespace {

View flat_view(DataType dt, int64_t n, int64_t offset) {
  View v;
  v.dtype = dt;
  v.rank = 3;
  v.dims = {1, 1, n};
  v.strides = {n, n, 1};
  v.offset = offset;
  return v;
}

// Positions that matter for a split into `chunks` equal parts of n.
std::set<int64_t> probe_positions(int64_t n) {
  std::set<int64_t> at{0, 1, n / 2, n - 2, n - 1};
  for (int64_t chunks = 2; chunks <= 32; ++chunks)
    for (int64_t t = 1; t < chunks; ++t) {
      const int64_t b = n * t / chunks;
      at.insert(b - 1);
      at.insert(b);
    }
  return at;
}

void put(std::vector<uint32_t>& storage, DataType dt, int64_t i, float v) {
  if (dt == DataType::f32)
    reinterpret_cast<float*>(storage.data())[i] = v;
  else if (dt == DataType::f16)
    reinterpret_cast<uint16_t*>(storage.data())[i] = float_to_f16(v);
  else
    reinterpret_cast<uint16_t*>(storage.data())[i] = float_to_bf16(v);
}

TEST(NonfiniteScan, FindsOneNonFiniteElementAnywhereAtAnyThreadCount) {
  ThreadPool& pool = ThreadPool::global();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), HUGE_VALF, -HUGE_VALF};
  for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16}) {
    for (int64_t n : {int64_t{1000}, int64_t{300001}, (int64_t{1} << 20) + 7}) {
      const int64_t offset = 5;  // the view starts inside the buffer
      std::vector<uint32_t> storage(static_cast<size_t>(n + offset + 8), 0);  // +0.0 in every dtype
      for (int64_t i = 0; i < n + offset; ++i) put(storage, dt, i, 0.25f * static_cast<float>(i % 7) - 0.75f);
      const View v = flat_view(dt, n, offset);
      for (int threads : {1, 2, 3, 8})
        ASSERT_FALSE(has_nonfinite(storage.data(), v, OperandRounding::none, &pool, threads))
            << "finite tensor, n " << n << " threads " << threads;
      int k = 0;
      for (int64_t at : probe_positions(n)) {
        const float special = specials[k++ % 3];
        put(storage, dt, offset + at, special);
        for (int threads : {1, 2, 3, 8})
          ASSERT_TRUE(has_nonfinite(storage.data(), v, OperandRounding::none, &pool, threads))
              << "dtype " << static_cast<int>(dt) << " n " << n << " element " << at << " threads " << threads;
        put(storage, dt, offset + at, 1.0f);
      }
      // Outside the view (before its offset, after its end) is not its business.
      put(storage, dt, offset - 1, specials[0]);
      put(storage, dt, offset + n, specials[1]);
      for (int threads : {1, 2, 8})
        ASSERT_FALSE(has_nonfinite(storage.data(), v, OperandRounding::none, &pool, threads))
            << "elements outside the view were counted, n " << n;
    }
  }
}

TEST(NonfiniteScan, Fp32ThatOverflowsUnderFp16RoundingCountsOnlyThen) {
  ThreadPool& pool = ThreadPool::global();
  const int64_t n = 300001;
  std::vector<uint32_t> storage(static_cast<size_t>(n), 0);
  put(storage, DataType::f32, n - 3, 1e6f);  // finite in fp32, +Inf once rounded to fp16
  const View v = flat_view(DataType::f32, n, 0);
  for (int threads : {1, 2, 8}) {
    EXPECT_FALSE(has_nonfinite(storage.data(), v, OperandRounding::none, &pool, threads));
    EXPECT_TRUE(has_nonfinite(storage.data(), v, OperandRounding::fp16, &pool, threads));
  }
}

}  // namespace
}  // namespace convbwd::detail
