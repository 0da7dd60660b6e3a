// CPU features, detected once. Kernels are chosen per call from the ISA found
// here, never inside inner loops.
#pragma once

#include <string_view>

namespace convbwd::detail {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

// The best ISA this CPU and OS support, lowered by CONVBWD_ISA=scalar|avx2
// (a request above what the CPU has is ignored, never honoured unsafely).
Isa active_isa();
Isa detected_isa();  // ignoring CONVBWD_ISA
std::string_view to_string(Isa);

}  // namespace convbwd::detail
