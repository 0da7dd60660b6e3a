// One test per validation rule of src/problem/validate.cpp and of
// Plan::execute: each asserts the status code and that the message names the
// parameter and the value given.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "util/run.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

// A valid 2D problem to break one rule at a time: input [2,4,5,5], weight
// [6,2,3,3], groups 2, padding 1, gradOutput [2,6,5,5].
Problem base2d() {
  Problem p;
  p.input.dims = {2, 4, 5, 5};
  p.weight.dims = {6, 2, 3, 3};
  p.grad_output.dims = {2, 6, 5, 5};
  p.groups = 2;
  p.stride = {1, 1};
  p.padding_before = {1, 1};
  p.dilation = {1, 1};
  p.bias_sizes = std::vector<int64_t>{6};
  return p;
}

// A valid transposed 1D problem: input [2,4,5], weight [4,3,2] (Cin, Cout/g,
// k), groups 2 -> Cout 6, stride 2: out = (5-1)*2 + 2 = 10 (+ outputPadding).
Problem base_tr1d() {
  Problem p;
  p.transposed = true;
  p.input.dims = {2, 4, 5};
  p.weight.dims = {4, 3, 2};
  p.grad_output.dims = {2, 6, 10};
  p.groups = 2;
  p.stride = {2};
  p.padding_before = {0};
  p.dilation = {1};
  p.bias_sizes = std::vector<int64_t>{6};
  return p;
}

// The error of Plan::create, which must exist, with the given status and
// every fragment in its message.
void expect_error(const Problem& p, Status status, std::initializer_list<std::string> fragments) {
  auto plan = Plan::create(p);
  ASSERT_FALSE(plan.ok()) << "accepted: " << p.descriptor();
  const Error& e = plan.error();
  EXPECT_EQ(e.status, status) << e.message;
  for (const std::string& f : fragments)
    EXPECT_NE(e.message.find(f), std::string::npos) << "message lacks '" << f << "': " << e.message;
}

void expect_invalid(const Problem& p, std::initializer_list<std::string> fragments) {
  expect_error(p, Status::invalid_parameter, fragments);
}

TEST(Validation, BaseProblemsAreValid) {
  for (const Problem& p : {base2d(), base_tr1d()}) {
    auto plan = Plan::create(p);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
  }
}

// --- ranks and dims ---------------------------------------------------------

TEST(Validation, InputRankTooSmall) {
  Problem p = base2d();
  p.input.dims = {2, 4};
  expect_invalid(p, {"input rank 2", "[2,4]", "expected 3 (NCL), 4 (NCHW) or 5 (NCDHW)"});
}

TEST(Validation, InputRankTooLarge) {
  Problem p = base2d();
  p.input.dims = {1, 1, 1, 1, 1, 1};
  expect_invalid(p, {"input rank 6", "[1,1,1,1,1,1]"});
}

TEST(Validation, OperandRankMismatch) {
  Problem p = base2d();
  p.weight.dims = {6, 2, 3};
  expect_invalid(p, {"weight rank 3", "[6,2,3]", "input rank 4"});
  p = base2d();
  p.grad_output.dims = {2, 6, 5, 5, 1};
  expect_invalid(p, {"gradOutput rank 5", "[2,6,5,5,1]"});
}

TEST(Validation, NegativeDims) {
  Problem p = base2d();
  p.grad_output.dims = {2, -6, 5, 5};
  expect_invalid(p, {"gradOutput dims", "[2,-6,5,5]", "negative"});
  p = base2d();
  p.input.dims = {-2, 4, 5, 5};
  expect_invalid(p, {"input dims", "[-2,4,5,5]", "negative"});
  p = base2d();
  p.weight.dims = {6, 2, -3, 3};
  expect_invalid(p, {"weight dims", "[6,2,-3,3]", "negative"});
}

TEST(Validation, ZeroInputSpatialDim) {
  Problem p = base2d();
  p.input.dims = {2, 4, 5, 0};
  expect_invalid(p, {"input spatial dims", "[2,4,5,0]", "contain 0", ">= 1"});
}

TEST(Validation, ZeroKernelDim) {
  Problem p = base2d();
  p.weight.dims = {6, 2, 0, 3};
  expect_invalid(p, {"weight kernel dims", "[6,2,0,3]", "contain 0", ">= 1"});
}

// --- convolution parameters -------------------------------------------------

TEST(Validation, StrideLength) {
  Problem p = base2d();
  p.stride = {1, 1, 1};
  expect_invalid(p, {"stride [1,1,1]", "has 3 values", "expected 2"});
}

TEST(Validation, StrideZero) {
  Problem p = base2d();
  p.stride = {1, 0};
  expect_invalid(p, {"stride [1,0]", "contains 0", ">= 1"});
}

