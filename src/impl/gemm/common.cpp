#include "impl/gemm/common.hpp"

#include <bit>
#include <cstring>

#include "impl/nonfinite/nonfinite.hpp"

namespace convbwd::detail::gemm {

void ImageCopy::finish_rows(float* o, int64_t pixels, int64_t nc, bool zero_nonfinite) const {
  // After the conversion, so that values the operand rounding overflowed count too.
  if (zero_nonfinite)
    for (int64_t w = 0; w < pixels; ++w) detail::zero_nonfinite(o + w * cp, nc);
  if (cp > nc)
    for (int64_t w = 0; w < pixels; ++w) std::memset(o + w * cp + nc, 0, static_cast<size_t>(cp - nc) * sizeof(float));
}

void ImageCopy::copy_rows(const void* base, int64_t src_index, int64_t cstride, int64_t wstride, int64_t nc,
                          int64_t nw, float* o, bool zero_nonfinite, bool* found) const {
  if (!pairs) {
    convert(base, v.dtype, rounding, src_index, cstride, wstride, nc, nw, o, cp);
    finish_rows(o, nw, nc, zero_nonfinite);
    if (found && check(o, nw * cp)) *found = true;
    return;
  }
  // bf16 pairs: channel c of pixel w is half-word c of the pixel's 2*cp.
  const uint16_t* s = static_cast<const uint16_t*>(base) + src_index;
  uint16_t* const d = reinterpret_cast<uint16_t*>(o);
  const int64_t pitch = 2 * cp;
  unsigned nonfinite = 0;
  auto put = [&](int64_t w, int64_t c, uint16_t x) {
    nonfinite |= bf16_nonfinite(x);
    d[w * pitch + c] = zero_nonfinite && bf16_nonfinite(x) ? uint16_t{0} : x;
  };
  // Planar: the tier's pair transpose interleaves two channel rows and
  // moves them pixel after pixel in registers. (One scalar 32-bit store per
  // pixel and pair, cp words apart, was 16% of the bf16 1D k5 256 data
  // gradient; an interleave pass and a transpose pass through L1 were 38% of
  // WaveNet's.)
  if (wstride == 1 && cstride != 1) {
    if (pairs_channels_last(s, cstride, nc, nw, false, 0, zero_nonfinite, reinterpret_cast<uint32_t*>(o), cp))
      nonfinite = 1;
  } else {
    for (int64_t w = 0; w < nw; ++w)
      for (int64_t c = 0; c < nc; ++c) put(w, c, s[c * cstride + w * wstride]);
  }
  // The high half of an odd last channel's pair is zero. The slots past a
  // pixel's slots() are left unwritten: no kernel reads them (each step
  // reads one slot of the reduction), and a memset of them per pixel was 8%
  // of the bf16 g8 128@28 data gradient (8 pairs at a 16-slot pitch).
  if (nc % 2 != 0 && nc < pitch)
    for (int64_t w = 0; w < nw; ++w) d[w * pitch + nc] = 0;
  if (found && nonfinite) *found = true;
}

void ImageCopy::set_col_phases(int64_t step, int64_t taps, int64_t dilation) {
  col_step = step;
  col_phases.clear();
  if (step <= 1) return;
  for (int64_t r = 0; r < taps && static_cast<int64_t>(col_phases.size()) < step; ++r) {
    const int64_t residue = r * dilation % step;
    if (std::find(col_phases.begin(), col_phases.end(), residue) == col_phases.end()) col_phases.push_back(residue);
  }
}

int64_t ImageCopy::column_offset(int64_t e) const {
  if (col_step <= 1) return e * cp;
  const auto at = std::find(col_phases.begin(), col_phases.end(), e % col_step);
  return (at - col_phases.begin()) * phase_floats() + e / col_step * cp;
}

void ImageCopy::copy_phases(const void* base, int64_t src_row, int64_t wstride, int64_t cstride, int64_t nc,
                            int64_t w_lo, int64_t w_hi, float* o, bool zero_nonfinite, bool* found) const {
  const int64_t pc = phase_cols(), phase_pitch = phase_floats();
  // Both phases of a planar row go through one pass of loads (the split
  // converter); else each stored phase reads every col_step-th column.
  const bool split = splits_rows(wstride, cstride);
  // Phase q holds stored columns col_phases[q] + j * col_step, j < pc: the
  // source data at [lo_q, hi_q), zeros around it. (Rows can be short: no
  // call is made for nothing.)
  for (size_t q = 0; q < col_phases.size(); ++q) {
    const int64_t first = col_phases[q];
    const auto index_past = [&](int64_t e) { return e <= first ? 0 : std::min(pc, (e - first + col_step - 1) / col_step); };
    const int64_t lo_q = index_past(w_lo), hi_q = index_past(w_hi);
    float* const to = o + static_cast<int64_t>(q) * phase_pitch;
    if (lo_q > 0) std::memset(to, 0, static_cast<size_t>(lo_q * cp) * sizeof(float));
    if (hi_q < pc) std::memset(to + hi_q * cp, 0, static_cast<size_t>((pc - hi_q) * cp) * sizeof(float));
    if (!split && lo_q < hi_q)
      copy_rows(base, src_row + (first + lo_q * col_step) * wstride, cstride, col_step * wstride, nc, hi_q - lo_q,
                to + lo_q * cp, zero_nonfinite, found);
  }
  if (!split || w_lo >= w_hi) return;
  // The first stored column (w_lo) goes to its phase, the next to the other.
  const bool first_is_q0 = w_lo % 2 == col_phases[0];
  float* const to_first = o + (first_is_q0 ? 0 : phase_pitch) + (w_lo / 2) * cp;
  float* const to_second = o + (first_is_q0 ? phase_pitch : 0) + ((w_lo + 1) / 2) * cp;
  split_rows(base, src_row + w_lo, cstride, nc, w_hi - w_lo, to_first, to_second, zero_nonfinite, found);
}

void ImageCopy::split_rows(const void* base, int64_t src_index, int64_t cstride, int64_t nc, int64_t nw, float* first,
                           float* second, bool zero_nonfinite, bool* found) const {
  convert_split(base, v.dtype, rounding, src_index, cstride, nc, nw, first, second, cp);
  for (const auto& [o, pixels] : {std::pair{first, (nw + 1) / 2}, std::pair{second, nw / 2}}) {
    finish_rows(o, pixels, nc, zero_nonfinite);
    if (found && check(o, pixels * cp)) *found = true;
  }
}

void ImageCopy::copy_plane(const void* base, int64_t n, int64_t plane, float* dst, bool zero_nonfinite,
                           bool* found) const {
  const int64_t g = plane / ext[0], e0 = plane % ext[0];
  const Strides st = strides_of(v, spatial);
  const int64_t row = row_floats();  // from a row to the next (of a phase)
  const int64_t x0 = e0 - lo[0];
  // Stored positions [w_lo, w_hi) of the last dim hold source data.
  const int64_t w_lo = std::clamp<int64_t>(lo[2], 0, ext[2]);
  const int64_t w_hi = std::clamp<int64_t>(lo[2] + src[2], 0, ext[2]);
  for (int64_t cb = 0; cb < blocks(); ++cb) {
    float* out = dst + g * image_floats() + cb * block_floats() + e0 * plane_floats();
    if (x0 < 0 || x0 >= src[0]) {
      std::memset(out, 0, static_cast<size_t>(plane_floats()) * sizeof(float));
      continue;
    }
    const int64_t per_block = pairs ? 2 * cp : cp;  // channels
    const int64_t c0 = cb * per_block, nc = std::min(per_block, cg - c0);
    // Unpadded rows that follow each other in the source as in the copy
    // (1x1 layers) convert as one run of pixels: the vector converter works
    // 8 pixels at a time, and a 7x7 image's rows were all tails. Unpadded:
    // stored and source positions coincide (lo == 0) and span the same
    // extents; a data-gradient copy with lo < 0 (its first stored position
    // is a later source one) goes row by row below.
    const bool unpadded = lo[1] == 0 && lo[2] == 0 && src[1] == ext[1] && src[2] == ext[2] &&
                          (ext[1] == 1 || st.sp[1] == ext[2] * st.sp[2]);
    // So are an unpadded plane's two column phases, when its rows are of
    // even width (a pixel's parity is then its column's): its even pixels
    // are phase 0's rows one after the other, its odd ones phase 1's.
    if (unpadded && col_step > 1 && ext[2] % 2 == 0 && splits_rows(st.sp[2], st.ch)) {
      split_rows(base, st.offset + n * st.n + (g * cg + c0) * st.ch + x0 * st.sp[0], st.ch, nc, ext[1] * ext[2], out,
                 out + phase_floats(), zero_nonfinite, found);
      continue;
    }
    if (col_step <= 1 && unpadded) {
      const int64_t pixels = ext[1] * ext[2];
      copy_rows(base, st.offset + n * st.n + (g * cg + c0) * st.ch + x0 * st.sp[0], st.ch, st.sp[2], nc, pixels,
                out, zero_nonfinite, found);
      continue;
    }
    for (int64_t e1 = 0; e1 < ext[1]; ++e1) {
      float* o = out + e1 * row;
      const int64_t x1 = e1 - lo[1];
      if (x1 < 0 || x1 >= src[1] || w_lo >= w_hi) {
        for (size_t q = 0; q < std::max<size_t>(col_phases.size(), 1); ++q)
          std::memset(o + static_cast<int64_t>(q) * phase_floats(), 0, static_cast<size_t>(row) * sizeof(float));
        continue;
      }
      // Source element of stored column 0 (before any padding).
      const int64_t src_row = st.offset + n * st.n + (g * cg + c0) * st.ch + x0 * st.sp[0] + x1 * st.sp[1] -
                              lo[2] * st.sp[2];
      if (col_step > 1) {
        copy_phases(base, src_row, st.sp[2], st.ch, nc, w_lo, w_hi, o, zero_nonfinite, found);
        continue;
      }
      std::memset(o, 0, static_cast<size_t>(w_lo * cp) * sizeof(float));
      std::memset(o + w_hi * cp, 0, static_cast<size_t>((ext[2] - w_hi) * cp) * sizeof(float));
      copy_rows(base, src_row + w_lo * st.sp[2], st.ch, st.sp[2], nc, w_hi - w_lo, o + w_lo * cp, zero_nonfinite,
                found);
    }
  }
}

void PixelPairCopy::set_columns(int64_t taps, int64_t dilation, int64_t pixels) {
  const int64_t period = 2 * step;
  // Class of each residue, in order of first use (-1: none yet). The stride
  // is bounded by supported() (at most 2^16 phases), so is this table.
  std::vector<int64_t> class_of(static_cast<size_t>(period), -1);
  std::vector<int64_t> cls(static_cast<size_t>(taps)), q0(static_cast<size_t>(taps));
  first.clear();
  int64_t max_q0 = 0;
  for (int64_t r = 0; r < taps; ++r) {
    const int64_t col = r * dilation, res = col % period;
    int64_t& c = class_of[static_cast<size_t>(res)];
    if (c < 0) {
      c = static_cast<int64_t>(first.size());
      first.push_back(res);
    }
    cls[static_cast<size_t>(r)] = c;
    q0[static_cast<size_t>(r)] = col / period;
    max_q0 = std::max(max_q0, col / period);
  }
  slots = max_q0 + (pixels + 1) / 2;
  tap_slot.resize(static_cast<size_t>(taps));
  for (size_t r = 0; r < tap_slot.size(); ++r) tap_slot[r] = cls[r] * slots + q0[r];
}

bool PixelPairCopy::adjacent_pairs(const Strides& st) const {
  // Short rows too, since the pair transpose works in registers: through
  // an L1 buffer and a transpose pass, a call per row and class cost more
  // than the general path's widening on 28- to 56-wide rows (0.93x-0.97x);
  // in registers, 2 threads, bf16 gradWeight: g8 128@28 1.20x, 3x3 128@28
  // 1.04x, 64@56 1.03x, unet3d 1.05x, 14- and 7-wide rows within noise.
  return step == 1 && st.sp[2] == 1;
}

bool PixelPairCopy::odd_class_derived(int64_t c_hi) const {
  return first.size() == 2 && first[0] == 0 && first[1] == 1 && step == 1 && 2 * slots >= c_hi;
}

void PixelPairCopy::copy_adjacent_pairs(const uint16_t* base, int64_t block_row, int64_t nc, int64_t c_lo,
                                        int64_t c_hi, uint32_t* out, bool zero_nonfinite, bool* found) const {
  const Strides st = strides_of(v, spatial);
  const int64_t classes = static_cast<int64_t>(first.size());
  const bool derive_odd = odd_class_derived(c_hi);
  bool nonfinite = false;
  // Stored row e1, class m: slots (e1 * classes + m) * slots + q of `out`.
  for (int64_t e1 = 0; e1 < ext[1]; ++e1)
    for (int64_t m = 0; m < classes; ++m) {
      uint32_t* const o = out + (e1 * classes + m) * slots * cp;
      if (m == 1 && derive_odd) {
        // Slot q + 1 of class 0 is cp words on; past its last slot, the low
        // half is column 2 * slots: padding (odd_class_derived).
        shift_pair_words(o - slots * cp, slots * cp, cp, o);
        continue;
      }
      const int64_t x1 = e1 - lo[1];
      if (x1 < 0 || x1 >= src[1] || c_lo >= c_hi) {
        std::memset(o, 0, static_cast<size_t>(slots * cp) * sizeof(uint32_t));
        continue;
      }
      const int64_t f = first[static_cast<size_t>(m)];
      const int64_t row0 = block_row + x1 * st.sp[1] - lo[2];  // + c * st.ch + col: stored column col
      // Slots [qa, qb) hold stored columns in [c_lo, c_hi), slot q columns
      // f + 2q and f + 2q + 1: one call of the tier's transpose reads them
      // from column col0 on, its first pair starting `lead` halves before
      // (a low half in the left padding), its last one cut at c_hi. The
      // slots outside hold padding only.
      const int64_t col0 = std::max(c_lo, f);
      const int64_t qa = std::min(slots, (col0 - f) / 2);
      const int64_t qb = std::clamp<int64_t>(ceil_div(std::max<int64_t>(c_hi - f, 0), 2), qa, slots);
      if (qb > qa &&
          pairs_channels_last(base + row0 + col0, st.ch, nc, std::min(c_hi, f + 2 * qb) - col0, true,
                              static_cast<int>(col0 - f - 2 * qa), zero_nonfinite, o + qa * cp, cp))
        nonfinite = true;
      if (qa > 0) std::memset(o, 0, static_cast<size_t>(qa * cp) * sizeof(uint32_t));
      if (qb < slots) std::memset(o + qb * cp, 0, static_cast<size_t>((slots - qb) * cp) * sizeof(uint32_t));
      if (nc < cp)
        for (int64_t q = 0; q < slots; ++q) std::fill(o + q * cp + nc, o + (q + 1) * cp, 0u);
    }
  if (found && nonfinite) *found = true;
}

void PixelPairCopy::copy_plane(const void* base, int64_t n, int64_t plane, float* dst, float* scratch,
                               bool zero_nonfinite, bool* found) const {
  const int64_t g = plane / ext[0], e0 = plane % ext[0];
  const Strides st = strides_of(v, spatial);
  const int64_t row = row_floats(), x0 = e0 - lo[0];
  // Stored columns [c_lo, c_hi) hold source data.
  const int64_t c_lo = std::clamp<int64_t>(lo[2], 0, ext[2]);
  const int64_t c_hi = std::clamp<int64_t>(lo[2] + src[2], 0, ext[2]);
  // A row goes window by window: the slots whose low column lies in
  // [wa, wa + kWindow) read the source columns of that window and those
  // `step` further on, converted channels-last to fp32 (bf16 widened exactly:
  // its bits in the high half) by the ISA's converter, which transposes in
  // registers; each slot's pair is then two 32-bit rows of that copy, vector
  // by vector. (Read straight from a planar source, each slot was two loads
  // from channel rows far apart, and the copy a quarter of the layer.) The
  // window bounds the scratch whatever the row width and stride: one range
  // of kWindow + step columns, or two of kWindow when the stride is larger.
  const bool one_range = step <= kWindow;
  float* const lo_wide = scratch;
  float* const hi_wide = one_range ? lo_wide : lo_wide + kWindow * cp;
  int64_t span = 0;  // past the last slot's low column
  for (int64_t f : first) span = std::max(span, f + 2 * step * (slots - 1) + 1);
  bool nonfinite = false;
  // nw pixels of nc channels from source index first (pixel stride
  // st.sp[2]) into `into`, channels last at pitch cp, lanes nc.. +0.
  auto convert_pixels = [&](int64_t first_pixel, int64_t nc, int64_t nw, float* into) {
    convert(base, DataType::bf16, OperandRounding::none, first_pixel, st.ch, st.sp[2], nc, nw, into, cp);
    if (nc < cp)
      for (int64_t w = 0; w < nw; ++w) std::fill(into + w * cp + nc, into + (w + 1) * cp, 0.0f);
    if (zero_nonfinite) detail::zero_nonfinite(into, nw * cp);
    if (found && check(into, nw * cp)) nonfinite = true;
  };
  // Converts stored columns [a, b) of source row src_row (clipped to the
  // source) into `into`; returns the first column converted.
  auto convert_range = [&](int64_t src_row, int64_t nc, int64_t a, int64_t b, float* into) {
    a = std::max(a, c_lo);
    b = std::min(b, c_hi);
    if (a >= b) return a;
    convert_pixels(src_row + (a - lo[2]) * st.sp[2], nc, b - a, into);
    return a;
  };
  // The slots of stored row o whose low column lies in [wa, wb), from the
  // fp32 copies lo32 (stored columns from lo_first on) and hi32 (from
  // hi_first): each slot's pair is two 32-bit rows of them, vector by vector.
  auto merge_slots = [&](uint32_t* o, const uint32_t* lo32, int64_t lo_first, const uint32_t* hi32, int64_t hi_first,
                         int64_t wa, int64_t wb) {
    for (size_t m = 0; m < first.size(); ++m) {
      const int64_t period = 2 * step;
      const int64_t q0 = std::min(slots, ceil_div(std::max<int64_t>(wa - first[m], 0), period));
      const int64_t q1 = std::min(slots, ceil_div(std::max<int64_t>(wb - first[m], 0), period));
      for (int64_t q = q0; q < q1; ++q) {
        uint32_t* const d = o + (static_cast<int64_t>(m) * slots + q) * cp;
        const int64_t col = first[m] + period * q;
        const bool has_lo = col >= c_lo && col < c_hi, has_hi = col + step >= c_lo && col + step < c_hi;
        const uint32_t* const lo_row = lo32 + (has_lo ? col - lo_first : 0) * cp;
        const uint32_t* const hi_row = hi32 + (has_hi ? col + step - hi_first : 0) * cp;
        if (has_lo && has_hi) {
          for (int64_t j = 0; j < cp; ++j) d[j] = lo_row[j] >> 16 | (hi_row[j] & 0xffff0000u);
        } else if (has_lo) {
          for (int64_t j = 0; j < cp; ++j) d[j] = lo_row[j] >> 16;
        } else if (has_hi) {
          for (int64_t j = 0; j < cp; ++j) d[j] = hi_row[j] & 0xffff0000u;
        } else {
          std::memset(d, 0, static_cast<size_t>(cp) * sizeof(uint32_t));
        }
      }
    }
  };
  for (int64_t cb = 0; cb < blocks(); ++cb) {
    uint32_t* const out =
        reinterpret_cast<uint32_t*>(dst + g * image_floats() + cb * block_floats() + e0 * ext[1] * row);
    if (x0 < 0 || x0 >= src[0]) {
      std::memset(out, 0, static_cast<size_t>(ext[1] * row) * sizeof(uint32_t));
      continue;
    }
    const int64_t c0 = cb * cp, nc = std::min(cp, cg - c0);
    if (adjacent_pairs(st)) {
      copy_adjacent_pairs(static_cast<const uint16_t*>(base), st.offset + n * st.n + (g * cg + c0) * st.ch + x0 * st.sp[0],
                          nc, c_lo, c_hi, out, zero_nonfinite, found ? &nonfinite : nullptr);
      continue;
    }
    // Planar rows that lie back to back in the source, each within one
    // window: several rows per converter call, as one run of pixels (rows
    // of 28 to 56 columns made one call per row, whose overhead was most of
    // the converter's time in the bf16 3x3 weight gradients).
    const bool back_to_back = st.sp[2] == 1 && st.sp[1] == src[2] && one_range && span <= kWindow;
    const int64_t rows_per_call = back_to_back ? std::max<int64_t>(1, kWindow / src[2]) : 1;
    int64_t have_lo = 0, have_hi = 0;  // source rows in lo_wide (rows_per_call > 1)
    for (int64_t e1 = 0; e1 < ext[1]; ++e1) {
      uint32_t* const o = out + e1 * row;
      const int64_t x1 = e1 - lo[1];
      if (x1 < 0 || x1 >= src[1] || c_lo >= c_hi) {
        std::memset(o, 0, static_cast<size_t>(row) * sizeof(uint32_t));
        continue;
      }
      const int64_t src_row = st.offset + n * st.n + (g * cg + c0) * st.ch + x0 * st.sp[0] + x1 * st.sp[1];
      if (rows_per_call > 1) {
        if (x1 < have_lo || x1 >= have_hi) {
          have_lo = x1;
          have_hi = std::min(src[1], x1 + rows_per_call);
          convert_pixels(src_row, nc, (have_hi - have_lo) * src[2], lo_wide);
        }
        // Stored column col of this row: pixel (x1 - have_lo) * src[2] + col - lo[2].
        const uint32_t* const row32 = reinterpret_cast<const uint32_t*>(lo_wide) + (x1 - have_lo) * src[2] * cp;
        merge_slots(o, row32, lo[2], row32, lo[2], 0, kWindow);
        continue;
      }
      for (int64_t wa = 0; wa < span; wa += kWindow) {
        const int64_t wb = wa + kWindow;
        const int64_t lo_first = convert_range(src_row, nc, wa, one_range ? wb + step : wb, lo_wide);
        const int64_t hi_first = one_range ? lo_first : convert_range(src_row, nc, wa + step, wb + step, hi_wide);
        merge_slots(o, reinterpret_cast<const uint32_t*>(lo_wide), lo_first, reinterpret_cast<const uint32_t*>(hi_wide),
                    hi_first, wa, wb);
      }
    }
  }
  if (found && nonfinite) *found = true;
}

void pack_pixel_pairs(const uint16_t* src, int64_t len, uint32_t* dst) {
  // Little-endian: a pair of neighbours, low half first, is their bytes.
  static_assert(std::endian::native == std::endian::little);
  std::memcpy(dst, src, static_cast<size_t>(len / 2) * sizeof(uint32_t));
  if (len % 2) dst[len / 2] = src[len - 1];
}

namespace {
constexpr int64_t kPrefetchRows = 8;
}  // namespace

WeightPack::TapWalk WeightPack::tap_walk() const {
  TapWalk w;
  for (int i = 0; i < spatial; ++i) {
    const size_t d = static_cast<size_t>(3 - spatial + i);
    const int64_t stride = v.strides[2 + i];
    w.strides[d] = flip_taps ? -stride : stride;
    if (flip_taps) w.origin += (ks[d] - 1) * stride;
  }
  return w;
}

bool WeightPack::by_converter() const {
  // Transposed (data-gradient) weights read each element's row of columns
  // and taps front to back already; through the converter, whose blocks are
  // then only `taps` pixels wide, the bf16 3x3 256@14 data gradient ran
  // 0.96x as fast.
  if (transpose || flip_taps || nr > kMaxNr || (pairs && taps > kMaxTaps)) return false;
  // The taps of one (k, c) must be one unit-stride run.
  int64_t expect = 1;
  for (int i = spatial - 1; i >= 0; --i) {
    if (ks[static_cast<size_t>(3 - spatial + i)] != 1 && v.strides[2 + i] != expect) return false;
    expect *= ks[static_cast<size_t>(3 - spatial + i)];
  }
  return true;
}

void WeightPack::pack_by_converter(const void* base, int64_t g, int64_t blk0, int64_t nblk, float* dst,
                                   bool zero_nonfinite, bool* found) const {
  // Forward weights only (by_converter): columns are k, a row apart
  // (col_step), and the reduced channels c (red_step) within a row.
  const int64_t col_step = v.strides[0], red_step = v.strides[1];
  const int64_t nred = red(), nsteps = steps();
  const int64_t first = v.offset + g * k * col_step;
  bool nonfinite = false;
  // Reduced channel q of a block's columns is a [ncols][taps] block of the
  // source with unit-stride taps, which the converter stores transposed,
  // [tap][column], at the packed layout's pitch.
  for (int64_t q = 0; q < nred; q += pairs ? 2 : 1) {
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t col0 = (blk0 + b) * nr, ncols = std::min<int64_t>(nr, cols() - col0);
      const int64_t src = first + col0 * col_step + q * red_step;
      float* const out = dst + b * block_floats();
      if (!pairs) {
        convert(base, v.dtype, rounding, src, col_step, 1, ncols, taps, out + q * nr, nred * nr);
        for (int64_t t = 0; t < taps; ++t) {
          float* const row = out + (t * nred + q) * nr;
          std::fill(row + ncols, row + nr, 0.0f);
          if (zero_nonfinite) detail::zero_nonfinite(row, ncols);
        }
        continue;
      }
      // Pairs: channels q and q + 1 widened exactly to fp32 (bf16 bits in
      // the high halves), then each tap's two rows merged into 32-bit pairs.
      alignas(64) float wide[2][kMaxTaps * kMaxNr];
      const bool has_hi = q + 1 < nred;
      for (int h = 0; h < (has_hi ? 2 : 1); ++h) {
        convert(base, DataType::bf16, OperandRounding::none, src + h * red_step, col_step, 1, ncols, taps, wide[h],
                nr);
        if (zero_nonfinite) detail::zero_nonfinite(wide[h], taps * nr);
        if (found && check(wide[h], taps * nr)) nonfinite = true;
      }
      uint32_t* const out32 = reinterpret_cast<uint32_t*>(out);
      for (int64_t t = 0; t < taps; ++t) {
        uint32_t* const o = out32 + (t * nsteps + q / 2) * nr;
        const uint32_t* const lo = reinterpret_cast<const uint32_t*>(wide[0] + t * nr);
        const uint32_t* const hi = reinterpret_cast<const uint32_t*>(wide[1] + t * nr);
        if (has_hi)
          for (int64_t j = 0; j < ncols; ++j) o[j] = lo[j] >> 16 | (hi[j] & 0xffff0000u);
        else
          for (int64_t j = 0; j < ncols; ++j) o[j] = lo[j] >> 16;
        std::fill(o + ncols, o + nr, 0u);
      }
    }
  }
  if (!found) return;
  if (pairs ? nonfinite : check(dst, nblk * block_floats())) *found = true;
}

