// Problems with extreme parameters (strides, paddings and dilations near
// 2^63, huge broadcast views) for the plan fuzzer and the guard-zone test of
// every implementation. Built as Problem structs, not descriptor strings, so
// that any 64-bit value can be given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"

namespace convbwd::test {

// A convolution's geometry as a caller gives it; spatial vectors all have
// one value per spatial dim.
struct Geo {
  int64_t n = 1, cin = 1, cout = 1, groups = 1;
  std::vector<int64_t> in{}, kernel{}, stride{}, pad_before{}, pad_after{}, dilation{}, output_padding{};
  bool transposed = false;
  DataType dtype = DataType::f32;
  std::array<bool, 3> mask = {true, true, true};
};

// The problem with the implied gradOutput shape (computed in checked
// arithmetic), contiguous views; nullopt when the shape overflows or is
// empty (validate would refuse it).
std::optional<Problem> make_problem(const Geo& g);

// Small tensors with strides, paddings and dilations from 2^31 to 2^63-1
// (the depthwise_cl findings of issue 18 among them), every rank, normal
// and transposed, depthwise, 8-channel groups and dense: cheap to execute
// and to check against the reference.
std::vector<Problem> extreme_problems();

}  // namespace convbwd::test
