// Shared pieces of the dense GEMM paths: the 3-deep spatial description, the
// channels-last fp32 image copies every path computes from (bf16 pairs for
// the bf16 kernels: of channels for the gather path, of pixels for the weight
// gradients), weight packing and storing fp32 tiles into any strided output
// view.
//
// Why channels-last copies: with channels innermost, every reduction step of
// every operation reads a contiguous run of channels (one vector of 16 for the
// B side, broadcasts from consecutive addresses for the A side), padding turns
// into stored zeros instead of branches, and dtype conversion plus the
// operand rounding of cubeMathType happen exactly once per element.
#pragma once

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gemm.hpp"
#include "impl/implementation.hpp"
#include "impl/operand_access.hpp"
#include "kernels/any_nonfinite.hpp"
#include "kernels/config.hpp"
#include "kernels/tier_kernels.hpp"
#include "numeric/float_formats.hpp"
#include "problem/checked.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail::gemm {

constexpr int64_t kAlignFloats = 16;  // 64 bytes

// Floats per pixel of a channels-last copy: whole 64-byte lines, plus one
// when their number is a multiple of 16. The gather kernel reads six
// pixels a pitch apart; with L lines per pixel they fall into 64 / gcd(64, L)
// of L1's 64 sets, all six into one or two sets when L is a multiple of 32
// (512 or 1024 channels: a 4 KB pitch) and four when 16. Any other L gives
// at least 8. (Padding every even L, 32 or 64 channels included, cost up
// to half again the copy's memory; on this shared machine neither rule was
// faster beyond the timing noise.) At most 8 floats (bf16 pairs of 16-channel
// groups) take 8, two pixels to a line: a pitch of 16 left half of each line
// unused, and the copy at 8 lets the data gradient's taps join into one run
// (gather_conv.cpp); bf16 g8 128@28 gradInput 1.02x from the pitch alone.
inline int64_t pixel_pitch(int64_t channels) {
  if (channels <= 8) return 8;
  int64_t p = (channels + 15) / 16 * 16;
  if ((p / 16) % 16 == 0) p += 16;
  return p;
}


// Declines what the GEMM paths do not handle (8-bit formats, the bias op).
inline bool supported(const OpSpec& op, std::string* why) {
  if (op.op == Op::bias) {
    *why = "the bias reduction is not a GEMM";
    return false;
  }
  if (!is_narrow_float(op.a.dtype) || !is_narrow_float(op.b.dtype) || !is_narrow_float(op.dst.dtype)) {
    *why = "8-bit operands or outputs are not handled (fp32/bf16/fp16 only)";
    return false;
  }
  // Planning builds per-tap, per-phase tables and sizes padded channels-last
  // copies from the geometry alone; hostile sizes (a 2^32-tap kernel over an
  // empty-channel or never-allocated tensor) must not hang planning or
  // overflow that arithmetic. Real convolutions are far inside these bounds.
  const Geometry& g = op.geo;
  Checked taps(1), phases(1), padded(std::max(g.c, g.k));
  padded = padded * g.groups;
  for (int d = 0; d < g.spatial; ++d) {
    taps = taps * g.ksize[d];
    phases = phases * g.stride[d];
    padded = padded * (Checked(g.xsize[d]) + g.pad_before[d] + g.pad_after[d] +
                       Checked(g.ksize[d] - 1) * g.dilation[d] + Checked(g.ysize[d]) * g.stride[d]);
  }
  // Phases: each has its own tables, and the largest real strides make a
  // few dozen; 1.4e7 of them (a fuzz finding) planned for seconds.
  const Checked table = taps * phases;
  if (!taps.ok() || taps.value() > (int64_t{1} << 16) || !phases.ok() || phases.value() > (int64_t{1} << 16) ||
      !table.ok() || table.value() > (int64_t{1} << 24) ||
      !padded.ok() || padded.value() > (int64_t{1} << 40)) {
    *why = "the kernel taps, stride phases or padded image are beyond the sizes the GEMM tables are built for";
    return false;
  }
  return true;
}

