// The register-blocked fp32 microkernels behind the dense convolution paths
// (src/impl/gemm/). One kernel shape serves all three operations:
//
//   acc[i][j] (+)= sum over runs r, steps t < len[r] of
//                  A(i, r, t) * b[b_off[r] + t*bs + j]      i < mr, j < nr
//
// The tile shape (mr, nr) belongs to the kernel: each ISA's entry in the
// kernel config (kernels/config.hpp) carries its kernels with their shape,
// and every planner and packing layout reads it from there (6x16 on AVX2 and
// scalar; the AVX-512 shape and why: kernels/avx512/f32_gemm_avx512.cpp).
// The nr columns j are contiguous on the B side (nr channels of a
// channels-last image or of a packed weight block). The mr rows i are either
//   gather:  mr independent pointers, A(i, r, t) = a[i][a_off[r] + t]
//            (mr output pixels, each reading a channel run of its own pixel);
//   strided: one pointer, A(i, r, t) = a[0][a_off[r] + t*as + i]
//            (mr consecutive channels of one channels-last pixel).
// A "run" is one kernel tap (forward/data gradient) or one image row (weight
// gradient): the accumulators stay in registers across every run, so a whole
// reduction costs one load and one store of the mr x nr tile.
//
// Users: gather_conv.cpp (fwd, phase dgrad: gather), wgrad_conv.cpp (blocked
// channels-last wgrad: strided), nchw_1x1.cpp (planar 1x1 fwd/dgrad:
// strided, A = packed weights), wgrad_1x1.cpp (planar 1x1 wgrad: gather, A
// rows = dy channel rows in place).
#pragma once

#include <cstdint>

#include "convbwd/convbwd.hpp"
#include "kernels/store_row.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {

// The largest tile any kernel has: what stack arrays of one tile are sized by.
constexpr int kMaxMr = 16;
constexpr int kMaxNr = 32;

struct MicroArgs {
  const float* a[kMaxMr] = {};  // gather: mr row pointers; strided: a[0] only
  const float* b = nullptr;
  int64_t as = 1;  // strided: A step stride (elements)
  int64_t bs = 0;  // B step stride (elements); gather kernels require nr
  const int64_t* a_off = nullptr;
  const int64_t* b_off = nullptr;
  const int64_t* len = nullptr;
  int64_t runs = 0;
  float* acc = nullptr;     // mr x nr row-major fp32 tile
  bool accumulate = false;  // add to acc (else overwrite)
};

using MicroKernel = void (*)(const MicroArgs&);

// The bf16 pair family (tiers with vdpbf16ps or AMX-BF16: GemmKernels::bf16
// in the config, null elsewhere) takes the same MicroArgs, but every
// "element" of A and B is a 32-bit bf16 pair along the reduction (VNNI
// order): the low half holds reduction index 2s, the high half 2s+1, so
// step t of a run is the pair (2t, 2t+1) and B is packed [step/2][nr][2].
// The pointers are typed float* only to share MicroArgs; offsets, strides
// and lengths count pairs.
//
//   acc[i][j] (+)= sum over runs r, steps t < len[r] of
//                  A(i, r, t).hi * B(r, t, j).hi + A(i, r, t).lo * B(r, t, j).lo
//
// in the order of the tier's instruction: on avx512_bf16 each step is one
// vdpbf16ps, products exact in fp32, added high pair element first, each
// addition rounded to nearest even; on amx each 16 steps of a run are one
// tdpbf16ps, which sums the low and the high elements apart over those
// steps, adds the two sums, then adds that to the accumulator
// (kernels/amx/tile_emu.hpp). Both read bf16 denormal inputs as zero and
// flush denormal sums to zero (their ISA definitions). An odd reduction
// length is padded with a zero element in the last pair.
// Accumulation stays fp32 and each output is rounded once, as in the fp32
// family; the results are the same across tiers only within the tolerance.