TEST(Validation, DilationLength) {
  Problem p = base2d();
  p.dilation = {1};
  expect_invalid(p, {"dilation [1]", "has 1 values", "expected 2"});
}

TEST(Validation, DilationZero) {
  Problem p = base2d();
  p.dilation = {0, 1};
  expect_invalid(p, {"dilation [0,1]", "contains 0", ">= 1"});
}

TEST(Validation, PaddingLength) {
  Problem p = base2d();
  p.padding_before = {1, 1, 1, 1};
  expect_invalid(p, {"padding [1,1,1,1]", "has 4 values", "expected 2"});
}

TEST(Validation, PaddingNegative) {
  Problem p = base2d();
  p.padding_before = {1, -1};
  expect_invalid(p, {"padding [1,-1]", "contains -1", ">= 0"});
}

TEST(Validation, PaddingAfterLength) {
  Problem p = base2d();
  p.padding_after = {1};
  expect_invalid(p, {"padding (after) [1]", "has 1 values", "expected 2"});
}

TEST(Validation, PaddingAfterNegative) {
  Problem p = base2d();
  p.padding_after = {-2, 1};
  expect_invalid(p, {"padding (after) [-2,1]", "contains -2", ">= 0"});
}

TEST(Validation, OutputPaddingLength) {
  Problem p = base_tr1d();
  p.output_padding = {0, 0};
  expect_invalid(p, {"outputPadding [0,0]", "has 2 values", "expected 1"});
}

TEST(Validation, OutputPaddingNegative) {
  Problem p = base_tr1d();
  p.output_padding = {-1};
  expect_invalid(p, {"outputPadding [-1]", "contains -1", ">= 0"});
}

TEST(Validation, OutputPaddingNonzeroWhenNotTransposed) {
  Problem p = base2d();
  p.output_padding = {0, 1};
  expect_invalid(p, {"outputPadding [0,1]", "all 0", "not transposed"});
}

TEST(Validation, OutputPaddingNotBelowStride) {
  Problem p = base_tr1d();
  p.output_padding = {2};  // stride 2: [0, 2)
  p.grad_output.dims = {2, 6, 12};
  expect_invalid(p, {"outputPadding [2]", "has 2", "[0, stride) = [0, 2)"});
  // One below the stride is fine.
  p.output_padding = {1};
  p.grad_output.dims = {2, 6, 11};
  auto plan = Plan::create(p);
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
}

TEST(Validation, GroupsZero) {
  Problem p = base2d();
  p.groups = 0;
  expect_invalid(p, {"groups 0", "[1, 65535]"});
}

TEST(Validation, Groups65536) {
  Problem p = base2d();
  p.groups = 65536;
  expect_invalid(p, {"groups 65536", "[1, 65535]"});
}

TEST(Validation, Groups65535IsAllowed) {
  Problem p;
  p.input.dims = {1, 65535, 1};
  p.weight.dims = {65535, 1, 1};
  p.grad_output.dims = {1, 65535, 1};
  p.groups = 65535;
  p.stride = {1};
  p.padding_before = {0};
  p.dilation = {1};
  p.bias_sizes = std::vector<int64_t>{65535};
  auto plan = Plan::create(p);
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
}

// --- channels -------------------------------------------------------------------

TEST(Validation, OutputChannelsNotDivisibleByGroups) {
  Problem p = base2d();
  p.weight.dims = {5, 2, 3, 3};
  p.grad_output.dims = {2, 5, 5, 5};
  p.bias_sizes = std::vector<int64_t>{5};
  expect_invalid(p, {"weight dims [5,2,3,3]", "output channels 5", "not divisible by groups 2"});
}

TEST(Validation, InputChannelsMismatch) {
  Problem p = base2d();
  p.input.dims = {2, 5, 5, 5};
  expect_invalid(p, {"input channels 5", "[2,5,5,5]", "groups * weight.shape[1] = 2 * 2"});
}

TEST(Validation, InputChannelsProductOverflows) {
  Problem p = base2d();
  p.weight.dims = {6, int64_t{1} << 62, 3, 3};
  expect_invalid(p, {"input channels 4", "2 * 4611686018427387904"});
}

TEST(Validation, TransposedWeightChannelsMismatch) {
  Problem p = base_tr1d();
  p.weight.dims = {6, 3, 2};
  expect_invalid(p, {"weight.shape[0] 6", "[6,3,2]", "input channels 4", "[Cin, Cout/groups, k...]"});
}

TEST(Validation, TransposedInputChannelsNotDivisibleByGroups) {
  Problem p = base_tr1d();
  p.groups = 3;
  p.grad_output.dims = {2, 9, 10};
  p.bias_sizes = std::vector<int64_t>{9};
  expect_invalid(p, {"input channels 4", "not divisible by groups 3"});
}

