// The problem descriptor string: every token, the defaults, the round trip
// parse -> descriptor -> parse, and clear errors for bad strings.
#include <gtest/gtest.h>

#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "util/forward_oracle.hpp"

namespace convbwd::test {
namespace {

Problem parse_ok(const std::string& d) {
  auto p = Problem::parse(d);
  EXPECT_TRUE(p.ok()) << d << ": " << (p.ok() ? "" : p.error().message);
  return p.ok() ? p.value() : Problem{};
}

void expect_bad(const std::string& d, std::initializer_list<std::string> fragments) {
  auto p = Problem::parse(d);
  ASSERT_FALSE(p.ok()) << "accepted '" << d << "' as " << p->descriptor();
  EXPECT_EQ(p.error().status, Status::invalid_parameter);
  const std::string& m = p.error().message;
  EXPECT_EQ(m.rfind("descriptor '" + d + "': ", 0), 0u) << "message does not quote the descriptor: " << m;
  for (const std::string& f : fragments) EXPECT_NE(m.find(f), std::string::npos) << "lacks '" << f << "': " << m;
}

using V = std::vector<int64_t>;

// --- defaults ------------------------------------------------------------------

TEST(Descriptor, Defaults2d) {
  const Problem p = parse_ok("ic3ih5");
  EXPECT_EQ(p.input.dims, (V{2, 3, 5, 5}));   // mb2, iw = ih
  EXPECT_EQ(p.weight.dims, (V{3, 3, 1, 1}));  // oc = ic, k = 1
  EXPECT_EQ(p.grad_output.dims, (V{2, 3, 5, 5}));
  EXPECT_EQ(p.stride, (V{1, 1}));
  EXPECT_EQ(p.padding_before, (V{0, 0}));
  EXPECT_EQ(p.padding_after, (V{0, 0}));
  EXPECT_EQ(p.dilation, (V{1, 1}));
  EXPECT_EQ(p.output_padding, (V{0, 0}));
  EXPECT_EQ(p.groups, 1);
  EXPECT_FALSE(p.transposed);
  EXPECT_EQ(p.output_mask, (std::array<bool, 3>{true, true, true}));
  EXPECT_EQ(p.math_mode, MathMode::keep_dtype);
  EXPECT_EQ(p.input.dtype, DataType::f32);
  EXPECT_EQ(p.weight.dtype, DataType::f32);
  EXPECT_EQ(p.grad_output.dtype, DataType::f32);
  ASSERT_TRUE(p.bias_sizes.has_value());
  EXPECT_EQ(*p.bias_sizes, (V{3}));
}

TEST(Descriptor, KernelAndStrideDefaultToTheDimAbove) {
  const Problem p = parse_ok("mb4ic30ih80oc320oh80kh3ph1");  // the CANN sample
  EXPECT_EQ(p.input.dims, (V{4, 30, 80, 80}));
  EXPECT_EQ(p.weight.dims, (V{320, 30, 3, 3}));
  EXPECT_EQ(p.grad_output.dims, (V{4, 320, 80, 80}));
  EXPECT_EQ(p.padding_before, (V{1, 1}));
  const Problem q = parse_ok("ic2ih9iw7kh3kw1sh2dh1");
  EXPECT_EQ(q.weight.dims, (V{2, 2, 3, 1}));
  EXPECT_EQ(q.stride, (V{2, 2}));
  EXPECT_EQ(q.dilation, (V{2, 2}));
  EXPECT_EQ(q.grad_output.dims, (V{2, 2, 3, 4}));  // (9-4-1)/2+1 = 3, (7-0-1)/2+1 = 4
}

TEST(Descriptor, RankFromTheHighestDimNamed) {
  EXPECT_EQ(parse_ok("ic3iw7kw2").input.dims, (V{2, 3, 7}));
  EXPECT_EQ(parse_ok("ic3id4").input.dims, (V{2, 3, 4, 4, 4}));
  EXPECT_EQ(parse_ok("ic3id4ih5iw6kd2").weight.dims, (V{3, 3, 2, 2, 2}));
  EXPECT_EQ(parse_ok("ic3id4ih5iw6kd2").grad_output.dims, (V{2, 3, 3, 4, 5}));
  // A 3-D kernel token makes the problem 3-D even if only ih is named: then id is missing.
  expect_bad("ic3ih5kd2", {"needs the input size of spatial dim 'id'"});
}

// --- each token ------------------------------------------------------------------

TEST(Descriptor, EachToken) {
  Problem p = parse_ok("mb3g2ic4ih6iw7oc6kh3kw2sh2sw1ph1pw0phr2pwr1dh0dw1");
  EXPECT_EQ(p.input.dims, (V{3, 4, 6, 7}));
  EXPECT_EQ(p.weight.dims, (V{6, 2, 3, 2}));
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.stride, (V{2, 1}));
  EXPECT_EQ(p.padding_before, (V{1, 0}));
  EXPECT_EQ(p.padding_after, (V{2, 1}));
  EXPECT_EQ(p.dilation, (V{1, 2}));
  // h: (6+3-2-1)/2+1 = 4; w: (7+1-2-1)/1+1 = 6
  EXPECT_EQ(p.grad_output.dims, (V{3, 6, 4, 6}));
  EXPECT_EQ(*p.bias_sizes, (V{6}));

