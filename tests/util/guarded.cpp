#include "util/guarded.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "numeric/float_formats.hpp"
#include "problem/spec.hpp"
#include "reference/reference.hpp"
#include "impl/implementation.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {

GuardedBuffer::GuardedBuffer(size_t bytes) : size_(bytes) {
  // Guard, up to 63 bytes of alignment slack (poisoned too), payload, guard.
  const size_t total = kGuardBytes + 64 + bytes + kGuardBytes;
  block_.reset(new unsigned char[total]);
  std::memset(block_.get(), kPoison, total);
  auto addr = reinterpret_cast<uintptr_t>(block_.get()) + kGuardBytes;
  addr = (addr + 63) / 64 * 64;
  data_ = reinterpret_cast<unsigned char*>(addr);
}

std::string GuardedBuffer::check_guards(const std::string& name) const {
  const unsigned char* begin = block_.get();
  const unsigned char* end = data_ + size_ + kGuardBytes;
  for (const unsigned char* p = begin; p < data_; ++p)
    if (*p != kPoison)
      return name + ": guard byte " + std::to_string(data_ - p) + " before the buffer was written";
  for (const unsigned char* p = data_ + size_; p < end; ++p)
    if (*p != kPoison)
      return name + ": guard byte " + std::to_string(p - (data_ + size_)) + " after the end of the " +
             std::to_string(size_) + "-byte buffer was written";
  return "";
}

StridedLayout contiguous_layout() { return {}; }

StridedLayout random_layout(int rank, bool gaps, std::mt19937_64& rng) {
  StridedLayout l;
  l.order.resize(static_cast<size_t>(rank));
  std::iota(l.order.begin(), l.order.end(), 0);
  std::shuffle(l.order.begin(), l.order.end(), rng);
  if (gaps) {
    std::uniform_int_distribution<int64_t> gap(0, 2), off(0, 5);
    for (int i = 0; i < rank; ++i) l.gaps.push_back(gap(rng));
    l.offset = off(rng);
  }
  return l;
}

GuardedTensor make_guarded(DataType dtype, const std::vector<int64_t>& dims, const StridedLayout& layout) {
  GuardedTensor t;
  t.desc.dtype = dtype;
  t.desc.dims = dims;
  const int rank = static_cast<int>(dims.size());
  std::vector<int> order = layout.order;
  if (order.empty()) {
    order.resize(static_cast<size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<int64_t> strides(static_cast<size_t>(rank), 1);
  int64_t running = 1;
  for (int j = rank - 1; j >= 0; --j) {
    const int d = order[static_cast<size_t>(j)];
    strides[static_cast<size_t>(d)] = running;
    const int64_t gap = layout.gaps.empty() ? 0 : layout.gaps[static_cast<size_t>(d)];
    running *= std::max<int64_t>(dims[static_cast<size_t>(d)], 1) + gap;
  }
  t.desc.strides = strides;
  t.desc.offset = layout.offset;
  // Storage ends right after the furthest element, so the trailing guard
  // starts where the view does.
  int64_t reach = layout.offset;
  bool empty = false;
  for (int d = 0; d < rank; ++d) {
    if (dims[static_cast<size_t>(d)] == 0) empty = true;
    reach += (std::max<int64_t>(dims[static_cast<size_t>(d)], 1) - 1) * strides[static_cast<size_t>(d)];
  }
  t.desc.storage_elements = empty ? layout.offset : reach + 1;
  t.buffer = GuardedBuffer(static_cast<size_t>(t.desc.storage_elements) * size_of(dtype));
  return t;
}

int64_t GuardedTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : desc.dims) n *= d;
  return n;
}

int64_t GuardedTensor::storage_index(int64_t i) const {
  int64_t at = desc.offset;
  for (size_t d = desc.dims.size(); d-- > 0;) {
    at += (i % desc.dims[d]) * desc.strides[d];
    i /= desc.dims[d];
  }
  return at;
}

double GuardedTensor::at(int64_t i) const { return detail::load_as_float(data(), storage_index(i), desc.dtype); }

void GuardedTensor::set(int64_t i, double v) { detail::store_from_double(data(), storage_index(i), desc.dtype, v); }

void GuardedTensor::fill_random(std::mt19937_64& rng, bool small_ints) {
  std::uniform_int_distribution<int> ints(-3, 3);
  std::uniform_real_distribution<double> reals(-1.0, 1.0);
  for (int64_t i = 0, n = elements(); i < n; ++i) set(i, small_ints ? ints(rng) : reals(rng));
}

