// Host tensors for the CLI: contiguous buffers with a dtype and dims, and the
// seeded data every mode uses.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "convbwd/convbwd.hpp"

namespace convbwd::cli {

struct HostTensor {
  DataType dtype = DataType::f32;
  std::vector<int64_t> dims;
  std::vector<unsigned char> bytes;

  int64_t elements() const;
  void* data() { return bytes.empty() ? nullptr : bytes.data(); }
  const void* data() const { return bytes.empty() ? nullptr : bytes.data(); }
  double at(int64_t i) const;  // element i decoded to double
  // The contiguous TensorDesc of this buffer (storage_elements set, so the
  // library checks the view stays inside it).
  TensorDesc desc() const;
};

// Plan::execute's arguments for host tensors: each pointer with the number
// of elements its tensor holds, so execute checks every view against it.
struct Bound {
  Buffers buffers;
  BufferSizes sizes;
};
Bound bind(const HostTensor& grad_output, const HostTensor& input, const HostTensor& weight, HostTensor (&outs)[3]);

// Zero-initialized storage. Byte pattern `fill_byte` (0xFF: NaN in every
// float format convbwd writes) marks outputs, so an element the plan forgot
// to write never passes a comparison.
HostTensor make_host(DataType dtype, const std::vector<int64_t>& dims, unsigned char fill_byte = 0);

// A copy with every element's sign cleared: the reference run on such
// operands yields sum |products|, the scale of the tolerance.
HostTensor abs_copy(const HostTensor& t);

enum class Fill {
  uniform,     // uniform in [-1, 1]
  small_ints,  // integers in [-3, 3]: fp32 sums stay exact
};

// Fills in row-major order from rng. With the same seed and fill, the CLI's
// contiguous gradOutput, input and weight (filled in that order from one
// std::mt19937_64) hold the same values as the tests' check_against_reference
// with contiguous layouts.
void fill(HostTensor& t, Fill kind, std::mt19937_64& rng);

// The seeded data of check and perf mode: given's operands as contiguous
// tensors filled from one generator seeded with `seed` (gradOutput, input,
// weight, in that order), each output the mask asks for filled with
// `out_byte`, and `problem`, given with these tensors' descriptors.
struct HostProblem {
  Problem problem;
  HostTensor grad_output, input, weight;
  HostTensor outs[3];

  Bound bound() { return bind(grad_output, input, weight, outs); }
};
HostProblem make_host_problem(const Problem& given, Fill kind, uint64_t seed, unsigned char out_byte = 0);

}  // namespace convbwd::cli
