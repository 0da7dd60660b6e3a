// aclnnConvolutionBackward: maps CANN's handles onto a convbwd::Problem, plans
// it with the core (the only place the rules live), and runs the plan on a
// stream. Nothing is validated here that the core validates; this file only
// checks what the core cannot see: null handles, enum values that have no
// core equivalent, and formats.
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "aclnnop/aclnn_convolution_backward.h"
#include "capi/capi.hpp"
#include "problem/checked.hpp"

namespace convbwd::capi {
namespace {

constexpr const char* kOp = "aclnnConvolutionBackwardGetWorkspaceSize";

std::optional<DataType> map_dtype(int32_t dtype) {
  switch (dtype) {
    case ACL_FLOAT: return DataType::f32;
    case ACL_FLOAT16: return DataType::f16;
    case ACL_BF16: return DataType::bf16;
    case ACL_HIFLOAT8: return DataType::hif8;
    case ACL_FLOAT8_E4M3FN: return DataType::f8e4m3;
    default: return std::nullopt;
  }
}

// The rank a format implies; 0 for ND, which fits any rank; -1 for formats
// this operator does not take (blocked layouts such as NC1HWC0 need a
// transdata the host side has no reason to emulate).
int format_rank(int32_t format) {
  switch (format) {
    case ACL_FORMAT_ND: return 0;
    case ACL_FORMAT_NCL: return 3;
    case ACL_FORMAT_NCHW: return 4;
    case ACL_FORMAT_NCDHW: return 5;
    default: return -1;
  }
}

// Converts one tensor handle; returns an error status (with the message set)
// or ACLNN_SUCCESS.
aclnnStatus to_desc(const char* name, const aclTensor& t, TensorDesc& d) {
  const std::optional<DataType> dt = map_dtype(t.dtype);
  if (!dt) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                std::string(kOp) + ": " + name + " data type " + dtype_name(t.dtype) +
                    " is not supported; expected ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_HIFLOAT8 or ACL_FLOAT8_E4M3FN");
  }
  const int want_rank = format_rank(t.format);
  if (want_rank < 0) {
    return fail(ACLNN_ERR_PARAM_INVALID, std::string(kOp) + ": " + name + " format " + format_name(t.format) +
                                             " is not supported; expected ACL_FORMAT_NCL, ACL_FORMAT_NCHW, "
                                             "ACL_FORMAT_NCDHW or ACL_FORMAT_ND");
  }
  if (want_rank > 0 && static_cast<size_t>(want_rank) != t.view_dims.size()) {
    return fail(ACLNN_ERR_PARAM_INVALID, std::string(kOp) + ": " + name + " format " + format_name(t.format) +
                                             " means rank " + std::to_string(want_rank) + ", but the tensor has " +
                                             std::to_string(t.view_dims.size()) +
                                             " dims; expected a matching format or ACL_FORMAT_ND");
  }
  // The storage bounds the view; the core checks the reach against it. A
  // storage too large to count cannot be outrun, so it is left unbounded
  // (-1), unless a dim is 0: then it holds nothing, whatever the product of
  // the dims before the 0 ([2^40,2^40,0] is empty, not unbounded).
  convbwd::detail::Checked storage(1);
  bool empty_storage = false;
  for (int64_t s : t.storage_dims) {
    if (s < 0) {
      return fail(ACLNN_ERR_PARAM_INVALID, std::string(kOp) + ": " + name + " storage dims contain " +
                                               std::to_string(s) + "; expected dims >= 0");
    }
    empty_storage = empty_storage || s == 0;
    storage = storage * s;
  }
  d.storage_elements = empty_storage ? 0 : storage.ok() ? storage.value() : -1;
  d.dtype = *dt;
  d.dims = t.view_dims;
  d.strides = t.strides;
  d.offset = t.offset;
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace convbwd::capi

convbwd::Error aclOpExecutor::run() noexcept {
  try {
    return plan.execute(buffers, workspace, workspace_bytes);
  } catch (const std::exception& e) {  // the core does not throw; be safe on a worker thread
    return convbwd::Error{convbwd::Status::internal_error, std::string("aclnnConvolutionBackward: ") + e.what()};
  }
}

void aclOpExecutor::release() noexcept { delete this; }

using convbwd::capi::fail;

extern "C" {

aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* weight, const aclIntArray* biasSizes,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation, bool transposed,
    const aclIntArray* outputPadding, int groups, const aclBoolArray* outputMask, int8_t cubeMathType,
    aclTensor* gradInput, aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize,
    aclOpExecutor** executor) try {
  using namespace convbwd;
  using convbwd::capi::kOp;
  const std::string op = kOp;

  // Null pointers first, all with one status, so that the status never
  // depends on which other argument also happens to be wrong.
  const struct {
    const void* p;
    const char* name;
  } required[] = {{gradOutput, "gradOutput"}, {input, "input"},       {weight, "weight"},
                  {stride, "stride"},         {padding, "padding"},   {dilation, "dilation"},
                  {outputPadding, "outputPadding"}, {outputMask, "outputMask"},
                  {workspaceSize, "workspaceSize"}, {executor, "executor"}};
  for (const auto& r : required) {
    if (r.p == nullptr) {
      return fail(ACLNN_ERR_PARAM_NULLPTR, op + ": " + r.name + " is null");
    }
  }
  if (outputMask->values.size() != 3) {
    return fail(ACLNN_ERR_PARAM_INVALID, op + ": outputMask has " + std::to_string(outputMask->values.size()) +
                                             " values; expected 3 (gradInput, gradWeight, gradBias)");
  }
  const bool mask[3] = {outputMask->values[0], outputMask->values[1], outputMask->values[2]};
  aclTensor* const outs[3] = {gradInput, gradWeight, gradBias};
  const char* const out_names[3] = {"gradInput", "gradWeight", "gradBias"};
  for (int i = 0; i < 3; ++i) {
    if (mask[i] && outs[i] == nullptr) {
      return fail(ACLNN_ERR_PARAM_NULLPTR,
                  op + ": " + out_names[i] + " is null but outputMask[" + std::to_string(i) + "] requests it");
    }
  }
  if (mask[2] && biasSizes == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR, op + ": biasSizes is null but outputMask[2] requests gradBias");
  }

