#include "util/oracle_run.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "numeric/float_formats.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {

Conv::Conv(int64_t n, int64_t cin, int64_t cout, std::vector<int64_t> in, std::vector<int64_t> k) {
  p.spatial = static_cast<int>(in.size());
  p.n = n;
  p.cin = cin;
  p.cout = cout;
  p.in = std::move(in);
  p.kernel = std::move(k);
  const size_t sp = p.in.size();
  p.stride = p.dilation = std::vector<int64_t>(sp, 1);
  p.pad_before = p.pad_after = p.output_padding = std::vector<int64_t>(sp, 0);
}
Conv& Conv::stride(std::vector<int64_t> v) { return p.stride = std::move(v), *this; }
Conv& Conv::dil(std::vector<int64_t> v) { return p.dilation = std::move(v), *this; }
Conv& Conv::pad(std::vector<int64_t> before, std::vector<int64_t> after) {
  p.pad_before = std::move(before);
  p.pad_after = std::move(after);
  return *this;
}
Conv& Conv::groups(int64_t g) { return p.groups = g, *this; }
Conv& Conv::transposed(std::vector<int64_t> output_padding) {
  p.transposed = true;
  p.output_padding = std::move(output_padding);
  return *this;
}

std::string_view base_name(std::string_view impl) { return impl.substr(0, impl.find(':')); }

double no_rounding(double v) { return v; }

namespace {

// True when v is exactly a value of dtype t, so that an exact fp32 sum
// rounded once into t is v itself. The 8-bit and 16-bit outputs are only
// given integer sums: integers up to 2^(significand bits) are exact.
bool representable(DataType t, double v) {
  if (t == DataType::f32) return static_cast<double>(static_cast<float>(v)) == v;
  const int bits = t == DataType::f16 ? 11 : t == DataType::bf16 ? 8 : t == DataType::f8e4m3 ? 4 : 2;
  return v == std::nearbyint(v) && std::fabs(v) <= std::ldexp(1.0, bits);
}

std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.at(static_cast<int64_t>(i));
  return v;
}

}  // namespace

