// The 8-bit operator: gradInput of a transposed convolution in HIFLOAT8 and
// FLOAT8_E4M3FN, through the C++ API and the C API, against the test's own
// computation: decode with a decoder written here from the bit layouts, apply
// the transposed convolution's gradInput formula directly, sum, and round once
// with the library's encoder (tested exhaustively in fp8_format_test).
//
// The result may come from any implementation that accumulates in fp32, so a
// value is accepted when it is the 8-bit rounding of some number within the
// fp32 summation bound n * 2^-24 * sum|products| of the exact sum. With data
// whose products are all zero-error (as here) and a bound of zero, that is
// bit-exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "convbwd/convbwd.hpp"
#include "numeric/float_formats.hpp"
#include "numeric/fp8.hpp"
#include "util/tensor.hpp"

namespace convbwd {
// Readable parameter values in gtest's messages.
void PrintTo(DataType t, std::ostream* os) { *os << to_string(t); }

namespace test {
namespace {

// ---- the test's decoders ---------------------------------------------------------------

// HiFloat8, read left to right: count the dot prefix's leading zeros (after
// the sign) to find the exponent width D, then sign-magnitude exponent with
// an implicit leading 1, then the mantissa.
double hif8_decode(uint8_t code) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const unsigned bits = code & 0x7Fu;
  if (bits == 0) return (code & 0x80) ? std::nan("") : 0.0;
  if (bits == 0x6F) return sign * INFINITY;
  int d = 0;       // exponent width
  int used = 0;    // bits of the dot field
  if (bits & 0x40) { d = (bits & 0x20) ? 4 : 3; used = 2; }
  else if (bits & 0x20) { d = 2; used = 2; }
  else if (bits & 0x10) { d = 1; used = 3; }
  else if (bits & 0x08) { d = 0; used = 4; }
  else return sign * std::pow(2.0, static_cast<int>(bits) - 23);  // denormal 2^(M-23)
  const int mbits = 7 - used - d;
  const unsigned rest = bits & ((1u << (7 - used)) - 1);
  const unsigned exp_field = rest >> mbits, mant = rest & ((1u << mbits) - 1);
  int e = 0;
  if (d > 0) {
    const int magnitude = (1 << (d - 1)) + static_cast<int>(exp_field & ((1u << (d - 1)) - 1));
    e = (exp_field >> (d - 1)) ? -magnitude : magnitude;
  }
  return sign * (1.0 + mant / double(1u << mbits)) * std::pow(2.0, e);
}

double e4m3_decode(uint8_t code) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if ((code & 0x7F) == 0x7F) return std::nan("");
  const int e = (code >> 3) & 15, m = code & 7;
  return sign * (e == 0 ? m * std::pow(2.0, -9) : (8 + m) * std::pow(2.0, e - 10));
}

double decode(DataType t, uint8_t c) { return t == DataType::hif8 ? hif8_decode(c) : e4m3_decode(c); }
uint8_t encode(DataType t, double v) {
  return t == DataType::hif8 ? detail::double_to_hif8(v) : detail::double_to_e4m3fn(v);
}

const char* token(DataType t) { return t == DataType::hif8 ? "hif8" : "f8e4m3"; }

// Codes whose values lie in [2^-6, 2^5] or are zero: every product and every
// sum of a few thousand of them is exact in fp64, so the test's sum is the
// exact sum whatever its order.
std::vector<uint8_t> moderate_codes(DataType t) {
  std::vector<uint8_t> codes;
  for (unsigned c = 0; c < 256; ++c) {
    const double v = decode(t, static_cast<uint8_t>(c));
    if (v == 0 || (std::fabs(v) >= 0x1p-6 && std::fabs(v) <= 32)) codes.push_back(static_cast<uint8_t>(c));
  }
  return codes;
}

// Every finite code.
std::vector<uint8_t> finite_codes(DataType t) {
  std::vector<uint8_t> codes;
  for (unsigned c = 0; c < 256; ++c)
    if (std::isfinite(decode(t, static_cast<uint8_t>(c)))) codes.push_back(static_cast<uint8_t>(c));
  return codes;
}

void fill_codes(HostTensor& h, const std::vector<uint8_t>& codes, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, codes.size() - 1);
  for (int64_t i = 0; i < h.elements(); ++i) h.storage[static_cast<size_t>(h.storage_index(i))] = codes[pick(rng)];
}

uint8_t code_at(const HostTensor& h, int64_t i) { return h.storage[static_cast<size_t>(h.storage_index(i))]; }

// ---- the direct formula -----------------------------------------------------------------

