// Loops over strided views shared by implementations.
#pragma once

#include <cstring>

#include "convbwd/convbwd.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {

// Calls f(element_index) for every element of v, in row-major order.
template <class F>
void for_each_element(const View& v, F&& f) {
  if (v.empty()) return;
  std::array<int64_t, kMaxRank> i{};
  int64_t at = v.offset;
  for (;;) {
    f(at);
    int d = v.rank - 1;
    for (; d >= 0; --d) {
      if (++i[d] < v.dims[d]) {
        at += v.strides[d];
        break;
      }
      at -= (v.dims[d] - 1) * v.strides[d];
      i[d] = 0;
    }
    if (d < 0) return;
  }
}

// Writes +0 into every element of the view (all-zero bits in every dtype).
inline void fill_zero(const View& v, void* base) {
  const size_t es = size_of(v.dtype);
  auto* p = static_cast<std::byte*>(base);
  if (v.contiguous()) {
    std::memset(p + v.offset * static_cast<int64_t>(es), 0, static_cast<size_t>(v.elements()) * es);
    return;
  }
  for_each_element(v, [&](int64_t i) { std::memset(p + i * static_cast<int64_t>(es), 0, es); });
}

}  // namespace convbwd::detail
