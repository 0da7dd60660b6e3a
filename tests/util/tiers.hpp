// The instruction-set tiers a test runs its kernels on: every tier whose
// kernel config is its own (a tier without kernels of its own would only
// rerun the one below) and that runs here, natively (the CPU has it) or
// emulated (a test build registered its SIMDe config). scalar is first.
#pragma once

#include <string>
#include <vector>

#include "runtime/cpu.hpp"

namespace convbwd::test {

std::vector<detail::Isa> test_isas();
// The tier's name, with " (emulated)" when its kernels run through SIMDe.
std::string tier_name(detail::Isa);

}  // namespace convbwd::test