// The transposed convolution's forward is a scatter
//   y[n, co, i*s - pb + r*d] += x[n, ci, i] * w[ci, co, r]   (positions in [0, out)),
// so its gradient with respect to x is the gather
//   gx[n, ci, i] = sum_{co, r} gy[n, co, i*s - pb + r*d] * w[ci, co, r].
// Row-major flat indexing of up to three spatial dims, padded to three.
struct Expected {
  std::vector<double> sum, sum_abs;
  int64_t terms_per_output = 0;
};

Expected expected_grad_input(const Problem& p, const std::vector<double>& gy, const std::vector<double>& w) {
  const int sp = static_cast<int>(p.input.dims.size()) - 2;
  const int64_t n = p.input.dims[0], cin = p.input.dims[1], cout = p.grad_output.dims[1];
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1},
          pb[3] = {0, 0, 0};
  for (int i = 0; i < sp; ++i) {
    const int j = 3 - sp + i;
    in[j] = p.input.dims[2 + i];
    out[j] = p.grad_output.dims[2 + i];
    k[j] = p.weight.dims[2 + i];
    s[j] = p.stride[i];
    d[j] = p.dilation[i];
    pb[j] = p.padding_before[i];
  }
  Expected e;
  e.terms_per_output = cout * k[0] * k[1] * k[2];
  const int64_t in_sp = in[0] * in[1] * in[2], k_sp = k[0] * k[1] * k[2];
  e.sum.assign(static_cast<size_t>(n * cin * in_sp), 0.0);
  e.sum_abs = e.sum;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t i0 = 0; i0 < in[0]; ++i0)
        for (int64_t i1 = 0; i1 < in[1]; ++i1)
          for (int64_t i2 = 0; i2 < in[2]; ++i2) {
            double acc = 0, acc_abs = 0;
            for (int64_t co = 0; co < cout; ++co)
              for (int64_t r0 = 0; r0 < k[0]; ++r0)
                for (int64_t r1 = 0; r1 < k[1]; ++r1)
                  for (int64_t r2 = 0; r2 < k[2]; ++r2) {
                    const int64_t o0 = i0 * s[0] - pb[0] + r0 * d[0], o1 = i1 * s[1] - pb[1] + r1 * d[1],
                                  o2 = i2 * s[2] - pb[2] + r2 * d[2];
                    if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] || o2 < 0 || o2 >= out[2]) continue;
                    const double prod = gy[static_cast<size_t>(((b * cout + co) * out[0] + o0) * out[1] * out[2] +
                                                               o1 * out[2] + o2)] *
                                        w[static_cast<size_t>((ci * cout + co) * k_sp + (r0 * k[1] + r1) * k[2] + r2)];
                    acc += prod;
                    acc_abs += std::fabs(prod);
                  }
            const size_t at = static_cast<size_t>(((b * cin + ci) * in[0] + i0) * in[1] * in[2] + i1 * in[2] + i2);
            e.sum[at] = acc;
            e.sum_abs[at] = acc_abs;
          }
  return e;
}

// Accepts `got` when it is the 8-bit rounding of a value within the fp32
// accumulation bound of the exact sum (rounding is monotone, so the two ends
// bracket every such rounding).
::testing::AssertionResult acceptable(DataType t, uint8_t got, double exact, double sum_abs, int64_t n) {
  const double bound = static_cast<double>(std::max<int64_t>(n, 1)) * 0x1p-24 * sum_abs;
  const double lo = decode(t, encode(t, exact - bound)), hi = decode(t, encode(t, exact + bound));
  const double g = decode(t, got);
  if (g >= lo && g <= hi) return ::testing::AssertionSuccess();
  char buf[200];
  std::snprintf(buf, sizeof buf, "got 0x%02X (%.9g), want within [%.9g, %.9g] (exact sum %.17g, bound %.3g)", got, g,
                lo, hi, exact, bound);
  return ::testing::AssertionFailure() << buf;
}

// ---- running a problem ------------------------------------------------------------------

struct Outcome {
  HostTensor go, in, w, gi, gb;
};

// Plans and runs `p` on tensors in the given layouts, filled from `codes`.
Outcome run(const Problem& given, Layout in_layout, Layout out_layout, const std::vector<uint8_t>& codes,
            uint64_t seed) {
  Problem p = given;
  Outcome o;
  std::mt19937_64 rng(seed);
  o.go = make_tensor(p.grad_output.dtype, p.grad_output.dims, in_layout);
  o.in = make_tensor(p.input.dtype, p.input.dims, in_layout);
  o.w = make_tensor(p.weight.dtype, p.weight.dims, in_layout);
  fill_codes(o.go, codes, rng);
  fill_codes(o.in, codes, rng);
  fill_codes(o.w, codes, rng);
  p.grad_output = o.go.desc;
  p.input = o.in.desc;
  p.weight = o.w.desc;
  o.gi = make_tensor(p.gradient_dtype(Gradient::input), p.gradient_dims(Gradient::input), out_layout);
  p.grad_input = o.gi.desc;
  if (p.output_mask[2]) {
    const DataType bias_dt = p.grad_bias.dims.empty() ? p.gradient_dtype(Gradient::bias) : p.grad_bias.dtype;
    o.gb = make_tensor(bias_dt, p.gradient_dims(Gradient::bias), Layout::contiguous);
    p.grad_bias = o.gb.desc;
  }
  auto plan = Plan::create(p);
  EXPECT_TRUE(plan) << p.descriptor() << ": " << plan.error().message;
  if (!plan) return o;
  std::vector<unsigned char> ws(plan->workspace_size() + 64);
  Buffers b{o.go.data(), o.in.data(), o.w.data(), o.gi.data(), nullptr, p.output_mask[2] ? o.gb.data() : nullptr};
  const Error e = plan->execute(b, ws.data(), ws.size());
  EXPECT_FALSE(e) << p.descriptor() << ": " << e.message;
  return o;
}

