// AVX-512 fp32 -> output dtype row store (kernels/store_row_kernel.hpp):
// sixteen values per conversion (float_formats_avx512.hpp: the same bits as
// the portable store), tails included. The avx512_bf16 tier's copies round
// bf16 with vcvtneps2bf16 (the *_cvtne functions): one instruction where the
// avx512 tier's integer rounding takes twelve, which were most of the
// planar bf16 store's time (8% of the g8 128@28 bf16 data gradient).
#include "kernels/avx512/simd.hpp"

#include <cstring>

#include "kernels/avx512/float_formats_avx512.hpp"
#include "kernels/store_row_kernel.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

template <bool kCvtne>
struct Avx512Lanes {
  using R = __m512;
  using H = __m256i;
  static constexpr int64_t W = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load_partial(const float* p, int64_t n) { return load_partial16<DataType::f32>(p, 0, n); }
  template <DataType T>
  static H narrow(R v) {
    if constexpr (T == DataType::f16)
      return float_to_f16x16(v);
    else if constexpr (kCvtne)
      return float_to_bf16x16_cvtne(v);
    else
      return float_to_bf16x16(v);
  }
  [[gnu::always_inline]] static void transpose(R* r) { transpose16x16(r); }  // as in VecAvx512
  static void store(uint16_t* p, H h) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h); }
  // Natively one masked store (masked-off lanes are never written); through
  // a copy under SIMDe (simd.hpp), which has no masked stores.
  static void store_partial(uint16_t* p, H h, int64_t n) {
#ifndef CONVBWD_EMULATE_AVX512
    _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1u << n) - 1u), h);
#else
    alignas(32) uint16_t lanes[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), h);
    std::memcpy(p, lanes, static_cast<size_t>(n) * sizeof(uint16_t));
#endif
  }
  // The first n (<= W) results at p[0], p[2], .. p[2n-2]: widened to 32-bit
  // lanes, each lands in the even half, and a masked store writes only those
  // (the odd elements are another phase's, perhaps another thread's).
  // SIMDe has no masked stores: the kernel's element-wise store serves.
#ifndef CONVBWD_EMULATE_AVX512
  static constexpr bool kStoreEveryOther = true;
  static void store_every_other(uint16_t* p, H h, int64_t n) {
    const auto even = static_cast<__mmask32>(0x55555555u & static_cast<uint32_t>((uint64_t{1} << (2 * n)) - 1u));
    _mm512_mask_storeu_epi16(p, even, _mm512_cvtepu16_epi32(h));
  }
#else
  static constexpr bool kStoreEveryOther = false;
  static void store_every_other(uint16_t*, H, int64_t) {}
#endif
};

}  // namespace

void store_row(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride) {
  StoreRowKernel<Avx512Lanes<false>>::run(src, n, base, dt, index, stride);
}

void store_rows(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt, int64_t index,
                int64_t row_stride) {
  StoreRowKernel<Avx512Lanes<false>>::run_rows(src, src_pitch, rows, n, base, dt, index, row_stride);
}

void store_columns(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base, DataType dt,
                   int64_t index, int64_t col_stride, int64_t pixel_step) {
  StoreRowKernel<Avx512Lanes<false>>::run_columns(src, src_pitch, n, cols, base, dt, index, col_stride, pixel_step);
}

void store_row_cvtne(const float* src, int64_t n, void* base, DataType dt, int64_t index, int64_t stride) {
  StoreRowKernel<Avx512Lanes<true>>::run(src, n, base, dt, index, stride);
}

void store_rows_cvtne(const float* src, int64_t src_pitch, int64_t rows, int64_t n, void* base, DataType dt,
                      int64_t index, int64_t row_stride) {
  StoreRowKernel<Avx512Lanes<true>>::run_rows(src, src_pitch, rows, n, base, dt, index, row_stride);
}

void store_columns_cvtne(const float* src, int64_t src_pitch, int64_t n, int64_t cols, void* base, DataType dt,
                         int64_t index, int64_t col_stride, int64_t pixel_step) {
  StoreRowKernel<Avx512Lanes<true>>::run_columns(src, src_pitch, n, cols, base, dt, index, col_stride, pixel_step);
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
