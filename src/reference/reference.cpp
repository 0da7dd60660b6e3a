#include "reference/reference.hpp"

#include "numeric/float_formats.hpp"

namespace convbwd::detail {
namespace {

// Element index of (n, ch, spatial) in a view of rank 2 + spatial.
struct Indexer {
  const View& v;
  int spatial;
  int64_t operator()(int64_t n, int64_t ch, const std::array<int64_t, 3>& s) const {
    int64_t i = v.offset + n * v.strides[0] + ch * v.strides[1];
    for (int d = 0; d < spatial; ++d) i += s[3 - spatial + d] * v.strides[2 + d];
    return i;
  }
};

// Positions along a spatial dim are worked out in 128 bits. A valid problem
// may pair a padding near 2^63 with a dilation near 2^63 (only the output
// size must fit), so o*s - p + r*d can leave the int64 range on its way to
// a tap that lands in the padding; the products and sums of int64 values
// here always fit 128 bits.
__extension__ typedef __int128 Wide;

template <class F>
void for_each_index(const std::array<int64_t, 3>& size, F&& f) {
  std::array<int64_t, 3> i{};
  for (i[0] = 0; i[0] < size[0]; ++i[0])
    for (i[1] = 0; i[1] < size[1]; ++i[1])
      for (i[2] = 0; i[2] < size[2]; ++i[2]) f(i);
}

// Operand loads go through the precision mode's rounding.
struct Loader {
  const void* base;
  DataType dtype;
  OperandRounding rounding;
  double operator()(int64_t i) const {
    const float v = load_as_float(base, i, dtype);
    switch (rounding) {
      case OperandRounding::none: return v;
      case OperandRounding::hf32: return round_to_hf32(v);
      case OperandRounding::fp16: return round_to_fp16(v);
    }
    return v;
  }
};

}  // namespace

void reference_run(const OpSpec& op, const void* a, const void* b, void* dst) {
  const Geometry& g = op.geo;
  const Space s = space_of(g);
  const int sp = g.spatial;
  const Loader load_a{a, op.a.dtype, op.rounding};
  const Loader load_b{b, op.b.dtype, op.rounding};
  const Indexer at_a{op.a, sp}, at_b{op.b, sp}, at_dst{op.dst, sp};
  auto store = [&](int64_t i, double v) { store_from_double(dst, i, op.dst.dtype, v); };

  // x position of output position o and kernel tap r, per spatial dim;
  // false when it falls into the padding.
  auto x_of = [&](const std::array<int64_t, 3>& o, const std::array<int64_t, 3>& r,
                  std::array<int64_t, 3>& xi) {
    for (int d = 0; d < 3; ++d) {
      const Wide x = Wide{o[d]} * s.s[d] - s.pb[d] + Wide{r[d]} * s.d[d];
      if (x < 0 || x >= s.x[d]) return false;
      xi[d] = static_cast<int64_t>(x);
    }
    return true;
  };

  switch (op.op) {
    case Op::fwd:  // dst = y[n, gK+k, o] = sum_{c,r} w[gK+k, c, r] x[n, gC+c, o*s-p+r*d]
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t gr = 0; gr < g.groups; ++gr)
          for (int64_t k = 0; k < g.k; ++k)
            for_each_index(s.y, [&](const std::array<int64_t, 3>& o) {
              double acc = 0;
              for (int64_t c = 0; c < g.c; ++c)
                for_each_index(s.k, [&](const std::array<int64_t, 3>& r) {
                  std::array<int64_t, 3> xi{};
                  if (x_of(o, r, xi))
                    acc += load_b(at_b(gr * g.k + k, c, r)) * load_a(at_a(n, gr * g.c + c, xi));
                });
              store(at_dst(n, gr * g.k + k, o), acc);
            });
      return;

    case Op::bwd_data:  // dst = x[n, gC+c, i] = sum over (k, r, o) with o*s-p+r*d = i
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t gr = 0; gr < g.groups; ++gr)
          for (int64_t c = 0; c < g.c; ++c)
            for_each_index(s.x, [&](const std::array<int64_t, 3>& xi) {
              double acc = 0;
              for (int64_t k = 0; k < g.k; ++k)
                for_each_index(s.k, [&](const std::array<int64_t, 3>& r) {
                  std::array<int64_t, 3> o{};
                  for (int d = 0; d < 3; ++d) {
                    const Wide t = Wide{xi[d]} + s.pb[d] - Wide{r[d]} * s.d[d];
                    if (t < 0 || t % s.s[d] != 0 || t / s.s[d] >= s.y[d]) return;
                    o[d] = static_cast<int64_t>(t / s.s[d]);
                  }
                  acc += load_b(at_b(gr * g.k + k, c, r)) * load_a(at_a(n, gr * g.k + k, o));
                });
              store(at_dst(n, gr * g.c + c, xi), acc);
            });
      return;

    case Op::bwd_weights:  // dst = w[gK+k, c, r] = sum_{n,o} y[n, gK+k, o] x[n, gC+c, o*s-p+r*d]
      for (int64_t gr = 0; gr < g.groups; ++gr)
        for (int64_t k = 0; k < g.k; ++k)
          for (int64_t c = 0; c < g.c; ++c)
            for_each_index(s.k, [&](const std::array<int64_t, 3>& r) {
              double acc = 0;
              for (int64_t n = 0; n < g.n; ++n)
                for_each_index(s.y, [&](const std::array<int64_t, 3>& o) {
                  std::array<int64_t, 3> xi{};
                  if (x_of(o, r, xi))
                    acc += load_a(at_a(n, gr * g.k + k, o)) * load_b(at_b(n, gr * g.c + c, xi));
                });
              store(at_dst(gr * g.k + k, c, r), acc);
            });
      return;

    case Op::bias: {  // dst[ch] = sum_{n, spatial} a[n, ch, spatial]
      const int64_t channels = op.a.dims[1];
      std::array<int64_t, 3> size{1, 1, 1};
      for (int d = 0; d < sp; ++d) size[3 - sp + d] = op.a.dims[2 + d];
      for (int64_t ch = 0; ch < channels; ++ch) {
        double acc = 0;
        for (int64_t n = 0; n < op.a.dims[0]; ++n)
          for_each_index(size, [&](const std::array<int64_t, 3>& i) { acc += load_a(at_a(n, ch, i)); });
        store(op.dst.offset + ch * op.dst.strides[0], acc);
      }
      return;
    }
  }
}

}  // namespace convbwd::detail
