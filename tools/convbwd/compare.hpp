// Comparing computed gradients with the reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "host.hpp"
#include "oracle.hpp"

namespace convbwd::cli {

// The tolerance for one output element: one ulp of the output dtype at |ref|
// (2*u_out*|ref|), plus the fp32 accumulation bound n*2^-24*sum|products|,
// plus 2^-24 (the smallest fp16 spacing) for values that round into
// subnormals.
//
// This MUST agree with tests/util/tensor.cpp tolerance(): the CLI and the
// tests pass or fail the same outputs. The CLI cannot link the test utilities
// (they pull in GoogleTest), so the formula is repeated here; the test
// cli_compare_test checks the two agree. (Proposed: move it into the library,
// e.g. src/numeric/tolerance.hpp, and have both call it.)
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
