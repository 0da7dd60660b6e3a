#pragma once

#include <array>
#include <memory>
#include <string>

#include "impl/implementation.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {

struct PlannedOp {
  bool active = false;  // requested and with a non-empty output
  OpSpec spec;
  const Implementation* impl = nullptr;
  std::string name;  // impl->name, and ":<tier>" when it runs the tier's kernels
  std::unique_ptr<OpKernel> kernel;
  // No tap meets padding (1x1, unpadded): NaN/Inf need no scan or event pass
  // (src/impl/nonfinite/nonfinite.hpp).
  bool every_tap_is_real = false;
};

struct PlanState {
  Spec spec;
  std::array<PlannedOp, 3> ops;  // gradInput, gradWeight, gradBias
  // A pass that computes several of them at once (null: none applies).
  std::unique_ptr<FusedKernel> fused;
  std::string fused_name;  // its name and tier
  size_t workspace = 0;
  int threads = 1;
  double flops = 0;
};

// Plans one operation: the first implementation of its list that accepts.
// With CONVBWD_VERBOSE set, prints why each earlier one declined.
PlannedOp plan_op(const OpSpec&, const PlanContext&);

}  // namespace convbwd::detail