std::vector<double> decoded(const HostTensor& h) {
  std::vector<double> v(static_cast<size_t>(h.elements()));
  for (int64_t i = 0; i < h.elements(); ++i) v[static_cast<size_t>(i)] = decode(h.desc.dtype, code_at(h, i));
  return v;
}

void check_grad_input(const Problem& p, const Outcome& o, const std::string& repro) {
  const Expected e = expected_grad_input(p, decoded(o.go), decoded(o.w));
  const DataType t = p.input.dtype;
  ASSERT_EQ(o.gi.desc.dtype, t);
  int failures = 0;
  for (int64_t i = 0; i < o.gi.elements() && failures < 5; ++i) {
    const auto r = acceptable(t, code_at(o.gi, i), e.sum[static_cast<size_t>(i)], e.sum_abs[static_cast<size_t>(i)],
                              e.terms_per_output);
    if (!r) {
      ++failures;
      ADD_FAILURE() << repro << " gradInput[" << i << "]: " << r.message();
    }
  }
}

// gradBias[co] = sum over n and positions of gradOutput[n, co, ...], rounded
// into gradBias's dtype (checked with the same bracket as above).
void check_grad_bias(const Problem& p, const Outcome& o, const std::string& repro) {
  const std::vector<double> gy = decoded(o.go);
  const int64_t n = p.grad_output.dims[0], cout = p.grad_output.dims[1];
  const int64_t per = o.go.elements() / std::max<int64_t>(n * cout, 1);
  const DataType bt = o.gb.desc.dtype;
  for (int64_t co = 0; co < cout; ++co) {
    double sum = 0, sum_abs = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < per; ++j) {
        const double v = gy[static_cast<size_t>((b * cout + co) * per + j)];
        sum += v;
        sum_abs += std::fabs(v);
      }
    const double bound = static_cast<double>(n * per) * 0x1p-24 * sum_abs;
    unsigned char lo_b[4], hi_b[4];
    detail::store_from_double(lo_b, 0, bt, sum - bound);
    detail::store_from_double(hi_b, 0, bt, sum + bound);
    const double lo = detail::load_as_float(lo_b, 0, bt), hi = detail::load_as_float(hi_b, 0, bt);
    const double got = o.gb.at(co);
    EXPECT_TRUE(got >= lo && got <= hi) << repro << " gradBias[" << co << "] = " << got << ", want in [" << lo << ", "
                                        << hi << "] (sum " << sum << ")";
  }
}

Problem parse(const std::string& d) {
  auto p = Problem::parse(d);
  EXPECT_TRUE(p) << d << ": " << p.error().message;
  return p ? p.value() : Problem{};
}

// ---- the operator against the formula ------------------------------------------------

const char* const kGeometries[] = {
    "mb2ic3iw7oc4kw3sw2pw1",                        // 1D, stride 2
    "mb1ic1iw5oc1kw1",                              // 1x1
    "mb2ic4ih5iw4oc3kh3kw2sh2sw1ph1pw0dh0dw1",      // 2D, mixed stride and dilation
    "mb1ic2ih4iw4oc3kh2kw2sh3sw3",                  // stride above kernel: gaps
    "mb1ic2ih6iw5oc2kh3kw3ph2pw1phr0pwr2",          // asymmetric padding
    "mb1ic2id3ih3iw3oc2kd2kh2kw2sd2sh1sw2pd1",      // 3D
    "mb1ic3ih3iw3oc24kh3kw3ph1pw1",                 // a long reduction: 216 terms
};

class Fp8Operator : public ::testing::TestWithParam<DataType> {};

