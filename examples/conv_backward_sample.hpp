// The flow of a CANN aclnnConvolutionBackward program, written once for the
// 1D, 2D and 3D samples: init, device buffers, tensors, the two phases,
// synchronize, copy back, release. Each sample only describes its problem.
//
// The data are small integers, so every sum is exact in fp32 and the results
// must equal, bit for bit, the plain loops of naive_gradients() below, which
// follow the definition of the gradients directly.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"

namespace sample {

#define SAMPLE_CHECK(cond, ...)   \
  do {                            \
    if (!(cond)) {                \
      std::printf(__VA_ARGS__);   \
      std::printf("\n  reason: %s\n", aclGetRecentErrMsg()); \
      return 1;                   \
    }                             \
  } while (0)

struct Config {
  const char* name;
  aclFormat format;          // of gradOutput, input, weight and gradInput/gradWeight
  int64_t n, cin, cout, groups;
  std::vector<int64_t> in, kernel, stride, padding, dilation;  // per spatial dim
  int8_t cube_math_type;
};

inline int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Small integers in [-3, 3], with periods that differ per tensor so that no
// channel sums to zero by accident.
inline std::vector<float> pattern(int64_t count, int64_t mul, int64_t mod, int64_t shift) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * mul) % mod - shift);
  return v;
}

// The gradients straight from their definition, in double. Spatial dims are
// padded to three with size 1 so one loop nest covers 1D, 2D and 3D.
struct Naive {
  std::vector<double> grad_input, grad_weight, grad_bias;
};

inline Naive naive_gradients(const Config& c, const std::vector<int64_t>& out, const std::vector<float>& go,
                             const std::vector<float>& x, const std::vector<float>& w) {
  std::array<int64_t, 3> I{1, 1, 1}, K{1, 1, 1}, O{1, 1, 1}, S{1, 1, 1}, P{0, 0, 0}, D{1, 1, 1};
  const size_t sp = c.in.size();
  for (size_t i = 0; i < sp; ++i) {
    const size_t j = 3 - sp + i;
    I[j] = c.in[i]; K[j] = c.kernel[i]; O[j] = out[i];
    S[j] = c.stride[i]; P[j] = c.padding[i]; D[j] = c.dilation[i];
  }
  const int64_t cin_g = c.cin / c.groups, cout_g = c.cout / c.groups;
  Naive r;
  r.grad_input.assign(static_cast<size_t>(c.n * c.cin * I[0] * I[1] * I[2]), 0.0);
  r.grad_weight.assign(static_cast<size_t>(c.cout * cin_g * K[0] * K[1] * K[2]), 0.0);
  r.grad_bias.assign(static_cast<size_t>(c.cout), 0.0);
  auto xi = [&](int64_t n, int64_t ch, int64_t d, int64_t h, int64_t v) {
    return static_cast<size_t>((((n * c.cin + ch) * I[0] + d) * I[1] + h) * I[2] + v);
  };
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.cout; ++co)
      for (int64_t od = 0; od < O[0]; ++od)
        for (int64_t oh = 0; oh < O[1]; ++oh)
          for (int64_t ow = 0; ow < O[2]; ++ow) {
            const double dy = go[static_cast<size_t>((((n * c.cout + co) * O[0] + od) * O[1] + oh) * O[2] + ow)];
            r.grad_bias[static_cast<size_t>(co)] += dy;
            for (int64_t cl = 0; cl < cin_g; ++cl)
              for (int64_t kd = 0; kd < K[0]; ++kd)
                for (int64_t kh = 0; kh < K[1]; ++kh)
                  for (int64_t kw = 0; kw < K[2]; ++kw) {
                    const int64_t id = od * S[0] - P[0] + kd * D[0];
                    const int64_t ih = oh * S[1] - P[1] + kh * D[1];
                    const int64_t iw = ow * S[2] - P[2] + kw * D[2];
                    if (id < 0 || id >= I[0] || ih < 0 || ih >= I[1] || iw < 0 || iw >= I[2]) continue;
                    const int64_t ci = (co / cout_g) * cin_g + cl;
                    const size_t wi = static_cast<size_t>((((co * cin_g + cl) * K[0] + kd) * K[1] + kh) * K[2] + kw);
                    r.grad_input[xi(n, ci, id, ih, iw)] += dy * w[wi];
                    r.grad_weight[wi] += dy * x[xi(n, ci, id, ih, iw)];
                  }
          }
  return r;
}

