// The tests' own forward convolution, written from PyTorch's definition of
// conv{1,2,3}d and conv_transpose{1,2,3}d, in double precision. It shares no
// code and no index mapping with src/reference or the Geometry reduction, so
// the finite-difference gradient check built on it checks the reference
// instead of agreeing with it by construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"

namespace convbwd::test {

struct ConvParams {
  int spatial = 2;  // 1, 2 or 3
  int64_t n = 1;
  int64_t cin = 1;   // channels of input
  int64_t cout = 1;  // channels of the forward output (= gradOutput)
  int64_t groups = 1;
  bool transposed = false;
  // One value per spatial dim each.
  std::vector<int64_t> in, kernel, stride, dilation, pad_before, pad_after, output_padding;

  // [N, Cin, in...]
  std::vector<int64_t> input_dims() const;
  // Normal [Cout, Cin/g, k...]; transposed [Cin, Cout/g, k...].
  std::vector<int64_t> weight_dims() const;
  // [N, Cout, out...], with out from PyTorch's formulas (written here again,
  // not taken from the library).
  std::vector<int64_t> output_dims() const;
  // Whether the library must accept these parameters: every spatial output
  // dim at least 1 (a normal convolution's padded input then covers the
  // dilated kernel). A zero batch or channel count is allowed: an empty
  // problem. Random generators draw until this holds.
  bool well_formed() const;
  // The same convolution as a library Problem (fp32, contiguous, all outputs,
  // biasSizes [Cout]).
  Problem to_problem() const;
  std::string to_string() const;
};

// y = conv(x, w) + b (or the transposed convolution), every tensor dense
// row-major. b may be empty (no bias). Accumulates in double.
//
// Normal:     y[n, g*Kg+k, o] = b[g*Kg+k] + sum_{c, r} x[n, g*Cg+c, o*s - pb + r*d] * w[g*Kg+k, c, r]
//             (terms whose x index falls outside [0, in) read the zero padding).
// Transposed: a scatter, y[n, g*Kt+k, i*s - pb + r*d] += x[n, g*Ct+c, i] * w[g*Ct+c, k, r],
//             over the cropped output [0, out) that outputPadding extends at the end.
std::vector<double> forward(const ConvParams&, const std::vector<double>& x, const std::vector<double>& w,
                            const std::vector<double>& b);

int64_t product(const std::vector<int64_t>& dims);

}  // namespace convbwd::test