void WeightPack::pack_pairs(const void* base, int64_t g, int64_t blk0, int64_t nblk, float* dst,
                            bool zero_nonfinite, bool* found) const {
  const int64_t s0 = v.strides[0], s1 = v.strides[1];
  const TapWalk walk = tap_walk();
  const std::array<int64_t, 3>& sp = walk.strides;
  const int64_t nred = red(), nsteps = steps();
  const int64_t col_step = transpose ? s1 : s0, red_step = transpose ? s0 : s1;
  const int64_t first = v.offset + g * k * s0 + walk.origin;
  const uint16_t* const src = static_cast<const uint16_t*>(base);
  uint32_t* const d = reinterpret_cast<uint32_t*>(dst);
  unsigned nonfinite = 0;
  auto keep = [&](uint16_t x) -> uint32_t {
    nonfinite |= bf16_nonfinite(x);
    return zero_nonfinite && bf16_nonfinite(x) ? 0u : x;
  };
  // The reduced index outermost, as in pack (a transposed weight's rows),
  // two at a time: each slot, the pair (q, q + 1) of column j, is one
  // 32-bit store (storing the halves apart into a zeroed buffer took twice
  // the stores and a pass of its own, 7-10% of the bf16 3x3 data gradients).
  for (int64_t q = 0; q < nred; q += 2) {
    const bool has_hi = q + 1 < nred;  // else the pair's high half is the zero past an odd red
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t col0 = (blk0 + b) * nr;
      const int64_t ncols = std::min<int64_t>(nr, cols() - col0);
      // Pair (q, q + 1) of column j, tap r: slot (r*steps + q/2)*nr + j.
      uint32_t* o = d + b * block_floats() + q / 2 * nr;
      const int64_t row_q = first + col0 * col_step + q * red_step;
      for (int64_t r0 = 0; r0 < ks[0]; ++r0)
        for (int64_t r1 = 0; r1 < ks[1]; ++r1)
          for (int64_t r2 = 0; r2 < ks[2]; ++r2, o += nsteps * nr) {
            const uint16_t* const lo = src + (row_q + r0 * sp[0] + r1 * sp[1] + r2 * sp[2]);
            if (has_hi) {
              const uint16_t* const hi = lo + red_step;
              for (int64_t j = 0; j < ncols; ++j) o[j] = keep(lo[j * col_step]) | keep(hi[j * col_step]) << 16;
            } else {
              for (int64_t j = 0; j < ncols; ++j) o[j] = keep(lo[j * col_step]);
            }
            std::fill(o + ncols, o + nr, 0u);
          }
    }
  }
  if (found && nonfinite) *found = true;
}