// Device buffer and tensor for one operand, released in reverse order by the
// unique_ptrs, with the deleter types CANN's documentation uses.
struct Operand {
  std::unique_ptr<void, aclError (*)(void*)> memory{nullptr, aclrtFree};
  std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> tensor{nullptr, aclDestroyTensor};
};

inline int make_operand(const std::vector<float>& host, const std::vector<int64_t>& shape, aclFormat format,
                        Operand& op) {
  const size_t bytes = host.size() * sizeof(float);
  void* device = nullptr;
  aclError ret = aclrtMalloc(&device, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  SAMPLE_CHECK(ret == ACL_SUCCESS, "aclrtMalloc failed: %d", ret);
  op.memory.reset(device);
  ret = aclrtMemcpy(device, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
  SAMPLE_CHECK(ret == ACL_SUCCESS, "aclrtMemcpy to device failed: %d", ret);
  // Contiguous strides, in elements.
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  op.tensor.reset(aclCreateTensor(shape.data(), shape.size(), aclDataType::ACL_FLOAT, strides.data(), 0, format,
                                  shape.data(), shape.size(), device));
  SAMPLE_CHECK(op.tensor != nullptr, "aclCreateTensor failed");
  return 0;
}

inline int fetch(const Operand& op, std::vector<float>& host) {
  const size_t bytes = host.size() * sizeof(float);
  const aclError ret = aclrtMemcpy(host.data(), bytes, op.memory.get(), bytes, ACL_MEMCPY_DEVICE_TO_HOST);
  SAMPLE_CHECK(ret == ACL_SUCCESS, "aclrtMemcpy to host failed: %d", ret);
  return 0;
}

inline int compare(const char* name, const std::vector<float>& got, const std::vector<double>& want) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    std::printf("%s[%zu] = %g\n", name, i, static_cast<double>(got[i]));
    if (static_cast<double>(got[i]) != want[i]) {
      if (bad++ < 10) std::printf("  MISMATCH: expected %g\n", want[i]);
    }
  }
  return bad;
}

