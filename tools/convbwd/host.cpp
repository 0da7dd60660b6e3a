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

}  // namespace convbwd::cli
