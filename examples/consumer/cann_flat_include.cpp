// CANN's samples include the operator header by its bare name, with
// <prefix>/include/aclnnop on the include path; find_package(convbwd) must
// give that path as CANN's build line and pkg-config do. Built as C++14 by
// the consumer project: the package raises the standard convbwd.hpp needs.
#include "aclnn_convolution_backward.h"

#include <convbwd/convbwd.hpp>

#include <cstdio>
#include <string>

int main() {
  // The version the library reports is the package's.
  if (convbwd::version() != EXPECTED_VERSION) {
    std::printf("FAIL cann_flat_include: library version %s, package version %s\n",
                std::string(convbwd::version()).c_str(), EXPECTED_VERSION);
    return 1;
  }
  // The operator's two phases are declared by the bare-name header.
  const auto phase1 = &aclnnConvolutionBackwardGetWorkspaceSize;
  const auto phase2 = &aclnnConvolutionBackward;
  if (!phase1 || !phase2) return 1;
  std::printf("PASS cann_flat_include %s (C++ %ld)\n", EXPECTED_VERSION, static_cast<long>(__cplusplus));
  return 0;
}
