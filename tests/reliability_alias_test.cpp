// Aliasing (issue 18): every pair among the seven buffers of a call
// (gradOutput, input, weight, gradInput, gradWeight, gradBias, workspace),
// fully and partially overlapping. A pair with a buffer that execute writes
// (an output or the workspace) is refused with 161002 and a message naming
// both, and nothing is written; two inputs may share memory. Also the
// workspace's alignment, and the same refusals through the C API.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "convbwd/convbwd.hpp"

namespace convbwd {
namespace {

enum Slot { kGradOutput, kInput, kWeight, kGradInput, kGradWeight, kGradBias, kWorkspace, kSlots };
const char* const kName[kSlots] = {"gradOutput", "input", "weight", "gradInput", "gradWeight", "gradBias", "workspace"};
bool written(int s) { return s >= kGradInput; }

int64_t elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A problem with all three gradients whose plan needs a workspace (which
// implementation is chosen decides; look among layers the fast paths stage).
struct Setup {
  Problem problem;
  std::optional<Plan> plan;
  std::array<size_t, kSlots> bytes{};
};
std::optional<Setup> setup() {
  for (const char* d : {"mb2ic16ih12oc16kh3ph1", "mb2ic8ih16oc24kh3ph1", "mb2ic16ih32oc16kh3ph1",
                        "mb4ic30ih40oc64kh3ph1"}) {
    auto p = Problem::parse(d);
    if (!p) continue;
    auto plan = Plan::create(p.value());
    if (!plan || plan->workspace_size() == 0) continue;
    Setup s{p.value(), plan.value(), {}};
    const Problem& q = s.problem;
    s.bytes = {static_cast<size_t>(elements(q.grad_output.dims)) * 4, static_cast<size_t>(elements(q.input.dims)) * 4,
               static_cast<size_t>(elements(q.weight.dims)) * 4,      static_cast<size_t>(elements(q.input.dims)) * 4,
               static_cast<size_t>(elements(q.weight.dims)) * 4,      static_cast<size_t>(q.weight.dims[0]) * 4,
               plan->workspace_size()};
    return s;
  }
  return std::nullopt;
}

// One arena holding every buffer in a region of its own, regions far enough
// apart that a buffer moved onto another one's region meets only that one.
struct Arena {
  explicit Arena(const std::array<size_t, kSlots>& bytes) : bytes_(bytes) {
    for (size_t b : bytes) pitch_ = std::max(pitch_, b);
    pitch_ = (2 * pitch_ + 63) / 64 * 64;
    storage_.assign(pitch_ * kSlots + 64, 0);
    for (size_t i = 0; i < storage_.size(); ++i) storage_[i] = static_cast<unsigned char>(i * 7 + 1);
    base_ = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(storage_.data()) + 63) / 64 * 64);
    for (int s = 0; s < kSlots; ++s) at[s] = base_ + pitch_ * s;
  }
  // Moves buffer j onto buffer i: the same start, or its first bytes over
  // i's last ones (rounded down to 16 bytes, so the workspace stays aligned).
  void overlap(int i, int j, bool full) {
    const auto end = reinterpret_cast<uintptr_t>(at[i]) + bytes_[i];
    at[j] = full ? at[i] : reinterpret_cast<unsigned char*>((end - 1) / 16 * 16);
  }
  Buffers buffers() const {
    return {at[kGradOutput], at[kInput], at[kWeight], at[kGradInput], at[kGradWeight], at[kGradBias]};
  }
  std::vector<unsigned char> bytes() const { return storage_; }

  std::array<unsigned char*, kSlots> at{};

