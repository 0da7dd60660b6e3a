// The one comparison tolerance (src/numeric/tolerance.hpp, used by the tests
// through util/tensor and by the CLI's check mode), pinned to values worked
// out by hand: a change to the definition, a factor slipped in or a term
// dropped, fails here before it can loosen every comparison of the suite.
//
//   tolerance = 2 u_out |ref| + max(n, 1) 2^-24 sum|products| + 2^-24
//   u_out = 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16), 2^-4 (e4m3), 2^-2 (hif8)
#include <gtest/gtest.h>

#include <cmath>

#include "numeric/tolerance.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

struct Pinned {
  DataType out;
  double ref, sum_abs;
  int64_t n;
  double want;
};

// Every term is a power of two times a small integer, so the doubles are
// exact and equality is the right comparison.
const Pinned kPinned[] = {
    // 2*3 + 9*250 + 1 units of 2^-24.
    {DataType::f32, 3.0, 250.0, 9, 2257 * 0x1p-24},
    {DataType::f32, -3.0, 250.0, 9, 2257 * 0x1p-24},  // |ref|
    // n = 0 counts as 1: 1 + 1 units.
    {DataType::f32, 0.0, 1.0, 0, 0x1p-23},
    {DataType::f32, 0.0, 0.0, 1 << 20, 0x1p-24},
    // 2^20 products of total magnitude 2^4: 2^24 * 2^-24 = 1, plus 2 * 2^-24 * 2^10 + 2^-24.
    {DataType::f32, 1024.0, 16.0, 1 << 20, 1 + 0x1p-13 + 0x1p-24},
    // f16: 2 * 2^-11 * 0.5 = 2^-11, plus 2^-24 + 2^-24.
    {DataType::f16, -0.5, 1.0, 1, 0x1p-11 + 0x1p-23},
    // bf16: 2 * 2^-8 * 256 = 2, plus 2^-24.
    {DataType::bf16, 256.0, 0.0, 0, 2 + 0x1p-24},
    {DataType::bf16, 1.0, 3.0, 5, 0x1p-7 + 16 * 0x1p-24},
    // e4m3: 2 * 2^-4 * 2 = 0.25, plus (2*3 + 1) 2^-24.
    {DataType::f8e4m3, 2.0, 3.0, 2, 0.25 + 7 * 0x1p-24},
    // hif8: 2 * 2^-2 * 4 = 2, plus 2^-24.
    {DataType::hif8, -4.0, 0.0, 3, 2 + 0x1p-24},
};

TEST(Tolerance, PinnedToHandComputedValues) {
  for (const Pinned& p : kPinned) {
    SCOPED_TRACE(std::string(to_string(p.out)) + " ref " + std::to_string(p.ref) + " sum " + std::to_string(p.sum_abs) +
                 " n " + std::to_string(p.n));
    EXPECT_EQ(detail::comparison_tolerance(p.out, p.ref, p.sum_abs, p.n), p.want);
    EXPECT_EQ(tolerance(p.out, p.ref, p.sum_abs, p.n), p.want);  // the tests' entry point
  }
}

// What the bound is for: two output roundings apart (both sides round once
// and may land either side of a tie) is inside it, four is outside it when
// a single product is summed.
TEST(Tolerance, BetweenTwoAndFourOutputRoundings) {
  for (DataType t : {DataType::f32, DataType::f16, DataType::bf16}) {
    const double u = t == DataType::f32 ? 0x1p-24 : t == DataType::f16 ? 0x1p-11 : 0x1p-8;
    const double ref = 3.0;  // sums of one product: no accumulation term to speak of
    const double tol = tolerance(t, ref, ref, 1);
    EXPECT_GE(tol, 2 * u * ref) << to_string(t);
    EXPECT_LT(tol, 4 * u * ref) << to_string(t);
  }
}

// gradBias's bound follows the order bias_reduce sums in (8 lanes, a
// 3-level tree, at most 64 chunks), not the sum's length.
TEST(Tolerance, BiasSummationDepth) {
  EXPECT_EQ(bias_summation_depth(1), 1);
  EXPECT_EQ(bias_summation_depth(50), 50);  // short sums: no order chains more than n additions
  EXPECT_EQ(bias_summation_depth(80), 10 + 3 + 64);
  EXPECT_EQ(bias_summation_depth(160000), 20000 + 3 + 64);
  EXPECT_EQ(bias_summation_depth(160001), 20001 + 3 + 64);
}

}  // namespace
}  // namespace convbwd::test
