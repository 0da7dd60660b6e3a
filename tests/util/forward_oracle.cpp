#include "util/forward_oracle.hpp"

#include <algorithm>
#include <stdexcept>

namespace convbwd::test {
namespace {

// Row-major coordinates of every position of a box, decoded once.
std::vector<std::vector<int64_t>> positions(const std::vector<int64_t>& size) {
  std::vector<std::vector<int64_t>> all;
  const int64_t count = product(size);
  all.reserve(static_cast<size_t>(count));
  for (int64_t flat = 0; flat < count; ++flat) {
    std::vector<int64_t> c(size.size());
    int64_t rest = flat;
    for (size_t d = size.size(); d-- > 0;) {
      c[d] = rest % size[d];
      rest /= size[d];
    }
    all.push_back(std::move(c));
  }
  return all;
}

// Row-major flat index of coordinates in a box, or -1 when outside it.
int64_t flat_index(const std::vector<int64_t>& c, const std::vector<int64_t>& size) {
  int64_t f = 0;
  for (size_t d = 0; d < size.size(); ++d) {
    if (c[d] < 0 || c[d] >= size[d]) return -1;
    f = f * size[d] + c[d];
  }
  return f;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

}  // namespace

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

std::vector<int64_t> ConvParams::input_dims() const {
  std::vector<int64_t> d = {n, cin};
  d.insert(d.end(), in.begin(), in.end());
  return d;
}

std::vector<int64_t> ConvParams::weight_dims() const {
  std::vector<int64_t> d = transposed ? std::vector<int64_t>{cin, cout / groups} : std::vector<int64_t>{cout, cin / groups};
  d.insert(d.end(), kernel.begin(), kernel.end());
  return d;
}

std::vector<int64_t> ConvParams::output_dims() const {
  std::vector<int64_t> d = {n, cout};
  for (int i = 0; i < spatial; ++i) {
    const int64_t extent = dilation[i] * (kernel[i] - 1) + 1;  // of the dilated kernel
    if (!transposed) {
      // torch.nn.Conv: floor((in + pad_total - dilation*(k-1) - 1) / stride) + 1
      // A floor, not C++'s truncation: a kernel wider than the padded input
      // must give an output size below 1, never 1.
      const int64_t num = in[i] + pad_before[i] + pad_after[i] - extent;
      d.push_back((num >= 0 ? num / stride[i] : -((-num + stride[i] - 1) / stride[i])) + 1);
    } else {
      // torch.nn.ConvTranspose: (in-1)*stride - pad_total + dilation*(k-1) + output_padding + 1
      d.push_back((in[i] - 1) * stride[i] - pad_before[i] - pad_after[i] + extent + output_padding[i]);
    }
  }
  return d;
}

bool ConvParams::well_formed() const {
  const std::vector<int64_t> out = output_dims();
  return std::all_of(out.begin() + 2, out.end(), [](int64_t o) { return o >= 1; });
}

Problem ConvParams::to_problem() const {
  Problem p;
  p.input.dims = input_dims();
  p.weight.dims = weight_dims();
  p.grad_output.dims = output_dims();
  p.stride = stride;
  p.dilation = dilation;
  p.padding_before = pad_before;
  p.padding_after = pad_after;
  p.transposed = transposed;
  p.output_padding = output_padding;
  p.groups = groups;
  p.bias_sizes = std::vector<int64_t>{cout};
  return p;
}

std::string ConvParams::to_string() const {
  return std::string(transposed ? "conv_transpose" : "conv") + std::to_string(spatial) + "d n=" + std::to_string(n) +
         " cin=" + std::to_string(cin) + " cout=" + std::to_string(cout) + " groups=" + std::to_string(groups) +
         " in=" + join(in) + " kernel=" + join(kernel) + " stride=" + join(stride) + " dilation=" + join(dilation) +
         " pad=" + join(pad_before) + "+" + join(pad_after) + " output_padding=" + join(output_padding);
}

std::vector<double> forward(const ConvParams& p, const std::vector<double>& x, const std::vector<double>& w,
                            const std::vector<double>& b) {
  const std::vector<int64_t> ydims = p.output_dims();
  const std::vector<int64_t> out(ydims.begin() + 2, ydims.end());
  if (static_cast<int64_t>(x.size()) != product(p.input_dims()) ||
      static_cast<int64_t>(w.size()) != product(p.weight_dims()) ||
      (!b.empty() && static_cast<int64_t>(b.size()) != p.cout))
    throw std::invalid_argument("forward: operand sizes do not match " + p.to_string());
  const int64_t in_sp = product(p.in), out_sp = product(out), k_sp = product(p.kernel);
  const auto in_pos = positions(p.in), out_pos = positions(out), k_pos = positions(p.kernel);
  const size_t sp = static_cast<size_t>(p.spatial);
  std::vector<double> y(static_cast<size_t>(product(ydims)), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t co = 0; co < p.cout; ++co)
      for (int64_t o = 0; o < out_sp; ++o)
        y[static_cast<size_t>((n * p.cout + co) * out_sp + o)] = b.empty() ? 0.0 : b[static_cast<size_t>(co)];

  std::vector<int64_t> at(sp);
  if (!p.transposed) {
    const int64_t cg = p.cin / p.groups, kg = p.cout / p.groups;
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t co = 0; co < p.cout; ++co) {
        const int64_t g = co / kg;
        for (int64_t o = 0; o < out_sp; ++o) {
          double acc = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < k_sp; ++r) {
              for (size_t d = 0; d < sp; ++d)
                at[d] = out_pos[o][d] * p.stride[d] - p.pad_before[d] + k_pos[r][d] * p.dilation[d];
              const int64_t i = flat_index(at, p.in);
              if (i < 0) continue;  // reads the zero padding
              acc += x[static_cast<size_t>((n * p.cin + g * cg + c) * in_sp + i)] *
                     w[static_cast<size_t>((co * cg + c) * k_sp + r)];
            }
          y[static_cast<size_t>((n * p.cout + co) * out_sp + o)] += acc;
        }
      }
  } else {
    const int64_t ct = p.cin / p.groups, kt = p.cout / p.groups;
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t ci = 0; ci < p.cin; ++ci) {
        const int64_t g = ci / ct;
        for (int64_t i = 0; i < in_sp; ++i) {
          const double xv = x[static_cast<size_t>((n * p.cin + ci) * in_sp + i)];
          for (int64_t k = 0; k < kt; ++k)
            for (int64_t r = 0; r < k_sp; ++r) {
              for (size_t d = 0; d < sp; ++d)
                at[d] = in_pos[i][d] * p.stride[d] - p.pad_before[d] + k_pos[r][d] * p.dilation[d];
              const int64_t o = flat_index(at, out);
              if (o < 0) continue;  // cropped away by the padding
              y[static_cast<size_t>((n * p.cout + g * kt + k) * out_sp + o)] +=
                  xv * w[static_cast<size_t>((ci * kt + k) * k_sp + r)];
            }
        }
      }
  }
  return y;
}

}  // namespace convbwd::test