 private:
  std::array<size_t, kSlots> bytes_;
  size_t pitch_ = 0;
  std::vector<unsigned char> storage_;
  unsigned char* base_ = nullptr;
};

TEST(ReliabilityAlias, EveryPairFullAndPartial) {
  auto s = setup();
  if (!s) GTEST_SKIP() << "no candidate problem has a plan with a workspace";
  {
    Arena apart(s->bytes);
    EXPECT_FALSE(s->plan->execute(apart.buffers(), apart.at[kWorkspace], s->bytes[kWorkspace]))
        << "buffers apart must run";
  }
  int refused = 0;
  for (int i = 0; i < kSlots; ++i)
    for (int j = i + 1; j < kSlots; ++j)
      for (bool full : {true, false}) {
        SCOPED_TRACE(std::string(kName[j]) + (full ? " on " : " partly over ") + kName[i]);
        Arena arena(s->bytes);
        arena.overlap(i, j, full);
        const std::vector<unsigned char> before = arena.bytes();
        const Error e = s->plan->execute(arena.buffers(), arena.at[kWorkspace], s->bytes[kWorkspace]);
        if (!written(i) && !written(j)) {
          EXPECT_FALSE(e) << "two inputs may share memory: " << e.message;
          continue;
        }
        ASSERT_TRUE(e) << "accepted";
        ++refused;
        EXPECT_EQ(e.status, Status::invalid_parameter);
        EXPECT_NE(e.message.find(kName[i]), std::string::npos) << e.message;
        EXPECT_NE(e.message.find(kName[j]), std::string::npos) << e.message;
        EXPECT_NE(e.message.find("overlaps"), std::string::npos) << e.message;
        EXPECT_TRUE(arena.bytes() == before) << "a refused call wrote memory";
        // check() gives the same answer without running anything.
        EXPECT_EQ(s->plan->check(arena.buffers(), arena.at[kWorkspace], s->bytes[kWorkspace]).message, e.message);
      }
  EXPECT_EQ(refused, 2 * (21 - 3));  // 21 pairs, 3 of them input-input
}

// Issue 18, item 6: a workspace at base+1 was used for float loads and
// stores. It is refused, with the alignment asked for; nothing is written.
TEST(ReliabilityAlias, MisalignedWorkspaceIsRefused) {
  auto s = setup();
  if (!s) GTEST_SKIP() << "no candidate problem has a plan with a workspace";
  Arena arena(s->bytes);
  const std::vector<unsigned char> before = arena.bytes();
  for (size_t shift : {size_t{1}, size_t{4}, size_t{8}}) {
    const Error e = s->plan->execute(arena.buffers(), arena.at[kWorkspace] + shift, s->bytes[kWorkspace]);
    ASSERT_TRUE(e) << shift;
    EXPECT_EQ(e.status, Status::invalid_parameter);
    EXPECT_NE(e.message.find(std::to_string(kWorkspaceAlignment) + "-byte aligned"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(std::to_string(shift) + " bytes past"), std::string::npos) << e.message;
  }
  EXPECT_TRUE(arena.bytes() == before);
  EXPECT_FALSE(s->plan->execute(arena.buffers(), arena.at[kWorkspace] + kWorkspaceAlignment, s->bytes[kWorkspace]));
}

// The C API refuses at aclnnConvolutionBackward (not later on the stream),
// so the status is the call's and the executor stays the caller's.
struct CCall {
  std::vector<aclTensor*> tensors;
  aclIntArray *bias = nullptr, *stride = nullptr, *pad = nullptr, *dil = nullptr, *outpad = nullptr;
  aclBoolArray* mask = nullptr;
  aclOpExecutor* executor = nullptr;
  uint64_t ws = 0;
  ~CCall() {
    for (aclTensor* t : tensors) aclDestroyTensor(t);
    aclDestroyIntArray(bias), aclDestroyIntArray(stride), aclDestroyIntArray(pad), aclDestroyIntArray(dil),
        aclDestroyIntArray(outpad), aclDestroyBoolArray(mask);
    if (executor) aclDestroyAclOpExecutor(executor);
  }
};

aclTensor* tensor(const std::vector<int64_t>& dims, void* data, const std::vector<int64_t>& storage) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return aclCreateTensor(dims.data(), dims.size(), ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, storage.data(),
                         storage.size(), data);
}

aclnnStatus prepare(CCall& c, const Setup& s, const Arena& a, const std::vector<int64_t>& go_storage = {}) {
  const Problem& p = s.problem;
  auto st = [](const std::vector<int64_t>& d) { return std::vector<int64_t>{elements(d)}; };
  const std::vector<int64_t> bias_dims = {p.weight.dims[0]};
  c.tensors = {tensor(p.grad_output.dims, a.at[kGradOutput], go_storage.empty() ? st(p.grad_output.dims) : go_storage),
               tensor(p.input.dims, a.at[kInput], st(p.input.dims)),
               tensor(p.weight.dims, a.at[kWeight], st(p.weight.dims)),
               tensor(p.input.dims, a.at[kGradInput], st(p.input.dims)),
               tensor(p.weight.dims, a.at[kGradWeight], st(p.weight.dims)),
               tensor(bias_dims, a.at[kGradBias], bias_dims)};
  const int64_t one[2] = {1, 1};
  const int64_t pads[2] = {p.padding_before[0], p.padding_before[1]};
  const int64_t zero[2] = {0, 0};
  const bool all[3] = {true, true, true};
  c.bias = aclCreateIntArray(bias_dims.data(), 1);
  c.stride = aclCreateIntArray(one, 2);
  c.pad = aclCreateIntArray(pads, 2);
  c.dil = aclCreateIntArray(one, 2);
  c.outpad = aclCreateIntArray(zero, 2);
  c.mask = aclCreateBoolArray(all, 3);
  return aclnnConvolutionBackwardGetWorkspaceSize(c.tensors[0], c.tensors[1], c.tensors[2], c.bias, c.stride, c.pad,
                                                  c.dil, false, c.outpad, 1, c.mask, 0, c.tensors[3], c.tensors[4],
                                                  c.tensors[5], &c.ws, &c.executor);
}

TEST(ReliabilityAlias, CApiRefusesAWorkspaceOverAnInputOrMisaligned) {
  auto s = setup();
  if (!s) GTEST_SKIP() << "no candidate problem has a plan with a workspace";
  ASSERT_EQ(s->problem.stride, (std::vector<int64_t>{1, 1}));
  for (int input : {int{kGradOutput}, int{kInput}, int{kWeight}, -1}) {
    SCOPED_TRACE(input < 0 ? "misaligned" : kName[input]);
    Arena arena(s->bytes);
    CCall c;
    ASSERT_EQ(prepare(c, *s, arena), ACLNN_SUCCESS) << aclGetRecentErrMsg();
    ASSERT_EQ(c.ws, s->bytes[kWorkspace]);
    unsigned char* ws = input < 0 ? arena.at[kWorkspace] + 1 : arena.at[input];
    const std::vector<unsigned char> before = arena.bytes();
    EXPECT_EQ(aclnnConvolutionBackward(ws, c.ws, c.executor, nullptr), ACLNN_ERR_PARAM_INVALID);
    const std::string msg = aclGetRecentErrMsg();
    EXPECT_NE(msg.find(input < 0 ? "aligned" : kName[input]), std::string::npos) << msg;
    EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
    EXPECT_TRUE(arena.bytes() == before) << "a refused call wrote memory";
    // Still the caller's: it runs with a proper workspace.
    EXPECT_EQ(aclnnConvolutionBackward(arena.at[kWorkspace], c.ws, c.executor, nullptr), ACLNN_SUCCESS);
    c.executor = nullptr;
    EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS) << aclGetRecentErrMsg();
  }
}

// Issue 18, item 5: storage dims whose product overflows before a 0
// ([2^40, 2^40, 0]: no elements) were read as "too large to count", so any
// view was accepted over empty storage; [0, 2^40, 2^40] was refused.
TEST(ReliabilityAlias, StorageWithAZeroDimIsEmptyWhateverComesBefore) {
  auto s = setup();
  if (!s) GTEST_SKIP() << "no candidate problem has a plan with a workspace";
  const int64_t big = int64_t{1} << 40;
  for (const std::vector<int64_t>& storage : {std::vector<int64_t>{big, big, 0}, std::vector<int64_t>{0, big, big}}) {
    Arena arena(s->bytes);
    CCall c;
    EXPECT_EQ(prepare(c, *s, arena, storage), ACLNN_ERR_PARAM_INVALID);
    const std::string msg = aclGetRecentErrMsg();
    EXPECT_NE(msg.find("gradOutput"), std::string::npos) << msg;
    EXPECT_NE(msg.find("storage of 0 elements"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace convbwd