std::string GuardedTensor::check_outside_view(const std::string& name) const {
  if (std::string e = buffer.check_guards(name); !e.empty()) return e;
  const size_t es = size_of(desc.dtype);
  std::vector<bool> covered(static_cast<size_t>(desc.storage_elements), false);
  for (int64_t i = 0, n = elements(); i < n; ++i) covered[static_cast<size_t>(storage_index(i))] = true;
  for (size_t e = 0; e < covered.size(); ++e) {
    if (covered[e]) continue;
    for (size_t k = 0; k < es; ++k)
      if (buffer.data()[e * es + k] != kPoison)
        return name + ": storage element " + std::to_string(e) + " is outside the view (dims " +
               detail::format_dims(desc.dims) + ", strides " + detail::format_dims(desc.strides) + ", offset " +
               std::to_string(desc.offset) + ") but was written";
  }
  return "";
}

std::vector<unsigned char> snapshot(const GuardedTensor& t) {
  return {t.buffer.data(), t.buffer.data() + t.buffer.size()};
}

int64_t storage_extent(const detail::View& v) { return v.empty() ? 0 : v.last_index().value() + 1; }

int64_t view_index(const detail::View& v, int64_t j) {
  int64_t at = v.offset;
  for (int d = v.rank - 1; d >= 0; --d) {
    at += (j % v.dims[d]) * v.strides[d];
    j /= v.dims[d];
  }
  return at;
}

namespace {

// The operand storage with every element's sign cleared (the sign is the top
// bit of the last byte in every supported format), so the reference on it
// yields sum |products|: the scale of the accumulation error.
std::vector<unsigned char> abs_copy(const void* base, const detail::View& v) {
  const size_t es = size_of(v.dtype);
  const auto n = static_cast<size_t>(storage_extent(v));
  std::vector<unsigned char> c(std::max<size_t>(n * es, 1));
  if (n) std::memcpy(c.data(), base, n * es);
  for (size_t e = 0; e < n; ++e) c[e * es + es - 1] &= 0x7f;
  return c;
}


template <class... T>
std::string fmt(const char* f, T... v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, v...);
  return buf;
}

}  // namespace

std::string compare_with_reference(const Problem& p, const Buffers& b) {
  auto spec = detail::validate(p);
  if (!spec) return "the problem does not validate: " + spec.error().message;
  const char* const names[3] = {"gradInput", "gradWeight", "gradBias"};
  const void* outs[3] = {b.grad_input, b.grad_weight, b.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!spec->mask[i] || spec->grads[i].empty()) continue;
    const auto g = static_cast<Gradient>(i);
    detail::OpSpec op = spec->op_for(g);
    const bool tr = p.transposed;
    const void* a = b.grad_output;
    const void* bb = b.weight;
    if (g == Gradient::weight) {
      a = tr ? b.input : b.grad_output;
      bb = tr ? b.grad_output : b.input;
    }
    const detail::View got_view = op.dst;
    const DataType dt = got_view.dtype;
    const int64_t n = got_view.elements();
    std::vector<unsigned char> ref(static_cast<size_t>(n) * size_of(dt));
    std::vector<float> sum_abs(static_cast<size_t>(n));
    op.dst = contiguous_view(got_view, dt);
    detail::reference_run(op, a, bb, ref.data());
    const std::vector<unsigned char> a_abs = abs_copy(a, op.a);
    const std::vector<unsigned char> b_abs =
        op.op == detail::Op::bias ? std::vector<unsigned char>(1) : abs_copy(bb, op.b);
    detail::OpSpec abs_op = op;
    abs_op.dst = contiguous_view(got_view, DataType::f32);
    detail::reference_run(abs_op, a_abs.data(), b_abs.data(), sum_abs.data());
    const int64_t len = detail::reduction_length(op);
    for (int64_t j = 0; j < n; ++j) {
      const double want = detail::load_as_float(ref.data(), j, dt);
      const double got = detail::load_as_float(outs[i], view_index(got_view, j), dt);
      // Only a failure needs the message (building it per element was most
      // of a fuzz run's time under ASan).
      auto where = [&] { return std::string(names[i]) + "[" + std::to_string(j) + "] of " + p.descriptor() + ": "; };
      if (std::isnan(want) || std::isnan(got)) {
        if (std::isnan(want) != std::isnan(got)) return where() + fmt("got %g, want %g", got, want);
        continue;
      }
      if (std::isinf(want) || std::isinf(got)) {
        if (want != got) return where() + fmt("got %g, want %g", got, want);
        continue;
      }
      const double tol = tolerance(dt, want, sum_abs[static_cast<size_t>(j)], len);
      if (std::fabs(got - want) > tol) return where() + fmt("got %.9g, want %.9g, tolerance %.3g", got, want, tol);
    }
  }
  return "";
}

