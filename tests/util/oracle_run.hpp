// Runs one problem through Plan::create and execute and compares every
// requested gradient exactly with the tests' own backward oracle
// (util/backward_oracle), after asserting which implementation the planner
// chose for each gradient. The operands come from a generator, and the
// oracle sees them through the precision mode's operand rounding as the
// test itself computes it, so the data must keep every fp32 sum exact
// (small integers, or values with few significant bits times small
// integers).
#pragma once

#include <array>
#include <functional>
#include <random>
#include <string>
#include <string_view>

#include "util/backward_oracle.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {

// The implementation expected for gradInput, gradWeight, gradBias (the part
// of its name before ':'); nullptr: the gradient is not requested;
// kAnyImplementation: requested, whichever implementation the planner picks
// (the random campaign, which tallies what ran instead).
using Want = std::array<const char*, 3>;
inline constexpr const char* kAnyImplementation = "*";

struct OracleCase {
  ConvParams p;
  Want want;
  DataType dt = DataType::f32;  // of the three operands
  MathMode math = MathMode::keep_dtype;
  int max_abs = 3;  // the default generator: integers in [-max_abs, max_abs]
  // false: every exact sum must also be exact in the output dtype (the
  // case's data is chosen so); true: the output must be the exact sum
  // rounded once into its dtype (to nearest even), which only needs the sum
  // exact in fp32. The random campaign's 16-bit cases reduce over more
  // terms than bf16's 8 significant bits hold.
  bool round_once = false;
  Layout in_layout = Layout::contiguous;   // gradOutput, input, weight
  Layout out_layout = Layout::contiguous;  // the gradients (storage outside the view must keep its canary)
};

// The value of each element of operand `which` (0 gradOutput, 1 input,
// 2 weight), drawn from rng.
using ValueGen = std::function<double(int which, std::mt19937_64& rng)>;
// What the oracle applies to each operand value before it multiplies (the
// bias sum takes gradOutput unrounded: cubeMathType does not apply to it).
using RoundOperand = double (*)(double);

double no_rounding(double v);

// Fails the current test (with the problem's descriptor) on a mismatch.
// gen empty: integers in [-max_abs, max_abs]. Returns the implementations
// that ran (full names, tier included; empty for a gradient not requested).
std::array<std::string, 3> check_against_oracle(const OracleCase&, uint64_t seed, const ValueGen& gen = {},
                          RoundOperand round_operand = no_rounding);

std::string_view base_name(std::string_view implementation);

// ConvParams with chainable setters; defaults: stride 1, dilation 1, no
// padding, one group, normal.
struct Conv {
  ConvParams p;
  Conv(int64_t n, int64_t cin, int64_t cout, std::vector<int64_t> in, std::vector<int64_t> k);
  Conv& stride(std::vector<int64_t> v);
  Conv& dil(std::vector<int64_t> v);
  Conv& pad(std::vector<int64_t> before, std::vector<int64_t> after);
  Conv& groups(int64_t g);
  Conv& transposed(std::vector<int64_t> output_padding);
  operator ConvParams() const { return p; }
};

}  // namespace convbwd::test
