// 1D sample: grouped, strided, padded convolution on NCL tensors.
#include "conv_backward_sample.hpp"

int main() {
  sample::Config c{};
  c.name = "conv_backward_1d";
  c.format = ACL_FORMAT_NCL;
  c.n = 2, c.cin = 4, c.cout = 6, c.groups = 2;
  c.in = {9}, c.kernel = {3}, c.stride = {2}, c.padding = {1}, c.dilation = {1};
  c.cube_math_type = 0;  // KEEP_DTYPE
  return sample::run(c);
}
