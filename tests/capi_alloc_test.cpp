// The second phase of an operator allocates nothing: the executor is itself
// the stream's queue node. Counted by replacing the global operator new for
// this executable (per thread, so the stream's own thread does not count).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <new>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"

namespace {
thread_local long t_allocations = 0;
}

// Every replaceable form, all on malloc/free, so that no pair mixes this
// allocator with the default one (sanitizers check that pairing).
namespace {
void* counted(std::size_t n, std::size_t align) noexcept {
  ++t_allocations;
  if (n == 0) n = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}
void* counted_or_throw(std::size_t n, std::size_t align) {
  if (void* p = counted(n, align)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_or_throw(n, 0); }
void* operator new[](std::size_t n) { return counted_or_throw(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

TEST(CapiAllocation, EnqueueingAnOperatorAllocatesNothing) {
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  // gradBias of a [1, 2, 3] gradOutput with a 1-wide kernel: tiny but real.
  const int64_t go_dims[3] = {1, 2, 3}, x_dims[3] = {1, 1, 3}, w_dims[3] = {2, 1, 1}, b_dims[1] = {2};
  float go[6] = {1, 2, 3, 4, 5, 6}, x[3] = {1, 1, 1}, w[2] = {1, 1}, gi[3] = {}, gw[2] = {}, gb[2] = {};
  aclTensor* t_go = aclCreateTensor(go_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, go_dims, 3, go);
  aclTensor* t_x = aclCreateTensor(x_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, x_dims, 3, x);
  aclTensor* t_w = aclCreateTensor(w_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, w_dims, 3, w);
  aclTensor* t_gi = aclCreateTensor(x_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, x_dims, 3, gi);
  aclTensor* t_gw = aclCreateTensor(w_dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, w_dims, 3, gw);
  aclTensor* t_gb = aclCreateTensor(b_dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, b_dims, 1, gb);
  const int64_t one[1] = {1}, zero[1] = {0};
  aclIntArray* bias = aclCreateIntArray(b_dims, 1);
  aclIntArray* ones = aclCreateIntArray(one, 1);
  aclIntArray* zeros = aclCreateIntArray(zero, 1);
  const bool m[3] = {true, true, true};
  aclBoolArray* mask = aclCreateBoolArray(m, 3);
  uint64_t ws_size = 0;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(t_go, t_x, t_w, bias, ones, zeros, ones, false, zeros, 1, mask,
                                                     0, t_gi, t_gw, t_gb, &ws_size, &ex),
            ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  void* ws = nullptr;
  if (ws_size > 0) {
    ASSERT_EQ(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  }

  const long before = t_allocations;
  const aclnnStatus st = aclnnConvolutionBackward(ws, ws_size, ex, stream);
  const long during = t_allocations - before;
  ASSERT_EQ(st, ACLNN_SUCCESS);
  EXPECT_EQ(during, 0) << "aclnnConvolutionBackward allocated";
  ASSERT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  EXPECT_EQ(gb[0], 6.0f);   // 1 + 2 + 3
  EXPECT_EQ(gb[1], 15.0f);  // 4 + 5 + 6
  // And the counter counts: the test would see an allocation.
  const long probe = t_allocations;
  // A direct call: new-expressions may be elided by the optimizer.
  ::operator delete(::operator new(8));
  EXPECT_EQ(t_allocations, probe + 1);

  if (ws != nullptr) aclrtFree(ws);
  for (aclTensor* t : {t_go, t_x, t_w, t_gi, t_gw, t_gb}) aclDestroyTensor(t);
  aclDestroyIntArray(bias);
  aclDestroyIntArray(ones);
  aclDestroyIntArray(zeros);
  aclDestroyBoolArray(mask);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

}  // namespace