  Problem p;
  if (auto s = capi::to_desc("gradOutput", *gradOutput, p.grad_output)) return s;
  if (auto s = capi::to_desc("input", *input, p.input)) return s;
  if (auto s = capi::to_desc("weight", *weight, p.weight)) return s;
  TensorDesc* const out_descs[3] = {&p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!mask[i]) continue;
    // Empty dims mean "the implied shape, contiguous" to the core; a rank-0
    // handle must not silently become that and be written past its end.
    if (outs[i]->view_dims.empty()) {
      return fail(ACLNN_ERR_PARAM_INVALID,
                  op + ": " + out_names[i] + " has no dims; expected the shape of the gradient");
    }
    if (auto s = capi::to_desc(out_names[i], *outs[i], *out_descs[i])) return s;
  }

  p.stride = stride->values;
  p.dilation = dilation->values;
  p.output_padding = outputPadding->values;
  // CANN takes one padding per spatial dim (symmetric) or, in 2D, four values
  // top, bottom, left, right. Anything else goes to the core as given, whose
  // message then names the expected length.
  const std::vector<int64_t>& pad = padding->values;
  if (input->view_dims.size() == 4 && pad.size() == 4) {
    p.padding_before = {pad[0], pad[2]};
    p.padding_after = {pad[1], pad[3]};
  } else {
    p.padding_before = pad;
  }
  p.transposed = transposed;
  p.groups = groups;
  p.output_mask = {mask[0], mask[1], mask[2]};
  if (mask[2]) {
    p.bias_sizes = biasSizes->values;  // unrequested: ignored, as CANN does
  }
  if (cubeMathType < 0 || cubeMathType > 3) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                op + ": cubeMathType is " + std::to_string(cubeMathType) +
                    "; expected 0 (KEEP_DTYPE), 1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)");
  }
  p.math_mode = static_cast<MathMode>(cubeMathType);

  Result<Plan> plan = Plan::create(p);
  if (!plan) {
    return fail(static_cast<aclnnStatus>(plan.error().status), op + ": " + plan.error().message);
  }
  // Owned here until registered, so that a failure to register leaks nothing.
  auto owned = std::make_unique<aclOpExecutor>(std::move(plan).value());
  aclOpExecutor* e = owned.get();
  e->buffers.grad_output = gradOutput->data;
  e->buffers.input = input->data;
  e->buffers.weight = weight->data;
  e->buffers.grad_input = mask[0] ? gradInput->data : nullptr;
  e->buffers.grad_weight = mask[1] ? gradWeight->data : nullptr;
  e->buffers.grad_bias = mask[2] ? gradBias->data : nullptr;
  capi::register_executor(e);
  owned.release();
  *workspaceSize = e->plan.workspace_size();
  *executor = e;
  return ACLNN_SUCCESS;
} catch (const std::bad_alloc&) {
  return fail(ACLNN_ERR_INNER_NULLPTR, "aclnnConvolutionBackwardGetWorkspaceSize: out of memory");
} catch (const std::exception& ex) {
  return fail(ACLNN_ERR_INNER, std::string("aclnnConvolutionBackwardGetWorkspaceSize: ") + ex.what());
}

