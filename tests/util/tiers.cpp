#include "util/tiers.hpp"

#include "kernels/config.hpp"

namespace convbwd::test {

std::vector<detail::Isa> test_isas() {
  std::vector<detail::Isa> v;
  for (detail::Isa i : detail::kAllIsas)
    if (detail::kernel_config(i).isa == i && (detail::cpu_has(i) || detail::emulated_kernel_config(i)))
      v.push_back(i);
  return v;
}

std::string tier_name(detail::Isa i) {
  return std::string(detail::to_string(i)) + (detail::kernel_config(i).emulated ? " (emulated)" : "");
}

}  // namespace convbwd::test
