// Plan data of the channel-blocked depthwise implementation ("depthwise_cl"):
// true depthwise layers (one in- and one out-channel per group), one group per
// lane of the tier's vectors (`lanes`: DwClKernels::lanes).
// NCHW rows of `lanes` channels are transposed into a channels-last
// plane in scratch, so that every lane does useful work whatever the row
// width or stride (the row-vectorized depthwise_direct wastes lanes on short
// rows, e.g. 14 outputs of a stride-2 layer, and pays per-row overhead per
// channel). Everything is computed once at plan time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/depthwise/depthwise_plan.hpp"
#include "kernels/store_row.hpp"

namespace convbwd::detail {

struct DwClPlan : DwExtents {
  Op op = Op::fwd;
  OperandRounding rounding = OperandRounding::none;
  int64_t lanes = 8;  // channels per block: the kernels' vector width W
  int64_t n = 0, groups = 0, blocks = 0;  // blocks: groups / lanes rounded up (depthwise), or groups
  // Grouped mode: up to 8 channels per group on each side, lanes = the
  // channels of one group on the op's output side (fwd: k, bwd_data and
  // bwd_weights: c), the input side's channels broadcast one at a time.
  bool grouped = false;
  int64_t cg = 1, kg = 1;      // channels per group: x side, y side
  int64_t cin = 1, cout = 1;   // per group on the op's input and output side
  DwView a, b, dst;

  // The padded channels-last input plane (x for fwd and bwd_weights, dy for
  // bwd_data): `bd, bh, bw` zero pixels before the data in each dim, `ld, lh`
  // planes and rows, `rw` pixels per row (at least every pixel a tap reads).
  int64_t bd = 0, bh = 0, bw = 0, ld = 0, lh = 0, rw = 0;
  // Source extents of that plane and its row length rounded up to `lanes`.
  int64_t srcd = 1, srch = 1, srcw = 1, srcw_round = 0;
  int64_t yw_round = 0, xw_round = 0;  // yw, xw rounded up to `lanes`
  // fwd, bwd_weights: the offset in floats of kernel tap t (flattened
  // (rd, rh, rw)) from output pixel o's base pixel o*stride.
  std::vector<int64_t> toff;
  // bwd_data, per width phase q (padded column m*sw + q): the dx columns m in
  // [phase_lo, phase_lo + phase_count), and its taps rw with the dy column
  // shift (dy column m + shift in the padded plane), in tap order.
  std::vector<int64_t> phase_lo, phase_count, phase_begin, phase_tap, phase_shift;

  // Plane mode (fp32, fp16 or bf16 output whose channel planes are
  // contiguous, fwd and bwd_data): floats between channels in the fp32
  // plane buffer; 0 = row mode.
  int64_t plane_stride = 0;
  // Plane mode, fp32: the planes go out with non-temporal stores (a large
  // output, which would only evict the operands from the cache), or
  // ordinary ones (an output small enough to stay in the last-level cache
  // for its reader). 16-bit planes are narrowed and stored whole, plane by
  // plane.
  bool stream_planes = true;
  // The tier's row store (KernelConfig::store_rows), which narrows the
  // 16-bit outputs' rows and planes. Not the block width's own (V's): the
  // avx512_bf16 tier's rounds bf16 with vcvtneps2bf16 (the same bits),
  // where the avx512 one takes a dozen integer operations a vector; those
  // were 45% of a bf16 dw s2 192@28 gradInput on a Zen 4 (one thread).
  StoreRows store_rows = nullptr;
  // The weight view is dense ([G*K][C][kd][kh][kw] with unit last stride).
  bool w_dense = false;
  int64_t tasks = 0;
  // Check the fp32 copies of the operands for NaN and +-Inf (OpArgs::found);
  // a task then returns which operands held any (kNonfiniteA, kNonfiniteB).
  bool report_nonfinite = false;
  size_t scratch_floats = 0;  // per thread
  size_t off_in = 0, off_y = 0, off_w = 0, off_row = 0, off_tmp = 0, off_acc = 0, off_plane = 0, off_wtmp = 0;
};

// A task (KernelConfig::depthwise.cl_task) returns 0, or with
// p.report_nonfinite the operands in which it read a NaN or +-Inf.
constexpr unsigned kNonfiniteA = 1, kNonfiniteB = 2;

// The plan of the fused pass (DwClKernel::fused): a layer's bwd_data and
// bwd_weights plans, both reporting NaN/Inf, and optionally gradBias.
struct DwClFusedPlan {
  DwClPlan data, weights;
  // Also gradBias, in the order of the tier's bias_reduce plan
  // (kernels/bias/bias_plan.hpp, one chunk): the element at width w goes to
  // lane w % bias_lanes, each lane sums in (n, d, h, w) order, the lanes are
  // added pairwise.
  bool bias = false;
  int64_t bias_lanes = 8;  // BiasPlan::lanes: 8 or 16
  DwView bias_out;         // off, sw (the channel stride) and dtype of gradBias
  // Per thread: the data plan's scratch, the weights plan's, bias_lanes
  // vectors of data.lanes channels.
  size_t scratch_floats() const {
    return data.scratch_floats + weights.scratch_floats + static_cast<size_t>(bias_lanes * data.lanes);
  }
};

}  // namespace convbwd::detail
