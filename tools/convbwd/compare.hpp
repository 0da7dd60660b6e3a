// Comparing computed gradients with the reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "host.hpp"
#include "oracle.hpp"

namespace convbwd::cli {

// The tolerance for one output element: detail::comparison_tolerance
// (src/numeric/tolerance.hpp), the same definition the tests use.
double tolerance(DataType out, double ref, double sum_abs_products, int64_t reduction_length);

struct Comparison {
  int64_t checked = 0;
  int64_t failures = 0;
  double worst_scaled_error = 0;  // max |got-ref| / tolerance over checked elements
  int64_t worst_index = -1;
  std::vector<std::string> first_failures;  // at most a few, formatted with the multi-index
  bool pass() const { return failures == 0; }
};

// Compares `got` (contiguous, the output dtype) with the oracle on the
// elements it computed. exact: fp32 outputs whose sum|products| < 2^24 must
// match bit for bit (small-integer data makes their sums exact).
Comparison compare(const char* name, const HostTensor& got, const OracleResult& oracle, int64_t reduction_length,
                   bool exact);

// "gradWeight[12,3,0,1]" for element i of a row-major tensor of these dims.
std::string element_name(const char* name, const std::vector<int64_t>& dims, int64_t i);

}  // namespace convbwd::cli