void WeightPack::pack(const void* base, int64_t g, int64_t blk0, int64_t nblk, float* dst, bool zero_nonfinite,
                      bool* found) const {
  if (by_converter()) {
    pack_by_converter(base, g, blk0, nblk, dst, zero_nonfinite, found);
    return;
  }
  if (pairs) {
    pack_pairs(base, g, blk0, nblk, dst, zero_nonfinite, found);
    return;
  }
  const int64_t s0 = v.strides[0], s1 = v.strides[1];
  const TapWalk walk = tap_walk();
  const std::array<int64_t, 3>& sp = walk.strides;
  const int64_t nred = red();
  // Element (reduced q, column j) is w[g*K + kk, cc] with (kk, cc) = (q,
  // col0 + j) when transposed, else (col0 + j, q): one step per column and
  // one per reduced index, hoisted so that the column loop is a plain
  // (vectorizable) strided copy. With the choice made per element, packing a
  // 2048 x 512 data-gradient weight was a tenth of the layer's time.
  const int64_t col_step = transpose ? s1 : s0, red_step = transpose ? s0 : s1;
  const int64_t first = v.offset + g * k * s0 + walk.origin;
  if (col_step == 1) {
    // Unit-stride columns (the data gradient's weight rows, or channels-last
    // forward weights): reduced index q of one tap is one run of the source
    // across the whole range, which the tier's converter cuts into the
    // blocks' rows (nr "channels" per block "pixel", the blocks
    // block_floats apart), a run per call, reading it front to back. Why:
    // per block, 16 floats at a time in a loop built for the baseline ISA,
    // the pack was 10.5% of the 1x1 2048->512 @7 data gradient's samples
    // (1 thread, Zen 3); this way it is 3%, and that gradient took 1/1.03
    // to 1/1.04 of the time on 1 thread (fp16 1/1.09, bf16 widened 1/1.05)
    // and 1/1.03 to 1/1.12 on 2, 512->2048 @7's 1/1.07 (1/1.06). (fp16
    // rows went through the converter before, block by block: built with
    // the portable flags, the fp16 decode went element by element.)
    // Block by block through the rows instead (each 64-byte read a whole row
    // past the previous one) it ran latency-bound at a sixth of the layer.
    const int64_t col0 = blk0 * nr, ncols = std::min(nblk * nr, cols() - col0);
    const int64_t full = ncols / nr, rest = ncols - full * nr;
    const int64_t esize = static_cast<int64_t>(size_of(v.dtype));
    const char* const bytes = static_cast<const char*>(base);
    for (int64_t q = 0; q < nred; ++q) {
      float* o = dst + q * nr;
      const int64_t row_q = first + col0 + q * red_step;
      for (int64_t r0 = 0; r0 < ks[0]; ++r0)
        for (int64_t r1 = 0; r1 < ks[1]; ++r1)
          for (int64_t r2 = 0; r2 < ks[2]; ++r2, o += nred * nr) {
            const int64_t row = row_q + r0 * sp[0] + r1 * sp[1] + r2 * sp[2];
            // Rows far apart (8 KB at 2048 channels) are a stream no
            // hardware prefetcher follows: fetched kPrefetchRows steps ahead.
            if (q + kPrefetchRows < nred)
              prefetch_lines<false>(bytes + (row + kPrefetchRows * red_step) * esize, (ncols - 1) * esize);
            if (full > 0) convert(base, v.dtype, rounding, row, 1, nr, nr, full, o, block_floats());
            if (rest > 0) {
              float* const last = o + full * block_floats();
              convert(base, v.dtype, rounding, row + full * nr, 1, nr, rest, 1, last, nr);
              std::fill(last + rest, last + nr, 0.0f);
            }
            if (zero_nonfinite)
              for (int64_t b = 0; b < nblk; ++b) detail::zero_nonfinite(o + b * block_floats(), nr);
          }
    }
  } else {
    // Strided columns (a k x k data-gradient weight's, taps apart): element
    // by element, the reduced index outermost as above.
    dispatch(v.dtype, rounding, [&]<DataType T, OperandRounding R>() {
      for (int64_t q = 0; q < nred; ++q)
        for (int64_t b = 0; b < nblk; ++b) {
          const int64_t col0 = (blk0 + b) * nr;
          const int64_t ncols = std::min<int64_t>(nr, cols() - col0);
          float* o = dst + b * block_floats() + q * nr;
          const int64_t row_q = first + col0 * col_step + q * red_step;
          for (int64_t r0 = 0; r0 < ks[0]; ++r0)
            for (int64_t r1 = 0; r1 < ks[1]; ++r1)
              for (int64_t r2 = 0; r2 < ks[2]; ++r2, o += nred * nr) {
                const int64_t row = row_q + r0 * sp[0] + r1 * sp[1] + r2 * sp[2];
                for (int64_t j = 0; j < ncols; ++j) o[j] = round_operand<R>(load<T>(base, row + j * col_step));
                for (int64_t j = ncols; j < nr; ++j) o[j] = 0.0f;
                if (zero_nonfinite) detail::zero_nonfinite(o, ncols);
              }
        }
    });
  }
  if (found && check(dst, nblk * block_floats())) *found = true;
}

}  // namespace convbwd::detail::gemm