// The planar 1x1 paths (nchw_1x1.cpp, wgrad_1x1.cpp) take 1x1, stride-1,
// unpadded layers.
inline bool planar_1x1(const Geometry& g, std::string* why) {
  for (int d = 0; d < g.spatial; ++d) {
    if (g.ksize[d] != 1 || g.stride[d] != 1 || g.pad_before[d] != 0 || g.pad_after[d] != 0 ||
        g.xsize[d] != g.ysize[d]) {
      *why = "not a 1x1, stride-1, unpadded convolution";
      return false;
    }
  }
  return true;
}
// Images of fewer pixels (the 7x7 layers) leave 16-pixel strips or chunks
// mostly tail, and each image's strip would stream the whole weight matrix
// again: the gather path's tiles run across the batch. (The planar weight
// gradient's one pass, which runs across the batch too, takes them.)
constexpr int64_t kPlanarMinPixels = 64;

// A positive integer from environment variable `name`, else 0: the knobs,
// read at plan time, with which the tests drive on small problems the paths
// that real layers take for their size (several batches, chunks, slabs).
inline int64_t test_knob(const char* name) {
  const char* e = std::getenv(name);
  const long long v = e ? std::atoll(e) : 0;
  return v > 0 ? static_cast<int64_t>(v) : 0;
}

// Reduction steps per chunk: `steps`, capped by CONVBWD_GEMM_CHUNK_STEPS, so
// that the tests cross chunk boundaries and split runs.
inline int64_t chunk_steps(int64_t steps) {
  const int64_t cap = test_knob("CONVBWD_GEMM_CHUNK_STEPS");
  return cap > 0 ? std::min(steps, cap) : steps;
}

// Images per batch of channels-last copies: enough for kBatchPixels pixels
// of work, so that a batch still splits into many tasks, but no more than
// kBatchFloats of copies (one image at least): the copies are most of a
// call's memory, and copying the whole batch at once made a transposed UNet
// layer's peak RSS 2.4x PyTorch's. Within the budget, and capped by
// CONVBWD_GEMM_MAX_BATCH (test_knob).
constexpr int64_t kBatchPixels = 4096;
constexpr int64_t kBatchFloats = int64_t{1} << 20;  // 4 MiB
inline int64_t batch_limit(int64_t n, int64_t budget_floats, int64_t fixed_floats, int64_t per_image_floats,
                           int64_t pixels_per_image, int64_t max_copy_floats = kBatchFloats) {
  int64_t b = std::min<int64_t>(n, (budget_floats - fixed_floats) / per_image_floats);
  const int64_t for_work = ceil_div(kBatchPixels, std::max<int64_t>(pixels_per_image, 1));
  b = std::min(b, std::max<int64_t>(1, std::min(for_work, max_copy_floats / per_image_floats)));
  if (const int64_t cap = test_knob("CONVBWD_GEMM_MAX_BATCH")) b = std::min(b, cap);
  return b;
}

// A channels-last fp32 copy of one operand image per (n, group):
//   [n][g][channel block][e0][e1][e2][cp],  stored position e = source + lo,
// with cp channels per block (a blocked layout like oneDNN's nChw16c when
// cp < cg; plain channels-last when one block holds them all). Zero where the
// source position falls outside the image and for channels past cg.
struct ImageCopy {
  View v;
  int spatial = 0;
  OperandRounding rounding = OperandRounding::none;
  int64_t groups = 1, cg = 0, cp = 0;
  std::array<int64_t, 3> src{1, 1, 1};  // source extents
  std::array<int64_t, 3> ext{1, 1, 1};  // stored extents
  std::array<int64_t, 3> lo{0, 0, 0};
  ToChannelsLast convert = scalar::to_channels_last;  // chosen by ISA at plan time
  ToChannelsLastSplit convert_split = scalar::to_channels_last_split;  // likewise
  AnyNonfinite check = scalar::any_nonfinite;         // likewise
  Bf16PairsChannelsLast pairs_channels_last = scalar::bf16_pairs_channels_last;  // likewise
  // bf16 pairs (the bf16 kernels of kernels/gemm.hpp): each stored 32-bit
  // slot holds channels 2s and 2s+1 of a bf16 source, copied bit for bit (no
  // operand rounding applies), a zero half past the last channel; cp then
  // counts slots, and the slots of a pixel past slots() are not written
  // (unlike fp32's zero channels: no kernel reads them, and no check scans
  // them). Else each slot is one channel in fp32.
  bool pairs = false;
  // Column phases (fp32 slots only): with col_step > 1, a stored plane (one
  // position of dim 0) holds, for each residue of col_phases in turn, its
  // rows' stored columns e with e % col_step == residue, in order,
  // phase_cols() pixels a row; columns of other residues are not stored.
  // Why: a stride-s weight gradient's tap reads every s-th column of x; so
  // stored, its B operand steps one pixel (64 bytes), not s, and columns no
  // tap reads are not copied. Phases outside the rows: an unpadded plane's
  // phases are then its pixels of each parity, converted in one call.
  int64_t col_step = 1;
  std::vector<int64_t> col_phases;
  // Stores the residues of the columns r * dilation, r < taps (the taps of
  // the last spatial dim) read, with step col_step.
  void set_col_phases(int64_t step, int64_t taps, int64_t dilation);
  int64_t phase_cols() const { return col_step > 1 ? (ext[2] + col_step - 1) / col_step : ext[2]; }
  int64_t row_pixels() const {
    return col_step > 1 ? static_cast<int64_t>(col_phases.size()) * phase_cols() : ext[2];
  }
  // Floats from a stored row to the next (within a phase), from a column
  // phase of a plane to the next, from a plane to the next, and from a
  // plane's start to its row 0's stored column e (of a stored residue).
  int64_t row_floats() const { return phase_cols() * cp; }
  int64_t phase_floats() const { return ext[1] * row_floats(); }
  int64_t plane_floats() const { return ext[1] * row_pixels() * cp; }
  int64_t column_offset(int64_t e) const;

