#include "host.hpp"

#include "numeric/float_formats.hpp"

namespace convbwd::cli {

int64_t HostTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double HostTensor::at(int64_t i) const { return detail::load_as_float(bytes.data(), i, dtype); }

TensorDesc HostTensor::desc() const {
  TensorDesc d;
  d.dtype = dtype;
  d.dims = dims;
  d.storage_elements = elements();
  return d;
}

HostTensor make_host(DataType dtype, const std::vector<int64_t>& dims, unsigned char fill_byte) {
  HostTensor t;
  t.dtype = dtype;
  t.dims = dims;
  t.bytes.assign(static_cast<size_t>(t.elements()) * size_of(dtype), fill_byte);
  return t;
}

HostTensor abs_copy(const HostTensor& t) {
  HostTensor a = t;
  const size_t es = size_of(t.dtype);
  for (size_t i = es - 1; i < a.bytes.size(); i += es) a.bytes[i] &= 0x7f;  // little-endian: the sign bit
  return a;
}

void fill(HostTensor& t, Fill kind, std::mt19937_64& rng) {
  // The same distributions, in the same order, as tests/util/tensor.cpp fill().
  std::uniform_int_distribution<int> ints(-3, 3);
  std::uniform_real_distribution<double> reals(-1.0, 1.0);
  const int64_t n = t.elements();
  for (int64_t i = 0; i < n; ++i) {
    const double v = kind == Fill::small_ints ? ints(rng) : reals(rng);
    detail::store_from_double(t.bytes.data(), i, t.dtype, v);
  }
}

HostProblem make_host_problem(const Problem& given, Fill kind, uint64_t seed, unsigned char out_byte) {
  HostProblem h;
  std::mt19937_64 rng(seed);
  h.grad_output = make_host(given.grad_output.dtype, given.grad_output.dims);
  h.input = make_host(given.input.dtype, given.input.dims);
  h.weight = make_host(given.weight.dtype, given.weight.dims);
  for (HostTensor* t : {&h.grad_output, &h.input, &h.weight}) fill(*t, kind, rng);
  Problem& p = h.problem;
  p = given;
  p.grad_output = h.grad_output.desc();
  p.input = h.input.desc();
  p.weight = h.weight.desc();
  TensorDesc* out_desc[3] = {&p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    h.outs[i] = make_host(p.gradient_dtype(g), p.gradient_dims(g), out_byte);
    *out_desc[i] = h.outs[i].desc();
  }
  return h;
}

Bound bind(const HostTensor& grad_output, const HostTensor& input, const HostTensor& weight, HostTensor (&outs)[3]) {
  Bound b;
  b.buffers = Buffers{grad_output.data(), input.data(), weight.data(), outs[0].data(), outs[1].data(), outs[2].data()};
  // What each allocation holds (an absent tensor holds nothing).
  auto held = [](const HostTensor& t) { return static_cast<int64_t>(t.bytes.size() / size_of(t.dtype)); };
  b.sizes = BufferSizes{held(grad_output), held(input), held(weight), held(outs[0]), held(outs[1]), held(outs[2])};
  return b;
}

}  // namespace convbwd::cli