aclnnStatus aclnnConvolutionBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     const aclrtStream stream) {
  // A std::string here would allocate on every call: messages are built only
  // on failure, so the success path stays allocation-free.
  const std::string_view op = "aclnnConvolutionBackward";
  if (executor == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR, std::string(op) + ": executor is null");
  }
  // Nothing below touches the executor until it is claimed: another thread may
  // be running (and then releasing) the same one.
  const std::optional<size_t> live = convbwd::capi::live_executor_workspace(executor);
  if (!live) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                std::string(op) + ": executor is not a live executor (each executor runs once; it is released after its run)");
  }
  // Every refusal happens before the executor is claimed, so it stays the
  // caller's: to retry, or to release with aclDestroyAclOpExecutor.
  const size_t need = *live;
  if (workspaceSize < need) {
    return fail(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": workspaceSize is " + std::to_string(workspaceSize) +
                                             " bytes; expected at least " + std::to_string(need) +
                                             " (from aclnnConvolutionBackwardGetWorkspaceSize)");
  }
  if (need > 0 && workspace == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR, std::string(op) + ": workspace is null; expected " + std::to_string(need) +
                                             " bytes");
  }
  // The core's checks of the buffers (alignment, aliasing), here rather than
  // on the stream, so that a refusal is this call's status and nothing runs.
  const std::optional<convbwd::Error> refused = convbwd::capi::check_live_executor(executor, workspace, workspaceSize);
  if (!refused) {
    return fail(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": executor was run or destroyed by another thread");
  }
  if (*refused) {
    return fail(refused->status == convbwd::Status::null_pointer ? ACLNN_ERR_PARAM_NULLPTR : ACLNN_ERR_PARAM_INVALID,
                std::string(op) + ": " + refused->message);
  }
  const std::shared_ptr<convbwd::capi::Stream> s = convbwd::capi::resolve_stream(stream, op);
  if (s == nullptr) {
    return ACLNN_ERR_PARAM_INVALID;  // message set by resolve_stream
  }
  if (!convbwd::capi::claim_executor(executor)) {
    return fail(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": executor was run or destroyed by another thread");
  }
  executor->workspace = workspace;
  executor->workspace_bytes = static_cast<size_t>(workspaceSize);
  s->enqueue(executor);
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  if (executor == nullptr) {
    return ACLNN_SUCCESS;
  }
  if (!convbwd::capi::claim_executor(executor)) {
    return fail(ACLNN_ERR_PARAM_INVALID,
                "aclDestroyAclOpExecutor: executor is not a live executor (already run or destroyed)");
  }
  delete executor;
  return ACLNN_SUCCESS;
}

}  // extern "C"
