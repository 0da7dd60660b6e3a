// The problem descriptor string, read as oneDNN's benchdnn reads its own:
//   mb8ic64ih56oc64oh56kh3ph1_dtbf16_mask110, g1ic3oc16_iw5ow5kw3pw1_n"1d"
// Geometry tokens are a name and a non-negative integer; '_' separates
// groups; dilation counts from 0; padding follows from a given output size.
// README.md documents the grammar; this file is its only implementation.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "problem/checked.hpp"
#include "problem/printable.hpp"
#include "problem/spec.hpp"

namespace convbwd {
namespace {

// Every message quotes the descriptor, its control bytes escaped.
Error bad(std::string_view desc, std::string message) {
  return Error{Status::invalid_parameter, "descriptor '" + detail::printable(desc) + "': " + message};
}

// Spatial families and their per-dim token names (d, h, w).
struct Family {
  const char* prefix;
  const char* suffix;
  int64_t fallback;  // when no dim of the family is given
};
constexpr Family kInput{"i", "", -1}, kOutput{"o", "", -1}, kKernel{"k", "", 1}, kStride{"s", "", 1},
    kPad{"p", "", 0}, kPadAfter{"p", "r", -1}, kDilation{"d", "", 0}, kOutPad{"op", "", 0};
constexpr const Family* kFamilies[] = {&kInput, &kOutput, &kKernel, &kStride, &kPad, &kPadAfter, &kDilation, &kOutPad};
constexpr char kDims[3] = {'d', 'h', 'w'};

std::string token(const Family& f, int dim) { return std::string(f.prefix) + kDims[dim] + f.suffix; }

std::optional<DataType> parse_dtype(std::string_view s) {
  if (s == "f32" || s == "fp32") return DataType::f32;
  if (s == "f16" || s == "fp16") return DataType::f16;
  if (s == "bf16") return DataType::bf16;
  if (s == "hif8") return DataType::hif8;
  if (s == "f8e4m3" || s == "e4m3") return DataType::f8e4m3;
  return std::nullopt;
}

}  // namespace

Result<Problem> Problem::parse(std::string_view desc) {
  std::map<std::string, int64_t> v;
  Problem p;
  bool transposed = false;
  DataType dts[3] = {DataType::f32, DataType::f32, DataType::f32};
  if (desc.empty()) return bad(desc, "is empty; expected e.g. mb2ic16ih32oc16kh3ph1");

  size_t pos = 0;
  bool have_dt = false, have_mask = false;
  while (pos < desc.size()) {
    if (desc[pos] == '_') {
      // '_' separates groups of tokens; a group may not be empty.
      if (pos == 0 || pos + 1 == desc.size() || desc[pos + 1] == '_')
        return bad(desc, "empty token group at position " + std::to_string(pos) +
                             "; '_' must stand between tokens");
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < desc.size() && std::islower(static_cast<unsigned char>(desc[end]))) ++end;
    // "dt" takes a dtype name as its value, which has letters too (dtbf16):
    // no other token starts with "dt", so the name stops after those two.
    if (end - pos > 2 && desc.substr(pos, 2) == "dt") end = pos + 2;
    const std::string name(desc.substr(pos, end - pos));
    if (name.empty())
      return bad(desc, "unexpected '" + detail::printable(desc.substr(pos, 1)) + "' at position " +
                           std::to_string(pos) + "; expected a token name such as ih");
    // n"name" (or n to the end, as benchdnn reads it): the name reports
    // show. No other token starts with 'n'.
    if (desc[pos] == 'n') {
      if (!p.name.empty() || pos + 1 == desc.size()) return bad(desc, "token 'n' needs a name: n\"NAME\"");
      if (desc[pos + 1] == '"') {
        const size_t close = desc.find('"', pos + 2);
        if (close == std::string_view::npos)
          return bad(desc, "the name at position " + std::to_string(pos) + " has no closing '\"'");
        p.name = std::string(desc.substr(pos + 2, close - pos - 2));
        if (p.name.empty()) return bad(desc, "token 'n' needs a name: n\"NAME\"");
        pos = close + 1;
      } else {
        p.name = std::string(desc.substr(pos + 1));
        pos = desc.size();
        // descriptor() prints it quoted, so it cannot hold a quote.
        if (p.name.find('"') != std::string::npos) return bad(desc, "a name may not contain '\"'");
      }
      continue;
    }
    if (name == "tr") {
      if (transposed) return bad(desc, "token 'tr' is given twice");
      transposed = true;
      pos = end;
      continue;
    }
    if (name == "dt") {
      if (have_dt) return bad(desc, "token 'dt' is given twice");
      have_dt = true;
      size_t stop = desc.find('_', end);
      if (stop == std::string_view::npos) stop = desc.size();
      const std::string_view val = desc.substr(end, stop - end);
      std::vector<std::string_view> parts;
      for (size_t a = 0;;) {
        const size_t c = val.find(':', a);
        parts.push_back(val.substr(a, c == std::string_view::npos ? std::string_view::npos : c - a));
        if (c == std::string_view::npos) break;
        a = c + 1;
      }
      if (parts.size() != 1 && parts.size() != 3)
        return bad(desc, "dt" + std::string(val) + " must name one dtype or three (gradOutput:input:weight)");
      for (size_t i = 0; i < 3; ++i) {
        const auto t = parse_dtype(parts[parts.size() == 1 ? 0 : i]);
        if (!t)
          return bad(desc, "dtype '" + std::string(parts[parts.size() == 1 ? 0 : i]) +
                               "' is unknown; expected f32, f16, bf16, hif8 or f8e4m3");
        dts[i] = *t;
      }
      pos = stop;
      continue;
    }
    if (name == "mask") {
      if (have_mask) return bad(desc, "token 'mask' is given twice");
      have_mask = true;
      const std::string_view val = desc.substr(end, 3);
      if (val.size() != 3 || val.find_first_not_of("01") != std::string_view::npos ||
          (end + 3 < desc.size() && std::isdigit(static_cast<unsigned char>(desc[end + 3]))))
        return bad(desc, "mask needs three 0/1 digits (gradInput, gradWeight, gradBias), e.g. mask110");
      for (int i = 0; i < 3; ++i) p.output_mask[i] = val[i] == '1';
      pos = end + 3;
      continue;
    }
    // Known before valued: "_foo" is an unknown token, not one without a value.
    static const char* const kScalars[] = {"mb", "g", "ic", "oc", "math"};
    bool known = false;
    for (const char* s : kScalars) known |= name == s;
    for (const Family* f : kFamilies)
      for (int d = 0; d < 3; ++d) known |= name == token(*f, d);
    if (!known)
      return bad(desc, "token '" + name + "' is unknown; see convbwd --help for the descriptor syntax");
    if (end < desc.size() && desc[end] == '-')
      return bad(desc, "token '" + name + "' has a negative value; expected a non-negative integer");
    size_t num_end = end;
    while (num_end < desc.size() && std::isdigit(static_cast<unsigned char>(desc[num_end]))) ++num_end;
    if (num_end == end)
      return bad(desc, "token '" + name + "' has no value; expected digits after it");
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(desc.data() + end, desc.data() + num_end, value);
    if (ec != std::errc() || ptr != desc.data() + num_end)
      return bad(desc, "value of '" + name + "' does not fit in 64 bits");
    if (v.count(name)) return bad(desc, "token '" + name + "' is given twice");
    v[name] = value;
    pos = num_end;
  }

  // Rank: the highest dim any spatial token names.
  int first_dim = 3;
  for (const Family* f : kFamilies)
    for (int d = 0; d < 3; ++d)
      if (v.count(token(*f, d))) first_dim = std::min(first_dim, d);
  if (first_dim == 3) return bad(desc, "gives no spatial size; expected iw (1D), ih (2D) or id (3D)");
  const int sp = 3 - first_dim;

  // Each family: a missing dim takes the value of the dim above it (so
  // ih32 means ih32iw32 and kh3 means kh3kw3), else the family's default.
  auto family = [&](const Family& f, std::vector<int64_t>& out) -> bool {
    out.clear();
    int64_t last = f.fallback;
    for (int d = first_dim; d < 3; ++d) {
      auto it = v.find(token(f, d));
      if (it != v.end()) last = it->second;
      out.push_back(last);
    }
    return last >= 0;
  };
  std::vector<int64_t> in, out, k, s, pb, pa, dil, op;
  if (!family(kInput, in) || in.front() < 0)
    return bad(desc, "needs the input size of spatial dim '" + token(kInput, first_dim) + "'");
  family(kKernel, k);
  family(kStride, s);
  family(kPad, pb);
  family(kDilation, dil);
  family(kOutPad, op);
  // Dilation counts from 0, as in benchdnn: dh0 is dense, dh1 skips one.
  for (int64_t& x : dil)
    if (__builtin_add_overflow(x, 1, &x)) return bad(desc, "a dilation does not fit in 64 bits");
  // The output size of a dim is given by its own token, or copied from the
  // dim above when this dim names no input size either (the square form).
  out.assign(static_cast<size_t>(sp), -1);
  for (int d = first_dim; d < 3; ++d) {
    const size_t i = static_cast<size_t>(d - first_dim);
    if (auto it = v.find(token(kOutput, d)); it != v.end()) out[i] = it->second;
    else if (i > 0 && !v.count(token(kInput, d))) out[i] = out[i - 1];
  }
  // Padding as benchdnn deduces it: with the output size given and no
  // padding for that dim, the leading padding is the symmetric one that
  // fits; the trailing padding, unless given, is what the output size
  // leaves (never below 0: a stride that skips the last rows needs none).
  // Without an output size, the trailing side equals the leading one.
  pa = pb;
  for (int d = first_dim; d < 3; ++d) {
    const size_t i = static_cast<size_t>(d - first_dim);
    if (out[i] < 0) {
      if (auto it = v.find(token(kPadAfter, d)); it != v.end()) pa[i] = it->second;
      continue;
    }
    // The dilated kernel's extent less one, and what the geometry spans
    // without padding: checked, the numbers are the user's.
    const detail::Checked span = detail::Checked(k[i] - 1) * dil[i];
    const detail::Checked reach = transposed ? detail::Checked(in[i] - 1) * s[i] + 1 + span + op[i] - out[i]
                                             : detail::Checked(out[i] - 1) * s[i] + 1 + span - in[i];
    if (!reach.ok())
      return bad(desc, "the padding of spatial dim '" + std::string(1, kDims[d]) +
                           "' overflows 64 bits; expected sizes and strides that fit");
    // A leading padding given for this dim or copied from one above stays.
    bool pad_given = false;
    for (int up = first_dim; up <= d; ++up) pad_given |= v.count(token(kPad, up)) > 0;
    if (!pad_given) pb[i] = std::max<int64_t>(reach.value() / 2, 0);
    if (auto it = v.find(token(kPadAfter, d)); it != v.end()) pa[i] = it->second;
    // (Compared first: a given leading padding may be as large as 2^63-1,
    // and reach less it overflowed, a fuzz finding. Both are >= 0 where
    // the difference is taken, so it fits.)
    else pa[i] = reach.value() > pb[i] ? reach.value() - pb[i] : 0;
  }

  const int64_t mb = v.count("mb") ? v["mb"] : 2;
  const int64_t g = v.count("g") ? v["g"] : 1;
  if (!v.count("ic")) return bad(desc, "needs ic, the input channels");
  const int64_t ic = v["ic"];
  const int64_t oc = v.count("oc") ? v["oc"] : ic;
  if (g < 1) return bad(desc, "g0: groups must be >= 1");
  if (v.count("math")) p.math_mode = static_cast<MathMode>(std::clamp<int64_t>(v["math"], -1, 100));

  p.transposed = transposed;
  p.groups = g;
  p.stride = s;
  p.padding_before = pb;
  p.padding_after = pa;
  p.dilation = dil;
  p.output_padding = op;
  p.grad_output.dtype = dts[0];
  p.input.dtype = dts[1];
  p.weight.dtype = dts[2];
  p.input.dims = {mb, ic};
  p.input.dims.insert(p.input.dims.end(), in.begin(), in.end());
  if (transposed) {
    p.weight.dims = {ic, g > 0 ? oc / g : oc};
    if (oc % g != 0) return bad(desc, "oc" + std::to_string(oc) + " is not divisible by g" + std::to_string(g));
  } else {
    p.weight.dims = {oc, g > 0 ? ic / g : ic};
    if (ic % g != 0) return bad(desc, "ic" + std::to_string(ic) + " is not divisible by g" + std::to_string(g));
  }
  p.weight.dims.insert(p.weight.dims.end(), k.begin(), k.end());
  p.bias_sizes = std::vector<int64_t>{oc};

  // Output size: implied; a given one must agree.
  std::vector<int64_t> implied = {mb, oc};
  for (int d = 0; d < sp; ++d) {
    // Checked: the numbers come from the user and may be as large as 2^63-1.
    const detail::Checked span = detail::Checked(k[d] - 1) * dil[d];
    detail::Checked o(0);
    if (!transposed) {
      const detail::Checked num = detail::Checked(in[d]) + pb[d] + pa[d] - 1 + detail::Checked(-1) * span;
      // A kernel wider than the padded input has no output position; say so
      // here, with the user's tokens, rather than imply a negative gradOutput.
      if (num.ok() && span.ok() && num.value() < 0) {
        const std::string dim(1, kDims[first_dim + d]);
        return bad(desc, "the kernel k" + dim + std::to_string(k[d]) + " (dilated extent " +
                             std::to_string(span.value() + 1) + ") is larger than the padded input " +
                             std::to_string(in[d] + pb[d] + pa[d]) + " (i" + dim + std::to_string(in[d]) + " + p" +
                             dim + std::to_string(pb[d]) + " + p" + dim + "r" + std::to_string(pa[d]) +
                             ") in spatial dim '" + dim + "'; expected a kernel that fits");
      }
      o = !num.ok() ? num : s[d] > 0 ? detail::Checked(num.value() / s[d]) + 1 : detail::Checked(0);
    } else {
      o = detail::Checked(in[d] - 1) * s[d] - pb[d] - pa[d] + span + op[d] + 1;
    }
    if (!o.ok())
      return bad(desc, "the output size of spatial dim '" + token(kOutput, first_dim + d) +
                           "' overflows 64 bits; expected sizes, strides, paddings and dilations that fit");
    implied.push_back(o.value());
    if (out[d] >= 0 && out[d] != o.value())  // -1: not given
      return bad(desc, token(kOutput, first_dim + d) + std::to_string(out[d]) + " does not match the output size " +
                           std::to_string(o.value()) + " implied by the other tokens");
  }
  p.grad_output.dims = implied;
  return p;
}

std::string Problem::descriptor() const {
  const int sp = static_cast<int>(input.dims.size()) - 2;
  if (sp < 1 || sp > 3 || weight.dims.size() != input.dims.size()) return "<invalid: rank>";
  const int first = 3 - sp;
  // Checked: descriptor() also names invalid problems in error reports.
  int64_t oc = weight.dims[0];
  if (transposed && __builtin_mul_overflow(weight.dims[1], groups, &oc)) return "<invalid: Cout overflows>";
  std::string s = "mb" + std::to_string(input.dims[0]);
  if (groups != 1) s += "g" + std::to_string(groups);
  s += "ic" + std::to_string(input.dims[1]);
  auto per_dim = [&](const Family& f, auto get, int64_t skip_if_all) {
    bool all_default = true;
    for (int d = 0; d < sp; ++d) all_default &= get(d) == skip_if_all;
    if (all_default) return;
    for (int d = 0; d < sp; ++d) s += token(f, first + d) + std::to_string(get(d));
  };
  auto at = [](const std::vector<int64_t>& vec, int d, int64_t dflt) {
    return d < static_cast<int>(vec.size()) ? vec[d] : dflt;
  };
  const bool have_out = grad_output.dims.size() == input.dims.size();
  per_dim(kInput, [&](int d) { return input.dims[2 + d]; }, -1);
  s += "oc" + std::to_string(oc);
  if (have_out)
    per_dim(kOutput, [&](int d) { return grad_output.dims[2 + d]; }, -1);
  per_dim(kKernel, [&](int d) { return weight.dims[2 + d]; }, -1);
  per_dim(kStride, [&](int d) { return at(stride, d, 1); }, 1);
  // The leading padding when nonzero, or when it differs from what parse
  // deduces (with the output size printed: the symmetric fit; else 0).
  auto reach_of = [&](int d) -> detail::Checked {
    const detail::Checked span = detail::Checked(weight.dims[2 + d] - 1) * at(dilation, d, 1);
    const int64_t s1 = at(stride, d, 1);
    return transposed ? detail::Checked(input.dims[2 + d] - 1) * s1 + 1 + span + at(output_padding, d, 0) -
                            grad_output.dims[2 + d]
                      : detail::Checked(grad_output.dims[2 + d] - 1) * s1 + 1 + span - input.dims[2 + d];
  };
  bool pad_given = false;
  for (int d = 0; d < sp; ++d) {
    int64_t deduced = 0;
    if (have_out) {
      const detail::Checked r = reach_of(d);
      deduced = r.ok() ? std::max<int64_t>(r.value() / 2, 0) : -1;
    }
    // Nonzero padding is printed anyway: the form people read.
    pad_given |= at(padding_before, d, 0) != 0 || at(padding_before, d, 0) != deduced;
  }
  if (pad_given)
    for (int d = 0; d < sp; ++d) s += token(kPad, first + d) + std::to_string(at(padding_before, d, 0));
  // The trailing padding is printed when it differs from what parse would
  // deduce from the printed output size (or, without one, from the leading).
  bool asym = false;
  for (int d = 0; d < sp; ++d) {
    const int64_t before = at(padding_before, d, 0), after = at(padding_after, d, before);
    int64_t implied = before;
    if (have_out) {
      const detail::Checked left = reach_of(d) - before;
      implied = left.ok() ? std::max<int64_t>(left.value(), 0) : -1;
    }
    asym |= after != implied;
  }
  if (asym) per_dim(kPadAfter, [&](int d) { return at(padding_after, d, at(padding_before, d, 0)); }, -1);
  per_dim(kDilation, [&](int d) { return at(dilation, d, 1) - 1; }, 0);
  per_dim(kOutPad, [&](int d) { return at(output_padding, d, 0); }, 0);
  if (!name.empty()) s += "n\"" + name + "\"";
  if (transposed) s += "_tr";
  if (grad_output.dtype == input.dtype && input.dtype == weight.dtype) {
    if (input.dtype != DataType::f32) s += "_dt" + std::string(to_string(input.dtype));
  } else {
    s += "_dt" + std::string(to_string(grad_output.dtype)) + ":" + std::string(to_string(input.dtype)) + ":" +
         std::string(to_string(weight.dtype));
  }
  if (!(output_mask[0] && output_mask[1] && output_mask[2])) {
    s += "_mask";
    for (bool m : output_mask) s += m ? '1' : '0';
  }
  if (math_mode != MathMode::keep_dtype) s += "_math" + std::to_string(static_cast<int>(math_mode));
  return s;
}

}  // namespace convbwd
