// 3D sample: NCDHW tensors.
#include "conv_backward_sample.hpp"

int main() {
  sample::Config c{};
  c.name = "conv_backward_3d";
  c.format = ACL_FORMAT_NCDHW;
  c.n = 1, c.cin = 2, c.cout = 3, c.groups = 1;
  c.in = {4, 5, 4}, c.kernel = {2, 3, 2}, c.stride = {1, 1, 2}, c.padding = {0, 1, 1}, c.dilation = {1, 1, 1};
  c.cube_math_type = 0;
  return sample::run(c);
}
