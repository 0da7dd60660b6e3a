// Every rule a call can break lives here, and nowhere else.
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <sstream>

#include "problem/checked.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {
namespace {

constexpr int64_t kMaxGroups = 65535;

Error invalid(std::string message) { return Error{Status::invalid_parameter, std::move(message)}; }

std::string list(const std::vector<int64_t>& v) { return format_dims(v); }

const char* const kGradientName[3] = {"gradInput", "gradWeight", "gradBias"};

bool is_8bit(DataType t) { return t == DataType::hif8 || t == DataType::f8e4m3; }

// The wider of two computation types: fp16 with bf16 has no common 16-bit
// type, so it widens to fp32.
DataType promote(DataType a, DataType b) {
  if (a == b) return a;
  return DataType::f32;
}

// Checks a tensor's view (strides, offset, reach) and fills a View.
// Outputs must not overlap themselves: two elements sharing memory would make
// the result depend on write order.
std::optional<Error> make_view(const char* name, const TensorDesc& d, bool is_output, View& v) {
  v.dtype = d.dtype;
  v.rank = static_cast<int>(d.dims.size());
  v.offset = d.offset;
  if (d.offset < 0)
    return invalid(std::string(name) + " offset " + std::to_string(d.offset) +
                   " is negative; expected an offset >= 0 elements");
  if (!d.strides.empty() && d.strides.size() != d.dims.size())
    return invalid(std::string(name) + " has " + std::to_string(d.strides.size()) + " strides " +
                   list(d.strides) + " for " + std::to_string(d.dims.size()) + " dims " + list(d.dims) +
                   "; expected one stride per dim");
  Checked count(1);
  // Zero dims count as 1 here: an empty tensor's other dims still size
  // loops and products (spatial extents, reduction lengths) downstream.
  Checked nonzero_count(1);
  for (size_t i = 0; i < d.dims.size(); ++i) {
    count = count * d.dims[i];
    nonzero_count = nonzero_count * std::max<int64_t>(d.dims[i], 1);
  }
  if (!count.ok() || !nonzero_count.ok())
    return invalid(std::string(name) + " dims " + list(d.dims) +
                   " hold more than 2^63 elements (zero dims counted as 1)");
  // Contiguous strides, checked as we go.
  Checked running(1);
  for (int i = v.rank - 1; i >= 0; --i) {
    v.dims[i] = d.dims[i];
    if (d.strides.empty()) {
      v.strides[i] = running.ok() ? running.value() : 0;
      running = running * std::max<int64_t>(d.dims[i], 1);
    } else {
      v.strides[i] = d.strides[i];
      if (d.strides[i] < 0)
        return invalid(std::string(name) + " strides " + list(d.strides) + " contain a negative stride " +
                       std::to_string(d.strides[i]) + " at dim " + std::to_string(i) +
                       "; expected strides >= 0");
    }
  }
  // The last element reached: offset + sum (dim-1)*stride. Its byte address
  // must be representable too.
  if (count.value() > 0) {
    const Checked reach = v.last_index();
    Checked bytes = reach + 1;
    bytes = bytes * static_cast<int64_t>(size_of(d.dtype));
    if (!reach.ok() || !bytes.ok())
      return invalid(std::string(name) + " view (dims " + list(d.dims) + ", strides " +
                     format_dims(v.strides.data(), v.rank) + ", offset " + std::to_string(d.offset) +
                     ") reaches beyond 2^63 bytes");
    if (d.storage_elements >= 0 && reach.value() >= d.storage_elements)
      return invalid(std::string(name) + " view (dims " + list(d.dims) + ", strides " +
                     format_dims(v.strides.data(), v.rank) + ", offset " + std::to_string(d.offset) +
                     ") reaches element " + std::to_string(reach.value()) + ", outside its storage of " +
                     std::to_string(d.storage_elements) + " elements");
    if (is_output) {
      // Sufficient condition for no self-overlap: ordered by stride, each
      // stride steps over everything the smaller strides span.
      // Insertion sort of at most five dims (std::sort trips a GCC 12 -O3
      // array-bounds false positive here).
      std::array<int, kMaxRank> order{};
      for (int j = 0; j < v.rank; ++j) {
        int at = j;
        while (at > 0 && v.strides[order[at - 1]] > v.strides[j]) {
          order[at] = order[at - 1];
          --at;
        }
        order[at] = j;
      }
      int64_t span = 1;  // elements spanned by the dims so far
      for (int j = 0; j < v.rank; ++j) {
        const int i = order[j];
        if (v.dims[i] == 1) continue;
        if (v.strides[i] < span)
          return invalid(std::string(name) + " view (dims " + list(d.dims) + ", strides " +
                         format_dims(v.strides.data(), v.rank) +
                         ") overlaps itself; an output needs each element at its own address");
        span = v.strides[i] * (v.dims[i] - 1) + span;
      }
    }
  }
  return std::nullopt;
}

// HIFLOAT8 and FLOAT8_E4M3FN exist for one case only: the gradInput of a
// transposed convolution.
std::optional<Error> validate_8bit_rules(const Problem& p) {
  const DataType t = p.input.dtype;
  if (!p.transposed)
    return invalid("8-bit dtypes (gradOutput " + std::string(to_string(p.grad_output.dtype)) + ", input " +
                   std::string(to_string(p.input.dtype)) + ", weight " + std::string(to_string(p.weight.dtype)) +
                   ") need transposed = true");
  if (!p.output_mask[0])
    return invalid("8-bit dtypes need outputMask[0] (gradInput) = true");
  if (p.output_mask[1])
    return invalid("8-bit dtypes compute gradInput only; expected outputMask[1] (gradWeight) = false");
  if (!is_8bit(t) || p.grad_output.dtype != t || p.weight.dtype != t)
    return invalid("8-bit dtypes must be the same for gradOutput, input and weight; got gradOutput " +
                   std::string(to_string(p.grad_output.dtype)) + ", input " + std::string(to_string(t)) +
                   ", weight " + std::string(to_string(p.weight.dtype)));
  if (p.groups != 1)
    return invalid("8-bit dtypes need groups = 1; got " + std::to_string(p.groups));
  for (int64_t v : p.output_padding)
    if (v != 0) return invalid("8-bit dtypes need outputPadding all 0; got " + list(p.output_padding));
  if (p.output_mask[2] && !p.grad_bias.dims.empty() && is_8bit(p.grad_bias.dtype))
    return invalid("gradBias dtype " + std::string(to_string(p.grad_bias.dtype)) +
                   " is 8-bit; expected FLOAT32, FLOAT16 or BFLOAT16");
  return std::nullopt;
}

}  // namespace