TEST_P(Fp8Operator, GradInputMatchesTheFormulaInEveryLayout) {
  const DataType t = GetParam();
  const std::vector<uint8_t> codes = moderate_codes(t);
  const Layout layouts[][2] = {{Layout::contiguous, Layout::contiguous},
                               {Layout::padded, Layout::channels_last},
                               {Layout::reversed, Layout::padded}};
  uint64_t seed = 1;
  for (const char* g : kGeometries) {
    for (const char* mask : {"_mask100", "_mask101"}) {
      const std::string d = std::string(g) + "_tr_dt" + token(t) + mask;
      const Problem p = parse(d);
      for (const auto& l : layouts) {
        const std::string repro = d + " in=" + to_string(l[0]) + " out=" + to_string(l[1]) + " seed=" +
                                  std::to_string(seed);
        const Outcome o = run(p, l[0], l[1], codes, seed++);
        check_grad_input(p, o, repro);
        if (p.output_mask[2]) check_grad_bias(p, o, repro);
      }
    }
  }
}

TEST_P(Fp8Operator, WholeRangeOfCodes) {
  // Every finite code, 2^-22 .. 2^15 for HiFloat8: sums span many binades,
  // overflow saturates, and tiny sums reach the denormals.
  const DataType t = GetParam();
  const std::vector<uint8_t> codes = finite_codes(t);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const std::string d = std::string("mb2ic3ih4iw4oc5kh2kw2sh2sw1ph1pw0_tr_dt") + token(t) + "_mask100";
    const Problem p = parse(d);
    const Outcome o = run(p, Layout::contiguous, Layout::contiguous, codes, seed);
    check_grad_input(p, o, d + " seed=" + std::to_string(seed));
  }
}

TEST_P(Fp8Operator, BitIdenticalForAnyThreadCount) {
  const DataType t = GetParam();
  const Problem p = parse(std::string("mb3ic8ih6iw6oc8kh3kw3ph1pw1_tr_dt") + token(t) + "_mask100");
  const int before = num_threads();
  std::vector<unsigned char> first;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const Outcome o = run(p, Layout::contiguous, Layout::contiguous, finite_codes(t), 5);
    if (first.empty()) first = o.gi.storage;
    EXPECT_EQ(o.gi.storage, first) << threads << " threads";
  }
  set_num_threads(before);
}

// Saturation to the largest finite value, and the special values, through the
// whole operator: every product is max * max.
TEST_P(Fp8Operator, OverflowSaturatesAndSpecialsPropagate) {
  const DataType t = GetParam();
  const uint8_t max_code = t == DataType::hif8 ? 0x6E : 0x7E;
  const double max_value = t == DataType::hif8 ? 32768.0 : 448.0;
  const Problem p = parse(std::string("mb1ic2ih3iw3oc2kh2kw2_tr_dt") + token(t) + "_mask100");
  {
    const Outcome o = run(p, Layout::contiguous, Layout::contiguous, {max_code}, 1);
    for (int64_t i = 0; i < o.gi.elements(); ++i) EXPECT_EQ(code_at(o.gi, i), max_code) << i;
    const Outcome neg = run(p, Layout::contiguous, Layout::contiguous, {static_cast<uint8_t>(max_code | 0x80)}, 1);
    // (-max) * (-max) > 0: still the positive maximum.
    for (int64_t i = 0; i < neg.gi.elements(); ++i) EXPECT_EQ(decode(t, code_at(neg.gi, i)), max_value) << i;
  }
  {
    // One NaN in gradOutput: NaN where it contributes, numbers elsewhere.
    const uint8_t nan_code = t == DataType::hif8 ? 0x80 : 0x7F;
    Outcome o = run(p, Layout::contiguous, Layout::contiguous, {encode(t, 1.0)}, 1);
    o.go.storage[static_cast<size_t>(o.go.storage_index(0))] = nan_code;
    Problem q = p;
    q.grad_output = o.go.desc;
    q.input = o.in.desc;
    q.weight = o.w.desc;
    q.grad_input = o.gi.desc;
    auto plan = Plan::create(q);
    ASSERT_TRUE(plan) << plan.error().message;
    std::vector<unsigned char> ws(plan->workspace_size() + 64);
    ASSERT_FALSE(plan->execute({o.go.data(), o.in.data(), o.w.data(), o.gi.data(), nullptr, nullptr}, ws.data(),
                               ws.size()));
    // gradOutput[0,0,0,0] reaches gradInput[n=0, ci, 0, 0] through tap (0, 0) of every ci.
    EXPECT_TRUE(std::isnan(decode(t, code_at(o.gi, 0))));
    EXPECT_TRUE(std::isnan(decode(t, code_at(o.gi, 9))));  // ci = 1
    EXPECT_FALSE(std::isnan(decode(t, code_at(o.gi, 8))));
    if (t == DataType::hif8) {
      // HiFloat8 has Inf: an infinite operand gives an infinite result.
      o.go.storage[static_cast<size_t>(o.go.storage_index(0))] = 0x6F;
      ASSERT_FALSE(plan->execute({o.go.data(), o.in.data(), o.w.data(), o.gi.data(), nullptr, nullptr}, ws.data(),
                                 ws.size()));
      EXPECT_EQ(decode(t, code_at(o.gi, 0)), INFINITY);
    }
  }
}

