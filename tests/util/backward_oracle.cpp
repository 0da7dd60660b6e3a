#include "util/backward_oracle.hpp"

#include <array>
#include <stdexcept>

namespace convbwd::test {
namespace {

// A spatial parameter three dims deep: a 1D or 2D problem's missing leading
// dims get `fill` (size 1, stride 1, padding 0), so one set of loops serves
// every rank.
std::array<int64_t, 3> deep(const std::vector<int64_t>& v, int spatial, int64_t fill) {
  std::array<int64_t, 3> a{fill, fill, fill};
  for (int i = 0; i < spatial; ++i) a[static_cast<size_t>(3 - spatial + i)] = v[static_cast<size_t>(i)];
  return a;
}

}  // namespace

OracleGradients backward(const ConvParams& p, const std::vector<double>& go, const std::vector<double>& x,
                         const std::vector<double>& w) {
  const std::vector<int64_t> ydims = p.output_dims();
  if (static_cast<int64_t>(go.size()) != product(ydims) || static_cast<int64_t>(x.size()) != product(p.input_dims()) ||
      static_cast<int64_t>(w.size()) != product(p.weight_dims()))
    throw std::invalid_argument("backward: operand sizes do not match " + p.to_string());
  const int sp = p.spatial;
  const auto in = deep(p.in, sp, 1), k = deep(p.kernel, sp, 1), s = deep(p.stride, sp, 1),
             d = deep(p.dilation, sp, 1), pb = deep(p.pad_before, sp, 0);
  const auto out = deep(std::vector<int64_t>(ydims.begin() + 2, ydims.end()), sp, 1);
  const int64_t in_sp = in[0] * in[1] * in[2], out_sp = out[0] * out[1] * out[2], k_sp = k[0] * k[1] * k[2];

  OracleGradients g;
  g.input.assign(x.size(), 0.0);
  g.weight.assign(w.size(), 0.0);
  g.bias.assign(static_cast<size_t>(p.cout), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t co = 0; co < p.cout; ++co)
      for (int64_t o = 0; o < out_sp; ++o) g.bias[static_cast<size_t>(co)] += go[static_cast<size_t>((n * p.cout + co) * out_sp + o)];

  // Every (position, kernel tap) pair of the side whose positions are
  // multiplied by the stride, and the position it meets on the other side:
  // normal, output position o reads input o*s - pb + r*d; transposed, input
  // position i scatters to output i*s - pb + r*d. Pairs whose partner falls
  // outside the other side (padding, or cropped) contribute nothing. Each
  // pair's one product goes into gradInput and gradWeight alike.
  const auto from = p.transposed ? in : out;
  const auto to = p.transposed ? out : in;
  // Channels: normal, group gr has cin/g input and cout/g output channels,
  // weight [cout, cin/g, k]; transposed, weight [cin, cout/g, k].
  const int64_t cin_g = p.cin / p.groups, cout_g = p.cout / p.groups;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t gr = 0; gr < p.groups; ++gr)
      for (int64_t ci = gr * cin_g; ci < (gr + 1) * cin_g; ++ci)
        for (int64_t co = gr * cout_g; co < (gr + 1) * cout_g; ++co) {
          const int64_t widx0 = p.transposed ? (ci * cout_g + (co - gr * cout_g)) * k_sp
                                             : (co * cin_g + (ci - gr * cin_g)) * k_sp;
          for (int64_t f0 = 0; f0 < from[0]; ++f0)
            for (int64_t f1 = 0; f1 < from[1]; ++f1)
              for (int64_t f2 = 0; f2 < from[2]; ++f2)
                for (int64_t r0 = 0; r0 < k[0]; ++r0)
                  for (int64_t r1 = 0; r1 < k[1]; ++r1)
                    for (int64_t r2 = 0; r2 < k[2]; ++r2) {
                      const int64_t t0 = f0 * s[0] - pb[0] + r0 * d[0];
                      const int64_t t1 = f1 * s[1] - pb[1] + r1 * d[1];
                      const int64_t t2 = f2 * s[2] - pb[2] + r2 * d[2];
                      if (t0 < 0 || t0 >= to[0] || t1 < 0 || t1 >= to[1] || t2 < 0 || t2 >= to[2]) continue;
                      const int64_t fpos = (f0 * from[1] + f1) * from[2] + f2;
                      const int64_t tpos = (t0 * to[1] + t1) * to[2] + t2;
                      const int64_t ipos = p.transposed ? fpos : tpos;
                      const int64_t opos = p.transposed ? tpos : fpos;
                      const size_t xi = static_cast<size_t>((n * p.cin + ci) * in_sp + ipos);
                      const size_t yi = static_cast<size_t>((n * p.cout + co) * out_sp + opos);
                      const size_t wi = static_cast<size_t>(widx0 + (r0 * k[1] + r1) * k[2] + r2);
                      g.input[xi] += go[yi] * w[wi];
                      g.weight[wi] += go[yi] * x[xi];
                    }
        }
  return g;
}

}  // namespace convbwd::test
