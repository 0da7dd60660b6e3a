// The plan of the depthwise/grouped direct kernels (depthwise_kernel.hpp,
// instantiated per ISA by src/kernels/<isa>/depthwise_*), filled by the
// planner in src/impl/depthwise. Everything here is computed once at plan
// time; the kernels only read it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/store_row.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {

// Widest kernel (taps along the width) the plan tabulates offsets for.
constexpr int64_t kDwMaxKw = 64;
// Most (depth, height) kernel taps a plan takes (a stack array per row).
constexpr int64_t kDwMaxRowTaps = 256;
// Most channels per block of the channel-blocked kernels (depthwise_cl): a
// tier's vector width (DwClKernels::lanes in kernels/config.hpp), 8 or 16.
constexpr int64_t kDwClMaxLanes = 16;

namespace {
// In an unnamed namespace: this header is compiled with every tier's flags.
inline int64_t dw_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
}  // namespace

// A strided 5D view (n or out-channel, channel, d, h, w); missing leading
// spatial dims have extent 1 and stride 0.
struct DwView {
  DataType dtype = DataType::f32;
  int64_t off = 0;
  int64_t sn = 0, sc = 0, sd = 0, sh = 0, sw = 0;
  // OpArgs::zero_nonfinite: loads store NaN and +-Inf as 0 (the rows are
  // zero-padded, so a NaN weight would otherwise meet phantom zeros).
  bool zero_nonfinite = false;
};

// The layer's extents as 3D (depth, height, width), which both depthwise
// plans (this one and DwClPlan) start from: 1D/2D have leading extents of 1.
struct DwExtents {
  int64_t xd = 1, xh = 1, xw = 1, yd = 1, yh = 1, yw = 1, kd = 1, kh = 1, kw = 1;
  int64_t sd = 1, sh = 1, sw = 1, dd = 1, dh = 1, dw = 1, pd = 0, ph = 0, pw = 0;
};

struct DwPlan : DwExtents {
  // Floats per vector of the tier's kernel (KernelConfig::depthwise.lanes):
  // every row buffer and padded width below is sized by it.
  int64_t lanes = 8;
  Op op = Op::fwd;
  OperandRounding rounding = OperandRounding::none;
  int64_t n = 0, groups = 0, c = 0, k = 0;
  DwView a, b, dst;

  // Packed x rows (fwd, bwd_weights): each x row is split into `sw` phase rows
  // (phase q holds padded columns q, q+sw, ...) of `lq` floats, so that every
  // kernel tap reads a contiguous run whatever the stride.
  int64_t lq = 0;
  int64_t yw_pad = 0;  // yw rounded up to the vector width
  // Packed dy rows (bwd_data): `amax` zeros on the left, `ly` floats in all.
  int64_t amax = 0, ly = 0;
  int64_t xw_pad = 0;     // bwd_data: a dx row, rounded up plus one vector
  // Per width tap rw (t = rw*dw): its phase t % sw, its shift t / sw, and
  // its offset into packed x rows, (t % sw)*lq + t / sw.
  std::array<int64_t, kDwMaxKw> tap_phase{}, tap_shift{}, xoff{};
  // bwd_data: phase q of a dx row covers padded columns m*sw + q for m in
  // [phase_lo[q], phase_lo[q] + phase_count[q]) (sw <= kDwMaxKw).
  std::array<int64_t, kDwMaxKw> phase_lo{}, phase_count{};
  // The width taps grouped by phase: phase q's taps are
  // phase_taps[phase_tap_begin[q] .. phase_tap_begin[q+1]), in tap order.
  std::array<int64_t, kDwMaxKw> phase_taps{};
  std::array<int64_t, kDwMaxKw + 1> phase_tap_begin{};
  int64_t phase_pad = 0;  // bwd_data: one phase of a dx row, rounded up

  // dy rows oh in [inner_lo, inner_hi) reach x rows with every height tap.
  int64_t inner_lo = 0, inner_hi = 0;

  int64_t row_len = 0;  // floats of one row buffer; the row region holds two

  int64_t kblock = 1;  // bwd_weights: out-channels per task
  int64_t tasks = 0;
  size_t scratch_floats = 0;  // per thread

  // Scratch layout (offsets in floats from a thread's scratch start).
  size_t off_x = 0, off_y = 0, off_w = 0, off_row = 0, off_phase = 0, off_acc = 0;
};

// Scalar row helpers for any stride and dtype (non-inline, compiled without
// ISA flags, depthwise_rows.cpp): the kernels use them for strided views and
// vector tails.
// Loads n elements base[off + i*stride] as fp32, rounded as the operand
// rounding says.
void dw_load_row_generic(const void* base, DataType dt, int64_t off, int64_t stride, int64_t n,
                         OperandRounding rounding, float* out);
// Elements [0, n) of up to `lanes` rows (row c: base[rows[c] + i*stride],
// c < nv) as fp32, rounded, channels last: out[j*lanes + c] for j < n rounded
// up to `lanes`; rows c >= nv and elements past n are +0.
void dw_load_rows_transposed_generic(const void* base, DataType dt, const int64_t* rows, int64_t stride, int64_t nv,
                                     int64_t n, OperandRounding rounding, int64_t lanes, float* out);

}  // namespace convbwd::detail