TEST_P(Fp8Operator, LibraryCheckerAgreesOnStridedViews) {
  // The shared checker (reference vs plan on uniform data) for 8-bit too.
  const DataType t = GetParam();
  for (const char* g : {"mb2ic3ih5iw5oc4kh3kw3sh2sw2ph1pw1", "mb2ic2iw9oc3kw4sw3pw2dw1"}) {
    const Problem p = parse(std::string(g) + "_tr_dt" + token(t) + "_mask101");
    CheckOptions opt;
    opt.in_layout = Layout::padded;
    opt.out_layout = Layout::reversed;
    const auto c = check_against_reference(p, opt);
    EXPECT_TRUE(c.pass) << p.descriptor() << ": " << c.first_failure;
  }
}

TEST_P(Fp8Operator, GradBiasMayBeAnyWideDtype) {
  const DataType t = GetParam();
  for (DataType bt : {DataType::f32, DataType::f16, DataType::bf16}) {
    Problem p = parse(std::string("mb2ic3ih4iw4oc4kh3kw3_tr_dt") + token(t) + "_mask101");
    p.grad_bias.dtype = bt;
    p.grad_bias.dims = {4};
    const Outcome o = run(p, Layout::contiguous, Layout::contiguous, moderate_codes(t), 3);
    ASSERT_EQ(o.gb.desc.dtype, bt);
    check_grad_bias(p, o, p.descriptor() + " gradBias " + std::string(convbwd::to_string(bt)));
    check_grad_input(p, o, p.descriptor());
  }
}

// ---- every other use is refused ---------------------------------------------------

void expect_refused(const Problem& p, const std::vector<std::string>& phrases, const std::string& what) {
  auto plan = Plan::create(p);
  ASSERT_FALSE(plan) << what << ": accepted " << p.descriptor();
  EXPECT_EQ(plan.error().status, Status::invalid_parameter) << what;
  EXPECT_EQ(static_cast<int>(plan.error().status), 161002);
  for (const std::string& ph : phrases)
    EXPECT_NE(plan.error().message.find(ph), std::string::npos)
        << what << ": message \"" << plan.error().message << "\" lacks \"" << ph << "\"";
}

TEST_P(Fp8Operator, EveryOtherUseIsRefusedNamingTheRule) {
  const DataType t = GetParam();
  const std::string dt = token(t);
  const std::string base = "mb2ic4ih5iw5oc4kh3kw3sh2sw2ph1pw1";
  ASSERT_TRUE(Plan::create(parse(base + "_tr_dt" + dt + "_mask100")));
  expect_refused(parse(base + "_dt" + dt + "_mask100"), {"transposed = true"}, "not transposed");
  expect_refused(parse(base + "_dt" + dt), {"transposed = true"}, "not transposed, all outputs");
  expect_refused(parse(base + "_tr_dt" + dt + "_mask000"), {"outputMask[0]"}, "nothing requested");
  expect_refused(parse(base + "_tr_dt" + dt + "_mask001"), {"outputMask[0]"}, "gradBias only");
  expect_refused(parse(base + "_tr_dt" + dt + "_mask010"), {"outputMask[0]"}, "gradWeight only");
  expect_refused(parse(base + "_tr_dt" + dt + "_mask110"), {"outputMask[1]", "gradWeight"}, "gradWeight too");
  expect_refused(parse(base + "_tr_dt" + dt), {"outputMask[1]"}, "all three");
  expect_refused(parse(base + "_tr_dt" + dt + ":" + dt + ":f32_mask100"), {"same", "weight f32"}, "weight f32");
  expect_refused(parse(base + "_tr_dtf16:" + dt + ":" + dt + "_mask100"), {"same", "gradOutput f16"},
                 "gradOutput f16");
  expect_refused(parse(base + "_tr_dt" + dt + ":bf16:" + dt + "_mask100"), {"same", "input bf16"}, "input bf16");
  const std::string other = t == DataType::hif8 ? "f8e4m3" : "hif8";
  expect_refused(parse(base + "_tr_dt" + dt + ":" + other + ":" + dt + "_mask100"), {"same"}, "two 8-bit dtypes");
  expect_refused(parse("mb2g2ic4ih5iw5oc4kh3kw3_tr_dt" + dt + "_mask100"), {"groups = 1", "got 2"}, "groups 2");
  expect_refused(parse(base + "oph1opw0_tr_dt" + dt + "_mask100"), {"outputPadding all 0", "[1,0]"},
                 "outputPadding");
  {
    Problem p = parse(base + "_tr_dt" + dt + "_mask101");
    p.grad_bias.dims = {4};
    p.grad_bias.dtype = t;
    expect_refused(p, {"gradBias dtype " + dt, "8-bit"}, "8-bit gradBias");
  }
  {
    Problem p = parse(base + "_tr_dt" + dt + "_mask100");
    p.grad_input.dims = p.input.dims;
    p.grad_input.dtype = DataType::f32;
    expect_refused(p, {"gradInput dtype f32", dt}, "gradInput not 8-bit");
  }
  {
    // 8-bit outputs of a wide problem.
    Problem p = parse(base + "_tr");
    p.grad_input.dims = p.input.dims;
    p.grad_input.dtype = t;
    expect_refused(p, {"gradInput dtype " + dt}, "8-bit gradInput of an fp32 problem");
    Problem q = parse(base);
    q.grad_weight.dims = q.weight.dims;
    q.grad_weight.dtype = t;
    expect_refused(q, {"gradWeight dtype " + dt}, "8-bit gradWeight of an fp32 problem");
    Problem r = parse(base);
    r.grad_bias.dims = {4};
    r.grad_bias.dtype = t;
    expect_refused(r, {"gradBias dtype " + dt}, "8-bit gradBias of an fp32 problem");
  }
}

