#include "util/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>

#include "impl/implementation.hpp"
#include "numeric/float_formats.hpp"
#include "numeric/tolerance.hpp"
#include "problem/spec.hpp"
#include "reference/reference.hpp"

namespace convbwd::test {

const char* to_string(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::channels_last: return "channels_last";
    case Layout::padded: return "padded";
    case Layout::reversed: return "reversed";
  }
  return "?";
}

constexpr unsigned char kCanary = 0xA5;

HostTensor make_tensor(DataType dtype, const std::vector<int64_t>& dims, Layout layout) {
  HostTensor t;
  t.desc.dtype = dtype;
  t.desc.dims = dims;
  const int rank = static_cast<int>(dims.size());
  // Memory order of dims, slowest first.
  std::vector<int> order(rank);
  std::iota(order.begin(), order.end(), 0);
  if (layout == Layout::channels_last && rank >= 3) {
    order.erase(order.begin() + 1);
    order.push_back(1);
  } else if (layout == Layout::reversed) {
    std::reverse(order.begin(), order.end());
  }
  const int64_t gap = layout == Layout::padded ? 1 : 0;
  std::vector<int64_t> strides(rank, 1);
  int64_t running = 1;
  for (int j = rank - 1; j >= 0; --j) {
    strides[order[j]] = running;
    running *= std::max<int64_t>(dims[order[j]], 1) + gap;
  }
  t.desc.offset = layout == Layout::padded ? 3 : 0;
  if (layout != Layout::contiguous) t.desc.strides = strides;
  t.desc.storage_elements = running + t.desc.offset;
  t.storage.assign(static_cast<size_t>(t.desc.storage_elements) * size_of(dtype), kCanary);
  return t;
}

int64_t HostTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : desc.dims) n *= d;
  return n;
}

int64_t HostTensor::storage_index(int64_t i) const {
  const int rank = static_cast<int>(desc.dims.size());
  int64_t at = desc.offset, stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t idx = i % desc.dims[d];
    i /= desc.dims[d];
    at += idx * (desc.strides.empty() ? stride : desc.strides[d]);
    stride *= desc.dims[d];
  }
  return at;
}

double HostTensor::at(int64_t i) const { return detail::load_as_float(data(), storage_index(i), desc.dtype); }

int64_t first_written_outside_view(const HostTensor& t) {
  const size_t es = size_of(t.desc.dtype);
  std::vector<bool> covered(t.storage.size() / es, false);
  for (int64_t j = 0; j < t.elements(); ++j) covered[static_cast<size_t>(t.storage_index(j))] = true;
  for (size_t e = 0; e < covered.size(); ++e)
    if (!covered[e])
      for (size_t k = 0; k < es; ++k)
        if (t.storage[e * es + k] != kCanary) return static_cast<int64_t>(e);
  return -1;
}

void fill(HostTensor& t, Fill kind, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> ints(-3, 3);
  std::uniform_real_distribution<double> reals(-1.0, 1.0), positive(0.5, 1.0);
  const int64_t n = t.elements();
  for (int64_t i = 0; i < n; ++i) {
    const double v = kind == Fill::uniform      ? reals(rng)
                     : kind == Fill::small_ints ? ints(rng)
                     : kind == Fill::positive   ? positive(rng)
                                                : ints(rng) * 0x1p-26;
    detail::store_from_double(t.data(), t.storage_index(i), t.desc.dtype, v);
  }
}

double tolerance(DataType out, double ref, double sum_abs, int64_t n) {
  return detail::comparison_tolerance(out, ref, sum_abs, n);
}

// No order chains more than n - 1 additions, so n bounds short sums.
int64_t bias_summation_depth(int64_t n) { return std::min(n, (n + 7) / 8 + 3 + 64); }

int64_t summation_depth(const detail::OpSpec& op) {
  const int64_t n = detail::reduction_length(op);
  return op.op == detail::Op::bias ? bias_summation_depth(n) : n;
}

namespace {

// A copy of t with every element's sign cleared, so the reference on these
// operands yields sum |products|.
HostTensor abs_copy(const HostTensor& t) {
  HostTensor a = t;
  const size_t es = size_of(t.desc.dtype);
  for (int64_t i = 0; i < t.elements(); ++i) {
    unsigned char* p = a.storage.data() + static_cast<size_t>(t.storage_index(i)) * es;
    p[es - 1] &= 0x7f;  // little-endian: the sign is the top bit of the last byte
  }
  return a;
}


}  // namespace

detail::View contiguous_view(const detail::View& v, DataType dt) {
  detail::View c = v;
  c.dtype = dt;
  c.offset = 0;
  int64_t s = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    c.strides[i] = s;
    s *= std::max<int64_t>(v.dims[i], 1);
  }
  return c;
}

