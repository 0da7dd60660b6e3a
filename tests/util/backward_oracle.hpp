// The tests' own backward pass: the three gradients of
//   L = sum(gradOutput * (forward(input, weight) + bias))
// as plain loops over a ConvParams' raw parameters (sizes, stride, dilation,
// padding before/after, groups, transposed), in double. Like
// util/forward_oracle it shares no code, index mapping or geometry helper
// (Geometry, space_of) with src/, so a bug in the library's geometry shows
// as a disagreement instead of being copied by the oracle. With
// small-integer operands every value is an exact integer, so the library's
// fp32 sums must equal it bit for bit.
#pragma once

#include <vector>

#include "util/forward_oracle.hpp"

namespace convbwd::test {

struct OracleGradients {
  std::vector<double> input, weight, bias;  // dense row-major, shaped like input, weight, [cout]
};

// go: [N, Cout, out...] (ConvParams::output_dims), x: input, w: weight.
OracleGradients backward(const ConvParams&, const std::vector<double>& go, const std::vector<double>& x,
                         const std::vector<double>& w);

}  // namespace convbwd::test