  int64_t slots() const { return pairs ? (cg + 1) / 2 : cg; }  // per pixel, unpadded
  int64_t blocks() const { return (slots() + cp - 1) / cp; }
  int64_t block_floats() const { return ext[0] * plane_floats(); }
  int64_t image_floats() const { return blocks() * block_floats(); }
  int64_t planes() const { return groups * ext[0]; }  // copy tasks per image
  // Copies plane (g, e0) of image n into dst (the copy of that image, all groups).
  // zero_nonfinite (OpArgs::zero_nonfinite): NaN and +-Inf are stored as 0.
  // found (OpArgs::found): set to true if the copy holds a NaN or +-Inf.
  void copy_plane(const void* base, int64_t n, int64_t plane, float* dst, bool zero_nonfinite = false,
                  bool* found = nullptr) const;

 private:
  // Zeroes non-finite values (if asked) and the channels past nc of `pixels`
  // consecutive stored pixels from o.
  void finish_rows(float* o, int64_t pixels, int64_t nc, bool zero_nonfinite) const;
  // Copies nc channels x nw pixels from source element src_index (strides as
  // for convert) to o, pixel after pixel, in the stored format, with the
  // padding, zero_nonfinite and found of copy_plane.
  void copy_rows(const void* base, int64_t src_index, int64_t cstride, int64_t wstride, int64_t nc, int64_t nw,
                 float* o, bool zero_nonfinite, bool* found) const;
  // Stores the source columns [w_lo, w_hi) (stored positions) of a row into
  // its column phases, phase q's row from o + q * phase_floats(),
  // zeros elsewhere; src_row: the source element of stored column 0.
  void copy_phases(const void* base, int64_t src_row, int64_t wstride, int64_t cstride, int64_t nc, int64_t w_lo,
                   int64_t w_hi, float* o, bool zero_nonfinite, bool* found) const;
  // As copy_rows, a planar row of nw pixels into two column phases:
  // source pixel 2j to first + j * cp, pixel 2j + 1 to second + j * cp.
  void split_rows(const void* base, int64_t src_index, int64_t cstride, int64_t nc, int64_t nw, float* first,
                  float* second, bool zero_nonfinite, bool* found) const;
  // Whether rows of a source with these strides split into both column
  // phases in one pass (the split converter: planar fp32 slots, stride 2).
  bool splits_rows(int64_t wstride, int64_t cstride) const {
    return col_phases.size() == 2 && col_step == 2 && !pairs && wstride == 1 && cstride != 1;
  }
};

