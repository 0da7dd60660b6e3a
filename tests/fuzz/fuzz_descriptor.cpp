// Fuzz target: the problem descriptor parser (Problem::parse), the round trip
// through Problem::descriptor(), and Plan::create + execute on what it accepts.
//
// Promises: parse never crashes or overflows; a rejection is
// invalid_parameter with a message naming the descriptor; every problem that
// plans is printed by descriptor() as a string that parses back to the same
// problem (and prints identically); small accepted problems execute and
// equal the reference, writing only inside their views.
#include <algorithm>
#include <random>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "problem/spec.hpp"
#include "util/guarded.hpp"

namespace convbwd::fuzz {
namespace {

// The fields parse() sets, compared one by one (Problem has no operator==).
std::string difference(const Problem& a, const Problem& b) {
  auto pad_after = [](const Problem& p) { return p.padding_after.empty() ? p.padding_before : p.padding_after; };
  auto out_pad = [](const Problem& p) {
    return p.output_padding.empty() ? std::vector<int64_t>(p.stride.size(), 0) : p.output_padding;
  };
  if (a.grad_output.dims != b.grad_output.dims) return "gradOutput dims";
  if (a.input.dims != b.input.dims) return "input dims";
  if (a.weight.dims != b.weight.dims) return "weight dims";
  if (a.grad_output.dtype != b.grad_output.dtype || a.input.dtype != b.input.dtype ||
      a.weight.dtype != b.weight.dtype)
    return "dtypes";
  if (a.stride != b.stride) return "stride";
  if (a.padding_before != b.padding_before || pad_after(a) != pad_after(b)) return "padding";
  if (a.dilation != b.dilation) return "dilation";
  if (a.transposed != b.transposed) return "transposed";
  if (out_pad(a) != out_pad(b)) return "outputPadding";
  if (a.groups != b.groups) return "groups";
  if (a.output_mask != b.output_mask) return "mask";
  if (a.bias_sizes != b.bias_sizes) return "biasSizes";
  if (a.math_mode != b.math_mode) return "math";
  return "";
}

}  // namespace
}  // namespace convbwd::fuzz

extern "C" int convbwd_fuzz_descriptor(const uint8_t* data, size_t size) {
  using namespace convbwd;
  using namespace convbwd::fuzz;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = Problem::parse(text);
  if (!parsed) {
    CONVBWD_FUZZ_CHECK(parsed.error().status == Status::invalid_parameter,
                       "status " + std::to_string(static_cast<int>(parsed.error().status)));
    CONVBWD_FUZZ_CHECK(parsed.error().message.find("descriptor") != std::string::npos,
                       "the message does not name the descriptor: " + parsed.error().message);
    return 0;
  }
  const Problem& p = parsed.value();
  (void)p.descriptor();  // prints anything parse gives, valid or not
  auto plan = Plan::create(p);
  if (!plan) {
    CONVBWD_FUZZ_CHECK(!plan.error().message.empty(), "Plan::create failed without a message");
    return 0;
  }
  const std::string d = p.descriptor();
  auto again = Problem::parse(d);
  CONVBWD_FUZZ_CHECK(again.ok(), "descriptor() printed '" + d + "', which does not parse: " +
                                     (again.ok() ? "" : again.error().message));
  const std::string diff = difference(p, again.value());
  CONVBWD_FUZZ_CHECK(diff.empty(), "'" + std::string(text) + "' -> '" + d + "' changes the " + diff);
  CONVBWD_FUZZ_CHECK(again->descriptor() == d, "'" + d + "' prints back as '" + again->descriptor() + "'");

  // Execute what is cheap, with guarded buffers and the reference oracle.
  const double macs = plan->flops() / 2;
  int64_t elements = 0;
  for (const TensorDesc* t : {&p.grad_output, &p.input, &p.weight}) {
    int64_t n = 1;
    // Zero dims count as 1: an empty tensor with huge other dims still gets
    // strides (and strided layouts) computed from them.
    for (int64_t x : t->dims) n = n <= (int64_t{1} << 40) / std::max<int64_t>(x, 1) ? n * std::max<int64_t>(x, 1) : int64_t{1} << 40;
    elements += n;
  }
  if (macs > 1e5 || elements > (int64_t{1} << 18)) return 0;
  // The oracle's own loops also visit the taps that land in padding or
  // between strides, which the MAC count leaves out (a 563-tap kernel over a
  // 565-wide row: 4e4 MACs, 4 s under ASan).
  if (oracle_steps(detail::validate(p).value().geo) > kMaxOracleSteps) return 0;
  std::mt19937_64 rng(size);
  test::GuardedRun r = test::make_guarded_run(p, size % 2 != 0, size % 3 != 0, rng);
  const std::string failure = test::run_plan(r);
  CONVBWD_FUZZ_CHECK(failure.empty(), failure);
  return 0;
}