  p = parse_ok("mb1ic4iw5oc6kw3sw2opw1_tr");  // transposed: weight [ic, oc/g, k]
  EXPECT_TRUE(p.transposed);
  EXPECT_EQ(p.weight.dims, (V{4, 6, 3}));
  EXPECT_EQ(p.output_padding, (V{1}));
  EXPECT_EQ(p.grad_output.dims, (V{1, 6, 12}));  // (5-1)*2 + 2 + 1 + 1
  p = parse_ok("mb1g2ic4iw5oc6kw3_tr");
  EXPECT_EQ(p.weight.dims, (V{4, 3, 3}));

  p = parse_ok("ic2ih4_dtbf16");
  EXPECT_EQ(p.grad_output.dtype, DataType::bf16);
  EXPECT_EQ(p.input.dtype, DataType::bf16);
  EXPECT_EQ(p.weight.dtype, DataType::bf16);
  p = parse_ok("ic2ih4_dtf16:bf16:f32");  // gradOutput:input:weight
  EXPECT_EQ(p.grad_output.dtype, DataType::f16);
  EXPECT_EQ(p.input.dtype, DataType::bf16);
  EXPECT_EQ(p.weight.dtype, DataType::f32);
  EXPECT_EQ(parse_ok("ic2ih4_dtfp16").input.dtype, DataType::f16);
  EXPECT_EQ(parse_ok("ic2ih4_dtfp32").input.dtype, DataType::f32);
  EXPECT_EQ(parse_ok("ic2ih4_dthif8_tr").input.dtype, DataType::hif8);
  EXPECT_EQ(parse_ok("ic2ih4_dtf8e4m3_tr").input.dtype, DataType::f8e4m3);

  EXPECT_EQ(parse_ok("ic2ih4_mask010").output_mask, (std::array<bool, 3>{false, true, false}));
  EXPECT_EQ(parse_ok("ic2ih4_mask101").output_mask, (std::array<bool, 3>{true, false, true}));
  for (int m = 0; m < 4; ++m)
    EXPECT_EQ(parse_ok("ic2ih4_math" + std::to_string(m)).math_mode, static_cast<MathMode>(m));