TEST_P(Fp8Operator, DescriptorTokens) {
  const DataType t = GetParam();
  const std::string d = std::string("mb2ic3ih5iw5oc4kh3kw3sh2sw2ph1pw1_tr_dt") + token(t) + "_mask100";
  const Problem p = parse(d);
  EXPECT_EQ(p.grad_output.dtype, t);
  EXPECT_EQ(p.input.dtype, t);
  EXPECT_EQ(p.weight.dtype, t);
  EXPECT_TRUE(p.transposed);
  EXPECT_EQ(p.gradient_dtype(Gradient::input), t);
  EXPECT_EQ(p.gradient_dtype(Gradient::bias), DataType::f32);
  // The descriptor names the dtype again and parses back to itself.
  const std::string canon = p.descriptor();
  EXPECT_NE(canon.find(std::string("_dt") + token(t)), std::string::npos) << canon;
  EXPECT_EQ(parse(canon).descriptor(), canon);
  if (t == DataType::f8e4m3) {
    EXPECT_EQ(parse("mb1ic1iw3oc1kw1_tr_dte4m3_mask100").input.dtype, t);  // the short alias
  }
}

TEST_P(Fp8Operator, EmptyReductionWritesZeros) {
  // No output channels: every gradInput element is an empty sum, +0 (code
  // 0x00 in both formats).
  const DataType t = GetParam();
  const Problem p = parse(std::string("mb1ic2ih3iw3oc0kh2kw2_tr_dt") + token(t) + "_mask100");
  const Outcome o = run(p, Layout::padded, Layout::padded, moderate_codes(t), 1);
  ASSERT_GT(o.gi.elements(), 0);
  for (int64_t i = 0; i < o.gi.elements(); ++i) EXPECT_EQ(code_at(o.gi, i), 0x00) << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Fp8Operator, ::testing::Values(DataType::hif8, DataType::f8e4m3),
                         [](const ::testing::TestParamInfo<DataType>& i) {
                           return std::string(i.param == DataType::hif8 ? "hif8" : "f8e4m3");
                         });

// ---- the C API ---------------------------------------------------------------------

struct AclBuffer {
  std::unique_ptr<void, aclError (*)(void*)> mem{nullptr, aclrtFree};
  std::unique_ptr<aclTensor, aclnnStatus (*)(const aclTensor*)> tensor{nullptr, aclDestroyTensor};
  size_t bytes = 0;
};

