// AVX2 fp32 -> output dtype row store (kernels/store_row_kernel.hpp): eight
// values per conversion (float_formats_avx2.hpp: the same bits as the
// portable store), tails included.
//
// Why: the GEMM paths stored fp16 outputs one float_to_f16 call at a time,
// which made a 1x1 fp16 layer up to 1.5x slower than the same layer in fp32.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx2/float_formats_avx2.hpp"
#include "kernels/avx2/transpose8_avx2.hpp"
#include "kernels/store_row_kernel.hpp"

namespace convbwd::detail {
namespace {

struct Avx2Lanes {
  using R = __m256;
  using H = __m128i;
  static constexpr int64_t W = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load_partial(const float* p, int64_t n) { return avx2::load_partial<DataType::f32>(p, 0, n); }
  template <DataType T>
  static H narrow(R v) {
    if constexpr (T == DataType::f16)
      return avx2::float_to_f16x8(v);
    else
      return avx2::float_to_bf16x8(v);
  }
  static void transpose(R* r) { avx2::transpose8x8(r); }
  static void store(uint16_t* p, H h) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h); }
  // 4, 2 and 1 at a time, straight from the register.
  static void store_partial(uint16_t* p, H h, int64_t n) {
    if (n & 4) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p), h);
      h = _mm_srli_si128(h, 8);
      p += 4;
    }
    if (n & 2) {
      const int32_t two = _mm_cvtsi128_si32(h);
      std::memcpy(p, &two, sizeof two);
      h = _mm_srli_si128(h, 4);
      p += 2;
    }
    if (n & 1) *p = static_cast<uint16_t>(_mm_cvtsi128_si32(h));
  }
  // No masked 16-bit store: the kernel's element-wise store serves pixel steps.
  static constexpr bool kStoreEveryOther = false;
  static void store_every_other(uint16_t*, H, int64_t) {}
};

}  // namespace

void avx2::store_row(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride) {
  StoreRowKernel<Avx2Lanes>::run(src, n, base, dt, index, stride);
}

void avx2::store_rows(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt,
                      int64_t index, int64_t row_stride) {
  StoreRowKernel<Avx2Lanes>::run_rows(src, src_pitch, rows, n, base, dt, index, row_stride);
}

void avx2::store_columns(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base, DataType dt,
                         int64_t index, int64_t col_stride, int64_t pixel_step) {
  StoreRowKernel<Avx2Lanes>::run_columns(src, src_pitch, n, cols, base, dt, index, col_stride, pixel_step);
}

}  // namespace convbwd::detail