TEST(Validation, TransposedOutputChannelsOverflow) {
  Problem p = base_tr1d();
  p.weight.dims = {4, int64_t{1} << 62, 2};
  expect_invalid(p, {"weight.shape[1] * groups overflows", "4611686018427387904 * 2"});
}

// --- spatial output size ----------------------------------------------------------

TEST(Validation, InputSmallerThanDilatedKernel) {
  Problem p = base2d();
  p.padding_before = {0, 0};
  p.dilation = {3, 1};  // dilated kernel 7 > 5
  expect_invalid(p, {"spatial dim 0", "input size 5", "padding 0+0", "dilated kernel 7"});
  // A dilated kernel whose extent, (2-1)*(2^63-1) + 1, passes 2^63 (a fuzz
  // finding: the message's +1 overflowed).
  p.weight.dims = {6, 2, 2, 3};
  p.dilation = {INT64_MAX, 1};
  expect_invalid(p, {"spatial dim 0", "input size 5", "dilated kernel (over 2^63)"});
}

TEST(Validation, TransposedOutputNotPositive) {
  Problem p = base_tr1d();
  p.padding_before = {6};  // 10 - 12 = -2
  expect_invalid(p, {"spatial dim 0", "transposed output size", "= -2", "not positive"});
}

TEST(Validation, OutputSizeOverflows) {
  Problem p = base_tr1d();
  p.input.dims = {2, 4, int64_t{1} << 62};
  p.stride = {4};
  p.output_padding = {0};
  expect_invalid(p, {"spatial dim 0", "overflows 64 bits", "input 4611686018427387904", "stride 4"});
}

// The message format of issue 2's example.
TEST(Validation, GradOutputShapeMismatch) {
  Problem p;
  p.input.dims = {4, 30, 80, 80};
  p.weight.dims = {320, 30, 3, 3};
  p.grad_output.dims = {4, 320, 79, 80};
  p.stride = {1, 1};
  p.padding_before = {1, 1};
  p.dilation = {1, 1};
  p.bias_sizes = std::vector<int64_t>{320};
  expect_invalid(p, {"gradOutput shape [4,320,79,80] does not match [4,320,80,80], the shape implied by input, "
                     "weight, stride, padding"});
  p = base_tr1d();
  p.grad_output.dims = {2, 6, 11};
  expect_invalid(p, {"gradOutput shape [2,6,11] does not match [2,6,10]", "outputPadding and transposed"});
}

// --- dtypes and precision mode ------------------------------------------------

TEST(Validation, DtypeUnknown) {
  Problem p = base2d();
  p.weight.dtype = static_cast<DataType>(9);
  expect_invalid(p, {"weight dtype value 9", "unknown", "FLOAT32, FLOAT16 or BFLOAT16"});
  p = base2d();
  p.grad_output.dtype = static_cast<DataType>(-1);
  expect_invalid(p, {"gradOutput dtype value -1", "unknown"});
}

TEST(Validation, CubeMathTypeUnknown) {
  Problem p = base2d();
  p.math_mode = static_cast<MathMode>(4);
  expect_invalid(p, {"cubeMathType 4", "unknown", "0 (KEEP_DTYPE)", "3 (USE_HF32)"});
  p.math_mode = static_cast<MathMode>(-1);
  expect_invalid(p, {"cubeMathType -1", "unknown"});
}

// USE_FP16 takes bf16 operands, as CANN's implementation does (issue 19):
// whether one operand is bf16 (the problem computes in fp32) or all three
// are, every operand of the data and weight gradients is rounded to fp16;
// gradBias is not. fp16 problems need no rounding.
TEST(Validation, UseFp16RoundsBf16OperandsToFp16) {
  for (int which = 0; which < 4; ++which) {  // 3: all three bf16
    Problem p = base2d();
    p.math_mode = MathMode::use_fp16;
    TensorDesc* t[3] = {&p.grad_output, &p.input, &p.weight};
    for (int i = 0; i < 3; ++i)
      if (i == which || which == 3) t[i]->dtype = DataType::bf16;
    SCOPED_TRACE(p.descriptor());
    auto spec = detail::validate(p);
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->compute, which == 3 ? DataType::bf16 : DataType::f32);
    EXPECT_EQ(spec->op_for(Gradient::input).rounding, detail::OperandRounding::fp16);
    EXPECT_EQ(spec->op_for(Gradient::weight).rounding, detail::OperandRounding::fp16);
    EXPECT_EQ(spec->op_for(Gradient::bias).rounding, detail::OperandRounding::none);
    EXPECT_TRUE(Plan::create(p).ok());
  }
  Problem p = base2d();
  p.math_mode = MathMode::use_fp16;
  for (TensorDesc* t : {&p.grad_output, &p.input, &p.weight}) t->dtype = DataType::f16;
  auto spec = detail::validate(p);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->op_for(Gradient::input).rounding, detail::OperandRounding::none);
  // HF32 keeps 11 mantissa bits: bf16 operands pass through unrounded.
  p = base2d();
  p.math_mode = MathMode::use_hf32;
  for (TensorDesc* t : {&p.grad_output, &p.input, &p.weight}) t->dtype = DataType::bf16;
  spec = detail::validate(p);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->op_for(Gradient::weight).rounding, detail::OperandRounding::none);
}

