#include "util/extreme.hpp"

#include <limits>

#include "problem/checked.hpp"

namespace convbwd::test {

std::optional<Problem> make_problem(const Geo& g) {
  using detail::Checked;
  const size_t sp = g.in.size();
  Problem p;
  p.input.dtype = p.weight.dtype = p.grad_output.dtype = g.dtype;
  p.input.dims = {g.n, g.cin};
  p.weight.dims = g.transposed ? std::vector<int64_t>{g.cin, g.cout / g.groups}
                               : std::vector<int64_t>{g.cout, g.cin / g.groups};
  p.grad_output.dims = {g.n, g.cout};
  for (size_t i = 0; i < sp; ++i) {
    const int64_t op = g.output_padding.empty() ? 0 : g.output_padding[i];
    const Checked span = Checked(g.kernel[i] - 1) * g.dilation[i];
    const Checked out = g.transposed ? Checked(g.in[i] - 1) * g.stride[i] - g.pad_before[i] - g.pad_after[i] + span + op + 1
                                     : Checked(g.in[i]) + g.pad_before[i] + g.pad_after[i] - 1 + Checked(-1) * span;
    if (!out.ok() || out.value() < (g.transposed ? 1 : 0)) return std::nullopt;
    p.input.dims.push_back(g.in[i]);
    p.weight.dims.push_back(g.kernel[i]);
    p.grad_output.dims.push_back(g.transposed ? out.value() : out.value() / g.stride[i] + 1);
  }
  p.stride = g.stride;
  p.padding_before = g.pad_before;
  p.padding_after = g.pad_after;
  p.dilation = g.dilation;
  p.output_padding = g.output_padding;
  p.transposed = g.transposed;
  p.groups = g.groups;
  p.output_mask = g.mask;
  p.bias_sizes = std::vector<int64_t>{g.cout};
  return p;
}

std::vector<Problem> extreme_problems() {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<Problem> out;
  auto add = [&](const Geo& g) {
    if (auto p = make_problem(g)) out.push_back(*p);
  };
  // Issue 18's depthwise_cl findings: wrong values with a stride and top
  // padding of 2^63-1, a segfault with (2^63-1)/2 and 2^63-2.
  add({.in = {2, 6}, .kernel = {1, 1}, .stride = {kMax, 1}, .pad_before = {kMax, 0}, .pad_after = {0, 0},
       .dilation = {1, 1}, .transposed = true});
  add({.in = {3, 6}, .kernel = {1, 1}, .stride = {kMax / 2, 1}, .pad_before = {kMax - 1, 0}, .pad_after = {0, 0},
       .dilation = {1, 1}, .transposed = true});
  struct Channels {
    int64_t cin, cout, groups;
  };
  // Depthwise (1 channel per group), 8-channel groups, dense.
  const Channels channels[] = {{8, 8, 8}, {16, 16, 2}, {3, 4, 1}};
  for (int k : {31, 54, 55, 56, 57, 61, 62}) {
    const int64_t big = int64_t{1} << k;
    // Paddings of 2^62 on both sides would not fit a normal convolution's
    // padded size; a transposed one subtracts them one by one.
    const int64_t after = k >= 62 ? 0 : big;
    for (const Channels& c : channels) {
      // Stride and padding 2^k on the height, with a 3x3 kernel.
      add({.cin = c.cin, .cout = c.cout, .groups = c.groups, .in = {3, 5}, .kernel = {3, 3}, .stride = {big, 1},
           .pad_before = {big, 1}, .pad_after = {after, 1}, .dilation = {1, 1}});
      add({.cin = c.cin, .cout = c.cout, .groups = c.groups, .in = {3, 5}, .kernel = {3, 3}, .stride = {big, 1},
           .pad_before = {big, 1}, .pad_after = {big, 1}, .dilation = {1, 1}, .transposed = true});
      // Dilation, stride and padding 2^k on the width (2 taps).
      add({.cin = c.cin, .cout = c.cout, .groups = c.groups, .in = {4, 3}, .kernel = {1, 2}, .stride = {1, big},
           .pad_before = {0, big}, .pad_after = {0, after}, .dilation = {1, big}});
      add({.cin = c.cin, .cout = c.cout, .groups = c.groups, .in = {4, 1}, .kernel = {1, 2}, .stride = {1, big},
           .pad_before = {0, big}, .pad_after = {0, 0}, .dilation = {1, big}, .transposed = true});
    }
    // 1D and 3D, depthwise.
    add({.n = 2, .cin = 8, .cout = 8, .groups = 8, .in = {7}, .kernel = {3}, .stride = {big}, .pad_before = {big},
         .pad_after = {after}, .dilation = {1}});
    add({.cin = 8, .cout = 8, .groups = 8, .in = {2, 3, 2}, .kernel = {2, 2, 1}, .stride = {big, 1, big},
         .pad_before = {big, 0, big}, .pad_after = {big, 0, 0}, .dilation = {big, 1, 1}, .transposed = true});
  }
  // A padding so large only the padding contributes: the output is all taps
  // out of range but one row.
  add({.cin = 8, .cout = 8, .groups = 8, .in = {1, 9}, .kernel = {1, 3}, .stride = {kMax, 1},
       .pad_before = {kMax - 8, 1}, .pad_after = {0, 1}, .dilation = {1, 1}});
  // A fuzz finding: a transposed layer whose after-padding and dilation
  // nearly cancel at 2^63. The reference's o*s - p + r*d overflowed int64
  // on a tap that lands in the padding.
  add({.cin = 8, .cout = 8, .in = {6}, .kernel = {2}, .stride = {1}, .pad_before = {1}, .pad_after = {kMax},
       .dilation = {kMax - 1}, .transposed = true, .dtype = DataType::f16, .mask = {false, true, true}});
  // The same in 8-bit floats, whose one operation (the transposed gradInput)
  // has a direct kernel of its own (f8_fwd_direct).
  add({.cin = 8, .cout = 8, .in = {6}, .kernel = {2}, .stride = {1}, .pad_before = {1}, .pad_after = {kMax},
       .dilation = {kMax - 1}, .transposed = true, .dtype = DataType::f8e4m3, .mask = {true, false, false}});
  // A fuzz finding: the same cancelling padding and dilation on a depthwise
  // layer, which the depthwise paths decline and small_channels_wgrad took:
  // its im2col's ceil_div(x - (r*d - p), s) overflowed.
  add({.cin = 8, .cout = 8, .groups = 8, .in = {7}, .kernel = {2}, .stride = {2}, .pad_before = {kMax - 1},
       .pad_after = {1}, .dilation = {kMax - 1}, .output_padding = {1}, .transposed = true, .dtype = DataType::f16,
       .mask = {false, true, false}});
  // bf16 and a gradWeight-only mask, on a huge stride.
  add({.cin = 8, .cout = 8, .groups = 8, .in = {3, 5}, .kernel = {3, 3}, .stride = {int64_t{1} << 58, 2},
       .pad_before = {int64_t{1} << 58, 1}, .pad_after = {0, 1}, .dilation = {1, 1}, .dtype = DataType::bf16,
       .mask = {false, true, false}});
  return out;
}

}  // namespace convbwd::test
