// Large problems: index arithmetic is 64-bit throughout. One problem has
// tensors of more than 2^31 bytes (a long 1D signal, 1x1 kernel, one channel,
// gradInput and gradBias, so the work is light); it runs when MemAvailable allows and is skipped,
// saying why, otherwise. Size products that overflow int64 are rejected at
// planning, through the C++ API and the C API.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <string>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "convbwd/convbwd.hpp"

namespace convbwd {
namespace {

int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return -1;
}

// dy[i]: a period-5 pattern summing to zero, so every partial sum in any
// blocking or lane order stays tiny and fp32 sums are exact, plus a spike at
// the very end (beyond 2^31 bytes) that the sums must include.
float dy_at(int64_t i, int64_t len) { return static_cast<float>((i * 7) % 5 - 2) + (i == len - 1 ? 3.0f : 0.0f); }

// 540M fp32 elements: 2.16 GB per tensor, just past 2^31 bytes (2.147 GB).
constexpr int64_t kLength = 540'000'000;

TEST(ReliabilityLarge, TensorsBeyondTwoGigabytes) {
  if (const char* skip = std::getenv("CONVBWD_SKIP_LARGE_TESTS"); skip && *skip && *skip != '0')
    GTEST_SKIP() << "CONVBWD_SKIP_LARGE_TESTS is set (sanitizer builds set it: the run would take minutes there)";
  // gradInput (= w * dy, checked element by element) and gradBias (= sum dy);
  // gradWeight would only add a third 2 GB tensor and minutes of runtime.
  const std::string desc = "mb1ic1iw" + std::to_string(kLength) + "oc1kw1_mask101";
  Problem p = Problem::parse(desc).value();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const int64_t tensor_bytes = kLength * 4;
  ASSERT_GT(tensor_bytes, int64_t{1} << 31);
  const int64_t need = 2 * tensor_bytes + static_cast<int64_t>(plan->workspace_size());
  const int64_t avail = mem_available_bytes();
  if (avail < need + (int64_t{1} << 30))
    GTEST_SKIP() << desc << " needs " << need / (1 << 20) << " MiB (two 2.16 GB tensors + "
                 << plan->workspace_size() / (1 << 20) << " MiB workspace) plus 1 GiB spare; MemAvailable is "
                 << avail / (1 << 20) << " MiB";
  std::printf("running %s: tensors of %lld bytes, workspace %zu bytes (MemAvailable %lld MiB)\n", desc.c_str(),
              static_cast<long long>(tensor_bytes), plan->workspace_size(), static_cast<long long>(avail >> 20));

  std::unique_ptr<float[]> go(new float[kLength]), gi(new float[kLength]);
  const float w = 2.0f;  // input: not read, so not bound (gradWeight is not requested)
  float gb = -1;
  double want_sum = 0;
  for (int64_t i = 0; i < kLength; ++i) {
    go[i] = dy_at(i, kLength);
    gi[i] = std::numeric_limits<float>::quiet_NaN();
    want_sum += go[i];
  }
  std::unique_ptr<unsigned char[]> ws(new unsigned char[plan->workspace_size() + 1]);
  const Error e = plan->execute({go.get(), nullptr, &w, gi.get(), nullptr, &gb}, ws.get(), plan->workspace_size());
  ASSERT_FALSE(e) << e.message;
  // gradInput[i] = w * dy[i] exactly; sample across the whole length, the
  // 2^31-byte boundary and the end.
  const int64_t boundary = (int64_t{1} << 31) / 4;
  for (int64_t i : {int64_t{0}, int64_t{1}, boundary - 1, boundary, boundary + 1, kLength / 2, kLength - 2,
                    kLength - 1})
    ASSERT_EQ(gi[i], w * dy_at(i, kLength)) << "gradInput[" << i << "]";
  for (int64_t i = 0; i < kLength; i += 999'983) ASSERT_EQ(gi[i], w * dy_at(i, kLength)) << "gradInput[" << i << "]";
  // gradBias = sum dy: exact (see dy_at).
  EXPECT_EQ(gb, want_sum);
  EXPECT_NE(want_sum, 0.0);
}

void expect_rejected(const Problem& p, const std::string& what) {
  auto plan = Plan::create(p);
  ASSERT_FALSE(plan.ok()) << what << " was accepted";
  EXPECT_EQ(plan.error().status, Status::invalid_parameter) << what;
  EXPECT_FALSE(plan.error().message.empty()) << what;
  std::printf("%s: %s\n", what.c_str(), plan.error().message.c_str());
}

TEST(ReliabilityLarge, SizeProductsThatOverflowInt64AreRejectedAtPlanning) {
  const int64_t big = int64_t{1} << 32;
  Problem base = Problem::parse("mb2ic3ih8oc4kh3").value();
  {
    Problem p = base;  // elements of input: 2^32 * 3 * 2^32 * 8 > 2^63
    p.input.dims = {big, 3, big, 8};
    p.grad_output.dims = {big, 4, big - 2, 6};
    expect_rejected(p, "input elements beyond 2^63");
  }
  {
    Problem p = Problem::parse("mb1ic1iw8oc1kw1").value();  // a valid shape whose strides reach beyond 2^63 bytes
    p.grad_output.strides = {1, 1, int64_t{1} << 61};
    expect_rejected(p, "gradOutput strides reaching beyond 2^63 bytes");
  }
  {
    Problem p = Problem::parse("mb1ic1iw8oc1kw1").value();
    p.grad_input.dims = p.input.dims;
    p.grad_input.strides = {1, 1, std::numeric_limits<int64_t>::max() / 2};
    expect_rejected(p, "gradInput view reach overflowing int64");
  }
  {
    Problem p = Problem::parse("mb1ic1iw8oc1kw1").value();
    p.input.offset = std::numeric_limits<int64_t>::max() - 2;
    expect_rejected(p, "input offset near 2^63");
  }
  {
    Problem p = Problem::parse("mb1ic1iw8oc1kw1sw2_tr").value();  // transposed output size overflows
    p.stride = {std::numeric_limits<int64_t>::max() / 2};
    expect_rejected(p, "transposed output size overflowing int64");
  }
  {
    Problem p = Problem::parse("mb1ic1iw8oc1kw3").value();  // dilation * (k - 1) overflows
    p.dilation = {std::numeric_limits<int64_t>::max() / 2 + 1};
    expect_rejected(p, "dilated kernel span overflowing int64");
  }
  {
    Problem p = Problem::parse("mb1ic1iw8oc1kw1").value();  // padding sum overflows
    p.padding_before = {std::numeric_limits<int64_t>::max()};
    p.padding_after = {std::numeric_limits<int64_t>::max()};
    expect_rejected(p, "padding sum overflowing int64");
  }
  {
    Problem p = Problem::parse("mb1ic2iw8oc2kw1").value();  // channels * groups overflow
    p.groups = 65536;
    expect_rejected(p, "groups beyond the limit");
  }
}

// The same through the C API: an overflowing shape is 161002 with a message.
TEST(ReliabilityLarge, CApiRejectsOverflowingShapes) {
  const int64_t big = int64_t{1} << 40;
  const int64_t in_dims[3] = {big, big, 8}, w_dims[3] = {4, big, 1}, go_dims[3] = {big, 4, 8};
  const int64_t storage = 1;
  float data[1] = {0};
  aclTensor* in = aclCreateTensor(in_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, &storage, 1, data);
  aclTensor* w = aclCreateTensor(w_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, &storage, 1, data);
  aclTensor* go = aclCreateTensor(go_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, &storage, 1, data);
  aclTensor* gw = aclCreateTensor(w_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, &storage, 1, data);
  const int64_t one = 1, zero = 0;
  aclIntArray* s = aclCreateIntArray(&one, 1);
  aclIntArray* pad = aclCreateIntArray(&zero, 1);
  aclIntArray* d = aclCreateIntArray(&one, 1);
  aclIntArray* op = aclCreateIntArray(&zero, 1);
  const bool mask_v[3] = {false, true, false};
  aclBoolArray* mask = aclCreateBoolArray(mask_v, 3);
  uint64_t ws = 0;
  aclOpExecutor* exec = nullptr;
  const aclnnStatus st = aclnnConvolutionBackwardGetWorkspaceSize(go, in, w, nullptr, s, pad, d, false, op, 1, mask, 0,
                                                                  nullptr, gw, nullptr, &ws, &exec);
  EXPECT_EQ(st, ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()), "");
  EXPECT_EQ(exec, nullptr);
  for (aclTensor* t : {in, w, go, gw}) aclDestroyTensor(t);
  for (aclIntArray* a : {s, pad, d, op}) aclDestroyIntArray(a);
  aclDestroyBoolArray(mask);
}

}  // namespace
}  // namespace convbwd