// A bf16 copy of one operand image per (n, group) for the weight
// gradient's pair kernels (kernels/gemm.hpp), whose reduction runs over
// output pixels: a slot (32 bits) holds two elements of one channel that the
// two reduction indices of one kernel step read (output pixels 2t and 2t+1 of
// an image row), low half first, copied bit for bit:
//   [n][g][channel block][e0][e1][column class m][slot q][cp]
//   slot (m, q, channel j) = (column first[m] + 2*step*q, that column + step)
// Rows e0, e1 are stored at source position + lo, as in ImageCopy; a column
// is a stored position along the last dim (source + lo[2]). Zero where the
// position falls outside the source, past ext (no output pixel reads it) and
// for channels past cg.
//
// dy (one class, first 0, step 1): pairs of consecutive output pixels, with
// the zero high half of an odd row's last pair that the kernel contract asks
// for (ext[2] = the row's pixels).
// x (step = the stride s): output pixels 2t and 2t+1 of tap column r read
// columns r*d + 2ts and r*d + 2ts + s, i.e. slot q0 + t of the class of
// residue r*d mod 2s, with q0 = r*d div 2s (set_columns). Why classes: with
// s > 1 a pair's two columns are not adjacent, so no single pairing of x
// serves every tap; one copy per tap would hold k copies of the image, while
// the residues mod 2s are at most 2s classes of ~ext/(2s) slots, two
// elements each: about twice the image at most, whatever the kernel size
// (3x3 stride 1: twice; 1x1 stride 2: half, as only even columns are read). Taps of one class share its slots, so an odd row's padding zero
// lives in dy only: x's high half there is a real column that another tap
// reads (or zero past ext). It meets dy's zero; a NaN or Inf there is found
// by the copy's check like any other, and execute then reruns with it zeroed
// (nonfinite.hpp).
struct PixelPairCopy {
  View v;
  int spatial = 0;
  int64_t groups = 1, cg = 0, cp = 0;
  std::array<int64_t, 3> src{1, 1, 1};  // source extents
  std::array<int64_t, 3> ext{1, 1, 1};  // stored extents (ext[2]: columns)
  std::array<int64_t, 3> lo{0, 0, 0};
  int64_t step = 1;              // columns between a slot's two elements
  std::vector<int64_t> first;    // first column of each class
  std::vector<int64_t> tap_slot; // per tap column: class * slots + q0
  int64_t slots = 0;             // per class and row
  ToChannelsLast convert = scalar::to_channels_last;  // chosen by ISA at plan time
  AnyNonfinite check = scalar::any_nonfinite;         // likewise
  Bf16PairsChannelsLast pairs_channels_last = scalar::bf16_pairs_channels_last;  // likewise
  ShiftPairWords shift_pair_words = scalar::shift_pair_words;                    // likewise

  // Classes and slots for rows of `pixels` output pixels, output pixel o
  // of tap column r < taps reading column r*dilation + o*step.
  void set_columns(int64_t taps, int64_t dilation, int64_t pixels);
  // Floats from a row's start to the first slot of tap column r.
  int64_t column_offset(int64_t r) const { return tap_slot[static_cast<size_t>(r)] * cp; }
  int64_t row_floats() const { return static_cast<int64_t>(first.size()) * slots * cp; }
  int64_t blocks() const { return (cg + cp - 1) / cp; }
  int64_t block_floats() const { return ext[0] * ext[1] * row_floats(); }
  int64_t image_floats() const { return blocks() * block_floats(); }
  int64_t planes() const { return groups * ext[0]; }  // copy tasks per image
  // Source columns converted at a time (copy_plane).
  static constexpr int64_t kWindow = 256;
  // Floats of scratch copy_plane needs: two windows, channels-last fp32.
  int64_t scratch_floats() const { return 2 * kWindow * cp; }
  // As ImageCopy::copy_plane, with `scratch` (scratch_floats()) its own.
  void copy_plane(const void* base, int64_t n, int64_t plane, float* dst, float* scratch, bool zero_nonfinite = false,
                  bool* found = nullptr) const;

 private:
  // A block's stored plane when a slot's two columns are neighbours (step
  // 1) in a planar source: each class's slots of a channel are then the
  // source row's own pairs of neighbours from the class's first column,
  // which pairs_channels_last moves to [slot][channel] in one pass, without the
  // widening to fp32 and pair merge of the general path (those made the
  // copies 38% of WaveNet's bf16 weight gradient). block_row: the source
  // index of the plane's first channel, before the row and column offsets.
  void copy_adjacent_pairs(const uint16_t* base, int64_t block_row, int64_t nc, int64_t c_lo, int64_t c_hi,
                           uint32_t* out, bool zero_nonfinite, bool* found) const;
  bool adjacent_pairs(const Strides& st) const;
  // Whether class 1 (columns 2q + 1 and 2q + 2, taps at odd columns with
  // step 1: the middle tap of a 3x3) is made from class 0 (columns 2q and
  // 2q + 1) of the same stored row, where class 0 was just copied:
  // slot q of class 1 is the high half of class 0's slot q and the low
  // half of its slot q + 1, two shifts and an or per word where a copy
  // transposes the source again. Valid when class 0's slots hold every
  // stored column with data (2 * slots >= c_hi): then class 1's elements are
  // all class 0's, already checked for NaN/Inf (and zeroed when asked), and
  // the column past class 0's last slot is padding. Why: the pixel-pair
  // copies were 22% of the g8 128@28 bf16 weight gradient on one thread
  // (and 17% of 3x3 64@56's), a third of them class 1 of x.
  bool odd_class_derived(int64_t c_hi) const;
};