Result<Spec> validate(const Problem& given) {
  Spec s;
  s.problem = given;
  Problem& p = s.problem;
  Geometry& g = s.geo;
  s.mask = p.output_mask;

  // --- ranks and dims -------------------------------------------------------
  const size_t rank = p.input.dims.size();
  if (rank < 3 || rank > 5)
    return invalid("input rank " + std::to_string(rank) + " (dims " + list(p.input.dims) +
                   ") is not supported; expected 3 (NCL), 4 (NCHW) or 5 (NCDHW)");
  const struct {
    const char* name;
    const TensorDesc* t;
  } operands[] = {{"gradOutput", &p.grad_output}, {"input", &p.input}, {"weight", &p.weight}};
  for (const auto& o : operands) {
    if (o.t->dims.size() != rank)
      return invalid(std::string(o.name) + " rank " + std::to_string(o.t->dims.size()) + " (dims " +
                     list(o.t->dims) + ") does not match input rank " + std::to_string(rank) +
                     "; gradOutput, input and weight share one rank");
    for (int64_t d : o.t->dims)
      if (d < 0)
        return invalid(std::string(o.name) + " dims " + list(o.t->dims) +
                       " contain a negative dimension; expected dims >= 0");
  }
  const int sp = static_cast<int>(rank) - 2;
  g.spatial = sp;
  for (int i = 0; i < sp; ++i) {
    if (p.input.dims[2 + i] < 1)
      return invalid("input spatial dims of " + list(p.input.dims) + " contain " +
                     std::to_string(p.input.dims[2 + i]) + "; expected spatial dims >= 1");
    if (p.weight.dims[2 + i] < 1)
      return invalid("weight kernel dims of " + list(p.weight.dims) + " contain " +
                     std::to_string(p.weight.dims[2 + i]) + "; expected kernel dims >= 1");
  }

  // --- convolution parameters ----------------------------------------------
  auto check_per_dim = [&](const char* name, const std::vector<int64_t>& v, int64_t min) -> std::optional<Error> {
    if (v.size() != static_cast<size_t>(sp))
      return invalid(std::string(name) + " " + list(v) + " has " + std::to_string(v.size()) +
                     " values; expected " + std::to_string(sp) + ", one per spatial dim");
    for (int64_t x : v)
      if (x < min)
        return invalid(std::string(name) + " " + list(v) + " contains " + std::to_string(x) +
                       "; expected values >= " + std::to_string(min));
    return std::nullopt;
  };
  if (auto e = check_per_dim("stride", p.stride, 1)) return *e;
  if (auto e = check_per_dim("dilation", p.dilation, 1)) return *e;
  if (auto e = check_per_dim("padding", p.padding_before, 0)) return *e;
  if (p.padding_after.empty()) p.padding_after = p.padding_before;
  if (auto e = check_per_dim("padding (after)", p.padding_after, 0)) return *e;
  if (p.output_padding.empty()) p.output_padding.assign(sp, 0);
  if (auto e = check_per_dim("outputPadding", p.output_padding, 0)) return *e;
  for (int i = 0; i < sp; ++i) {
    if (!p.transposed && p.output_padding[i] != 0)
      return invalid("outputPadding " + list(p.output_padding) +
                     " must be all 0 for a convolution that is not transposed");
    if (p.transposed && p.output_padding[i] >= p.stride[i])
      return invalid("outputPadding " + list(p.output_padding) + " has " +
                     std::to_string(p.output_padding[i]) + " at spatial dim " + std::to_string(i) +
                     "; expected a value in [0, stride) = [0, " + std::to_string(p.stride[i]) + ")");
  }
  if (p.groups < 1 || p.groups > kMaxGroups)
    return invalid("groups " + std::to_string(p.groups) + " is out of range; expected [1, 65535]");

  // --- channels ---------------------------------------------------------------
  const int64_t n = p.input.dims[0];
  const int64_t cin = p.input.dims[1];
  const int64_t w0 = p.weight.dims[0], w1 = p.weight.dims[1];
  int64_t cout = 0;
  if (!p.transposed) {
    cout = w0;
    if (w0 % p.groups != 0)
      return invalid("weight dims " + list(p.weight.dims) + ": output channels " + std::to_string(w0) +
                     " are not divisible by groups " + std::to_string(p.groups));
    const auto expect_cin = checked_mul(w1, p.groups);
    if (!expect_cin || *expect_cin != cin)
      return invalid("input channels " + std::to_string(cin) + " (input dims " + list(p.input.dims) +
                     ") do not match groups * weight.shape[1] = " + std::to_string(p.groups) + " * " +
                     std::to_string(w1));
  } else {
    if (w0 != cin)
      return invalid("weight.shape[0] " + std::to_string(w0) + " (weight dims " + list(p.weight.dims) +
                     ") does not match input channels " + std::to_string(cin) +
                     "; a transposed weight is [Cin, Cout/groups, k...]");
    if (cin % p.groups != 0)
      return invalid("input channels " + std::to_string(cin) + " are not divisible by groups " +
                     std::to_string(p.groups));
    const auto c = checked_mul(w1, p.groups);
    if (!c) return invalid("weight.shape[1] * groups overflows: " + std::to_string(w1) + " * " + std::to_string(p.groups));
    cout = *c;
  }

  // --- spatial output size -----------------------------------------------------
  std::vector<int64_t> expect_go = {n, cout};
  for (int i = 0; i < sp; ++i) {
    const int64_t in = p.input.dims[2 + i], k = p.weight.dims[2 + i];
    const Checked span = Checked(k - 1) * p.dilation[i];  // dilation*(k-1)
    Checked out(0);
    if (!p.transposed) {
      const Checked num = Checked(in) + p.padding_before[i] + p.padding_after[i] - 1 + Checked(-1) * span;
      if (num.ok() && num.value() < 0) {
        // The kernel's extent can itself pass 2^63 (a fuzz finding: the
        // message's +1 overflowed).
        const Checked extent = span + 1;
        return invalid("spatial dim " + std::to_string(i) + ": input size " + std::to_string(in) +
                       " with padding " + std::to_string(p.padding_before[i]) + "+" +
                       std::to_string(p.padding_after[i]) + " is smaller than the dilated kernel " +
                       (extent.ok() ? std::to_string(extent.value()) : std::string("(over 2^63)")) +
                       "; the output would be empty");
      }
      out = num.ok() ? Checked(num.value() / p.stride[i] + 1) : num;
    } else {
      out = Checked(in - 1) * p.stride[i] - p.padding_before[i] - p.padding_after[i] + span +
            p.output_padding[i] + 1;
      if (out.ok() && out.value() < 1)
        return invalid("spatial dim " + std::to_string(i) + ": the transposed output size (" +
                       std::to_string(in) + "-1)*" + std::to_string(p.stride[i]) + " - " +
                       std::to_string(p.padding_before[i]) + " - " + std::to_string(p.padding_after[i]) +
                       " + " + std::to_string(p.dilation[i]) + "*(" + std::to_string(k) + "-1) + " +
                       std::to_string(p.output_padding[i]) + " + 1 = " + std::to_string(out.value()) +
                       " is not positive");
    }
    if (!out.ok())
      return invalid("spatial dim " + std::to_string(i) + ": the output size overflows 64 bits (input " +
                     std::to_string(in) + ", kernel " + std::to_string(k) + ", stride " +
                     std::to_string(p.stride[i]) + ", padding " + std::to_string(p.padding_before[i]) + "+" +
                     std::to_string(p.padding_after[i]) + ", dilation " + std::to_string(p.dilation[i]) + ")");
    expect_go.push_back(out.value());
  }
  if (p.grad_output.dims != expect_go)
    return invalid("gradOutput shape " + list(p.grad_output.dims) + " does not match " + list(expect_go) +
                   ", the shape implied by input, weight, stride, padding, dilation" +
                   (p.transposed ? std::string(", outputPadding and transposed") : std::string()));

  // --- geometry --------------------------------------------------------------
  const TensorDesc& x = p.transposed ? p.grad_output : p.input;
  const TensorDesc& y = p.transposed ? p.input : p.grad_output;
  g.n = n;
  g.groups = p.groups;
  g.c = w1;
  g.k = w0 / p.groups;
  for (int i = 0; i < sp; ++i) {
    g.xsize[i] = x.dims[2 + i];
    g.ysize[i] = y.dims[2 + i];
    g.ksize[i] = p.weight.dims[2 + i];
    g.stride[i] = p.stride[i];
    g.dilation[i] = p.dilation[i];
    g.pad_before[i] = p.padding_before[i];
    g.pad_after[i] = p.padding_after[i];
  }

  // --- dtypes and precision mode ----------------------------------------------
  for (const auto& o : operands) {
    const int code = static_cast<int>(o.t->dtype);
    if (code < 0 || code > static_cast<int>(DataType::f8e4m3))
      return invalid(std::string(o.name) + " dtype value " + std::to_string(code) +
                     " is unknown; expected FLOAT32, FLOAT16 or BFLOAT16");
  }
  const bool any_8bit = is_8bit(p.grad_output.dtype) || is_8bit(p.input.dtype) || is_8bit(p.weight.dtype);
  if (any_8bit) {
    if (auto e = validate_8bit_rules(p)) return *e;
  }
  s.compute = promote(promote(p.grad_output.dtype, p.input.dtype), p.weight.dtype);
  if (any_8bit) s.compute = DataType::f32;
  const int mode = static_cast<int>(p.math_mode);
  if (mode < 0 || mode > 3)
    return invalid("cubeMathType " + std::to_string(mode) +
                   " is unknown; expected 0 (KEEP_DTYPE), 1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)");
  // USE_FP16 rounds every operand of the data and weight gradients to fp16,
  // bf16 ones included (issue 19). The operator document says USE_FP16 is
  // "not supported" for BFLOAT16 input; CANN's implementation nevertheless
  // accepts it on the chips that have bf16 (its cube-math check refuses bf16
  // only where the cube unit lacks fp32, its 3D path only warns), casts each
  // cube operand to FLOAT16, and its system tests and golden generator run
  // exactly these cases. convbwd follows the implementation. fp16 problems
  // need no rounding, and HF32's 11 mantissa bits leave fp16 and bf16 values
  // as they are.
  if (!any_8bit) {
    if (p.math_mode == MathMode::use_fp16 && s.compute != DataType::f16)
      s.rounding = OperandRounding::fp16;
    else if (s.compute == DataType::f32 &&
             (p.math_mode == MathMode::allow_fp32_down_precision || p.math_mode == MathMode::use_hf32))
      s.rounding = OperandRounding::hf32;
  }

  // --- bias sizes ----------------------------------------------------------------
  if (p.output_mask[2]) {
    if (!p.bias_sizes)
      return Error{Status::null_pointer, "biasSizes is null but gradBias is requested; expected [" +
                                             std::to_string(cout) + "]"};
    if (*p.bias_sizes != std::vector<int64_t>{cout})
      return invalid("biasSizes " + list(*p.bias_sizes) + " does not match [" + std::to_string(cout) +
                     "], the output channels " +
                     (p.transposed ? std::string("weight.shape[1] * groups") : std::string("weight.shape[0]")));
  }

  // --- views ---------------------------------------------------------------------
  if (auto e = make_view("gradOutput", p.grad_output, false, s.grad_output)) return *e;
  if (auto e = make_view("input", p.input, false, s.input)) return *e;
  if (auto e = make_view("weight", p.weight, false, s.weight)) return *e;
  TensorDesc* outs[3] = {&p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) {
      *outs[i] = TensorDesc{};
      continue;
    }
    const auto gi = static_cast<Gradient>(i);
    const std::vector<int64_t> expect = p.gradient_dims(gi);
    const DataType expect_dt = p.gradient_dtype(gi);
    TensorDesc& o = *outs[i];
    if (o.dims.empty()) {
      o.dims = expect;
      o.dtype = expect_dt;
    } else {
      if (o.dims != expect)
        return invalid(std::string(kGradientName[i]) + " shape " + list(o.dims) + " does not match " +
                       list(expect) + ", the shape of " +
                       (i == 0 ? "input" : i == 1 ? "weight" : "[Cout]"));
      if (o.dtype != expect_dt && !(i == 2 && any_8bit && !is_8bit(o.dtype)))
        return invalid(std::string(kGradientName[i]) + " dtype " + std::string(to_string(o.dtype)) +
                       " does not match " + std::string(to_string(expect_dt)) + ", the dtype of " +
                       (i == 0 ? "input" : i == 1 ? "weight" : "gradOutput"));
    }
    if (auto e = make_view(kGradientName[i], o, true, s.grads[i])) return *e;
  }
  return s;
}

