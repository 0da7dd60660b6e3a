// Every Implementation the registry lists. Each is defined in its own folder.
#pragma once

#include "impl/implementation.hpp"

namespace convbwd::detail {

extern const Implementation kZerosImpl;
extern const Implementation kDepthwiseDirectImpl;  // src/impl/depthwise
extern const Implementation kDepthwiseClImpl;      // src/impl/depthwise
extern const Implementation kBiasReduceImpl;       // src/impl/bias
extern const Implementation kSmallChannelsBwdDataImpl;     // src/impl/small_channels
extern const Implementation kSmallChannelsBwdWeightsImpl;  // src/impl/small_channels
extern const Implementation kGemmFwdImpl;         // src/impl/gemm
extern const Implementation kGemmBwdDataImpl;     // src/impl/gemm
extern const Implementation kGemmBwdWeightsImpl;  // src/impl/gemm
extern const Implementation kGemm1x1FwdImpl;      // src/impl/gemm
extern const Implementation kGemm1x1BwdDataImpl;  // src/impl/gemm
extern const Implementation kGemm1x1BwdWeightsImpl;  // src/impl/gemm
extern const Implementation kFp8FwdDirectImpl;   // src/impl/fp8_direct
extern const Implementation kReferenceImpl;

// Fusions (see FusedKernel). depthwise_cl's data and weight gradients of one
// depthwise or grouped layer in one pass over gradOutput, and its bias
// gradient too where bias_reduce's order allows; null unless both kernels
// are depthwise_cl's, of one problem (src/impl/depthwise).
std::unique_ptr<FusedKernel> fuse_depthwise_cl(const OpKernel& data, const OpKernel& weights, const OpKernel* bias);

}  // namespace convbwd::detail