std::vector<double> reference_output(const Problem& p, const Buffers& b, Gradient g) {
  const detail::Spec spec = detail::validate(p).value();
  detail::OpSpec op = spec.op_for(g);
  const bool tr = p.transposed;
  const void* a = b.grad_output;
  const void* bb = b.weight;
  if (g == Gradient::weight) {
    a = tr ? b.input : b.grad_output;
    bb = tr ? b.grad_output : b.input;
  }
  const DataType dt = op.dst.dtype;
  const int64_t n = op.dst.elements();
  op.dst = contiguous_view(op.dst, dt);
  std::vector<unsigned char> ref(static_cast<size_t>(n) * size_of(dt));
  detail::reference_run(op, a, bb, ref.data());
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(j)] = detail::load_as_float(ref.data(), j, dt);
  return v;
}

Buffers GuardedRun::buffers() const {
  return Buffers{grad_output.data(), input.data(), weight.data(),
                 const_cast<void*>(outs[0].data()), const_cast<void*>(outs[1].data()),
                 const_cast<void*>(outs[2].data())};
}

std::string GuardedRun::check() const {
  const char* const in_names[3] = {"gradOutput", "input", "weight"};
  const GuardedTensor* ins[3] = {&grad_output, &input, &weight};
  for (int i = 0; i < 3; ++i) {
    if (std::string e = ins[i]->buffer.check_guards(in_names[i]); !e.empty()) return e;
    if (snapshot(*ins[i]) != in_snapshots[i]) return std::string(in_names[i]) + " (an input) was written";
  }
  const char* const out_names[3] = {"gradInput", "gradWeight", "gradBias"};
  for (int i = 0; i < 3; ++i) {
    if (!problem.output_mask[i]) {
      // Unrequested outputs get a buffer too: it must stay untouched.
      if (std::string e = outs[i].check_outside_view(out_names[i]); !e.empty()) return e;
      for (size_t k = 0; k < outs[i].buffer.size(); ++k)
        if (outs[i].buffer.data()[k] != kPoison) return std::string(out_names[i]) + " is not requested but was written";
      continue;
    }
    if (std::string e = outs[i].check_outside_view(out_names[i]); !e.empty()) return e;
  }
  return compare_with_reference(problem, buffers());
}

std::vector<unsigned char> output_bits(const GuardedRun& r, int only) {
  std::vector<unsigned char> bits;
  for (int i = 0; i < 3; ++i) {
    if (!r.problem.output_mask[i] || (only >= 0 && i != only)) continue;
    const GuardedTensor& t = r.outs[i];
    const size_t es = size_of(t.desc.dtype);
    for (int64_t j = 0, n = t.elements(); j < n; ++j) {
      const unsigned char* p = t.buffer.data() + static_cast<size_t>(t.storage_index(j)) * es;
      bits.insert(bits.end(), p, p + es);
    }
  }
  return bits;
}

GuardedRun make_guarded_run(const Problem& p, bool strided_inputs, bool strided_outputs, std::mt19937_64& rng) {
  GuardedRun r;
  r.problem = p;
  const int rank = static_cast<int>(p.input.dims.size());
  auto layout = [&](bool strided, int rk) { return strided ? random_layout(rk, true, rng) : contiguous_layout(); };
  r.grad_output = make_guarded(p.grad_output.dtype, p.grad_output.dims, layout(strided_inputs, rank));
  r.input = make_guarded(p.input.dtype, p.input.dims, layout(strided_inputs, rank));
  r.weight = make_guarded(p.weight.dtype, p.weight.dims, layout(strided_inputs, rank));
  GuardedTensor* ins[3] = {&r.grad_output, &r.input, &r.weight};
  TensorDesc* in_descs[3] = {&r.problem.grad_output, &r.problem.input, &r.problem.weight};
  for (int i = 0; i < 3; ++i) {
    ins[i]->fill_random(rng);
    *in_descs[i] = ins[i]->desc;
    r.in_snapshots[i] = snapshot(*ins[i]);
  }
  TensorDesc* out_descs[3] = {&r.problem.grad_input, &r.problem.grad_weight, &r.problem.grad_bias};
  for (int i = 0; i < 3; ++i) {
    const auto g = static_cast<Gradient>(i);
    const std::vector<int64_t> dims = p.gradient_dims(g);
    r.outs[i] = make_guarded(p.gradient_dtype(g), dims, layout(strided_outputs, static_cast<int>(dims.size())));
    if (p.output_mask[i]) *out_descs[i] = r.outs[i].desc;
  }
  return r;
}

}  // namespace convbwd::test

