// The check every fast-path test runs: one gradient of a descriptor planned
// directly with a given implementation, on every tier that runs here (test_isas) and the
// given thread counts (whose bits must be identical), compared with the fp64
// reference within the one tolerance (exactly, for Fill::small_ints), with
// canaries around the output view. Each `same_bits_knob` ("NAME=VALUE", a
// planner's test knob, set only while planning) runs every thread count
// again, and must give the same bits too: for knobs that change how the work
// is split, never a sum.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "impl/implementation.hpp"
#include "runtime/cpu.hpp"
#include "util/tensor.hpp"
#include "util/tiers.hpp"

namespace convbwd::test {

// Which implementation a test plans for an operation.
using ImplFor = std::function<const detail::Implementation&(detail::Op)>;

void check_implementation(const std::string& desc, Gradient which, const ImplFor& impl_for, Layout in_layout,
                          Layout out_layout, Fill fill_kind, const std::vector<int>& thread_counts,
                          const std::vector<std::string>& same_bits_knobs = {});

}  // namespace convbwd::test
