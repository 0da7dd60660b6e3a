// Test utilities: host tensors with any layout, seeded data, and the one
// definition of the comparison tolerance.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "problem/spec.hpp"

namespace convbwd::test {

// An implementation's name without the tier its kernels ran on:
// "gemm_wgrad_nhwc:avx512" -> "gemm_wgrad_nhwc". Tests that pin which
// implementation a problem reaches compare this part, on every tier.
inline std::string_view impl_base(std::string_view name) { return name.substr(0, name.find(':')); }

enum class Layout {
  contiguous,     // row-major NC...
  channels_last,  // memory order N, spatial..., C, seen as NC...
  padded,         // row-major with a gap after every dim and an offset
  reversed,       // memory order reversed (last dim slowest)
};
const char* to_string(Layout);

enum class Fill {
  small_ints,  // integers in [-3, 3]: fp32 sums stay exact
  uniform,     // uniform in [-1, 1]
  // Integers in [-3, 3] times 2^-26: fp16 rounding (cubeMathType USE_FP16)
  // makes them 0 (+-2^-26, and +-2^-25 by ties to even) or +-2^-24, so a path
  // that skipped it would be far off; sums stay exact, as with small_ints.
  fp16_subnormals,
  positive,    // uniform in [0.5, 1]: sums without cancellation, so a dropped
               // or doubled partial sum moves the result by its own size
};
// Whether every sum of products of this fill is exact in fp32 (below 2^24
// units of its quantum): then fp32 outputs must match the reference exactly.
inline bool exact_fill(Fill f) { return f == Fill::small_ints || f == Fill::fp16_subnormals; }

// A tensor view into storage it owns. Storage is bigger than the view for
// padded layouts; bytes outside the view hold a canary pattern.
struct HostTensor {
  TensorDesc desc;
  std::vector<unsigned char> storage;
  void* data() { return storage.data(); }
  const void* data() const { return storage.data(); }
  int64_t elements() const;
  // The element at row-major position i of the view, decoded to double.
  double at(int64_t i) const;
  // Storage index of row-major view position i.
  int64_t storage_index(int64_t i) const;
};

// The first storage element outside t's view whose bytes are no longer the
// canary make_tensor wrote (something wrote past or between the view's
// elements), or -1.
int64_t first_written_outside_view(const HostTensor& t);

HostTensor make_tensor(DataType dtype, const std::vector<int64_t>& dims, Layout layout);
void fill(HostTensor& t, Fill kind, std::mt19937_64& rng);

// The tolerance for one output element: one ulp of the output dtype at |ref|,
// plus the fp32 accumulation bound n*u*sum|products|, plus the smallest fp16
// spacing (2^-24) for values that round into subnormals.
// `reduction_length` is the longest chain of fp32 additions a product goes
// through in the order the library sums (summation_depth), which for a
// plain loop is the reduction length.
double tolerance(DataType out, double ref, double sum_abs_products, int64_t reduction_length);

// That chain for a gradBias sum of n elements per channel, in bias_reduce's
// documented order (src/impl/bias/bias_plan.hpp, which the fused depthwise
// pass follows too): 8 lanes each summing at most ceil(n/8) elements, a
// 3-level pairwise tree over the lanes, and at most 64 chunk sums added in
// sequence. Bounding by n instead made the bound 6-23 times the answer on
// long sums, loose enough to pass an all-zero gradBias.
int64_t bias_summation_depth(int64_t n);
// The same for any operation: bias_summation_depth for the bias, else the
// reduction length (the other kernels accumulate each output in sequence).
int64_t summation_depth(const detail::OpSpec&);

struct Comparison {
  bool pass = true;
  double worst_scaled_error = 0;  // max |got-ref| / tolerance
  std::string first_failure;      // "gradWeight[3]: got ..., want ..., tolerance ..."
};

// Runs `problem` through Plan::execute and through the reference on the same
// seeded data, with the given layouts, and compares every requested output.
// With exact = true (small-integer data), fp32 outputs must match bit for bit.
// The view v with dtype dt and row-major contiguous strides from offset 0.
detail::View contiguous_view(const detail::View& v, DataType dt);

struct CheckOptions {
  Layout in_layout = Layout::contiguous;   // gradOutput, input, weight
  Layout out_layout = Layout::contiguous;  // gradInput, gradWeight, gradBias
  Fill fill = Fill::uniform;
  uint64_t seed = 1;
};
Comparison check_against_reference(const Problem& problem, const CheckOptions& = {});

}  // namespace convbwd::test