  p = parse_ok("mb1ic2id3ih4iw5oc2kd2pd1pdr0opd0");
  // ph, pw copy pd; phr, pwr copy their own before side.
  EXPECT_EQ(p.padding_before, (V{1, 1, 1}));
  EXPECT_EQ(p.padding_after, (V{0, 1, 1}));
  EXPECT_EQ(p.weight.dims, (V{2, 2, 2, 2, 2}));
  EXPECT_EQ(p.grad_output.dims, (V{1, 2, 3, 5, 6}));  // d: 3+1+0-1-1+1 = 3; h: 4+2-1-1+1 = 5; w: 5+2-1-1+1 = 6
  // Options may come in any order and the separators are optional.
  EXPECT_EQ(parse_ok("ic2ih4_math1_mask110_dtf16").descriptor(), parse_ok("ic2ih4_dtf16_mask110_math1").descriptor());
}

// A given output size sets the padding as benchdnn deduces it: the leading
// side, when not given, is the symmetric fit ((o-1)*s + extent - i) / 2; the
// trailing side, when not given, is what the output size leaves.
TEST(Descriptor, GivenOutputSizeDeducesThePadding) {
  Problem p = parse_ok("ic3ih5oh3kh3");
  EXPECT_EQ(p.grad_output.dims, (V{2, 3, 3, 3}));
  EXPECT_EQ(p.padding_before, (V{0, 0}));
  EXPECT_EQ(p.padding_after, (V{0, 0}));
  p = parse_ok("ic3ih5oh5kh3");  // "same": 1 on each side
  EXPECT_EQ(p.padding_before, (V{1, 1}));
  EXPECT_EQ(p.padding_after, (V{1, 1}));
  p = parse_ok("ic3ih5oh4kh3");  // odd total: the trailing side takes the extra row
  EXPECT_EQ(p.padding_before, (V{0, 0}));
  EXPECT_EQ(p.padding_after, (V{1, 1}));
  p = parse_ok("ic3ih6oh3kh3sh2");  // (3-1)*2 + 3 - 6 = 1
  EXPECT_EQ(p.padding_before, (V{0, 0}));
  EXPECT_EQ(p.padding_after, (V{1, 1}));
  p = parse_ok("ic3ih5oh5kh3ph2");  // leading given: the trailing side is what is left
  EXPECT_EQ(p.padding_before, (V{2, 2}));
  EXPECT_EQ(p.padding_after, (V{0, 0}));
  p = parse_ok("ic3ih4oh8kh4sh2_tr");  // transposed: (4-1)*2 + 4 - 8 = 2
  EXPECT_EQ(p.padding_before, (V{1, 1}));
  EXPECT_EQ(p.padding_after, (V{1, 1}));
  EXPECT_EQ(p.grad_output.dims, (V{2, 3, 8, 8}));
  // A stride that skips the last rows needs no trailing padding.
  p = parse_ok("ic3ih6oh2kh3sh2");
  EXPECT_EQ(p.padding_after, (V{0, 0}));
  // An output too small for the input cannot be padded into agreement.
  expect_bad("ic3ih9oh2kh3", {"oh2 does not match the output size 7"});
  // iw given without ow: ow is implied, not copied from oh.
  EXPECT_EQ(parse_ok("ic3ih5iw6oh3kh3").grad_output.dims, (V{2, 3, 3, 4}));
  EXPECT_EQ(parse_ok("ic3ih5iw6ow4kh3").grad_output.dims, (V{2, 3, 3, 4}));
}

// benchdnn's dilation counts from 0: dh0 is dense, dh1 one gap.
TEST(Descriptor, DilationCountsFromZero) {
  EXPECT_EQ(parse_ok("ic3ih9kh3dh0").dilation, (V{1, 1}));
  EXPECT_EQ(parse_ok("ic3ih9kh3dh1").dilation, (V{2, 2}));
  EXPECT_EQ(parse_ok("ic3ih9kh3dh1").grad_output.dims, (V{2, 3, 5, 5}));
  Problem p = parse_ok("ic3ih9kh3");
  p.dilation = {3, 1};
  EXPECT_EQ(p.descriptor().find("dh2dw0") != std::string::npos, true) << p.descriptor();
}

// benchdnn's shape files: '_' between groups and n"name" at the end.
TEST(Descriptor, BenchdnnShapeLines) {
  Problem p = parse_ok("g1ic3oc16_iw5ow5kw3pw1_n\"1d_conv:1st\"");
  EXPECT_EQ(p.name, "1d_conv:1st");
  EXPECT_EQ(p.input.dims, (V{2, 3, 5}));
  EXPECT_EQ(p.grad_output.dims, (V{2, 16, 5}));
  p = parse_ok("mb1_ic64oc64_ih56oh56kh3ph1nresnet_50:res2a");  // unquoted: to the end
  EXPECT_EQ(p.name, "resnet_50:res2a");
  const Problem q = parse_ok(p.descriptor());
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.grad_output.dims, p.grad_output.dims);
  expect_bad("ic3ih5n\"open", {"has no closing"});
  expect_bad("ic3ih5n", {"token 'n' needs a name"});
  expect_bad("ic3ih5nab\"c", {"a name may not contain '\"'"});
}