// One kernel family's entry in the kernel config: the kernels and their shape.
struct GemmKernels {
  int mr = 0, nr = 0;
  MicroKernel gather = nullptr, strided = nullptr;
  const char* name = "";  // <dtype>_gemm_<MR>x<NR>_<isa>, for benchmarks and tests
  // Rows of `gather` where it has fewer than mr (0: mr). Its row pointers
  // live in general registers, of which x86-64 has 15 to spare: at 16 rows
  // seven of them were spilled and reloaded every step.
  int gather_mr = 0;
  int gather_rows() const { return gather_mr > 0 ? gather_mr : mr; }
  // The strided kernel of exactly `rows` rows, for 1 <= rows <=
  // strided_rows_max (null outside): nr columns as `strided`, the acc tile
  // rows x nr, and each element the same sum in the same order, so the bits
  // do not depend on how rows are tiled. For planners whose rows are a count
  // the problem fixes (the small-channel data gradient's (channel, tap)
  // columns): wav2vec2's 10 rounded up to 16 rows of 8x32 tiles, 1.6x the
  // work. Null on tiers without them (planners then pad to mr).
  MicroKernel (*strided_of_rows)(int rows) = nullptr;
  int strided_rows_max = 0;
  MicroKernel strided_kernel(int rows) const {
    return strided_of_rows && rows >= 1 && rows <= strided_rows_max ? strided_of_rows(rows) : nullptr;
  }
  // The strided kernel of mr rows and the first nr/2 columns: B read as
  // `strided` reads it (bs apart) but only its first nr/2 columns, the acc
  // tile mr x nr/2, each element the same sum in the same order, so the
  // bits do not depend on which of the two computes a column. For a last
  // block of at most nr/2 columns (the planar 1x1 path's pixel tail: 196
  // pixels are six 32-pixel blocks and 4). Null on tiers without one
  // (planners then pad to nr).
  MicroKernel strided_half = nullptr;
};

// Converts a [channels nc][pixels nw] block of a source image (element
// (c, w) at src_index + c*cstride + w*wstride, dtype dt) to fp32, applies the
// operand rounding, and stores it channels-last: dst[w*pitch + c]. The fast
// path (unit pixel or channel stride) transposes 8x8 blocks in registers.
using ToChannelsLast = void (*)(const void* src, DataType dt, OperandRounding rounding, int64_t src_index,
                                int64_t cstride, int64_t wstride, int64_t nc, int64_t nw, float* dst,
                                int64_t pitch);

// ToChannelsLast of a planar block (pixels contiguous: wstride 1) into two
// column phases: source pixel 2j goes to even[j*pitch + c], pixel 2j+1 to
// odd[j*pitch + c]. (A stride-2 weight gradient's x copy: ImageCopy::col_step.)
using ToChannelsLastSplit = void (*)(const void* src, DataType dt, OperandRounding rounding, int64_t src_index,
                                     int64_t cstride, int64_t nc, int64_t nw, float* even, float* odd,
                                     int64_t pitch);

// Moves planar bf16 rows into the bf16 pair family's 32-bit slots, channels
// last, bit for bit: row j of the block starts at src + j*cstride and holds
// len contiguous elements. Two ways to pair them:
//   pair_elements = false (pairs of rows: the reduced channels of the
//     forward and data-gradient copies): dst[e*pitch + p] =
//     row 2p [e] | row 2p+1 [e] << 16, for e < len, p < ceil(rows/2);
//   pair_elements = true (pairs of neighbours: the pixels the weight
//     gradient reduces over): dst[t*pitch + j] =
//     row j [2t - lead] | row j [2t+1 - lead] << 16,
//     for t < ceil((lead + len)/2), j < rows;
// elements outside [0, len) are zero halves: an odd last pair takes a zero
// high half, and lead = 1 (pair_elements only; else 0) starts the first pair
// with a zero low half, so a row whose pairs straddle its left padding goes
// in one call (scalar edge slots were 18% of the bf16 g8 128@28 weight
// gradient). Nothing else of dst is written,
// nothing past the block is read. A NaN or +-Inf half is stored as 0 when
// zero_nonfinite (OpArgs::zero_nonfinite); the result says whether any half
// was one. The vector tiers do both steps, the pairing and the transpose,
// in registers: as an interleave pass and a transpose pass through L1 they
// were 38% of WaveNet's bf16 data gradient.
using Bf16PairsChannelsLast = bool (*)(const uint16_t* src, int64_t cstride, int64_t rows, int64_t len,
                                       bool pair_elements, int lead, bool zero_nonfinite, uint32_t* dst,
                                       int64_t pitch);

}  // namespace convbwd::detail