// ---- running -----------------------------------------------------------------

namespace convbwd::test {

std::string run_plan(GuardedRun& r) {
  auto plan = Plan::create(r.problem);
  if (!plan) return "Plan::create(" + r.problem.descriptor() + "): " + plan.error().message;
  GuardedBuffer ws(plan->workspace_size());
  if (Error e = plan->execute(r.buffers(), ws.size() ? ws.data() : nullptr, ws.size()))
    return "execute(" + r.problem.descriptor() + "): " + e.message;
  if (std::string e = ws.check_guards("workspace of " + r.problem.descriptor()); !e.empty()) return e;
  return r.check();
}

namespace {

aclDataType acl_dtype(DataType t) {
  switch (t) {
    case DataType::f32: return ACL_FLOAT;
    case DataType::f16: return ACL_FLOAT16;
    case DataType::bf16: return ACL_BF16;
    case DataType::hif8: return ACL_HIFLOAT8;
    case DataType::f8e4m3: return ACL_FLOAT8_E4M3FN;
  }
  return ACL_DT_UNDEFINED;
}

aclTensor* acl_tensor(const TensorDesc& d, void* data) {
  const int64_t storage = d.storage_elements;
  return aclCreateTensor(d.dims.data(), d.dims.size(), acl_dtype(d.dtype), d.strides.data(), d.offset,
                         ACL_FORMAT_ND, &storage, 1, data);
}

}  // namespace

std::string run_capi(GuardedRun& r, void* stream, bool check, bool synchronize) {
  const Problem& p = r.problem;
  const std::string desc = p.descriptor();
  const bool asym = p.padding_after != p.padding_before && !p.padding_after.empty();
  std::vector<int64_t> pad = p.padding_before;
  if (asym) {
    if (pad.size() != 2) return "run_capi(" + desc + "): asymmetric padding only exists in 2D in the C API";
    pad = {p.padding_before[0], p.padding_after[0], p.padding_before[1], p.padding_after[1]};
  }
  std::vector<int64_t> out_pad = p.output_padding;
  if (out_pad.empty()) out_pad.assign(p.stride.size(), 0);
  const std::vector<int64_t> bias = p.bias_sizes.value_or(std::vector<int64_t>{});
  const bool mask[3] = {p.output_mask[0], p.output_mask[1], p.output_mask[2]};
  aclTensor* go = acl_tensor(p.grad_output, r.grad_output.data());
  aclTensor* in = acl_tensor(p.input, r.input.data());
  aclTensor* w = acl_tensor(p.weight, r.weight.data());
  aclTensor* outs[3] = {};
  for (int i = 0; i < 3; ++i)
    if (mask[i]) outs[i] = acl_tensor(r.outs[i].desc, r.outs[i].data());
  aclIntArray* bias_a = aclCreateIntArray(bias.data(), bias.size());
  aclIntArray* stride_a = aclCreateIntArray(p.stride.data(), p.stride.size());
  aclIntArray* pad_a = aclCreateIntArray(pad.data(), pad.size());
  aclIntArray* dil_a = aclCreateIntArray(p.dilation.data(), p.dilation.size());
  aclIntArray* outpad_a = aclCreateIntArray(out_pad.data(), out_pad.size());
  aclBoolArray* mask_a = aclCreateBoolArray(mask, 3);
  uint64_t ws_size = 0;
  aclOpExecutor* exec = nullptr;
  std::string failure;
  aclnnStatus st = aclnnConvolutionBackwardGetWorkspaceSize(
      go, in, w, bias_a, stride_a, pad_a, dil_a, p.transposed, outpad_a, static_cast<int>(p.groups), mask_a,
      static_cast<int8_t>(p.math_mode), outs[0], outs[1], outs[2], &ws_size, &exec);
  r.pending_workspace = std::make_unique<GuardedBuffer>(st == ACLNN_SUCCESS ? static_cast<size_t>(ws_size) : 0);
  GuardedBuffer& ws = *r.pending_workspace;
  if (st != ACLNN_SUCCESS) {
    failure = "GetWorkspaceSize(" + desc + ") returned " + std::to_string(st) + ": " + aclGetRecentErrMsg();
  } else if ((st = aclnnConvolutionBackward(ws.size() ? ws.data() : nullptr, ws_size, exec, stream)) !=
             ACLNN_SUCCESS) {
    failure = "aclnnConvolutionBackward(" + desc + ") returned " + std::to_string(st) + ": " + aclGetRecentErrMsg();
    aclDestroyAclOpExecutor(exec);
  } else if (!synchronize) {
    check = false;
  } else if (aclError e = aclrtSynchronizeStream(stream); e != ACL_SUCCESS) {
    failure = "aclrtSynchronizeStream after " + desc + " returned " + std::to_string(e) + ": " + aclGetRecentErrMsg();
  }
  for (aclTensor* t : {go, in, w, outs[0], outs[1], outs[2]}) aclDestroyTensor(t);
  for (aclIntArray* a : {bias_a, stride_a, pad_a, dil_a, outpad_a}) aclDestroyIntArray(a);
  aclDestroyBoolArray(mask_a);
  if (!failure.empty() || !synchronize) return failure;
  if (std::string e = ws.check_guards("workspace of " + desc); !e.empty()) return e;
  return check ? r.check() : "";
}

}  // namespace convbwd::test

