// AVX-512 bf16 pair transpose (Bf16PairsChannelsLast, kernels/gemm.hpp):
// blocks of 16 slots x 16 lanes, each pair put together, NaN/Inf-checked
// and transposed in registers, so the block goes from the planar rows to
// its slots in one pass. Tails load and store only their own elements
// (simd.hpp's load_first_epi16, float_formats_avx512.hpp's
// store_partial16), so nothing past the block is read or written.
#include "kernels/avx512/simd.hpp"

#include <algorithm>

#include "kernels/avx512/float_formats_avx512.hpp"
#include "kernels/tier_kernels.hpp"

namespace convbwd::detail::CONVBWD_AVX512_NS {
namespace {

// The 16-bit halves of v that are bf16 NaN or +-Inf (exponent all ones):
// (h & 0x7f80) + 0x0080 reaches 0x8000 exactly for those.
inline __mmask32 nonfinite_halves(__m512i v) {
  const __m512i e = _mm512_add_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7f80)), _mm512_set1_epi16(0x0080));
  return _mm512_test_epi16_mask(e, _mm512_set1_epi16(static_cast<int16_t>(0x8000)));
}

// The first n (0 to 16) 16-bit elements at p, zero-extended, the other lanes 0.
inline __m256i first_halves(const uint16_t* p, int64_t n) {
  if (n >= 16) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if (n <= 0) return _mm256_setzero_si256();
  return load_first_epi16(p, n);
}

// Stores the first `lanes` lanes of slot vector v at dst.
inline void store_slot(__m512i v, int64_t lanes, uint32_t* dst) {
  float* const o = reinterpret_cast<float*>(dst);
  if (lanes == 16) _mm512_storeu_ps(o, _mm512_castsi512_ps(v));
  else store_partial16(o, _mm512_castsi512_ps(v), lanes);
}

// Stores slot vectors r[0 .. slots) at dst + s*pitch, their first `lanes` lanes.
inline void store_slots(const __m512i* r, int64_t slots, int64_t lanes, uint32_t* dst, int64_t pitch) {
  for (int64_t s = 0; s < slots; ++s) store_slot(r[s], lanes, dst + s * pitch);
}

// The pair words of two rows' 16 elements (lo the low halves), by one
// 16-bit interleave per 128-bit lane: lane i holds element
// kPairWordElement[i] (elements 0-3, 8-11, 4-7, 12-15), an order the
// transposes undo by where they store each slot. Three shuffles where
// widening both rows and merging them took eight, more than the 16 x 16
// transpose itself (the bf16 data gradients' channel-pair copies).
constexpr int64_t kPairWordElement[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
inline __m512i pair_words(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi16(lo, hi)), _mm256_unpackhi_epi16(lo, hi), 1);
}

// Asks for the line kAhead elements on in a row that has `left` elements
// from p on. The block reads 16 or 32 rows side by side, more streams than
// the hardware prefetchers follow: without this, three quarters of the
// kernel's time were loads waiting on L3 (perf, WaveNet's bf16 data gradient).
constexpr int64_t kAhead = 256;  // elements: 8 lines
inline void prefetch_ahead(const uint16_t* p, int64_t left) {
  if (left > kAhead) _mm_prefetch(reinterpret_cast<const char*>(p + kAhead), _MM_HINT_T0);
}

// The first n (0 to 32) 16-bit elements at p, the other lanes 0.
inline __m512i first_32_halves(const uint16_t* p, int64_t n) {
  if (n >= 32) return _mm512_loadu_si512(p);
  return _mm512_inserti64x4(_mm512_castsi256_si512(first_halves(p, n)), first_halves(p + 16, n - 16), 1);
}

// v's halves one lane up, lane 0 zero: a row's first pair with a zero low
// half (lead = 1). Shifted in a register, so nothing before the row is read.
inline __m512i halves_one_up(__m512i v) {
  alignas(64) static constexpr uint16_t kFromLane[32] = {0,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9,
                                                         10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                                         21, 22, 23, 24, 25, 26, 27, 28, 29, 30};
  return _mm512_maskz_permutexvar_epi16(~__mmask32{1}, _mm512_load_si512(kFromLane), v);
}

inline void transpose(__m512i* r) {
  __m512 f[16];
  for (int i = 0; i < 16; ++i) f[i] = _mm512_castsi512_ps(r[i]);
  transpose16x16(f);  // shuffles only: the bits move as they are
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(f[i]);
}

