// AVX-512 fp32 -> output dtype row store (see kernels/store_row.hpp):
// sixteen values per conversion (float_formats_avx512.hpp: the same bits as
// the portable store), tails included. fp32 and 8-bit types go to the
// portable version.
#include "kernels/avx512/simd.hpp"

#include <cstring>

#include "kernels/tier_kernels.hpp"
#include "kernels/store_row.hpp"
#include "kernels/avx512/float_formats_avx512.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

template <DataType T>
inline __m256i narrow16(__m512 v) {
  if constexpr (T == DataType::f16)
    return float_to_f16x16(v);
  else
    return float_to_bf16x16(v);
}

template <DataType T>
void store_narrow(const float* src, int64_t n, uint16_t* p, int64_t stride) {
  alignas(32) uint16_t lanes[16];
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256i h = narrow16<T>(_mm512_loadu_ps(src + j));
    if (stride == 1) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + j), h);
    } else {
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), h);
      for (int i = 0; i < 16; ++i) p[(j + i) * stride] = lanes[i];
    }
  }
  if (j == n) return;
  // The tail (1 to 15) converted as one vector, stored element by element
  // from a copy: nothing past the row is touched.
  const int64_t rest = n - j;
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), narrow16<T>(load_partial16<DataType::f32>(src, j, rest)));
  if (stride == 1) {
    std::memcpy(p + j, lanes, static_cast<size_t>(rest) * sizeof(uint16_t));
    return;
  }
  for (int64_t i = 0; i < rest; ++i) p[(j + i) * stride] = lanes[i];
}

}  // namespace

void store_row(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride) {
  switch (dt) {
    case DataType::bf16: store_narrow<DataType::bf16>(src, n, static_cast<uint16_t*>(base) + index, stride); return;
    case DataType::f16: store_narrow<DataType::f16>(src, n, static_cast<uint16_t*>(base) + index, stride); return;
    default: scalar::store_row(src, n, base, dt, index, stride); return;
  }
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
