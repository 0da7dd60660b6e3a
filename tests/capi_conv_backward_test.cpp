// aclnnConvolutionBackward through the C API: every status path, the
// parameter mapping (dtype, format, padding, views), stream semantics, and
// agreement with the C++ API bit for bit.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "convbwd/convbwd.hpp"
#include "numeric/float_formats.hpp"
#include "numeric/fp8.hpp"

namespace {

using convbwd::DataType;
using convbwd::Problem;
using convbwd::TensorDesc;

enum class Layout { contiguous, channels_last, offset_in_larger_storage };

std::string recent() { return aclGetRecentErrMsg(); }

aclDataType to_acl(DataType t) {
  switch (t) {
    case DataType::f32: return ACL_FLOAT;
    case DataType::f16: return ACL_FLOAT16;
    case DataType::bf16: return ACL_BF16;
    case DataType::hif8: return ACL_HIFLOAT8;
    case DataType::f8e4m3: return ACL_FLOAT8_E4M3FN;
  }
  return ACL_DT_UNDEFINED;
}

aclFormat format_for_rank(size_t rank) {
  return rank == 3 ? ACL_FORMAT_NCL : rank == 4 ? ACL_FORMAT_NCHW : rank == 5 ? ACL_FORMAT_NCDHW : ACL_FORMAT_ND;
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Sets the view of `d` (whose dims are set) for a layout; returns the number
// of elements its storage needs.
int64_t apply_layout(TensorDesc& d, Layout layout) {
  const size_t r = d.dims.size();
  d.strides.assign(r, 1);
  d.offset = 0;
  if (layout == Layout::channels_last && r >= 3) {
    // Memory order N, spatial..., C.
    int64_t s = 1;
    d.strides[1] = s;
    s *= d.dims[1];
    for (size_t i = r; i-- > 2;) {
      d.strides[i] = s;
      s *= d.dims[i];
    }
    d.strides[0] = s;
    return count(d.dims);
  }
  for (size_t i = r; i-- > 1;) d.strides[i - 1] = d.strides[i] * d.dims[i];
  if (layout == Layout::offset_in_larger_storage) {
    d.offset = 5;
    return count(d.dims) + 9;
  }
  return count(d.dims);
}

// Small integers in [-3, 3]: every sum is exact in fp32, so any correct
// order of summation gives the same bits.
void store(std::vector<unsigned char>& bytes, DataType t, int64_t index, double v) {
  const size_t at = static_cast<size_t>(index) * convbwd::size_of(t);
  if (t == DataType::f32) {
    const float f = static_cast<float>(v);
    std::memcpy(&bytes[at], &f, 4);
  } else if (t == DataType::hif8) {
    bytes[at] = convbwd::detail::double_to_hif8(v);
  } else if (t == DataType::f8e4m3) {
    bytes[at] = convbwd::detail::double_to_e4m3fn(v);
  } else {
    const uint16_t h = t == DataType::f16 ? convbwd::detail::float_to_f16(static_cast<float>(v))
                                          : convbwd::detail::float_to_bf16(static_cast<float>(v));
    std::memcpy(&bytes[at], &h, 2);
  }
}

double load(const std::vector<unsigned char>& bytes, DataType t, int64_t index) {
  const size_t at = static_cast<size_t>(index) * convbwd::size_of(t);
  if (t == DataType::f32) {
    float f;
    std::memcpy(&f, &bytes[at], 4);
    return f;
  }
  if (t == DataType::hif8) return convbwd::detail::hif8_to_float(bytes[at]);
  if (t == DataType::f8e4m3) return convbwd::detail::e4m3fn_to_float(bytes[at]);
  uint16_t h;
  std::memcpy(&h, &bytes[at], 2);
  return t == DataType::f16 ? convbwd::detail::f16_to_float(h) : convbwd::detail::bf16_to_float(h);
}

// Storage index of row-major view position i.
int64_t storage_index(const TensorDesc& d, int64_t i) {
  int64_t at = d.offset;
  for (size_t k = d.dims.size(); k-- > 0;) {
    at += (i % d.dims[k]) * d.strides[k];
    i /= d.dims[k];
  }
  return at;
}

// One operand: its view, its storage in aclrtMalloc memory, and its tensor.
struct Operand {
  TensorDesc desc;
  std::vector<int64_t> storage_dims;
  std::unique_ptr<void, aclError (*)(void*)> mem{nullptr, aclrtFree};
  std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> tensor{nullptr, aclDestroyTensor};
  size_t bytes = 0;

  void make(const TensorDesc& view, Layout layout, const std::vector<unsigned char>* init, uint64_t seed) {
    desc = view;
    const int64_t elements = apply_layout(desc, layout);
    desc.storage_elements = elements;
    storage_dims = {elements};
    bytes = static_cast<size_t>(elements) * convbwd::size_of(desc.dtype);
    void* p = nullptr;
    ASSERT_EQ(aclrtMalloc(&p, bytes == 0 ? 1 : bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    mem.reset(p);
    std::vector<unsigned char> host(bytes, 0xab);  // a canary where the view does not write
    if (init != nullptr) {
      host = *init;
    } else if (seed != 0) {
      for (int64_t i = 0; i < count(desc.dims); ++i)
        store(host, desc.dtype, storage_index(desc, i),
              static_cast<double>(static_cast<int64_t>((static_cast<uint64_t>(i) * 2654435761u + seed) % 7) - 3));
    }
    ASSERT_EQ(aclrtMemcpy(p, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    tensor.reset(aclCreateTensor(desc.dims.data(), desc.dims.size(), to_acl(desc.dtype), desc.strides.data(),
                                 desc.offset, format_for_rank(desc.dims.size()), storage_dims.data(),
                                 storage_dims.size(), p));
    ASSERT_NE(tensor, nullptr);
  }
  std::vector<unsigned char> contents() const {
    std::vector<unsigned char> host(bytes);
    EXPECT_EQ(aclrtMemcpy(host.data(), bytes, mem.get(), bytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return host;
  }
  // The view's values in row-major order.
  std::vector<double> values() const {
    const auto host = contents();
    std::vector<double> v;
    for (int64_t i = 0; i < count(desc.dims); ++i) v.push_back(load(host, desc.dtype, storage_index(desc, i)));
    return v;
  }
};

using IntArray = std::unique_ptr<aclIntArray, aclnnStatus (*)(const aclIntArray*)>;
using BoolArray = std::unique_ptr<aclBoolArray, aclnnStatus (*)(const aclBoolArray*)>;

IntArray int_array(const std::vector<int64_t>& v) {
  return IntArray(aclCreateIntArray(v.data(), v.size()), aclDestroyIntArray);
}

// A Problem realized through the C API. `args` holds every argument of phase
// one; tests change single arguments to probe each check.
struct Case {
  Problem problem;
  Operand go, x, w, gi, gw, gb;
  IntArray bias_sizes{nullptr, aclDestroyIntArray}, stride{nullptr, aclDestroyIntArray},
      padding{nullptr, aclDestroyIntArray}, dilation{nullptr, aclDestroyIntArray},
      output_padding{nullptr, aclDestroyIntArray};
  BoolArray mask{nullptr, aclDestroyBoolArray};
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  std::unique_ptr<void, aclError (*)(void*)> workspace{nullptr, aclrtFree};

  struct Args {
    const aclTensor *grad_output, *input, *weight;
    const aclIntArray *bias_sizes, *stride, *padding, *dilation;
    bool transposed;
    const aclIntArray* output_padding;
    int groups;
    const aclBoolArray* mask;
    int8_t cube_math_type;
    aclTensor *grad_input, *grad_weight, *grad_bias;
    uint64_t* workspace_size;
    aclOpExecutor** executor;
  } args{};

  explicit Case(const std::string& descriptor, Layout in = Layout::contiguous, Layout out = Layout::contiguous) {
    auto p = Problem::parse(descriptor);
    EXPECT_TRUE(p) << p.error().message;
    if (p) init(p.value(), in, out);
  }
  Case(const Problem& p, Layout in, Layout out) { init(p, in, out); }

  void init(const Problem& p, Layout in, Layout out) {
    problem = p;
    go.make(p.grad_output, in, nullptr, 11);
    x.make(p.input, in, nullptr, 22);
    w.make(p.weight, in, nullptr, 33);
    TensorDesc d;
    const convbwd::Gradient which[3] = {convbwd::Gradient::input, convbwd::Gradient::weight, convbwd::Gradient::bias};
    Operand* outs[3] = {&gi, &gw, &gb};
    for (int i = 0; i < 3; ++i) {
      d.dims = p.gradient_dims(which[i]);
      d.dtype = p.gradient_dtype(which[i]);
      outs[i]->make(d, i == 2 ? Layout::contiguous : out, nullptr, 0);
    }
    problem.grad_output = go.desc;
    problem.input = x.desc;
    problem.weight = w.desc;
    problem.grad_input = gi.desc;
    problem.grad_weight = gw.desc;
    problem.grad_bias = gb.desc;
    bias_sizes = int_array(p.bias_sizes.value_or(std::vector<int64_t>{}));
    stride = int_array(p.stride);
    dilation = int_array(p.dilation);
    output_padding = int_array(p.output_padding.empty() ? std::vector<int64_t>(p.stride.size(), 0) : p.output_padding);
    const auto& pb = p.padding_before;
    const auto& pa = p.padding_after.empty() ? pb : p.padding_after;
    if (pa == pb) {
      padding = int_array(pb);
    } else {
      EXPECT_EQ(pb.size(), 2u) << "asymmetric padding has a C form only in 2D";
      padding = int_array({pb[0], pa[0], pb[1], pa[1]});
    }
    const bool m[3] = {p.output_mask[0], p.output_mask[1], p.output_mask[2]};
    mask.reset(aclCreateBoolArray(m, 3));
    args = Args{go.tensor.get(), x.tensor.get(), w.tensor.get(), bias_sizes.get(), stride.get(), padding.get(),
                dilation.get(), p.transposed, output_padding.get(), static_cast<int>(p.groups), mask.get(),
                static_cast<int8_t>(p.math_mode), gi.tensor.get(), gw.tensor.get(), gb.tensor.get(),
                &workspace_size, &executor};
  }

  aclnnStatus plan() {
    return aclnnConvolutionBackwardGetWorkspaceSize(
        args.grad_output, args.input, args.weight, args.bias_sizes, args.stride, args.padding, args.dilation,
        args.transposed, args.output_padding, args.groups, args.mask, args.cube_math_type, args.grad_input,
        args.grad_weight, args.grad_bias, args.workspace_size, args.executor);
  }

  void* allocate_workspace() {
    if (workspace_size > 0 && !workspace) {
      void* p = nullptr;
      EXPECT_EQ(aclrtMalloc(&p, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
      workspace.reset(p);
    }
    return workspace.get();
  }

  // Both phases and a synchronize.
  ::testing::AssertionResult run(aclrtStream stream = nullptr) {
    if (aclnnStatus s = plan()) return ::testing::AssertionFailure() << "phase one: " << s << " " << recent();
    if (aclnnStatus s = aclnnConvolutionBackward(allocate_workspace(), workspace_size, executor, stream))
      return ::testing::AssertionFailure() << "phase two: " << s << " " << recent();
    if (aclError e = aclrtSynchronizeStream(stream))
      return ::testing::AssertionFailure() << "synchronize: " << e << " " << recent();
    return ::testing::AssertionSuccess();
  }

  // The same problem through the C++ API on copies of the same storage.
  // Returns the three output storages.
  std::vector<std::vector<unsigned char>> run_cpp() const {
    auto plan = convbwd::Plan::create(problem);
    EXPECT_TRUE(plan) << plan.error().message;
    if (!plan) return {};
    auto a = go.contents(), b = x.contents(), c = w.contents();
    std::vector<std::vector<unsigned char>> outs = {std::vector<unsigned char>(gi.bytes, 0xab),
                                                    std::vector<unsigned char>(gw.bytes, 0xab),
                                                    std::vector<unsigned char>(gb.bytes, 0xab)};
    std::vector<unsigned char> ws(plan->workspace_size() + 64);
    void* aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
    convbwd::Buffers bufs{a.data(), b.data(), c.data(), outs[0].data(), outs[1].data(), outs[2].data()};
    const convbwd::Error e = plan->execute(bufs, aligned, plan->workspace_size());
    EXPECT_FALSE(e) << e.message;
    return outs;
  }
};

// ---- success, and the C++ API bit for bit ------------------------------------------
class CapiMatchesCpp : public ::testing::TestWithParam<const char*> {};

TEST_P(CapiMatchesCpp, BitForBit) {
  Case c(GetParam());
  ASSERT_TRUE(c.run()) << GetParam();
  const auto cpp = c.run_cpp();
  ASSERT_EQ(cpp.size(), 3u);
  EXPECT_EQ(c.gi.contents(), cpp[0]) << "gradInput differs for " << GetParam();
  EXPECT_EQ(c.gw.contents(), cpp[1]) << "gradWeight differs for " << GetParam();
  EXPECT_EQ(c.gb.contents(), cpp[2]) << "gradBias differs for " << GetParam();
  // And the requested outputs were written (canaries alone would also "match").
  const Operand* outs[3] = {&c.gi, &c.gw, &c.gb};
  for (int i = 0; i < 3; ++i) {
    if (c.problem.output_mask[static_cast<size_t>(i)]) {
      EXPECT_NE(std::vector<unsigned char>(outs[i]->bytes, 0xab), outs[i]->contents()) << "output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Problems, CapiMatchesCpp,
    ::testing::Values("mb2ic3ih7iw6oc4kh3kw2sh2ph1", "mb2g2ic4iw9oc6kw3sw2pw1", "mb1ic2id4ih4iw5oc3kd2kh2kw3pd1",
                      "mb2ic4ih5iw5oc2kh3kw3ph1pw1math1", "mb2ic4ih5iw5oc2kh3kw3ph1pw1math3",
                      "mb2ic4ih5iw5oc2kh3kw3ph1pw1math2", "mb2ic4ih5iw5oc2kh3kw3ph1pw1_dtbf16_math2",
                      "tr_mb2ic3ih5iw4oc2kh3kw3sh2sw2ph1pw1",
                      "mb2ic3ih6iw6oc4kh3kw3dh1dw1_dtbf16", "mb2ic3ih6iw6oc4kh3kw3sh2sw2_dtf16",
                      "mb2ic4ih6iw6oc4kh3kw3ph1pw1mask011", "mb2ic4ih6iw6oc4kh3kw3ph1pw1mask100",
                      "tr_mb2ic4ih5iw5oc3kh3kw3sh2sw2mask100_dthif8", "tr_mb2ic4ih5iw5oc3kh3kw3ph1pw1mask101_dtf8e4m3"));

TEST(CapiConvBackward, AsymmetricFourValuePaddingIn2d) {
  auto p = Problem::parse("mb2ic3ih7iw6oc4kh3kw3");
  ASSERT_TRUE(p);
  Problem q = p.value();
  q.padding_before = {2, 0};
  q.padding_after = {1, 1};  // C form: top 2, bottom 1, left 0, right 1
  q.grad_output.dims = {2, 4, (7 + 3 - 3) / 1 + 1, (6 + 1 - 3) / 1 + 1};
  Case c(q, Layout::contiguous, Layout::contiguous);
  uint64_t n = 0;
  ASSERT_EQ(aclGetIntArraySize(c.padding.get(), &n), ACLNN_SUCCESS);
  ASSERT_EQ(n, 4u);
  ASSERT_TRUE(c.run());
  const auto cpp = c.run_cpp();
  ASSERT_EQ(cpp.size(), 3u);
  EXPECT_EQ(c.gi.contents(), cpp[0]);
  EXPECT_EQ(c.gw.contents(), cpp[1]);
}

TEST(CapiConvBackward, FourValuePaddingEqualToSymmetricGivesTheSameBits) {
  Case sym("mb2ic3ih7iw6oc4kh3kw3ph1pw2");
  Case four("mb2ic3ih7iw6oc4kh3kw3ph1pw2");
  four.padding = int_array({1, 1, 2, 2});
  four.args.padding = four.padding.get();
  ASSERT_TRUE(sym.run());
  ASSERT_TRUE(four.run());
  EXPECT_EQ(sym.gi.contents(), four.gi.contents());
  EXPECT_EQ(sym.gw.contents(), four.gw.contents());
}

// ---- strided views -----------------------------------------------------------------
class CapiLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(CapiLayouts, SameNumbersAsContiguous) {
  // The bf16 1x1 layers: with an offset, the planar weight gradient reads
  // dy's pair words in place at an odd element offset; channels-last, the
  // gather path takes them.
  for (const char* d : {"mb2ic3ih7iw6oc4kh3kw2sh2ph1", "mb2ic4iw9oc6kw3sw2pw1", "mb1ic2id4ih4iw5oc3kd2kh2kw3",
                        "mb3ic40ih8oc13kh1_dtbf16", "mb2ic18ih16iw18oc20kh1_dtbf16"}) {
    Case plain(d);
    Case strided(d, GetParam(), GetParam());
    ASSERT_TRUE(plain.run()) << d;
    ASSERT_TRUE(strided.run()) << d;
    EXPECT_EQ(plain.gi.values(), strided.gi.values()) << d;
    EXPECT_EQ(plain.gw.values(), strided.gw.values()) << d;
    EXPECT_EQ(plain.gb.values(), strided.gb.values()) << d;
    // And the C++ API agrees on the strided views, gaps included.
    const auto cpp = strided.run_cpp();
    ASSERT_EQ(cpp.size(), 3u);
    EXPECT_EQ(strided.gi.contents(), cpp[0]) << d;
    EXPECT_EQ(strided.gw.contents(), cpp[1]) << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Views, CapiLayouts, ::testing::Values(Layout::channels_last, Layout::offset_in_larger_storage));

TEST(CapiConvBackward, ViewOutsideItsStorageIsInvalid) {
  Case c("mb2ic3ih7iw6oc4kh3kw2");
  // The same view over a storage one element too small.
  const std::vector<int64_t> storage = {count(c.x.desc.dims) - 1};
  std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> t(
      aclCreateTensor(c.x.desc.dims.data(), 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, storage.data(), 1,
                      c.x.mem.get()),
      aclDestroyTensor);
  c.args.input = t.get();
  EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(recent().find("storage"), std::string::npos) << recent();
  // An offset that pushes the view past the end.
  const std::vector<int64_t> exact = {count(c.x.desc.dims)};
  t.reset(aclCreateTensor(c.x.desc.dims.data(), 4, ACL_FLOAT, nullptr, 1, ACL_FORMAT_NCHW, exact.data(), 1,
                          c.x.mem.get()));
  c.args.input = t.get();
  EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
  // Negative storage dims.
  const std::vector<int64_t> negative = {-4, 5};
  t.reset(aclCreateTensor(c.x.desc.dims.data(), 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, negative.data(), 2,
                          c.x.mem.get()));
  c.args.input = t.get();
  EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(recent().find("-4"), std::string::npos) << recent();
}

// ---- 161001: null pointers ------------------------------------------------------------
TEST(CapiConvBackward, EachNullRequiredArgumentIsNullptr) {
  struct Probe {
    const char* name;
    void (*clear)(Case::Args&);
  };
  const Probe probes[] = {
      {"gradOutput", [](Case::Args& a) { a.grad_output = nullptr; }},
      {"input", [](Case::Args& a) { a.input = nullptr; }},
      {"weight", [](Case::Args& a) { a.weight = nullptr; }},
      {"stride", [](Case::Args& a) { a.stride = nullptr; }},
      {"padding", [](Case::Args& a) { a.padding = nullptr; }},
      {"dilation", [](Case::Args& a) { a.dilation = nullptr; }},
      {"outputPadding", [](Case::Args& a) { a.output_padding = nullptr; }},
      {"outputMask", [](Case::Args& a) { a.mask = nullptr; }},
      {"gradInput", [](Case::Args& a) { a.grad_input = nullptr; }},
      {"gradWeight", [](Case::Args& a) { a.grad_weight = nullptr; }},
      {"gradBias", [](Case::Args& a) { a.grad_bias = nullptr; }},
      {"biasSizes", [](Case::Args& a) { a.bias_sizes = nullptr; }},
      {"workspaceSize", [](Case::Args& a) { a.workspace_size = nullptr; }},
      {"executor", [](Case::Args& a) { a.executor = nullptr; }},
  };
  for (const Probe& p : probes) {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    p.clear(c.args);
    c.executor = reinterpret_cast<aclOpExecutor*>(0x1);  // must stay untouched
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_NULLPTR) << p.name;
    EXPECT_NE(recent().find(p.name), std::string::npos) << p.name << ": " << recent();
    EXPECT_EQ(c.executor, reinterpret_cast<aclOpExecutor*>(0x1)) << p.name;
  }
}

TEST(CapiConvBackward, NullOutputsThatAreNotRequestedAreFine) {
  Case c("mb2ic3ih5iw5oc4kh3kw3mask010");
  c.args.grad_input = nullptr;
  c.args.grad_bias = nullptr;
  c.args.bias_sizes = nullptr;
  const auto before_gi = c.gi.contents();
  ASSERT_TRUE(c.run());
  EXPECT_EQ(c.gi.contents(), before_gi) << "an unrequested output is not touched";
  EXPECT_NE(c.gw.contents(), std::vector<unsigned char>(c.gw.bytes, 0xab));
}

TEST(CapiConvBackward, NullsInEveryPositionAtOnceDoNotCrash) {
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                     false, nullptr, 1, nullptr, 0, nullptr, nullptr, nullptr,
                                                     nullptr, nullptr),
            ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                     true, nullptr, -5, nullptr, 99, nullptr, nullptr, nullptr, &ws,
                                                     &ex),
            ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(ex, nullptr);
  EXPECT_EQ(aclnnConvolutionBackward(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_NE(recent().find("executor"), std::string::npos);
}

// ---- 161002: invalid values -------------------------------------------------------------
TEST(CapiConvBackward, OutputMaskOfWrongLength) {
  for (uint64_t n : {0u, 2u, 4u}) {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    const bool m[4] = {true, true, true, true};
    BoolArray mask(aclCreateBoolArray(m, n), aclDestroyBoolArray);
    c.args.mask = mask.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID) << n;
    EXPECT_NE(recent().find("outputMask"), std::string::npos) << recent();
  }
}

TEST(CapiConvBackward, UnknownOrUnsupportedDataTypes) {
  for (int dt : {-1, 2, 3, 9, 11, 12, 13, 25, 35, 37, 99, -100, 0x7fffffff}) {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> t(
        aclCreateTensor(c.w.desc.dims.data(), 4, static_cast<aclDataType>(dt), nullptr, 0, ACL_FORMAT_NCHW,
                        c.w.storage_dims.data(), 1, c.w.mem.get()),
        aclDestroyTensor);
    c.args.weight = t.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID) << dt;
    EXPECT_NE(recent().find("weight"), std::string::npos) << recent();
    EXPECT_NE(recent().find("(" + std::to_string(dt) + ")"), std::string::npos) << recent();
  }
}

TEST(CapiConvBackward, UnknownOrUnsupportedFormats) {
  for (int f : {-1, 1, 3, 4, 16, 27, 29, 33, 35, 46, 48, 1000, -77}) {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> t(
        aclCreateTensor(c.go.desc.dims.data(), 4, ACL_FLOAT, nullptr, 0, static_cast<aclFormat>(f),
                        c.go.storage_dims.data(), 1, c.go.mem.get()),
        aclDestroyTensor);
    c.args.grad_output = t.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID) << f;
    EXPECT_NE(recent().find("gradOutput format"), std::string::npos) << recent();
    EXPECT_NE(recent().find("(" + std::to_string(f) + ")"), std::string::npos) << recent();
  }
}

TEST(CapiConvBackward, FormatMustAgreeWithRankUnlessNd) {
  for (aclFormat f : {ACL_FORMAT_NCL, ACL_FORMAT_NCDHW}) {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> t(
        aclCreateTensor(c.x.desc.dims.data(), 4, ACL_FLOAT, nullptr, 0, f, c.x.storage_dims.data(), 1,
                        c.x.mem.get()),
        aclDestroyTensor);
    c.args.input = t.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID) << f;
    EXPECT_NE(recent().find("rank"), std::string::npos) << recent();
  }
  // ND fits every rank (as CANN's samples use it for 1D and 3D tensors).
  Case c("mb2ic3ih5iw5oc4kh3kw3");
  std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> t(
      aclCreateTensor(c.x.desc.dims.data(), 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, c.x.storage_dims.data(), 1,
                      c.x.mem.get()),
      aclDestroyTensor);
  c.args.input = t.get();
  EXPECT_TRUE(c.run());
}

TEST(CapiConvBackward, MismatchedShapes) {
  {
    Case c("mb2ic3ih5iw5oc4kh3kw3");  // gradOutput is [2,4,3,3]
    Case other("mb2ic3ih6iw5oc4kh3kw3");  // gradOutput [2,4,4,3]
    c.args.grad_output = other.go.tensor.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
  }
  {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    Case other("mb2ic3ih5iw5oc4kh3kw3id3", Layout::contiguous);  // rank 5
    c.args.weight = other.w.tensor.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
  }
  {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    const std::vector<int64_t> s = {1, 1, 1};  // three strides for a 2D problem
    IntArray a = int_array(s);
    c.args.stride = a.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(recent().find("stride"), std::string::npos) << recent();
  }
  {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    IntArray a = int_array({1, 1, 1});  // neither 2 nor 4 values
    c.args.padding = a.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(recent().find("padding"), std::string::npos) << recent();
  }
  {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    c.args.groups = 2;  // 3 input channels do not split in 2
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
    c.args.groups = 0;
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
  }
  {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    IntArray a = int_array({5});
    c.args.bias_sizes = a.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(recent().find("biasSizes"), std::string::npos) << recent();
  }
}

TEST(CapiConvBackward, WrongOutputShapeOrDtype) {
  Case c("mb2ic3ih5iw5oc4kh3kw3");
  {
    Case other("mb2ic3ih5iw6oc4kh3kw3");  // gradInput one column wider
    c.args.grad_input = other.gi.tensor.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(recent().find("gradInput"), std::string::npos) << recent();
    c.args.grad_input = c.gi.tensor.get();
  }
  {
    Case other("mb2ic3ih5iw5oc4kh3kw3_dtf16");  // gradWeight in fp16 for fp32 inputs
    c.args.grad_weight = other.gw.tensor.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(recent().find("gradWeight"), std::string::npos) << recent();
    c.args.grad_weight = c.gw.tensor.get();
  }
  {
    // A rank-0 output must not be taken for "the implied shape".
    std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> scalar(
        aclCreateTensor(nullptr, 0, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, c.gb.mem.get()),
        aclDestroyTensor);
    c.args.grad_bias = scalar.get();
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(recent().find("gradBias"), std::string::npos) << recent();
    c.args.grad_bias = c.gb.tensor.get();
  }
  EXPECT_TRUE(c.run()) << "the original arguments still work";
}

TEST(CapiConvBackward, CubeMathTypeOutOfRange) {
  for (int m : {-1, 4, 127, -128}) {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    c.args.cube_math_type = static_cast<int8_t>(m);
    EXPECT_EQ(c.plan(), ACLNN_ERR_PARAM_INVALID) << m;
    EXPECT_NE(recent().find("cubeMathType"), std::string::npos) << recent();
  }
}

// ---- phase two --------------------------------------------------------------------------------
// A problem whose plan needs a workspace, if the core has one.
std::unique_ptr<Case> case_with_workspace() {
  for (const char* d : {"mb2ic8ih9iw9oc8kh3kw3ph1pw1_dtbf16", "tr_mb2ic8ih9iw9oc8kh3kw3sh2sw2_dtbf16",
                        "mb2ic8ih9iw9oc8kh3kw3ph1pw1_dtf16", "mb4ic16ih16iw16oc16kh3kw3ph1pw1",
                        "mb2ic8ih9iw9oc8kh3kw3sh2sw2ph1pw1"}) {
    auto c = std::make_unique<Case>(d);
    if (c->plan() == ACLNN_SUCCESS && c->workspace_size > 0) return c;
    if (c->executor != nullptr) aclDestroyAclOpExecutor(c->executor);
  }
  return nullptr;
}

TEST(CapiConvBackward, WorkspaceTooSmallIsInvalidAndChangesNothing) {
  auto c = case_with_workspace();
  if (!c) GTEST_SKIP() << "no plan of the core needs a workspace yet";
  const auto before = c->gi.contents();
  void* ws = c->allocate_workspace();
  EXPECT_EQ(aclnnConvolutionBackward(ws, c->workspace_size - 1, c->executor, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(recent().find("workspaceSize"), std::string::npos) << recent();
  EXPECT_EQ(aclnnConvolutionBackward(nullptr, c->workspace_size, c->executor, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(c->gi.contents(), before);
  // The executor is still the caller's: the right size now runs it.
  EXPECT_EQ(aclnnConvolutionBackward(ws, c->workspace_size, c->executor, nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_NE(c->gi.contents(), before);
}

TEST(CapiConvBackward, ZeroWorkspaceSizeIsRefusedWhenOneIsNeeded) {
  auto c = case_with_workspace();
  if (!c) GTEST_SKIP() << "no plan of the core needs a workspace yet";
  EXPECT_EQ(aclnnConvolutionBackward(nullptr, 0, c->executor, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(aclDestroyAclOpExecutor(c->executor), ACLNN_SUCCESS);
}

TEST(CapiConvBackward, AnExecutorRunsOnce) {
  Case c("mb2ic3ih5iw5oc4kh3kw3");
  ASSERT_TRUE(c.run());
  // Released by the stream after its run: a second use is refused, not a
  // use-after-free.
  EXPECT_EQ(aclnnConvolutionBackward(c.allocate_workspace(), c.workspace_size, c.executor, nullptr),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(recent().find("executor"), std::string::npos) << recent();
  EXPECT_EQ(aclDestroyAclOpExecutor(c.executor), ACLNN_ERR_PARAM_INVALID);
}

TEST(CapiConvBackward, TwoThreadsRacingOneExecutorRunItOnce) {
  for (int round = 0; round < 20; ++round) {
    Case c("mb2ic3ih5iw5oc4kh3kw3");
    ASSERT_EQ(c.plan(), ACLNN_SUCCESS);
    void* ws = c.allocate_workspace();
    std::atomic<int> ok{0}, refused{0};
    auto go = [&] {
      const aclnnStatus s = aclnnConvolutionBackward(ws, c.workspace_size, c.executor, nullptr);
      (s == ACLNN_SUCCESS ? ok : refused)++;
    };
    std::thread a(go), b(go);
    a.join();
    b.join();
    EXPECT_EQ(ok.load(), 1);
    EXPECT_EQ(refused.load(), 1);
    EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  }
}

TEST(CapiConvBackward, AnUnrunExecutorCanBeDestroyed) {
  Case c("mb2ic3ih5iw5oc4kh3kw3");
  ASSERT_EQ(c.plan(), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyAclOpExecutor(c.executor), ACLNN_SUCCESS);
  EXPECT_EQ(aclnnConvolutionBackward(c.allocate_workspace(), c.workspace_size, c.executor, nullptr),
            ACLNN_ERR_PARAM_INVALID);
}

TEST(CapiConvBackward, AStrayStreamIsRefusedAndTheExecutorKept) {
  Case c("mb2ic3ih5iw5oc4kh3kw3");
  ASSERT_EQ(c.plan(), ACLNN_SUCCESS);
  int not_a_stream = 0;
  EXPECT_EQ(aclnnConvolutionBackward(c.allocate_workspace(), c.workspace_size, c.executor, &not_a_stream),
            ACLNN_ERR_PARAM_INVALID);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  EXPECT_EQ(aclnnConvolutionBackward(c.allocate_workspace(), c.workspace_size, c.executor, s), ACLNN_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiConvBackward, NullDataPointerIsRefusedAtTheCall) {
  // A null data pointer passes phase one (the pointer is data, not a handle).
  // The second phase runs the plan's buffer checks before it enqueues, so
  // the call itself refuses it (not a later synchronize), runs nothing and
  // leaves the executor to the caller. (A failure inside a task is reported
  // by synchronize: CapiStream.SynchronizeReportsTheFirstErrorOnce.)
  Case c("mb2ic3ih5iw5oc4kh3kw3");
  std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> t(
      aclCreateTensor(c.x.desc.dims.data(), 4, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCHW, c.x.storage_dims.data(), 1,
                      nullptr),
      aclDestroyTensor);
  c.args.input = t.get();
  const aclnnStatus s1 = c.plan();
  if (s1 != ACLNN_SUCCESS) {
    EXPECT_EQ(s1, ACLNN_ERR_PARAM_NULLPTR);  // also acceptable: caught early
    return;
  }
  EXPECT_EQ(aclnnConvolutionBackward(c.allocate_workspace(), c.workspace_size, c.executor, nullptr),
            ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_NE(recent().find("input"), std::string::npos) << recent();
  EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclDestroyAclOpExecutor(c.executor), ACLNN_SUCCESS) << "still the caller's";
  c.executor = nullptr;
}

// ---- streams with real work -------------------------------------------------------------------
TEST(CapiConvBackward, TwoOpsOnOneStreamRunInOrder) {
  // Op 2 reads op 1's gradInput as its gradOutput ("same" convolutions keep
  // the shape), so running them out of order would read stale data.
  const char* d = "mb2ic4ih8iw8oc4kh3kw3ph1pw1";
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  Case reference1(d), reference2(d);
  ASSERT_TRUE(reference1.run(s));
  ASSERT_EQ(aclrtMemcpy(reference2.go.mem.get(), reference2.go.bytes, reference1.gi.mem.get(), reference1.gi.bytes,
                        ACL_MEMCPY_DEVICE_TO_DEVICE),
            ACL_SUCCESS);
  ASSERT_TRUE(reference2.run(s));

  for (int round = 0; round < 5; ++round) {
    Case op1(d), op2(d);
    op2.args.grad_output = op1.gi.tensor.get();  // the chain
    ASSERT_EQ(op1.plan(), ACLNN_SUCCESS);
    ASSERT_EQ(op2.plan(), ACLNN_SUCCESS);
    ASSERT_EQ(aclnnConvolutionBackward(op1.allocate_workspace(), op1.workspace_size, op1.executor, s), ACLNN_SUCCESS);
    ASSERT_EQ(aclnnConvolutionBackward(op2.allocate_workspace(), op2.workspace_size, op2.executor, s), ACLNN_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS) << recent();
    EXPECT_EQ(op2.gi.contents(), reference2.gi.contents()) << "round " << round;
  }
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiConvBackward, DestroyingAStreamWithPendingOpsCompletesThem) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::vector<std::unique_ptr<Case>> cases;
  for (int i = 0; i < 4; ++i) {
    cases.push_back(std::make_unique<Case>("mb4ic8ih12iw12oc8kh3kw3ph1pw1"));
    ASSERT_EQ(cases.back()->plan(), ACLNN_SUCCESS);
    ASSERT_EQ(aclnnConvolutionBackward(cases.back()->allocate_workspace(), cases.back()->workspace_size,
                                       cases.back()->executor, s),
              ACLNN_SUCCESS);
  }
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);  // drains; executors are released (ASan/LSan check)
  Case reference("mb4ic8ih12iw12oc8kh3kw3ph1pw1");
  ASSERT_TRUE(reference.run());
  for (auto& c : cases) EXPECT_EQ(c->gw.contents(), reference.gw.contents());
}

TEST(CapiConvBackward, AsyncCopiesAreOrderedWithTheOperator) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  Case c("mb4ic8ih12iw12oc8kh3kw3ph1pw1");
  std::vector<unsigned char> copy(c.gi.bytes, 0);
  // Zero the output on the stream, run, then copy it out: all in order.
  ASSERT_EQ(aclrtMemsetAsync(c.gi.mem.get(), c.gi.bytes, 0, c.gi.bytes, s), ACL_SUCCESS);
  ASSERT_EQ(c.plan(), ACLNN_SUCCESS);
  ASSERT_EQ(aclnnConvolutionBackward(c.allocate_workspace(), c.workspace_size, c.executor, s), ACLNN_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(copy.data(), copy.size(), c.gi.mem.get(), c.gi.bytes, ACL_MEMCPY_DEVICE_TO_HOST, s),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(copy, c.gi.contents());
  EXPECT_NE(copy, std::vector<unsigned char>(c.gi.bytes, 0));
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiConvBackward, TwoStreamsGiveTheSameResults) {
  aclrtStream a = nullptr, b = nullptr;
  ASSERT_EQ(aclrtCreateStream(&a), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&b), ACL_SUCCESS);
  Case ca("mb2ic8ih10iw10oc8kh3kw3ph1pw1"), cb("mb2ic8ih10iw10oc8kh3kw3ph1pw1");
  ASSERT_EQ(ca.plan(), ACLNN_SUCCESS);
  ASSERT_EQ(cb.plan(), ACLNN_SUCCESS);
  ASSERT_EQ(aclnnConvolutionBackward(ca.allocate_workspace(), ca.workspace_size, ca.executor, a), ACLNN_SUCCESS);
  ASSERT_EQ(aclnnConvolutionBackward(cb.allocate_workspace(), cb.workspace_size, cb.executor, b), ACLNN_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(a), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(b), ACL_SUCCESS);
  EXPECT_EQ(ca.gi.contents(), cb.gi.contents());
  EXPECT_EQ(ca.gw.contents(), cb.gw.contents());
  EXPECT_EQ(aclrtDestroyStream(a), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(b), ACL_SUCCESS);
}

}  // namespace