TEST(Descriptor, UnknownMathModeParsesAndPlanRejectsIt) {
  const Problem p = parse_ok("ic2ih4_math7");
  auto plan = Plan::create(p);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("cubeMathType 7"), std::string::npos) << plan.error().message;
}

// --- errors ------------------------------------------------------------------------

TEST(Descriptor, Errors) {
  expect_bad("", {"is empty"});
  expect_bad("mb2ic3ih5xy3", {"token 'xy' is unknown"});
  expect_bad("mb2ih5", {"needs ic"});
  expect_bad("ic3ic4ih5", {"token 'ic' is given twice"});
  expect_bad("ic3ih5kh3kh3", {"token 'kh' is given twice"});
  expect_bad("ic3ih5_dtf64", {"dtype 'f64' is unknown", "f32, f16, bf16"});
  expect_bad("ic3ih5_dtf16:bf16", {"must name one dtype or three"});
  expect_bad("ic3ih5_dt", {"dtype '' is unknown"});
  expect_bad("ic3ih5_mask12", {"mask needs three 0/1 digits"});
  expect_bad("ic3ih5_mask11", {"mask needs three 0/1 digits"});
  expect_bad("ic3ih5_mask1101", {"mask needs three 0/1 digits"});
  expect_bad("ic3", {"gives no spatial size"});
  expect_bad("ic3ih", {"token 'ih' has no value"});
  expect_bad("ic3ih5-1", {"unexpected '-' at position 6"});
  expect_bad("IC3ih5", {"unexpected 'I' at position 0"});
  expect_bad("ic3iw7kh3", {"needs the input size of spatial dim 'ih'"});
  expect_bad("g0ic3ih5", {"g0", "groups must be >= 1"});
  expect_bad("g2ic3ih5oc4", {"ic3 is not divisible by g2"});
  expect_bad("g2ic4ih5oc3_tr", {"oc3 is not divisible by g2"});
}

TEST(Descriptor, HugeNumbers) {
  expect_bad("mb99999999999999999999ic3ih5", {"value of 'mb' does not fit in 64 bits"});
  expect_bad("ic3ih9223372036854775808", {"value of 'ih' does not fit in 64 bits"});
  // Fits in 64 bits, but the implied output size does not: rejected, not wrapped.
  expect_bad("ic1ih4611686018427387904oc1sh4_tr", {"output size of spatial dim 'oh' overflows 64 bits"});
  expect_bad("ic1iw9223372036854775807oc1pw9223372036854775807", {"output size of spatial dim 'ow' overflows"});
  expect_bad("ic1iw5oc1kw4611686018427387904dw3", {"output size of spatial dim 'ow' overflows"});
  // A given output size and a leading padding of 2^63-1: the trailing
  // padding deduced from them is 0, and the output size overflows (the
  // deduction once subtracted the padding with signed overflow, a fuzz
  // finding).
  expect_bad("mb2ic3iw5ow3pw9223372036854775807", {"output size of spatial dim 'ow' overflows"});
  // Largest sizes that fit parse, and validation takes over.
  const Problem p = parse_ok("ic1iw9223372036854775807oc1");
  EXPECT_EQ(p.grad_output.dims, (V{2, 1, 9223372036854775807}));
  EXPECT_FALSE(Plan::create(p).ok());
}