// --- bias sizes ---------------------------------------------------------------------

TEST(Validation, BiasSizesNullWhenGradBiasRequested) {
  Problem p = base2d();
  p.bias_sizes.reset();
  expect_error(p, Status::null_pointer, {"biasSizes is null", "[6]"});
  // Without gradBias it may be null.
  p.output_mask = {true, true, false};
  EXPECT_TRUE(Plan::create(p).ok());
}

TEST(Validation, BiasSizesWrong) {
  Problem p = base2d();
  p.bias_sizes = std::vector<int64_t>{4};
  expect_invalid(p, {"biasSizes [4]", "[6]", "weight.shape[0]"});
  p = base_tr1d();
  p.bias_sizes = std::vector<int64_t>{3};  // Cout/groups, not Cout
  expect_invalid(p, {"biasSizes [3]", "[6]", "weight.shape[1] * groups"});
  p = base2d();
  p.bias_sizes = std::vector<int64_t>{6, 1};
  expect_invalid(p, {"biasSizes [6,1]"});
}

// --- views -------------------------------------------------------------------------

TEST(Validation, NegativeOffset) {
  Problem p = base2d();
  p.weight.offset = -1;
  expect_invalid(p, {"weight offset -1", "negative", ">= 0"});
}

TEST(Validation, StridesCountMismatch) {
  Problem p = base2d();
  p.input.strides = {100, 25, 5};
  expect_invalid(p, {"input has 3 strides [100,25,5]", "4 dims [2,4,5,5]", "one stride per dim"});
}

TEST(Validation, NegativeStride) {
  Problem p = base2d();
  p.grad_output.strides = {150, 25, 5, -1};
  expect_invalid(p, {"gradOutput strides [150,25,5,-1]", "negative stride -1", "dim 3"});
}

TEST(Validation, ViewBeyondStorage) {
  Problem p = base2d();
  p.input.storage_elements = 199;  // the view needs 2*4*5*5 = 200
  expect_invalid(p, {"input view", "reaches element 199", "storage of 199 elements"});
  p.input.storage_elements = 200;
  EXPECT_TRUE(Plan::create(p).ok());
  // The offset counts too.
  p.input.offset = 1;
  expect_invalid(p, {"input view", "offset 1", "reaches element 200", "storage of 200 elements"});
}

TEST(Validation, ElementCountOverflows) {
  // Four dims of 2^40 each: 2^160 elements. A 1x1 kernel keeps the spatial
  // shape rules satisfied so that the element count is what fails.
  const int64_t big = int64_t{1} << 40;
  Problem p;
  p.input.dims = {big, big, big, big};
  p.weight.dims = {big, big, 1, 1};
  p.grad_output.dims = {big, big, big, big};
  p.stride = {1, 1};
  p.padding_before = {0, 0};
  p.dilation = {1, 1};
  p.bias_sizes = std::vector<int64_t>{big};
  expect_invalid(p, {"gradOutput dims [1099511627776,1099511627776,1099511627776,1099511627776]",
                     "more than 2^63 elements"});
}

TEST(Validation, ViewReachOverflows) {
  Problem p = base2d();
  p.weight.strides = {int64_t{1} << 62, 9, 3, 1};  // (6-1) * 2^62 overflows
  expect_invalid(p, {"weight view", "4611686018427387904", "beyond 2^63 bytes"});
  // Reach fits in 63 bits but its byte address (x4 for fp32) does not.
  p = base2d();
  p.weight.strides = {int64_t{1} << 60, 9, 3, 1};
  expect_invalid(p, {"weight view", "1152921504606846976", "beyond 2^63 bytes"});
}

TEST(Validation, OutputViewOverlapsItself) {
  Problem p = base2d();
  p.output_mask = {false, true, false};
  p.grad_weight.dims = {6, 2, 3, 3};
  p.grad_weight.dtype = DataType::f32;
  p.grad_weight.strides = {18, 9, 3, 2};  // the last dim steps 2 over 3 elements: overlaps the next row
  expect_invalid(p, {"gradWeight view", "[18,9,3,2]", "overlaps itself"});
  // A zero stride broadcasts: fine for an input, not for an output.
  p = base2d();
  p.weight.strides = {0, 0, 0, 0};
  EXPECT_TRUE(Plan::create(p).ok());
  p.output_mask = {true, false, false};
  p.grad_input.dims = {2, 4, 5, 5};
  p.grad_input.strides = {100, 25, 0, 1};
  expect_invalid(p, {"gradInput view", "[100,25,0,1]", "overlaps itself"});
}

