#include "util/impl_check.hpp"

#include "kernels/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "numeric/float_formats.hpp"
#include "problem/spec.hpp"
#include "reference/reference.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::test {
namespace {

using detail::Isa;

struct Aligned {
  void* p = nullptr;
  explicit Aligned(size_t bytes) : p(bytes ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr) {}
  ~Aligned() { std::free(p); }
};

}  // namespace

void check_implementation(const std::string& desc, Gradient which, const ImplFor& impl_for, Layout in_layout,
                          Layout out_layout, Fill fill_kind, const std::vector<int>& thread_counts,
                          const std::vector<std::string>& same_bits_knobs) {
  SCOPED_TRACE(desc + " gradient " + std::to_string(static_cast<int>(which)) + " in " + to_string(in_layout) +
               " out " + to_string(out_layout));
  auto parsed = Problem::parse(desc);
  ASSERT_TRUE(parsed) << parsed.error().message;
  Problem p = parsed.value();
  std::mt19937_64 rng(42);
  HostTensor go = make_tensor(p.grad_output.dtype, p.grad_output.dims, in_layout);
  HostTensor in = make_tensor(p.input.dtype, p.input.dims, in_layout);
  HostTensor w = make_tensor(p.weight.dtype, p.weight.dims, in_layout);
  for (HostTensor* t : {&go, &in, &w}) fill(*t, fill_kind, rng);
  p.grad_output = go.desc;
  p.input = in.desc;
  p.weight = w.desc;
  HostTensor out = make_tensor(p.gradient_dtype(which), p.gradient_dims(which), out_layout);
  (which == Gradient::input ? p.grad_input : p.grad_weight) = out.desc;
  auto spec = detail::validate(p);
  ASSERT_TRUE(spec) << spec.error().message;
  const detail::OpSpec op = spec->op_for(which);
  const bool tr = p.transposed;
  const void* a = go.data();
  const void* b = w.data();
  if (which == Gradient::weight) {
    a = tr ? in.data() : go.data();
    b = tr ? go.data() : in.data();
  }

  // Reference and sum |products| for the tolerance, contiguous.
  const int64_t n_out = out.elements();
  detail::OpSpec ref_op = op;
  int64_t s = 1;
  for (int i = op.dst.rank - 1; i >= 0; --i) ref_op.dst.strides[i] = s, s *= op.dst.dims[i];
  ref_op.dst.offset = 0;
  ref_op.dst.dtype = DataType::f32;
  std::vector<float> ref(static_cast<size_t>(n_out)), sum_abs(static_cast<size_t>(n_out));
  // fp32 reference output is enough here: the tolerance covers one extra ulp.
  detail::reference_run(ref_op, a, b, ref.data());
  {
    HostTensor ga = go, ia = in, wa = w;
    for (HostTensor* t : {&ga, &ia, &wa})
      for (int64_t i = 0; i < t->elements(); ++i) {
        unsigned char* q = t->storage.data() + static_cast<size_t>(t->storage_index(i)) * size_of(t->desc.dtype);
        q[size_of(t->desc.dtype) - 1] &= 0x7f;
      }
    const void* aa = ga.data();
    const void* ba = wa.data();
    if (which == Gradient::weight) {
      aa = tr ? ia.data() : ga.data();
      ba = tr ? ga.data() : ia.data();
    }
    detail::reference_run(ref_op, aa, ba, sum_abs.data());
  }
  const int64_t red = detail::reduction_length(op);

  detail::ThreadPool pool(*std::max_element(thread_counts.begin(), thread_counts.end()));
  std::vector<std::string> knobs{""};
  knobs.insert(knobs.end(), same_bits_knobs.begin(), same_bits_knobs.end());
  for (Isa isa : test_isas()) {
    std::vector<unsigned char> first;
    // Every knob at every thread count: one sequence of runs.
    for (size_t run = 0; run < knobs.size() * thread_counts.size(); ++run) {
      const std::string& knob = knobs[run / thread_counts.size()];
      const int threads = thread_counts[run % thread_counts.size()];
      SCOPED_TRACE("isa " + tier_name(isa) + " threads " + std::to_string(threads) + " " + knob);
      std::string why;
      const size_t eq = knob.find('=');
      if (!knob.empty()) setenv(knob.substr(0, eq).c_str(), knob.substr(eq + 1).c_str(), 1);
      auto k = impl_for(op.op).plan(op, detail::PlanContext{isa, threads}, &why);
      if (!knob.empty()) unsetenv(knob.substr(0, eq).c_str());
      ASSERT_TRUE(k) << "declined: " << why;
      Aligned ws(k->workspace_bytes());
      // NaN in every byte pattern the kernels read back (fp32, bf16, pairs):
      // fresh memory is often zero, which would hide a buffer read before
      // it was written.
      if (ws.p) std::memset(ws.p, 0xff, k->workspace_bytes());
      HostTensor o = out;  // canary-filled storage
      detail::OpArgs args{a, b, o.data(), static_cast<std::byte*>(ws.p)};
      k->run(args, pool);
      int failures = 0;
      for (int64_t j = 0; j < n_out && failures < 5; ++j) {
        double want = ref[static_cast<size_t>(j)];
        const double got = o.at(j);
        const double tol = tolerance(o.desc.dtype, want, sum_abs[static_cast<size_t>(j)], red) +
                           std::fabs(want) * 0x1p-24;  // the fp32 reference's own rounding
        const bool exact = exact_fill(fill_kind) && sum_abs[static_cast<size_t>(j)] < 0x1p24;
        if (exact) {
          // An exact sum, rounded once into the output's dtype.
          unsigned char bits[4];
          detail::store_from_double(bits, 0, o.desc.dtype, want);
          want = detail::load_as_float(bits, 0, o.desc.dtype);
        }
        if (exact ? got != want : !(std::fabs(got - want) <= tol)) {
          ++failures;
          ADD_FAILURE() << "element " << j << ": got " << got << ", want " << want << ", tolerance " << tol;
        }
      }
      const int64_t outside = first_written_outside_view(o);
      ASSERT_LT(outside, 0) << "storage element " << outside << " outside the output view was written";
      if (first.empty())
        first = o.storage;
      else
        EXPECT_TRUE(first == o.storage) << threads << " threads" << (knob.empty() ? "" : " with " + knob) << " and "
                                        << thread_counts.front() << " give different bits";
    }
  }
}

}  // namespace convbwd::test