Comparison check_against_reference(const Problem& given, const CheckOptions& opt) {
  Comparison cmp;
  auto fail = [&](std::string msg) {
    cmp.pass = false;
    if (cmp.first_failure.empty()) cmp.first_failure = std::move(msg);
  };
  std::mt19937_64 rng(opt.seed);
  Problem problem = given;
  HostTensor go = make_tensor(given.grad_output.dtype, given.grad_output.dims, opt.in_layout);
  HostTensor in = make_tensor(given.input.dtype, given.input.dims, opt.in_layout);
  HostTensor w = make_tensor(given.weight.dtype, given.weight.dims, opt.in_layout);
  for (HostTensor* t : {&go, &in, &w}) fill(*t, opt.fill, rng);
  problem.grad_output = go.desc;
  problem.input = in.desc;
  problem.weight = w.desc;

  // Outputs: the implied shapes and dtypes, in the requested layout.
  HostTensor outs[3];
  TensorDesc* out_desc[3] = {&problem.grad_input, &problem.grad_weight, &problem.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!problem.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    outs[i] = make_tensor(problem.gradient_dtype(g), problem.gradient_dims(g),
                          i == 2 && opt.out_layout == Layout::channels_last ? Layout::contiguous : opt.out_layout);
    *out_desc[i] = outs[i].desc;
  }

  auto plan = Plan::create(problem);
  if (!plan) {
    fail("Plan::create failed: " + plan.error().message);
    return cmp;
  }
  const size_t ws_bytes = plan->workspace_size();
  std::unique_ptr<unsigned char, decltype(&std::free)> ws(
      static_cast<unsigned char*>(ws_bytes ? std::aligned_alloc(64, (ws_bytes + 63) / 64 * 64) : nullptr), &std::free);
  Buffers b{go.data(), in.data(), w.data(), outs[0].data(), outs[1].data(), outs[2].data()};
  if (Error e = plan->execute(b, ws.get(), ws_bytes)) {
    fail("execute failed: " + e.message);
    return cmp;
  }

  auto spec = detail::validate(problem);
  if (!spec) {
    fail("validate failed after Plan::create succeeded: " + spec.error().message);
    return cmp;
  }
  const HostTensor go_abs = abs_copy(go), in_abs = abs_copy(in), w_abs = abs_copy(w);
  const char* const names[3] = {"gradInput", "gradWeight", "gradBias"};
  for (int i = 0; i < 3; ++i) {
    if (!problem.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    detail::OpSpec op = spec->op_for(g);
    const HostTensor& out = outs[i];
    // Operand buffers as Plan::execute binds them.
    const bool tr = problem.transposed;
    const void* a = go.data();
    const void* bb = w.data();
    const void* a_abs = go_abs.data();
    const void* b_abs = w_abs.data();
    if (g == Gradient::weight) {
      a = tr ? in.data() : go.data();
      bb = tr ? go.data() : in.data();
      a_abs = tr ? in_abs.data() : go_abs.data();
      b_abs = tr ? go_abs.data() : in_abs.data();
    }
    const DataType out_dt = out.desc.dtype;
    const int64_t n_out = out.elements();
    std::vector<unsigned char> ref(static_cast<size_t>(std::max<int64_t>(n_out, 1)) * size_of(out_dt));
    std::vector<float> sum_abs(static_cast<size_t>(std::max<int64_t>(n_out, 1)));
    op.dst = contiguous_view(op.dst, out_dt);
    detail::reference_run(op, a, bb, ref.data());
    detail::OpSpec abs_op = op;
    abs_op.dst = contiguous_view(op.dst, DataType::f32);
    detail::reference_run(abs_op, a_abs, b_abs, sum_abs.data());
    const int64_t n = summation_depth(op);
    for (int64_t j = 0; j < n_out; ++j) {
      const double want = detail::load_as_float(ref.data(), j, out_dt);
      const double got = out.at(j);
      if (std::isnan(want) || std::isnan(got)) {
        if (std::isnan(want) != std::isnan(got))
          fail(std::string(names[i]) + "[" + std::to_string(j) + "]: got " + std::to_string(got) + ", want " +
               std::to_string(want));
        continue;
      }
      if (std::isinf(want) || std::isinf(got)) {
        if (want != got)
          fail(std::string(names[i]) + "[" + std::to_string(j) + "]: got " + std::to_string(got) + ", want " +
               std::to_string(want));
        continue;
      }
      const double tol = tolerance(out_dt, want, sum_abs[static_cast<size_t>(j)], n);
      const bool exact_needed = exact_fill(opt.fill) && sum_abs[static_cast<size_t>(j)] < 0x1p24;
      const double err = std::fabs(got - want);
      cmp.worst_scaled_error = std::max(cmp.worst_scaled_error, err / tol);
      if (exact_needed ? err != 0 : err > tol) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s[%lld]: got %.9g, want %.9g, error %.3g, tolerance %.3g%s", names[i],
                      static_cast<long long>(j), got, want, err, tol, exact_needed ? " (exact expected)" : "");
        fail(buf);
      }
    }
    // Nothing outside the view may change.
    if (const int64_t e = first_written_outside_view(out); e >= 0)
      fail(std::string(names[i]) + ": storage element " + std::to_string(e) + " outside the view was written");
  }
  return cmp;
}

}  // namespace convbwd::test