inline int run_problem(const Config& c, aclrtStream stream) {
  // 1. Shapes. The output size follows the usual convolution formula.
  std::vector<int64_t> out;
  for (size_t i = 0; i < c.in.size(); ++i)
    out.push_back((c.in[i] + 2 * c.padding[i] - c.dilation[i] * (c.kernel[i] - 1) - 1) / c.stride[i] + 1);
  std::vector<int64_t> input_shape{c.n, c.cin}, weight_shape{c.cout, c.cin / c.groups}, go_shape{c.n, c.cout};
  input_shape.insert(input_shape.end(), c.in.begin(), c.in.end());
  weight_shape.insert(weight_shape.end(), c.kernel.begin(), c.kernel.end());
  go_shape.insert(go_shape.end(), out.begin(), out.end());
  const std::vector<int64_t> bias_shape{c.cout};

  // 2. Host data and device operands.
  const auto x = pattern(elements(input_shape), 7, 5, 2);
  const auto w = pattern(elements(weight_shape), 3, 4, 1);
  const auto go = pattern(elements(go_shape), 3, 7, 3);
  Operand grad_output, input, weight, grad_input, grad_weight, grad_bias;
  if (make_operand(go, go_shape, c.format, grad_output) || make_operand(x, input_shape, c.format, input) ||
      make_operand(w, weight_shape, c.format, weight) ||
      make_operand(std::vector<float>(x.size(), 0.f), input_shape, c.format, grad_input) ||
      make_operand(std::vector<float>(w.size(), 0.f), weight_shape, c.format, grad_weight) ||
      make_operand(std::vector<float>(static_cast<size_t>(c.cout), 0.f), bias_shape, ACL_FORMAT_ND, grad_bias))
    return 1;

  // 3. Parameters.
  using IntArray = std::unique_ptr<aclIntArray, aclnnStatus (*)(const aclIntArray*)>;
  IntArray bias_sizes(aclCreateIntArray(bias_shape.data(), bias_shape.size()), aclDestroyIntArray);
  IntArray stride(aclCreateIntArray(c.stride.data(), c.stride.size()), aclDestroyIntArray);
  IntArray padding(aclCreateIntArray(c.padding.data(), c.padding.size()), aclDestroyIntArray);
  IntArray dilation(aclCreateIntArray(c.dilation.data(), c.dilation.size()), aclDestroyIntArray);
  const std::vector<int64_t> zeros(c.in.size(), 0);
  IntArray output_padding(aclCreateIntArray(zeros.data(), zeros.size()), aclDestroyIntArray);
  const bool mask_values[3] = {true, true, true};
  std::unique_ptr<aclBoolArray, aclnnStatus (*)(const aclBoolArray*)> mask(aclCreateBoolArray(mask_values, 3),
                                                                            aclDestroyBoolArray);
  SAMPLE_CHECK(bias_sizes && stride && padding && dilation && output_padding && mask, "creating arrays failed");

  // 4. Phase one: validate, plan, size the workspace.
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  aclnnStatus st = aclnnConvolutionBackwardGetWorkspaceSize(
      grad_output.tensor.get(), input.tensor.get(), weight.tensor.get(), bias_sizes.get(), stride.get(),
      padding.get(), dilation.get(), false, output_padding.get(), static_cast<int>(c.groups), mask.get(),
      c.cube_math_type, grad_input.tensor.get(), grad_weight.tensor.get(), grad_bias.tensor.get(),
      &workspace_size, &executor);
  SAMPLE_CHECK(st == ACLNN_SUCCESS, "aclnnConvolutionBackwardGetWorkspaceSize failed: %d", st);

  // 5. Phase two: run on the stream with a workspace when one is needed.
  std::unique_ptr<void, aclError (*)(void*)> workspace(nullptr, aclrtFree);
  if (workspace_size > 0) {
    void* p = nullptr;
    const aclError ret = aclrtMalloc(&p, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST);
    SAMPLE_CHECK(ret == ACL_SUCCESS, "workspace aclrtMalloc failed: %d", ret);
    workspace.reset(p);
  }
  st = aclnnConvolutionBackward(workspace.get(), workspace_size, executor, stream);
  SAMPLE_CHECK(st == ACLNN_SUCCESS, "aclnnConvolutionBackward failed: %d", st);
  const aclError ret = aclrtSynchronizeStream(stream);
  SAMPLE_CHECK(ret == ACL_SUCCESS, "aclrtSynchronizeStream failed: %d", ret);

  // 6. Results back to the host, checked against the definition.
  std::vector<float> gi(x.size()), gw(w.size()), gb(static_cast<size_t>(c.cout));
  if (fetch(grad_input, gi) || fetch(grad_weight, gw) || fetch(grad_bias, gb)) return 1;
  const Naive want = naive_gradients(c, out, go, x, w);
  const int bad = compare("gradInput", gi, want.grad_input) + compare("gradWeight", gw, want.grad_weight) +
                  compare("gradBias", gb, want.grad_bias);
  if (bad != 0) {
    std::printf("FAIL %s: %d values differ from the definition\n", c.name, bad);
    return 1;
  }
  std::printf("PASS %s: gradInput, gradWeight and gradBias equal the definition exactly\n", c.name);
  return 0;
}

// The whole program: runtime up, one problem, runtime down.
inline int run(const Config& c) {
  const int32_t device = 0;
  aclError ret = aclInit(nullptr);
  SAMPLE_CHECK(ret == ACL_SUCCESS, "aclInit failed: %d", ret);
  ret = aclrtSetDevice(device);
  SAMPLE_CHECK(ret == ACL_SUCCESS, "aclrtSetDevice failed: %d", ret);
  aclrtStream stream = nullptr;
  ret = aclrtCreateStream(&stream);
  SAMPLE_CHECK(ret == ACL_SUCCESS, "aclrtCreateStream failed: %d", ret);

  const int result = run_problem(c, stream);  // releases its objects before the teardown below

  aclrtDestroyStream(stream);
  aclrtResetDevice(device);
  aclFinalize();
  return result;
}

}  // namespace sample