// --- round trip ---------------------------------------------------------------------

Problem random_problem(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (;;) {
    ConvParams c;
    c.spatial = static_cast<int>(pick(1, 3));
    c.transposed = pick(0, 1) == 1;
    c.n = pick(0, 5);
    c.groups = pick(0, 3) == 0 ? pick(2, 4) : 1;
    c.cin = c.groups * pick(0, 4);
    c.cout = c.groups * pick(0, 4);
    const bool asym = pick(0, 2) == 0;
    for (int d = 0; d < c.spatial; ++d) {
      c.in.push_back(pick(1, 40));
      c.kernel.push_back(pick(1, 5));
      c.stride.push_back(pick(1, 3));
      c.dilation.push_back(pick(1, 3));
      c.pad_before.push_back(pick(0, 3));
      c.pad_after.push_back(asym ? pick(0, 3) : c.pad_before.back());
      c.output_padding.push_back(c.transposed ? pick(0, c.stride.back() - 1) : 0);
    }
    bool ok = true;
    for (size_t i = 2; i < c.output_dims().size(); ++i) ok &= c.output_dims()[i] >= 1;
    if (!ok) continue;
    Problem p = c.to_problem();
    const DataType dts[3] = {DataType::f32, DataType::f16, DataType::bf16};
    if (pick(0, 1)) {
      p.grad_output.dtype = p.input.dtype = p.weight.dtype = dts[pick(0, 2)];
    } else {
      p.grad_output.dtype = dts[pick(0, 2)];
      p.input.dtype = dts[pick(0, 2)];
      p.weight.dtype = dts[pick(0, 2)];
    }
    const int64_t mask = pick(0, 7);
    p.output_mask = {(mask & 4) != 0, (mask & 2) != 0, (mask & 1) != 0};
    p.math_mode = static_cast<MathMode>(pick(0, 3));
    return p;
  }
}

TEST(Descriptor, RoundTripRandomProblems) {
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 3000; ++i) {
    const Problem p = random_problem(rng);
    const std::string d = p.descriptor();
    auto q = Problem::parse(d);
    ASSERT_TRUE(q.ok()) << d << ": " << q.error().message;
    EXPECT_EQ(q->input.dims, p.input.dims) << d;
    EXPECT_EQ(q->weight.dims, p.weight.dims) << d;
    EXPECT_EQ(q->grad_output.dims, p.grad_output.dims) << d;
    EXPECT_EQ(q->stride, p.stride) << d;
    EXPECT_EQ(q->padding_before, p.padding_before) << d;
    EXPECT_EQ(q->padding_after, p.padding_after) << d;
    EXPECT_EQ(q->dilation, p.dilation) << d;
    EXPECT_EQ(q->output_padding, p.output_padding) << d;
    EXPECT_EQ(q->transposed, p.transposed) << d;
    EXPECT_EQ(q->groups, p.groups) << d;
    EXPECT_EQ(q->output_mask, p.output_mask) << d;
    EXPECT_EQ(q->math_mode, p.math_mode) << d;
    EXPECT_EQ(q->grad_output.dtype, p.grad_output.dtype) << d;
    EXPECT_EQ(q->input.dtype, p.input.dtype) << d;
    EXPECT_EQ(q->weight.dtype, p.weight.dtype) << d;
    EXPECT_EQ(q->bias_sizes, p.bias_sizes) << d;
    // The descriptor is canonical: printing the parsed problem gives it back.
    EXPECT_EQ(q->descriptor(), d);
    if (HasFailure()) return;
  }
}

