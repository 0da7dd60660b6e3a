// 2D sample: NCHW tensors, a non-square kernel, per-dim stride, padding and
// dilation. cubeMathType 1 (ALLOW_FP32_DOWN_PRECISION) as CANN's own sample
// uses: small integers survive the HF32 rounding, so the results stay exact.
#include "conv_backward_sample.hpp"

int main() {
  sample::Config c{};
  c.name = "conv_backward_2d";
  c.format = ACL_FORMAT_NCHW;
  c.n = 2, c.cin = 3, c.cout = 4, c.groups = 1;
  c.in = {6, 5}, c.kernel = {3, 2}, c.stride = {1, 2}, c.padding = {1, 0}, c.dilation = {2, 1};
  c.cube_math_type = 1;
  return sample::run(c);
}