// The transpose of a half block: a[p] lane i holds pair p (< 8) of element
// kPairWordElement[i]; slot e of the result is a[0..8) at that element,
// eight 32-bit lanes, stored for slots [0, tn) and lanes [0, pn). 4 x 4
// transposes within each 128-bit lane of pairs 0-3 and of pairs 4-7, then
// each slot's two quarters joined by one two-source permute per pair of
// slots: 24 shuffles where the 16 x 16 transpose takes 64, half of them on
// zero registers (16-channel groups, 8 pairs: the copy was 11% of the g8
// 128@28 bf16 data gradient).
inline void transpose_store_half(const __m512i* a, int64_t tn, int64_t pn, uint32_t* dst, int64_t pitch) {
  __m512i q[2][4];  // q[h][k] 128-bit lane L: input lane 4L + k of pairs 4h .. 4h+3
  for (int h = 0; h < 2; ++h) {
    const __m512i* const b = a + 4 * h;
    const __m512i t0 = _mm512_unpacklo_epi32(b[0], b[1]), t1 = _mm512_unpackhi_epi32(b[0], b[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(b[2], b[3]), t3 = _mm512_unpackhi_epi32(b[2], b[3]);
    q[h][0] = _mm512_unpacklo_epi64(t0, t2);
    q[h][1] = _mm512_unpackhi_epi64(t0, t2);
    q[h][2] = _mm512_unpacklo_epi64(t1, t3);
    q[h][3] = _mm512_unpackhi_epi64(t1, t3);
  }
  // Input lanes 4L + k and 4(L+1) + k for L = 0 and 2: lane L of both halves, then lane L + 1.
  const __m512i lanes01 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i lanes23 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  auto store = [&](int64_t slot, __m256i v) {
    if (slot < tn) store_slot(_mm512_castsi256_si512(v), pn, dst + slot * pitch);
  };
  for (int k = 0; k < 4; ++k) {
    const __m512i s01 = _mm512_permutex2var_epi64(q[0][k], lanes01, q[1][k]);
    const __m512i s23 = _mm512_permutex2var_epi64(q[0][k], lanes23, q[1][k]);
    store(kPairWordElement[k], _mm512_castsi512_si256(s01));
    store(kPairWordElement[4 + k], _mm512_extracti64x4_epi64(s01, 1));
    store(kPairWordElement[8 + k], _mm512_castsi512_si256(s23));
    store(kPairWordElement[12 + k], _mm512_extracti64x4_epi64(s23, 1));
  }
}

}  // namespace

bool bf16_pairs_channels_last(const uint16_t* src, int64_t cstride, int64_t rows, int64_t len, bool pair_elements,
                              int lead, bool zero_nonfinite, uint32_t* dst, int64_t pitch) {
  __mmask32 seen = 0;
  // Checks (and zeroes) the halves of one register of pairs.
  auto checked = [&](__m512i v) {
    const __mmask32 bad = nonfinite_halves(v);
    seen |= bad;
    return zero_nonfinite ? _mm512_maskz_mov_epi16(static_cast<__mmask32>(~bad), v) : v;
  };
  __m512i r[16];
  if (pair_elements) {
    // Lane j: row j; register j holds that row's 16 pairs of the block,
    // which start at element 2*t0 - lead (the first block of a lead-1 row
    // reads from element 0 and shifts its halves one lane up).
    const int64_t slots = (lead + len + 1) / 2;
    for (int64_t j0 = 0; j0 < rows; j0 += 16) {
      const int64_t jn = std::min<int64_t>(16, rows - j0);
      for (int64_t t0 = 0; t0 < slots; t0 += 16) {
        const int64_t tn = std::min<int64_t>(16, slots - t0);
        const int64_t e0 = std::max<int64_t>(2 * t0 - lead, 0), shift = e0 - (2 * t0 - lead);
        const int64_t en = std::min<int64_t>(32 - shift, len - e0);
        for (int64_t j = 0; j < 16; ++j) {
          if (j >= jn) {
            r[j] = _mm512_setzero_si512();
            continue;
          }
          const uint16_t* const row = src + (j0 + j) * cstride + e0;
          prefetch_ahead(row, len - e0);
          const __m512i v = first_32_halves(row, en);
          r[j] = checked(shift != 0 ? halves_one_up(v) : v);
        }
        transpose(r);
        store_slots(r, tn, jn, dst + t0 * pitch + j0, pitch);
      }
    }
  } else {
    // Lane p: rows 2p and 2p+1; register p holds their 16 elements of the block, paired.
    const int64_t pairs = (rows + 1) / 2;
    for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
      const int64_t pn = std::min<int64_t>(16, pairs - p0);
      for (int64_t e0 = 0; e0 < len; e0 += 16) {
        const int64_t en = std::min<int64_t>(16, len - e0);
        for (int64_t p = 0; p < (pn <= 8 ? 8 : 16); ++p) {
          if (p >= pn) {
            r[p] = _mm512_setzero_si512();
            continue;
          }
          const int64_t even = 2 * (p0 + p);
          if (e0 % 32 == 0) {
            prefetch_ahead(src + even * cstride + e0, len - e0);
            if (even + 1 < rows) prefetch_ahead(src + (even + 1) * cstride + e0, len - e0);
          }
          const __m256i lo = first_halves(src + even * cstride + e0, en);
          const __m256i hi =
              even + 1 < rows ? first_halves(src + (even + 1) * cstride + e0, en) : _mm256_setzero_si256();
          r[p] = checked(pair_words(lo, hi));
        }
        if (pn <= 8) {
          transpose_store_half(r, en, pn, dst + e0 * pitch + p0, pitch);
          continue;
        }
        transpose(r);
        for (int i = 0; i < 16; ++i)
          if (const int64_t e = kPairWordElement[i]; e < en) store_slot(r[i], pn, dst + (e0 + e) * pitch + p0);
      }
    }
  }
  return seen != 0;
}

}  // namespace convbwd::detail::CONVBWD_AVX512_NS