TEST(Validation, OutputDimsMismatch) {
  Problem p = base2d();
  p.grad_input.dims = {2, 4, 5, 4};
  expect_invalid(p, {"gradInput shape [2,4,5,4]", "[2,4,5,5]", "the shape of input"});
  p = base2d();
  p.grad_weight.dims = {6, 2, 3};
  expect_invalid(p, {"gradWeight shape [6,2,3]", "[6,2,3,3]", "the shape of weight"});
  p = base2d();
  p.grad_bias.dims = {3};
  expect_invalid(p, {"gradBias shape [3]", "[6]", "[Cout]"});
}

TEST(Validation, OutputDtypeMismatch) {
  Problem p = base2d();
  p.grad_input.dims = {2, 4, 5, 5};
  p.grad_input.dtype = DataType::f16;
  expect_invalid(p, {"gradInput dtype f16", "does not match f32", "the dtype of input"});
  p = base2d();
  p.weight.dtype = DataType::bf16;
  p.grad_weight.dims = {6, 2, 3, 3};
  p.grad_weight.dtype = DataType::f32;
  expect_invalid(p, {"gradWeight dtype f32", "does not match bf16", "the dtype of weight"});
  p = base2d();
  p.grad_output.dtype = DataType::f16;
  p.grad_bias.dims = {6};
  p.grad_bias.dtype = DataType::f32;
  expect_invalid(p, {"gradBias dtype f32", "does not match f16", "the dtype of gradOutput"});
}

TEST(Validation, OutputDtypeUnknown) {
  Problem p = base2d();
  p.grad_weight.dims = {6, 2, 3, 3};
  p.grad_weight.dtype = static_cast<DataType>(11);
  expect_invalid(p, {"gradWeight dtype unknown", "does not match f32"});
}

// --- 8-bit dtypes ---------------------------------------------------------------

Problem base_8bit() {
  Problem p = base_tr1d();
  p.groups = 1;
  p.weight.dims = {4, 6, 2};
  p.grad_output.dtype = p.input.dtype = p.weight.dtype = DataType::hif8;
  p.output_mask = {true, false, false};
  return p;
}

TEST(Validation, EightBitBaseIsValid) {
  for (DataType t : {DataType::hif8, DataType::f8e4m3}) {
    Problem p = base_8bit();
    p.grad_output.dtype = p.input.dtype = p.weight.dtype = t;
    auto plan = Plan::create(p);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
  }
}

TEST(Validation, EightBitNeedsTransposed) {
  Problem p = base2d();
  p.groups = 1;
  p.input.dims = {2, 2, 5, 5};
  p.grad_output.dtype = p.input.dtype = p.weight.dtype = DataType::f8e4m3;
  p.output_mask = {true, false, false};
  expect_invalid(p, {"8-bit dtypes", "gradOutput f8e4m3", "transposed = true"});
}

TEST(Validation, EightBitNeedsGradInput) {
  Problem p = base_8bit();
  p.output_mask = {false, false, true};
  expect_invalid(p, {"8-bit dtypes", "outputMask[0] (gradInput) = true"});
}

TEST(Validation, EightBitRejectsGradWeight) {
  Problem p = base_8bit();
  p.output_mask = {true, true, false};
  expect_invalid(p, {"8-bit dtypes", "outputMask[1] (gradWeight) = false"});
}

TEST(Validation, EightBitMixedDtypes) {
  Problem p = base_8bit();
  p.weight.dtype = DataType::f8e4m3;
  expect_invalid(p, {"8-bit dtypes must be the same", "gradOutput hif8", "weight f8e4m3"});
  p = base_8bit();
  p.input.dtype = DataType::f32;
  expect_invalid(p, {"8-bit dtypes must be the same", "input f32"});
}

TEST(Validation, EightBitGroups) {
  Problem p = base_tr1d();  // groups 2
  p.grad_output.dtype = p.input.dtype = p.weight.dtype = DataType::hif8;
  p.output_mask = {true, false, false};
  expect_invalid(p, {"8-bit dtypes need groups = 1", "got 2"});
}

TEST(Validation, EightBitOutputPadding) {
  Problem p = base_8bit();
  p.output_padding = {1};
  p.grad_output.dims = {2, 6, 11};
  expect_invalid(p, {"8-bit dtypes need outputPadding all 0", "[1]"});
}