// Whether a bf16 value is NaN or +-Inf (its exponent all ones): the test
// of every bf16 copy that keeps the values as they are.
constexpr bool bf16_nonfinite(uint16_t v) { return (v & 0x7f80u) == 0x7f80u; }

// Moves a [rows][cols] block of 32-bit words (src row pitch src_pitch) to
// dst[col * dst_pitch + row], bit for bit: the fp32 converter's register
// transpose (`convert`) moves fp32 values as they are, NaN payloads
// included, so it serves for pair words built elsewhere (the small-channel
// weight gradient's, paired from fp32 rows). Pairs read from a bf16 source
// take the tier's bf16 pair transpose instead (kernels/gemm.hpp), which
// pairs and moves them in one pass.
inline void transpose_words(ToChannelsLast convert, const uint32_t* src, int64_t src_pitch, int64_t rows,
                            int64_t cols, uint32_t* dst, int64_t dst_pitch) {
  convert(src, DataType::f32, OperandRounding::none, 0, src_pitch, 1, rows, cols, reinterpret_cast<float*>(dst),
          dst_pitch);
}

// Packs `len` consecutive bf16 elements from src as pairs of neighbours into
// the (len + 1) / 2 slots dst[0 ..], a zero high half after an odd len: the
// pixel pairs of the planar 1x1 weight gradient (wgrad_1x1.cpp), which has
// no NaN/Inf pass to run (every tap is real), so the padding is zero on both
// operands.
void pack_pixel_pairs(const uint16_t* src, int64_t len, uint32_t* dst);
// The same for nc rows (row j at src + j * cstride) side by side, slot t of
// row j at dst[t * pitch + j], is the tier's bf16 pair transpose with
// pair_elements (KernelConfig::bf16_pairs_channels_last). (One scalar store
// per slot, pitch words apart, was 60% of the bf16 1x1 256->64 weight
// gradient.)

// Packs weights for the gather kernel: [blk][tap][red][nr] per group, where
// the nr columns are `cols` (output channels of the tile) and red the reduced
// channel. transpose = false: cols are k, red is c (forward);
// true: cols are c, red is k (data gradient).
struct WeightPack {
  View v;  // [G*K, C, ks...]
  int spatial = 0;
  OperandRounding rounding = OperandRounding::none;
  int64_t groups = 1, k = 0, c = 0, taps = 1;
  std::array<int64_t, 3> ks{1, 1, 1};
  bool transpose = false;
  int64_t nr = 16;  // columns per block: the microkernel's nr (kernel config)
  AnyNonfinite check = scalar::any_nonfinite;  // chosen by ISA at plan time
  ToChannelsLast convert = scalar::to_channels_last;  // chosen by ISA at plan time
  // bf16 pairs along the reduction ([blk][tap][red/2][nr][2], a zero pair
  // element past an odd red), copied bit for bit from bf16 weights; else fp32.
  bool pairs = false;
  // Taps packed in reverse order: slot t holds tap taps-1-t, every spatial
  // index mirrored (transposed weights only). The data gradient's tap of
  // index r reads dy at position pad - r*d, so in mirrored order its taps'
  // stored positions rise with their slots as the packed weights do, and
  // neighbouring taps join into one kernel run (gather_conv.cpp).
  bool flip_taps = false;

  int64_t cols() const { return transpose ? c : k; }
  int64_t red() const { return transpose ? k : c; }
  int64_t steps() const { return pairs ? (red() + 1) / 2 : red(); }  // kernel steps (32-bit slots) per tap
  int64_t blocks() const { return ceil_div(cols(), nr); }
  int64_t block_floats() const { return taps * steps() * nr; }
  int64_t group_floats() const { return blocks() * block_floats(); }
  // Packs blocks blk0 .. blk0+nblk-1 of group g into dst (nblk *
  // block_floats() floats, block after block).
  // zero_nonfinite (OpArgs::zero_nonfinite): NaN and +-Inf are stored as 0.
  // found (OpArgs::found): set to true if the blocks hold a NaN or +-Inf.
  void pack(const void* base, int64_t g, int64_t blk0, int64_t nblk, float* dst, bool zero_nonfinite = false,
            bool* found = nullptr) const;

