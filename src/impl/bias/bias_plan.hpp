// Plain data shared by the bias implementation (src/impl/bias) and its per-ISA
// kernels (src/kernels/<isa>/bias_*): the per-channel sum of gradOutput over N
// and every spatial position.
#pragma once

#include <array>
#include <cstdint>

#include "problem/spec.hpp"

namespace convbwd::detail {

struct BiasPlan {
  enum class Mode {
    rows,           // the innermost summed dim is contiguous: 8-lane sums along it
    channels_last,  // channels are contiguous: 8 channels per vector
    generic,        // anything else: one element at a time
  };
  Mode mode = Mode::generic;
  DataType dtype = DataType::f32;  // gradOutput
  int64_t off = 0;
  int64_t channels = 0, cstride = 0;
  // The summed dims (N and spatial), extent-1 dims dropped, adjacent dims
  // merged where memory allows; outermost first. nd >= 1.
  int nd = 1;
  std::array<int64_t, 4> ext{1, 1, 1, 1}, str{0, 0, 0, 0};
  // A channel's sum is split into `chunks` fixed ranges of ext[0], summed
  // separately and then added in chunk order: more tasks than channels when
  // there are few channels, the same bits for any thread count.
  int64_t chunks = 1;
  int64_t cblock = 8;  // channels_last: channels per task
  int64_t tasks = 0;
  DataType out_dtype = DataType::f32;
  int64_t out_off = 0, out_stride = 1;
};

// One task of a bias plan. With chunks > 1 the task writes its fp32 partial
// sum to partials[task] (task = channel * chunks + chunk) and the caller adds
// them up; otherwise it rounds the sums into dst.
void bias_task_scalar(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t task);
void bias_task_avx2(const BiasPlan& p, const void* a, void* dst, float* partials, int64_t task);

}  // namespace convbwd::detail
