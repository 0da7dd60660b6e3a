// The check's oracle: the library's fp64 reference (src/reference), run on
// independent slices of an operation in parallel.
//
// The reference is single-threaded plain loops, by design (obviously right,
// not fast). Every output element is an independent sum, so slicing an
// operation along N, groups and output channels and running the slices on
// several std::threads gives bit-identical results to one call, in a fraction
// of the time. For problems too large to check in full in reasonable time, a
// seeded random subset of slices is checked instead, and the report says so.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "problem/spec.hpp"

namespace convbwd::cli {

// One independent piece of an operation: `op` computes exactly the output
// elements [begin, end) of the full operation's contiguous dst.
struct Shard {
  detail::OpSpec op;
  int64_t begin = 0, end = 0;
};

// Splits `op`, whose dst view must be contiguous with offset 0, into about
// `target` shards (at least one per (n, group) for fwd/bwd_data, one per group
// for bwd_weights), covering every output element once. Empty outputs give no
// shards.
std::vector<Shard> make_shards(const detail::OpSpec& op, int64_t target);

struct OracleOptions {
  int threads = 1;
  // Most multiply-adds to spend (reference values and sum|products| both
  // count); 0 or `all`: no limit.
  double budget = 0;
  bool all = false;
  uint64_t seed = 1;  // chooses the subset when the budget cuts in
  // Called from the worker threads after each shard with the elements done
  // so far and the number to do: once per shard, so counting costs nothing
  // next to the shard's reference work. Empty: not called.
  std::function<void(int64_t done, int64_t total)> progress;
};

struct OracleResult {
  std::vector<unsigned char> ref;  // dst dtype, contiguous; valid inside `ranges`
  std::vector<float> sum_abs;      // sum |products| per element (fp32, as the tests keep it)
  std::vector<Shard> computed;     // the shards run, in output order
  int64_t total_elements = 0;
  int64_t computed_elements = 0;
  bool subset() const { return computed_elements < total_elements; }
};

// Runs the reference for `op` (dst contiguous, offset 0) on operands a, b and
// on their absolute values a_abs, b_abs (for sum |products|).
OracleResult run_oracle(const detail::OpSpec& op, const void* a, const void* b, const void* a_abs,
                        const void* b_abs, const OracleOptions& options);

// A view of the same dims, row-major contiguous, offset 0.
detail::View contiguous_view(const detail::View& v, DataType dtype);

}  // namespace convbwd::cli
