// How the fast paths read operands: element loads by dtype, cubeMathType
// operand rounding, both as compile-time parameters of the conversion loops
// (dispatch: kernels/format_dispatch.hpp), strides of a view made three
// spatial dims deep, and the workspace budget of issue 4. Shared by the GEMM
// and small-channel paths, which each had their own copy.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "impl/implementation.hpp"
#include "kernels/format_dispatch.hpp"
#include "runtime/env.hpp"
#include "numeric/float_formats.hpp"
#include "problem/checked.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {

// The dtypes these paths convert (everything but the 8-bit formats).
inline bool is_narrow_float(DataType t) { return t == DataType::f32 || t == DataType::bf16 || t == DataType::f16; }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t v, int64_t m) { return ceil_div(v, m) * m; }

template <DataType T>
inline float load(const void* base, int64_t i) {
  if constexpr (T == DataType::f32) return static_cast<const float*>(base)[i];
  if constexpr (T == DataType::bf16) return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
  if constexpr (T == DataType::f16) return f16_to_float(static_cast<const uint16_t*>(base)[i]);
  return 0.0f;
}

template <OperandRounding R>
inline float round_operand(float v) {
  if constexpr (R == OperandRounding::hf32) return round_to_hf32(v);
  if constexpr (R == OperandRounding::fp16) return round_to_fp16(v);
  return v;
}

// Strides of a [N-or-rows, channels, spatial...] view with spatial dims made
// three deep (0 for a missing dim).
struct Strides {
  int64_t offset = 0, n = 0, ch = 0;
  std::array<int64_t, 3> sp{0, 0, 0};
};
inline Strides strides_of(const View& v, int spatial) {
  Strides s;
  s.offset = v.offset;
  s.n = v.strides[0];
  s.ch = v.strides[1];
  for (int i = 0; i < spatial; ++i) s.sp[3 - spatial + i] = v.strides[2 + i];
  return s;
}

// Workspace allowed (issue 4): the largest input tensor (times
// ctx.budget_scale), or 64 MiB, whichever is larger. CONVBWD_WORKSPACE_FLOOR
// (bytes) replaces the 64 MiB in tests, so that small problems meet the
// budget the way large ones do.
constexpr int64_t kWorkspaceBudgetFloor = int64_t{64} << 20;
inline int64_t workspace_budget(const OpSpec& op, const PlanContext& ctx) {
  // Read per plan, as tests set it.
  const int64_t floor = env_int("CONVBWD_WORKSPACE_FLOOR", 1, std::numeric_limits<int64_t>::max())
                            .value_or(kWorkspaceBudgetFloor);
  // The scale multiplies the inputs' size, not the floor: a problem with
  // small inputs and huge padding keeps its 64 MiB. An input's size is what
  // the caller holds: a broadcast view of 2^61 elements over one float
  // (strides 0) allows no more than a dense one of its storage (it let a
  // depthwise plan ask for 137 GB). Saturating, like the sizes it bounds.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t scale = std::max(ctx.budget_scale, 1);
  auto held = [&](const View& t) {
    const Checked span = t.last_index() - t.offset + 1;  // elements from the view's first to its last
    const int64_t elements = std::min(t.elements(), span.value_or(kMax));
    return (Checked(elements) * static_cast<int64_t>(size_of(t.dtype)) * scale).value_or(kMax);
  };
  return std::max({floor, held(op.a), held(op.b)});
}

// Index arithmetic of the fast paths. Their kernels form, per spatial dim,
// indices such as o*stride - pad + r*dilation, (i + pad)/stride and padded,
// rounded extents, in int64 at execute. Every term is at most one of the
// dim's sizes below, so when their sum stays under kIndexLimit, any such
// expression, with a few more terms or a small factor, is representable.
// Valid problems can exceed it (a stride or padding near 2^63, a huge
// broadcast view): those are left to paths that never form the indices (the
// reference). Declines with a reason naming the dim and the bound.
constexpr int64_t kIndexLimit = int64_t{1} << 56;
inline bool tap_indices_fit(const Geometry& g, std::string* why) {
  for (int i = 0; i < g.spatial; ++i) {
    const Checked sum = Checked(g.ysize[i]) * g.stride[i] + Checked(g.ksize[i]) * g.dilation[i] + g.pad_before[i] +
                        g.pad_after[i] + g.xsize[i] + g.stride[i];
    if (!sum.at_most(kIndexLimit)) {
      *why = "spatial dim " + std::to_string(i) + ": y*stride + k*dilation + paddings + x + stride (sizes " +
             std::to_string(g.xsize[i]) + ", " + std::to_string(g.ysize[i]) + ", kernel " +
             std::to_string(g.ksize[i]) + ", stride " + std::to_string(g.stride[i]) + ", dilation " +
             std::to_string(g.dilation[i]) + ", padding " + std::to_string(g.pad_before[i]) + "+" +
             std::to_string(g.pad_after[i]) + ") exceeds 2^56: tap indices might not fit 64 bits";
      return false;
    }
  }
  return true;
}

}  // namespace convbwd::detail