 private:
  void pack_pairs(const void* base, int64_t g, int64_t blk0, int64_t nblk, float* dst, bool zero_nonfinite,
                  bool* found) const;
  // Element by element (pack_pairs and the fp32 loop), forward weights
  // (cols are k), whose columns are weight rows a whole [C, taps] apart,
  // took one scalar load and store per element: the pack was half the bf16
  // data gradient of DCGAN's transposed 512->256. When a forward weight's
  // taps are one unit-stride run (pairs: at most kMaxTaps, the size of its
  // widened rows), pack_by_converter has the tier's converter (`convert`)
  // transpose each reduced channel's [column][tap] block in registers
  // instead.
  static constexpr int64_t kMaxTaps = 64;
  // The source offset of packed slot (r0, r1, r2) is origin + r0*strides[0]
  // + r1*strides[1] + r2*strides[2] (flip_taps mirrors them).
  struct TapWalk {
    int64_t origin = 0;
    std::array<int64_t, 3> strides{0, 0, 0};
  };
  TapWalk tap_walk() const;
  bool by_converter() const;
  void pack_by_converter(const void* base, int64_t g, int64_t blk0, int64_t nblk, float* dst, bool zero_nonfinite,
                         bool* found) const;
};

// Whether a problem's operands can run on a tier's bf16 pair kernels: both
// bf16 and no operand rounding (cubeMathType HF32 leaves bf16 as it is, so
// it plans rounding none; USE_FP16 rounds to fp16 and stays on fp32 kernels).
inline bool bf16_pairs(const OpSpec& op, const KernelConfig& cfg) {
  return cfg.bf16.gather != nullptr && op.a.dtype == DataType::bf16 && op.b.dtype == DataType::bf16 &&
         op.rounding == OperandRounding::none;
}

// The kernel family a GEMM planner runs: the bf16 pair kernels when `pairs`
// (bf16_pairs above), else the fp32 kernels; of either, the narrow ones
// where the tier has them and the tile's `cols` columns (the channels of one
// group on the B side) would fill at most the narrow tile: 16-channel groups
// on 8x32 computed half their lanes on padding (gather_conv.cpp and
// wgrad_conv.cpp give the figures). wide_family: the pair or fp32 kernels
// alone, for planners whose tile columns are pixels (the planar 1x1 paths).
inline const GemmKernels& wide_family(const KernelConfig& cfg, bool pairs) { return pairs ? cfg.bf16 : cfg.gemm; }
inline const GemmKernels& gemm_family(const KernelConfig& cfg, bool pairs, int64_t cols) {
  const GemmKernels& wide = wide_family(cfg, pairs);
  const GemmKernels& n = pairs ? cfg.bf16_narrow : cfg.gemm_narrow;
  return n.gather && n.strided && cols <= n.nr && cols < wide.nr ? n : wide;
}

// Stores rows x cols of an fp32 tile (row stride `pitch`) into a view:
// element (i, j) goes to row_base[i] + j * col_stride, rounded once.
// fp32 rows are copied inline (store_row_f32); narrow types go through the
// ISA's row store, which converts eight at a time.
inline void store_tile(StoreRow store, void* base, DataType dt, const float* tile, int64_t pitch,
                       const int64_t* row_base, int rows, int64_t col_stride, int cols) {
  for (int i = 0; i < rows; ++i) {
    if (dt == DataType::f32)
      store_row_f32(tile + i * pitch, cols, static_cast<float*>(base) + row_base[i], col_stride);
    else
      store(tile + i * pitch, cols, base, dt, row_base[i], col_stride);
  }
}

// Prefetches every cache line of the bytes [p, p + last], for writing or
// for reading (a run need not start on a line).
template <bool kForWrite>
inline void prefetch_lines(const char* p, int64_t last) {
  for (int64_t off = 0; off < last; off += 64) __builtin_prefetch(p + off, kForWrite ? 1 : 0);
  __builtin_prefetch(p + last, kForWrite ? 1 : 0);
}

// The tier's kernels and their tile shape, chosen at plan time.
inline const KernelConfig& kernels_for(Isa isa) { return kernel_config(isa); }

}  // namespace convbwd::detail::gemm