OpSpec Spec::op_for(Gradient which) const {
  OpSpec o;
  o.geo = geo;
  o.compute = compute;
  o.rounding = rounding;
  const bool tr = problem.transposed;
  const View& xv = tr ? grad_output : input;
  const View& yv = tr ? input : grad_output;
  switch (which) {
    case Gradient::input:
      o.op = tr ? Op::fwd : Op::bwd_data;
      o.a = tr ? xv : yv;
      o.b = weight;
      break;
    case Gradient::weight:
      o.op = Op::bwd_weights;
      o.a = yv;
      o.b = xv;
      break;
    case Gradient::bias:
      o.op = Op::bias;
      o.a = grad_output;
      o.rounding = OperandRounding::none;  // a vector-unit reduction: cubeMathType does not apply
      break;
  }
  o.dst = grads[static_cast<int>(which)];
  return o;
}

std::string_view to_string(Op op) {
  switch (op) {
    case Op::fwd: return "fwd";
    case Op::bwd_data: return "bwd_data";
    case Op::bwd_weights: return "bwd_weights";
    case Op::bias: return "bias";
  }
  return "?";
}

std::string format_dims(const int64_t* dims, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}
std::string format_dims(const std::vector<int64_t>& v) { return format_dims(v.data(), static_cast<int>(v.size())); }

}  // namespace convbwd::detail