namespace convbwd::test {

std::vector<std::string> reliability_descriptors() {
  return {
      // 1D
      "mb2ic3iw9oc4kw3",
      "mb2ic4iw11oc6kw3sw2pw1",
      "mb1g2ic4iw10oc6kw3dw1pw2",
      "mb2ic3iw7oc5kw2sw3_tr",
      "mb2ic4iw6oc4kw3sw2pw1opw1_tr",
      "mb3g4ic4iw13oc4kw5pw2",  // depthwise
      // 2D
      "mb2ic3ih7oc4kh3ph1",
      "mb2ic8ih6iw5oc16kh1kw1",  // 1x1
      "mb1ic5ih9iw8oc7kh3kw2sh2sw1ph1pw0",
      "mb2g2ic6ih8oc4kh3sh2dh1ph2",
      "mb2ic4ih5iw6oc3kh3kw3ph0pw1phr2pwr0",  // asymmetric padding
      "mb2ic3ih4iw5oc4kh3kw2sh2sw2ph1pw1_tr",
      "mb1g3ic6ih5oc9kh3sh2ph1oph1_tr",
      "mb2g8ic8ih9oc8kh3ph1",  // depthwise
      "mb2g8ic8ih9oc16kh3sh2ph1",  // depthwise, multiplier 2
      "mb2ic16ih6oc24kh3ph1",  // large enough for blocked kernels
      "mb2ic48ih5oc40kh1",
      "mb2ic48ih8oc40kh1",     // 1x1 with >= 64 pixels: the planar 1x1 data gradient
      "mb2ic40ih8oc24kh1_tr",  // and its forward
      "mb2ic3ih11oc20kh5sh2ph2",  // small_channels (C <= 4, K > 16)
      // 3D
      "mb1ic2id4ih5iw4oc3kd2kh3kw2pd1",
      "mb2g2ic4id3ih4iw5oc2kd1kh2kw3sd1sh2sw2_tr",
      "mb1g4ic4id5ih5iw5oc4kd3kh3kw3pd1ph1pw1",  // depthwise
      // dtypes and precision modes
      "mb2ic4ih6oc5kh3ph1_dtf16",
      "mb2ic4ih6oc5kh3ph1_dtbf16",
      "mb2ic3iw9oc4kw3sw2_tr_dtbf16",
      "mb1ic4id3ih3iw4oc3kd2kh2kw2_dtf16",
      "mb2ic4ih6oc5kh3ph1_dtf32:f16:bf16",
      "mb2ic4ih6oc5kh3ph1_math1",
      "mb2ic4ih6oc5kh3ph1_math2",
      "mb2ic3iw8oc4kw3_tr_math3",
      "mb2ic3ih5oc4kh3sh2_tr_dthif8_mask101",
      "mb2ic3ih5oc4kh3sh2_tr_dtf8e4m3_mask100",
      // masks and empty problems (the explicit skip paths)
      "mb2ic3ih5oc4kh3_mask010",
      "mb2ic3ih5oc4kh3_mask001",
      "mb0ic3ih5oc4kh3",
      "mb2ic0ih5oc4kh3",
      "mb2ic3ih5oc0kh3",
      "mb0ic3iw5oc4kw3sw2_tr",
  };
}

}  // namespace convbwd::test