// A contiguous tensor in aclrtMalloc memory holding `host`.
void make_acl(AclBuffer& b, const std::vector<int64_t>& dims, aclDataType dt, size_t elem_bytes,
              const std::vector<unsigned char>& host) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  b.bytes = static_cast<size_t>(n) * elem_bytes;
  void* p = nullptr;
  ASSERT_EQ(aclrtMalloc(&p, b.bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  b.mem.reset(p);
  ASSERT_EQ(aclrtMemcpy(p, b.bytes, host.data(), b.bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  const std::vector<int64_t> storage{n};
  b.tensor.reset(aclCreateTensor(dims.data(), dims.size(), dt, nullptr, 0,
                                 dims.size() == 4 ? ACL_FORMAT_NCHW : ACL_FORMAT_ND, storage.data(), 1, p));
  ASSERT_NE(b.tensor, nullptr);
}

using IntArray = std::unique_ptr<aclIntArray, aclnnStatus (*)(const aclIntArray*)>;
IntArray ints(const std::vector<int64_t>& v) { return IntArray(aclCreateIntArray(v.data(), v.size()), aclDestroyIntArray); }

struct CapiCase {
  DataType t;
  aclDataType acl;
};

class Fp8Capi : public ::testing::TestWithParam<CapiCase> {};

TEST_P(Fp8Capi, GradInputThroughTheCApi) {
  const auto [t, acl] = GetParam();
  // ic 3, oc 4, in 5x5, kernel 3x3, stride 2, padding 1: gradOutput 9x9.
  const Problem p = parse(std::string("mb2ic3ih5iw5oc4kh3kw3sh2sw2ph1pw1_tr_dt") + token(t) + "_mask101");
  std::mt19937_64 rng(9);
  const std::vector<uint8_t> codes = moderate_codes(t);
  std::uniform_int_distribution<size_t> pick(0, codes.size() - 1);
  auto random_codes = [&](const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<unsigned char> v(static_cast<size_t>(n));
    for (auto& c : v) c = codes[pick(rng)];
    return v;
  };
  const auto go_host = random_codes(p.grad_output.dims), in_host = random_codes(p.input.dims),
             w_host = random_codes(p.weight.dims);
  AclBuffer go, in, w, gi, gb;
  make_acl(go, p.grad_output.dims, acl, 1, go_host);
  make_acl(in, p.input.dims, acl, 1, in_host);
  make_acl(w, p.weight.dims, acl, 1, w_host);
  make_acl(gi, p.input.dims, acl, 1, std::vector<unsigned char>(in_host.size(), 0xA5));
  make_acl(gb, {4}, ACL_FLOAT, 4, std::vector<unsigned char>(16, 0));
  IntArray bias = ints({4}), stride = ints({2, 2}), pad = ints({1, 1}), dil = ints({1, 1}), outpad = ints({0, 0});
  const bool mask_v[3] = {true, false, true};
  std::unique_ptr<aclBoolArray, aclnnStatus (*)(const aclBoolArray*)> mask(aclCreateBoolArray(mask_v, 3),
                                                                            aclDestroyBoolArray);
  uint64_t ws_size = 0;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(go.tensor.get(), in.tensor.get(), w.tensor.get(), bias.get(),
                                                     stride.get(), pad.get(), dil.get(), true, outpad.get(), 1,
                                                     mask.get(), 0, gi.tensor.get(), nullptr, gb.tensor.get(),
                                                     &ws_size, &ex),
            ACLNN_SUCCESS)
      << aclGetRecentErrMsg();
  std::unique_ptr<void, aclError (*)(void*)> ws(nullptr, aclrtFree);
  if (ws_size > 0) {
    void* q = nullptr;
    ASSERT_EQ(aclrtMalloc(&q, ws_size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ws.reset(q);
  }
  ASSERT_EQ(aclnnConvolutionBackward(ws.get(), ws_size, ex, nullptr), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS) << aclGetRecentErrMsg();

  std::vector<unsigned char> gi_host(gi.bytes);
  ASSERT_EQ(aclrtMemcpy(gi_host.data(), gi.bytes, gi.mem.get(), gi.bytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  std::vector<double> gy(go_host.size()), wv(w_host.size());
  for (size_t i = 0; i < gy.size(); ++i) gy[i] = decode(t, go_host[i]);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = decode(t, w_host[i]);
  const Expected e = expected_grad_input(p, gy, wv);
  for (size_t i = 0; i < gi_host.size(); ++i)
    EXPECT_TRUE(acceptable(t, gi_host[i], e.sum[i], e.sum_abs[i], e.terms_per_output)) << "gradInput[" << i << "]";
  std::vector<float> gb_host(4);
  ASSERT_EQ(aclrtMemcpy(gb_host.data(), 16, gb.mem.get(), 16, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  for (int64_t co = 0; co < 4; ++co) {
    double sum = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t j = 0; j < 81; ++j) sum += gy[static_cast<size_t>((b * 4 + co) * 81 + j)];
    EXPECT_EQ(gb_host[static_cast<size_t>(co)], static_cast<float>(sum)) << "gradBias[" << co << "]";  // exact data
  }
}

TEST_P(Fp8Capi, RefusedUseReturns161002AndSaysWhy) {
  const auto [t, acl] = GetParam();
  const std::vector<int64_t> in_dims{1, 2, 4, 4}, w_dims{2, 2, 3, 3}, go_dims{1, 2, 6, 6};
  AclBuffer go, in, w, gi, gw;
  make_acl(go, go_dims, acl, 1, std::vector<unsigned char>(72, 0x08));
  make_acl(in, in_dims, acl, 1, std::vector<unsigned char>(32, 0x08));
  make_acl(w, w_dims, acl, 1, std::vector<unsigned char>(36, 0x08));
  make_acl(gi, in_dims, acl, 1, std::vector<unsigned char>(32, 0));
  make_acl(gw, w_dims, acl, 1, std::vector<unsigned char>(36, 0));
  IntArray bias = ints({2}), stride = ints({1, 1}), pad = ints({0, 0}), dil = ints({1, 1}), outpad = ints({0, 0});
  uint64_t ws_size = 0;
  aclOpExecutor* ex = nullptr;
  {
    // gradWeight requested.
    const bool mask_v[3] = {true, true, false};
    std::unique_ptr<aclBoolArray, aclnnStatus (*)(const aclBoolArray*)> mask(aclCreateBoolArray(mask_v, 3),
                                                                              aclDestroyBoolArray);
    EXPECT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(go.tensor.get(), in.tensor.get(), w.tensor.get(), bias.get(),
                                                       stride.get(), pad.get(), dil.get(), true, outpad.get(), 1,
                                                       mask.get(), 0, gi.tensor.get(), gw.tensor.get(), nullptr,
                                                       &ws_size, &ex),
              ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("outputMask[1]"), std::string::npos) << aclGetRecentErrMsg();
  }
  {
    // Not transposed (a normal convolution with the same shapes: in 6x6 -> 4x4).
    const bool mask_v[3] = {true, false, false};
    std::unique_ptr<aclBoolArray, aclnnStatus (*)(const aclBoolArray*)> mask(aclCreateBoolArray(mask_v, 3),
                                                                              aclDestroyBoolArray);
    AclBuffer gi2;
    make_acl(gi2, go_dims, acl, 1, std::vector<unsigned char>(72, 0));
    EXPECT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(in.tensor.get(), go.tensor.get(), w.tensor.get(), bias.get(),
                                                       stride.get(), pad.get(), dil.get(), false, outpad.get(), 1,
                                                       mask.get(), 0, gi2.tensor.get(), nullptr, nullptr, &ws_size,
                                                       &ex),
              ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("transposed = true"), std::string::npos)
        << aclGetRecentErrMsg();
  }
  {
    // gradBias in the 8-bit dtype.
    const bool mask_v[3] = {true, false, true};
    std::unique_ptr<aclBoolArray, aclnnStatus (*)(const aclBoolArray*)> mask(aclCreateBoolArray(mask_v, 3),
                                                                              aclDestroyBoolArray);
    AclBuffer gb;
    make_acl(gb, {2}, acl, 1, std::vector<unsigned char>(2, 0));
    EXPECT_EQ(aclnnConvolutionBackwardGetWorkspaceSize(go.tensor.get(), in.tensor.get(), w.tensor.get(), bias.get(),
                                                       stride.get(), pad.get(), dil.get(), true, outpad.get(), 1,
                                                       mask.get(), 0, gi.tensor.get(), nullptr, gb.tensor.get(),
                                                       &ws_size, &ex),
              ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(std::string(aclGetRecentErrMsg()).find("gradBias dtype"), std::string::npos) << aclGetRecentErrMsg();
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Fp8Capi,
                         ::testing::Values(CapiCase{DataType::hif8, ACL_HIFLOAT8},
                                           CapiCase{DataType::f8e4m3, ACL_FLOAT8_E4M3FN}),
                         [](const ::testing::TestParamInfo<CapiCase>& i) {
                           return std::string(i.param.t == DataType::hif8 ? "hif8" : "f8e4m3");
                         });

static_assert(ACL_HIFLOAT8 == 34 && ACL_FLOAT8_E4M3FN == 36, "CANN's dtype values");


// Issue 6: products accumulate in fp32 before the one rounding into 8 bits.
// 16*16 + 4*4 + 2^-9*2^-9 = 272 + 2^-18 exactly. In fp32 the 2^-18 is lost
// (27 bits apart), leaving 272, the midpoint of E4M3FN neighbours 256 and
// 288, which ties to even: 256. An fp64 sum would round up to 288.
TEST(Fp8Accumulation, ProductsAccumulateInFp32) {
  auto p = Problem::parse("mb1ic1iw1oc3kw1_tr_dtf8e4m3_mask100");
  ASSERT_TRUE(p) << p.error().message;
  auto plan = Plan::create(p.value());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), "f8_fwd_direct");
  const uint8_t go[3] = {detail::double_to_e4m3fn(16), detail::double_to_e4m3fn(4), detail::double_to_e4m3fn(0x1p-9)};
  const uint8_t w[3] = {go[0], go[1], go[2]};
  const uint8_t x[1] = {0};
  uint8_t gi[1] = {0xAA};
  std::vector<std::byte> ws(plan->workspace_size());
  Buffers b{go, x, w, gi, nullptr, nullptr};
  ASSERT_FALSE(plan->execute(b, ws.data(), ws.size()));
  EXPECT_EQ(detail::e4m3fn_to_float(gi[0]), 256.0f);
}

}  // namespace
}  // namespace test
}  // namespace convbwd
