// The plan of the bias kernels (bias_kernel.hpp, instantiated per ISA by
// src/kernels/<isa>/bias_*), filled by the planner in src/impl/bias: the
// per-channel sum of gradOutput over N and every spatial position.
#pragma once

#include <array>
#include <cstdint>

#include "problem/spec.hpp"

namespace convbwd::detail {

// The summation order, the same for every memory layout and thread count
// on a tier (L = lanes, the tier's vector width: 8 on scalar and AVX2, 16 on
// AVX-512): a channel's elements at width index w go to lane w % L; each
// lane sums its elements in logical order (n, then depth, height, width);
// the lanes are added pairwise, halves first: for L = 8
// ((0+1)+(2+3))+((4+5)+(6+7)), for L = 16 that of lanes 0-7 plus that of
// lanes 8-15. With chunks > 1 the N range is split into fixed chunks, each
// summed that way, and the chunk sums are added in order. Every path below
// follows exactly this order.
struct BiasPlan {
  enum class Mode {
    rows,           // width contiguous: one L-lane vector per L widths
    channels_last,  // channels contiguous: L channels x L lanes per block
    generic,        // anything else: element by element into L lanes
  };
  int64_t lanes = 8;  // KernelConfig::bias.lanes
  Mode mode = Mode::generic;
  DataType dtype = DataType::f32;  // gradOutput
  int64_t off = 0;
  int64_t channels = 0, cstride = 0;
  // Outer dims N, depth, height (extent-1 dims dropped: they do not change
  // the order), outermost first; no = their count (N always first).
  int no = 1;
  std::array<int64_t, 3> ext{1, 1, 1}, str{0, 0, 0};
  int64_t width = 1, wstride = 0;
  int64_t chunks = 1;  // of N (ext[0])
  int64_t cblock = 8;  // channels per task (L channels_last, 4 rows, 1 generic)
  int64_t tasks = 0;
  DataType out_dtype = DataType::f32;
  int64_t out_off = 0, out_stride = 1;
};

// One task of a bias plan (KernelConfig::bias). With chunks > 1 the task
// writes the fp32 sums of its channels over its chunk to
// partials[channel * chunks + chunk] and the caller adds them up; otherwise
// it rounds the sums into dst.

}  // namespace convbwd::detail
