// Prints, one per line, the environment of each rerun of the `isa`-labelled
// tests that scripts/test.sh makes after the default run: every tier with
// kernels of its own that this machine runs other than the default one, and
// each emulated tier (with CONVBWD_EMULATED=1 where the CPU also has the
// tier natively, so that the SIMDe build is tested there too). A tier that
// would run the same code as the default run is not listed.
#include <cstdio>
#include <string>

#include "kernels/config.hpp"
#include "runtime/cpu.hpp"

int main() {
  using namespace convbwd::detail;
  const Isa standard = detected_isa();
  for (Isa i : kAllIsas) {
    const std::string name(to_string(i));
    const bool native = native_kernel_config(i) != nullptr;
    if (native && i != standard) std::printf("CONVBWD_ISA=%s\n", name.c_str());
    if (emulated_kernel_config(i)) {
      if (native) std::printf("CONVBWD_ISA=%s CONVBWD_EMULATED=1\n", name.c_str());
      else std::printf("CONVBWD_ISA=%s\n", name.c_str());
    }
  }
  return 0;
}