std::array<std::string, 3> check_against_oracle(const OracleCase& c, uint64_t seed, const ValueGen& gen,
                                                RoundOperand round_operand) {
  std::array<std::string, 3> ran;
  const ConvParams& cp = c.p;
  Problem prob = cp.to_problem();
  prob.grad_output.dtype = prob.input.dtype = prob.weight.dtype = c.dt;
  prob.math_mode = c.math;
  for (size_t i = 0; i < 3; ++i) prob.output_mask[i] = c.want[i] != nullptr;
  SCOPED_TRACE(prob.descriptor() + " (" + cp.to_string() + ", operands " + to_string(c.in_layout) + ", gradients " +
               to_string(c.out_layout) + ") seed " + std::to_string(seed));

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> ints(-c.max_abs, c.max_abs);
  HostTensor ops[3] = {make_tensor(c.dt, prob.grad_output.dims, c.in_layout),
                       make_tensor(c.dt, prob.input.dims, c.in_layout),
                       make_tensor(c.dt, prob.weight.dims, c.in_layout)};
  for (int t = 0; t < 3; ++t)
    for (int64_t i = 0; i < ops[t].elements(); ++i)
      detail::store_from_double(ops[t].data(), ops[t].storage_index(i), c.dt, gen ? gen(t, rng) : ints(rng));
  prob.grad_output = ops[0].desc;
  prob.input = ops[1].desc;
  prob.weight = ops[2].desc;
  HostTensor outs[3];
  TensorDesc* out_desc[3] = {&prob.grad_input, &prob.grad_weight, &prob.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!prob.output_mask[static_cast<size_t>(i)]) continue;
    const auto g = static_cast<Gradient>(i);
    outs[i] = make_tensor(prob.gradient_dtype(g), prob.gradient_dims(g), c.out_layout);
    *out_desc[i] = outs[i].desc;
  }

  auto plan = Plan::create(prob);
  EXPECT_TRUE(plan) << plan.error().message;
  if (!plan) return ran;
  const char* const names[3] = {"gradInput", "gradWeight", "gradBias"};
  for (int i = 0; i < 3; ++i) {
    if (!c.want[static_cast<size_t>(i)]) continue;
    ran[static_cast<size_t>(i)] = plan->implementation(static_cast<Gradient>(i));
    if (std::string_view(c.want[static_cast<size_t>(i)]) == kAnyImplementation) continue;
    EXPECT_EQ(std::string(base_name(plan->implementation(static_cast<Gradient>(i)))),
              std::string(c.want[static_cast<size_t>(i)]))
        << names[i] << " went to another implementation: this case no longer tests the one it names";
  }
  const size_t ws_bytes = plan->workspace_size();
  std::unique_ptr<unsigned char, decltype(&std::free)> ws(
      static_cast<unsigned char*>(ws_bytes ? std::aligned_alloc(64, (ws_bytes + 63) / 64 * 64) : nullptr),
      &std::free);
  // NaN in every byte pattern the kernels read back (fp32, bf16, pairs):
  // fresh memory is often zero, which would hide a buffer read before it
  // was written.
  if (ws) std::memset(ws.get(), 0xff, ws_bytes);
  const Error e = plan->execute(
      {ops[0].data(), ops[1].data(), ops[2].data(), outs[0].data(), outs[1].data(), outs[2].data()}, ws.get(),
      ws_bytes);
  EXPECT_FALSE(e) << e.message;
  if (e) return ran;

  // The oracle's operands: the stored values, through the operand rounding.
  std::vector<double> v[3];
  for (int t = 0; t < 3; ++t) {
    v[t] = values(ops[t]);
    for (double& x : v[t]) x = round_operand(x);
  }
  OracleGradients want = backward(cp, v[0], v[1], v[2]);
  want.bias = backward(cp, values(ops[0]), v[1], v[2]).bias;  // unrounded
  const std::vector<double>* wanted[3] = {&want.input, &want.weight, &want.bias};
  for (int i = 0; i < 3; ++i) {
    if (!prob.output_mask[static_cast<size_t>(i)]) continue;
    const HostTensor& got = outs[i];
    const std::vector<double>& ref = *wanted[i];
    EXPECT_EQ(got.elements(), static_cast<int64_t>(ref.size())) << names[i];
    if (got.elements() != static_cast<int64_t>(ref.size())) return ran;
    int failures = 0;
    for (size_t j = 0; j < ref.size() && failures < 5; ++j) {
      // A case whose sums cannot be exact is a badly chosen case, not a
      // library bug: say so.
      if (c.round_once ? !representable(DataType::f32, ref[j]) : !representable(got.desc.dtype, ref[j])) {
        ADD_FAILURE() << names[i] << "[" << j << "] = " << ref[j] << " is not exact in "
                      << to_string(c.round_once ? DataType::f32 : got.desc.dtype)
                      << ": the case's data must keep every sum exact";
        return ran;
      }
      double expect = ref[j];
      if (c.round_once) {
        unsigned char bits[4];
        detail::store_from_double(bits, 0, got.desc.dtype, expect);
        expect = detail::load_as_float(bits, 0, got.desc.dtype);
      }
      const double g = got.at(static_cast<int64_t>(j));
      if (g != expect) {
        ++failures;
        ADD_FAILURE() << names[i] << "[" << j << "]: library " << g << ", oracle " << expect << " (exact sum "
                      << ref[j] << ", " << plan->implementation(static_cast<Gradient>(i)) << ")";
      }
    }
    // Nothing of the storage outside the view may change.
    if (const int64_t at = first_written_outside_view(got); at >= 0)
      ADD_FAILURE() << names[i] << ": storage element " << at << " outside the view was written ("
                    << plan->implementation(static_cast<Gradient>(i)) << ")";
  }
  return ran;
}

}  // namespace convbwd::test