TEST(Descriptor, OfHostileProblemsDoesNotOverflow) {
  Problem p = Problem::parse("ic4iw5oc6kw3_tr").value();
  p.weight.dims[1] = int64_t{1} << 62;
  p.groups = 4;
  EXPECT_EQ(p.descriptor().rfind("<invalid", 0), 0u) << p.descriptor();
  p.input.dims = {1, 2};
  EXPECT_EQ(p.descriptor().rfind("<invalid", 0), 0u) << p.descriptor();
}

TEST(Descriptor, CanonicalFormOmitsDefaults) {
  EXPECT_EQ(parse_ok("mb2ic3ih5iw5oc3kh1kw1sh1sw1ph0pw0dh0dw0_mask111_math0_dtf32").descriptor(), "mb2ic3ih5iw5oc3oh5ow5kh1kw1");
  EXPECT_EQ(parse_ok("ic3iw7").descriptor(), "mb2ic3iw7oc3ow7kw1");
}

// Messages that say what is wrong (issue 16): each of these once said
// something else (a negative gradOutput, "has no value", or nothing).
TEST(Descriptor, MessagesNameTheActualMistake) {
  expect_bad("mb2ic16ih32oc16kh40",
             {"the kernel kh40 (dilated extent 40) is larger than the padded input 32 (ih32 + ph0 + phr0)"});
  expect_bad("mb2ic16ih32oc16kh3ph1kw40",
             {"kernel kw40 (dilated extent 40) is larger than the padded input 34 (iw32 + pw1 + pwr1)"});
  // With a stride the truncated division used to make this an empty output.
  expect_bad("ic3ih3kh5sh2", {"kernel kh5 (dilated extent 5) is larger than the padded input 3"});
  expect_bad("ic3ih5_foo", {"token 'foo' is unknown"});
  expect_bad("ic3ih5ph-1", {"token 'ph' has a negative value; expected a non-negative integer"});
  expect_bad("ic3ih5_tr_tr", {"token 'tr' is given twice"});
  expect_bad("ic3ih5_dtf16_dtbf16", {"token 'dt' is given twice"});
  expect_bad("ic3ih5_mask100_mask010", {"token 'mask' is given twice"});
  expect_bad("ic3ih5__tr", {"empty token group at position 6"});
  expect_bad("ic3ih5_", {"empty token group at position 6"});
  expect_bad("_ic3ih5", {"empty token group at position 0"});
}

TEST(Descriptor, ControlBytesAreEscapedInMessages) {
  auto p = Problem::parse("ic3ih5\x1b[31m");
  ASSERT_FALSE(p.ok());
  const std::string& m = p.error().message;
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << "raw escape byte in: " << m;
  EXPECT_NE(m.find("descriptor 'ic3ih5\\x1b[31m': unexpected '\\x1b' at position 6"), std::string::npos) << m;
}

// The easy path reports a typo: value() of a failed Result throws with the
// parser's message (not std::bad_variant_access), and Plan::create takes the
// descriptor itself.
TEST(Descriptor, ValueOfAFailedParseThrowsItsMessage) {
  try {
    (void)Problem::parse("mb2ic16ih32oc16kh3ph1zz9").value();
    FAIL() << "value() of a failed parse did not throw";
  } catch (const BadResultAccess& e) {
    EXPECT_NE(std::string(e.what()).find("token 'zz' is unknown"), std::string::npos) << e.what();
    EXPECT_EQ(e.error().status, Status::invalid_parameter);
  }
}

TEST(Descriptor, PlanCreateFromADescriptor) {
  auto bad = Plan::create("mb2ic16ih32oc16kh3ph1zz9");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("token 'zz' is unknown"), std::string::npos) << bad.error().message;
  auto invalid = Plan::create("mb2ic4ih3oc4kh7");  // a kernel larger than the input: validation's error
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().status, Status::invalid_parameter);
  auto good = Plan::create("mb2ic4ih8oc6kh3");
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->problem().weight.dims, (std::vector<int64_t>{6, 4, 3, 3}));
}

}  // namespace
}  // namespace convbwd::test