TEST(Validation, EightBitGradBiasDtype) {
  Problem p = base_8bit();
  p.output_mask = {true, false, true};
  p.grad_bias.dims = {6};
  p.grad_bias.dtype = DataType::hif8;
  expect_invalid(p, {"gradBias dtype hif8", "8-bit", "FLOAT32, FLOAT16 or BFLOAT16"});
}

// --- Plan::execute --------------------------------------------------------------

// A plan of base2d with contiguous host buffers.
struct Bound {
  HostTensor go, in, w, gi, gw, gb;
  std::vector<unsigned char> ws;  // workspace: big enough for the plan
  Buffers buffers() { return {go.data(), in.data(), w.data(), gi.data(), gw.data(), gb.data()}; }
};

Bound bind(const Problem& p, size_t workspace = 0) {
  Bound b;
  b.ws.resize(workspace + 64);
  std::mt19937_64 rng(3);
  b.go = make_tensor(p.grad_output.dtype, p.grad_output.dims, Layout::contiguous);
  b.in = make_tensor(p.input.dtype, p.input.dims, Layout::contiguous);
  b.w = make_tensor(p.weight.dtype, p.weight.dims, Layout::contiguous);
  for (HostTensor* t : {&b.go, &b.in, &b.w}) fill(*t, Fill::uniform, rng);
  b.gi = make_tensor(p.gradient_dtype(Gradient::input), p.gradient_dims(Gradient::input), Layout::contiguous);
  b.gw = make_tensor(p.gradient_dtype(Gradient::weight), p.gradient_dims(Gradient::weight), Layout::contiguous);
  b.gb = make_tensor(p.gradient_dtype(Gradient::bias), p.gradient_dims(Gradient::bias), Layout::contiguous);
  return b;
}

// Execute fails with `status` and a message holding every fragment, and
// writes nothing: every output byte keeps its canary.
void expect_execute_error(const Plan& plan, Bound& b, const Buffers& buf, void* ws, size_t ws_bytes, Status status,
                          std::initializer_list<std::string> fragments) {
  const auto before_gi = b.gi.storage, before_gw = b.gw.storage, before_gb = b.gb.storage;
  Error e = plan.execute(buf, ws, ws_bytes);
  ASSERT_TRUE(e) << "execute accepted the buffers";
  EXPECT_EQ(e.status, status) << e.message;
  for (const std::string& f : fragments)
    EXPECT_NE(e.message.find(f), std::string::npos) << "message lacks '" << f << "': " << e.message;
  EXPECT_EQ(b.gi.storage, before_gi) << "gradInput written by a failing execute";
  EXPECT_EQ(b.gw.storage, before_gw) << "gradWeight written by a failing execute";
  EXPECT_EQ(b.gb.storage, before_gb) << "gradBias written by a failing execute";
}

TEST(ValidationExecute, NullInputBuffers) {
  const Problem p = base2d();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  const char* names[3] = {"gradOutput", "input", "weight"};
  for (int which = 0; which < 3; ++which) {
    Buffers buf = b.buffers();
    const void** in[3] = {&buf.grad_output, &buf.input, &buf.weight};
    *in[which] = nullptr;
    expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::null_pointer, {names[which], "null"});
  }
}

TEST(ValidationExecute, UnneededInputMayBeNull) {
  // gradInput alone does not read input; gradWeight alone does not read weight.
  Problem p = base2d();
  p.output_mask = {true, false, false};
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  std::vector<unsigned char> ws(plan->workspace_size() + 1);
  Buffers buf = b.buffers();
  buf.input = nullptr;
  buf.grad_weight = buf.grad_bias = nullptr;
  Error e = plan->execute(buf, ws.data(), plan->workspace_size());
  EXPECT_FALSE(e) << e.message;
  p.output_mask = {false, true, false};
  auto plan_w = Plan::create(p);
  ASSERT_TRUE(plan_w.ok());
  ws.resize(plan_w->workspace_size() + 1);
  buf = b.buffers();
  buf.weight = nullptr;
  buf.grad_input = buf.grad_bias = nullptr;
  e = plan_w->execute(buf, ws.data(), plan_w->workspace_size());
  EXPECT_FALSE(e) << e.message;
}

TEST(ValidationExecute, NullOutputBuffers) {
  const Problem p = base2d();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  const char* names[3] = {"gradInput", "gradWeight", "gradBias"};
  for (int which = 0; which < 3; ++which) {
    Buffers buf = b.buffers();
    void** out[3] = {&buf.grad_input, &buf.grad_weight, &buf.grad_bias};
    *out[which] = nullptr;
    expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::null_pointer,
                         {names[which], "requested", "null"});
  }
}

