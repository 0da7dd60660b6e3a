// Runs a Problem through Plan::execute on seeded host tensors and keeps every
// tensor, so tests can read the inputs back, compare output bits between runs
// or check what was written.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "util/tensor.hpp"

namespace convbwd::test {

struct RunOptions {
  Layout in_layout = Layout::contiguous;   // gradOutput, input, weight
  Layout out_layout = Layout::contiguous;  // gradInput, gradWeight (gradBias stays contiguous unless padded/reversed)
  Fill fill = Fill::uniform;
  uint64_t seed = 1;
};

struct RunResult {
  Error error;          // Plan::create's or execute's, if any
  HostTensor go, in, w;  // the operands, as filled
  std::array<HostTensor, 3> outs;  // gradInput, gradWeight, gradBias (empty storage when not requested)
  std::string implementation[3];
  size_t workspace = 0;
};

// Fills the operands like check_against_reference does (same seed, same
// order), plans and executes once.
RunResult run_problem(const Problem&, const RunOptions& = {});

// "mb2ic3ih5oc4kh3 in=padded out=reversed seed=7": the one-line repro.
std::string repro(const Problem&, const RunOptions&);

}  // namespace convbwd::test
