// The pair words of two neighbouring bf16 rows, element by element:
// dst[i] = even[i] | odd[i] << 16, or even[i] alone (a zero high half, the
// element past an odd reduction) where odd is null. How the planar 1x1 data
// gradient builds its pair panels and the small-channel data gradient its
// bands (src/impl/). One body, compiled with each tier's flags
// (src/kernels/<isa>/interleave_pairs_*), so the compiler vectorizes it for
// that tier's registers: built with the library's portable flags it ran 8
// elements per step (the wav2vec2 k10 s5 front end's bf16 gradInput took
// 1/1.21 of the time on a Zen 5 with the AVX-512 build). Bits are moved,
// never computed: every tier gives the same words.
#pragma once

#include <cstdint>

namespace convbwd::detail {

using InterleavePairRows = void (*)(const uint16_t* even, const uint16_t* odd, int64_t n, uint32_t* dst);

// Pair words shifted by one element: dst[i] = src[i] >> 16 | src[i + pitch]
// << 16, the high half of word i and the low half of the word `pitch` on,
// and src[i] >> 16 alone (a zero high half) for the last `pitch` words (i +
// pitch >= n). How the weight gradient's pixel-pair copy makes the slots
// of columns (2q + 1, 2q + 2) from those of (2q, 2q + 1), a slot being
// `pitch` words (PixelPairCopy::odd_class_derived). Bits are moved: every
// tier gives the same words.
using ShiftPairWords = void (*)(const uint32_t* src, int64_t n, int64_t pitch, uint32_t* dst);

namespace {  // compiled with every tier's flags: one copy per file
inline void interleave_pair_rows_body(const uint16_t* __restrict even, const uint16_t* __restrict odd, int64_t n,
                                      uint32_t* __restrict dst) {
  if (odd != nullptr)
    for (int64_t i = 0; i < n; ++i) dst[i] = uint32_t{even[i]} | uint32_t{odd[i]} << 16;
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = even[i];
}

inline void shift_pair_words_body(const uint32_t* __restrict src, int64_t n, int64_t pitch,
                                  uint32_t* __restrict dst) {
  const int64_t joined = n > pitch ? n - pitch : 0;
  for (int64_t i = 0; i < joined; ++i) dst[i] = src[i] >> 16 | src[i + pitch] << 16;
  for (int64_t i = joined; i < n; ++i) dst[i] = src[i] >> 16;
}
}  // namespace

}  // namespace convbwd::detail