// The workspace rules need a plan that asks for scratch memory; whether one
// does depends on which implementations are registered, so look for one among
// problems that fast paths typically stage.
TEST(ValidationExecute, WorkspaceTooSmallOrNull) {
  const char* candidates[] = {"mb4ic30ih80oc320oh80kh3ph1", "mb8ic64ih28oc64kh3ph1", "mb2ic16ih32oc16kh3ph1_dtbf16",
                              "mb2ic16ih32oc16kh3ph1_dtf16", "mb2ic16ih32oc16kh3sh2ph1_tr",
                              "mb2ic64iw256oc64kw3pw1"};
  for (const char* d : candidates) {
    auto parsed = Problem::parse(d);
    ASSERT_TRUE(parsed.ok()) << d << ": " << parsed.error().message;
    auto plan = Plan::create(parsed.value());
    ASSERT_TRUE(plan.ok()) << d << ": " << plan.error().message;
    const size_t need = plan->workspace_size();
    if (need == 0) continue;
    Bound b = bind(parsed.value(), need);
    std::vector<unsigned char> ws(need);
    expect_execute_error(plan.value(), b, b.buffers(), ws.data(), need - 1, Status::invalid_parameter,
                         {"workspace of " + std::to_string(need - 1) + " bytes", std::to_string(need) + " bytes"});
    expect_execute_error(plan.value(), b, b.buffers(), nullptr, need, Status::null_pointer,
                         {"workspace is null", std::to_string(need) + " bytes"});
    // An output placed inside the workspace.
    std::vector<unsigned char> shared(need + b.gb.storage.size() + 64);
    Buffers buf = b.buffers();
    buf.grad_bias = shared.data() + 64;
    const auto before = b.gb.storage;
    Error e = plan->execute(buf, shared.data(), need);
    ASSERT_TRUE(e);
    EXPECT_EQ(e.status, Status::invalid_parameter);
    EXPECT_NE(e.message.find("gradBias buffer overlaps the workspace"), std::string::npos) << e.message;
    return;
  }
  GTEST_SKIP() << "no registered implementation needs a workspace for any candidate problem";
}

TEST(ValidationExecute, OutputAliasesInput) {
  const Problem p = base2d();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  // gradInput has input's shape and dtype: writing it over input is the
  // tempting in-place mistake.
  Buffers buf = b.buffers();
  buf.grad_input = b.in.data();
  expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::invalid_parameter,
                       {"gradInput buffer overlaps input", "must not alias"});
  buf = b.buffers();
  buf.grad_weight = b.w.data();
  expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::invalid_parameter,
                       {"gradWeight buffer overlaps weight"});
  // A partial overlap: gradBias over the last bytes of gradOutput.
  buf = b.buffers();
  buf.grad_bias = static_cast<unsigned char*>(b.go.data()) + b.go.storage.size() - 4;
  expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::invalid_parameter,
                       {"gradBias buffer overlaps gradOutput"});
}

TEST(ValidationExecute, OutputsAliasEachOther) {
  Problem p = base2d();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  Buffers buf = b.buffers();
  buf.grad_bias = b.gw.data();
  expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::invalid_parameter,
                       {"gradWeight buffer overlaps gradBias"});
  buf = b.buffers();
  buf.grad_weight = static_cast<unsigned char*>(b.gi.data()) + 8;
  expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::invalid_parameter,
                       {"gradInput buffer overlaps gradWeight"});
}

TEST(ValidationExecute, FailedExecuteWritesNothingAndGoodOneWrites) {
  const Problem p = base2d();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  Buffers buf = b.buffers();
  buf.weight = nullptr;
  expect_execute_error(plan.value(), b, buf, b.ws.data(), plan->workspace_size(), Status::null_pointer, {"weight"});
  // The same outputs with every pointer bound: all three are written.
  std::vector<unsigned char> ws(plan->workspace_size() + 1);
  const auto before = b.gi.storage;
  EXPECT_FALSE(plan->execute(b.buffers(), ws.data(), plan->workspace_size()));
  EXPECT_NE(b.gi.storage, before);
}


// --- Plan::execute with BufferSizes ----------------------------------------------

BufferSizes sizes_of(const Bound& b) {
  auto n = [](const HostTensor& t) { return static_cast<int64_t>(t.storage.size() / size_of(t.desc.dtype)); };
  return {n(b.go), n(b.in), n(b.w), n(b.gi), n(b.gw), n(b.gb)};
}

