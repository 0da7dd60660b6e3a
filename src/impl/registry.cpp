#include <array>

#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"

namespace convbwd::detail {

std::span<const Implementation> implementations(Op op) {
  // Fastest first; each entry declines what it cannot do, with a reason.
  static const std::array kFwd = {kZerosImpl,       kFp8FwdDirectImpl, kDepthwiseClImpl, kDepthwiseDirectImpl,
                                  kGemm1x1FwdImpl,  kGemmFwdImpl,      kReferenceImpl};
  static const std::array kBwdData = {kZerosImpl,          kDepthwiseClImpl,          kDepthwiseDirectImpl,
                                      kGemm1x1BwdDataImpl, kSmallChannelsBwdDataImpl, kGemmBwdDataImpl,
                                      kReferenceImpl};
  static const std::array kBwdWeights = {kZerosImpl,           kDepthwiseClImpl,
                                         kDepthwiseDirectImpl, kGemm1x1BwdWeightsImpl,
                                         kSmallChannelsBwdWeightsImpl, kGemmBwdWeightsImpl,
                                         kReferenceImpl};
  static const std::array kBias = {kZerosImpl, kBiasReduceImpl, kReferenceImpl};
  switch (op) {
    case Op::fwd: return kFwd;
    case Op::bwd_data: return kBwdData;
    case Op::bwd_weights: return kBwdWeights;
    case Op::bias: return kBias;
  }
  return {};
}

std::unique_ptr<FusedKernel> plan_fused(const std::array<const OpKernel*, 3>& kernels) {
  if (kernels[0] && kernels[1]) return fuse_depthwise_cl(*kernels[0], *kernels[1], kernels[2]);
  return nullptr;
}

int64_t reduction_length(const OpSpec& op) {
  const Geometry& g = op.geo;
  switch (op.op) {
    case Op::fwd: return g.c * g.k_spatial();
    case Op::bwd_data: return g.k * g.k_spatial();
    case Op::bwd_weights: return g.n * g.y_spatial();
    case Op::bias: {
      int64_t r = op.a.dims[0];
      for (int i = 2; i < op.a.rank; ++i) r *= op.a.dims[i];
      return r;
    }
  }
  return 0;
}

}  // namespace convbwd::detail