TEST(ValidationExecute, BufferSizesExactlyEnoughRuns) {
  const Problem p = base2d();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  const BufferSizes sizes = sizes_of(b);
  // base2d's shapes: gradOutput 2*6*5*5, input 2*4*5*5, weight 6*2*3*3.
  ASSERT_EQ(sizes.grad_output, 300);
  ASSERT_EQ(sizes.grad_input, 200);
  ASSERT_EQ(sizes.grad_weight, 108);
  const BufferSizes need = plan->buffer_sizes();
  EXPECT_EQ(need.grad_output, 300);
  EXPECT_EQ(need.input, 200);
  EXPECT_EQ(need.weight, 108);
  EXPECT_EQ(need.grad_input, 200);
  EXPECT_EQ(need.grad_weight, 108);
  EXPECT_EQ(need.grad_bias, 6);
  const Error e = plan->execute(b.buffers(), sizes, b.ws.data(), plan->workspace_size());
  EXPECT_FALSE(e) << e.message;
}

TEST(ValidationExecute, EachBufferOneElementShortIsRefused) {
  const Problem p = base2d();
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  const char* names[6] = {"gradOutput", "input", "weight", "gradInput", "gradWeight", "gradBias"};
  const int64_t need[6] = {300, 200, 108, 200, 108, 6};
  for (int which = 0; which < 6; ++which) {
    BufferSizes sizes = sizes_of(b);
    int64_t* field[6] = {&sizes.grad_output, &sizes.input,       &sizes.weight,
                         &sizes.grad_input,  &sizes.grad_weight, &sizes.grad_bias};
    *field[which] = need[which] - 1;
    const auto before_gi = b.gi.storage, before_gw = b.gw.storage, before_gb = b.gb.storage;
    const Error e = plan->execute(b.buffers(), sizes, b.ws.data(), plan->workspace_size());
    ASSERT_TRUE(e) << names[which] << " one element short was accepted";
    EXPECT_EQ(e.status, Status::invalid_parameter);
    for (const std::string& f : {std::string(names[which]) + " buffer holds " + std::to_string(need[which] - 1) +
                                     " elements",
                                 "needs " + std::to_string(need[which])})
      EXPECT_NE(e.message.find(f), std::string::npos) << "message lacks '" << f << "': " << e.message;
    EXPECT_EQ(b.gi.storage, before_gi);
    EXPECT_EQ(b.gw.storage, before_gw);
    EXPECT_EQ(b.gb.storage, before_gb);
  }
}

TEST(ValidationExecute, BufferSizesCountTheViewsOffsetAndStrides) {
  // gradInput as every other element from offset 3: its last element is at
  // 3 + 2*(200-1) = 401, so the buffer needs 402 elements.
  Problem p = base2d();
  p.grad_input.dims = {2, 4, 5, 5};
  p.grad_input.strides = {200, 50, 10, 2};
  p.grad_input.offset = 3;
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  Bound b = bind(p, plan->workspace_size());
  b.gi.storage.assign(402 * sizeof(float), 0);
  BufferSizes sizes = sizes_of(b);
  sizes.grad_input = 401;
  Error e = plan->execute(b.buffers(), sizes, b.ws.data(), plan->workspace_size());
  ASSERT_TRUE(e);
  EXPECT_NE(e.message.find("gradInput buffer holds 401 elements; its f32 view needs 402"), std::string::npos)
      << e.message;
  sizes.grad_input = 402;
  e = plan->execute(b.buffers(), sizes, b.ws.data(), plan->workspace_size());
  EXPECT_FALSE(e) << e.message;
}

TEST(ValidationExecute, UnrequestedAndUnreadBuffersNeedNoSize) {
  // gradInput alone reads gradOutput and weight; input and the other outputs
  // may be absent with size 0.
  Problem p = base2d();
  p.output_mask = {true, false, false};
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan.ok());
  Bound b = bind(p, plan->workspace_size());
  Buffers buf = b.buffers();
  buf.input = nullptr;
  buf.grad_weight = buf.grad_bias = nullptr;
  BufferSizes sizes;
  sizes.grad_output = 300;
  sizes.weight = 108;
  sizes.grad_input = 200;
  const BufferSizes need = plan->buffer_sizes();
  EXPECT_EQ(need.input, 0);
  EXPECT_EQ(need.grad_weight, 0);
  EXPECT_EQ(need.grad_bias, 0);
  EXPECT_EQ(need.grad_input, 200);
  const Error e = plan->execute(buf, sizes, b.ws.data(), plan->workspace_size());
  EXPECT_FALSE(e) << e.message;
}

}  // namespace
}  // namespace convbwd::test

namespace convbwd {
// An empty tensor (N = 0) whose other dims multiply past 2^63 is refused too:
// its spatial extents still size products downstream (found by fuzzing).
TEST(ValidationOverflow, EmptyTensorWithOverflowingOtherDims) {
  auto p = Problem::parse("mb0ic36ih9496729612");
  ASSERT_TRUE(p) << p.error().message;
  auto plan = Plan::create(p.value());
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().status, Status::invalid_parameter);
  EXPECT_NE(plan.error().message.find("zero dims counted as 1"), std::string::npos) << plan.error().message;
}
}  // namespace convbwd
