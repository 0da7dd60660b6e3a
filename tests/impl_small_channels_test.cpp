// The small-channel paths (src/impl/small_channels: small_channels_dgrad,
// small_channels_wgrad) against the fp64 reference, planned directly with
// every ISA this CPU has and with 1, 2 and 3 threads (whose bits must be
// identical). Shapes walk C = 1..4, column counts below, at and above one
// 16-column block, K tails of the 6-row tiles, pixel tails of the 6-pixel
// tiles and of bands/chunks, stride above and below the kernel, dilation,
// asymmetric padding, groups, 1D/2D/3D, every dtype and operand rounding,
// strided layouts of every tensor, and checks that plans choose these paths
// for the suite's two small-channel rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "impl/registry_entries.hpp"
#include "numeric/float_formats.hpp"
#include "problem/spec.hpp"
#include "reference/reference.hpp"
#include "runtime/thread_pool.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

using detail::Isa;

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::scalar};
  if (detail::detected_isa() >= Isa::avx2) v.push_back(Isa::avx2);
  return v;
}

const detail::Implementation& impl_for(detail::Op op) {
  return op == detail::Op::bwd_data ? detail::kSmallChannelsBwdDataImpl : detail::kSmallChannelsBwdWeightsImpl;
}

struct Aligned {
  void* p = nullptr;
  explicit Aligned(size_t bytes) : p(bytes ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr) {}
  ~Aligned() { std::free(p); }
};

// Runs one gradient of `desc` through the small-channel path with every ISA
// and thread counts 1, 2 and 3 (whose bits must be identical); compares with
// the reference and checks the canaries around the output view.
void check(const std::string& desc, Gradient which, Layout in_layout = Layout::contiguous,
           Layout out_layout = Layout::contiguous, Fill fill_kind = Fill::uniform) {
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

  detail::ThreadPool pool(3);
  for (Isa isa : isas()) {
    std::vector<unsigned char> first;
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(std::string("isa ") + std::string(detail::to_string(isa)) + " threads " + std::to_string(threads));
      std::string why;
      auto k = impl_for(op.op).plan(op, detail::PlanContext{isa, threads}, &why);
      ASSERT_TRUE(k) << "declined: " << why;
      Aligned ws(k->workspace_bytes());
      HostTensor o = out;  // canary-filled storage
      detail::OpArgs args{a, b, o.data(), static_cast<std::byte*>(ws.p)};
      k->run(args, pool);
      int failures = 0;
      for (int64_t j = 0; j < n_out && failures < 5; ++j) {
        const double want = ref[static_cast<size_t>(j)];
        const double got = o.at(j);
        const double tol = tolerance(o.desc.dtype, want, sum_abs[static_cast<size_t>(j)], red) +
                           std::fabs(want) * 0x1p-24;  // the fp32 reference's own rounding
        const bool exact = fill_kind == Fill::small_ints && sum_abs[static_cast<size_t>(j)] < 0x1p24;
        if (exact ? got != want : !(std::fabs(got - want) <= tol)) {
          ++failures;
          ADD_FAILURE() << "element " << j << ": got " << got << ", want " << want << ", tolerance " << tol;
        }
      }
      std::vector<bool> covered(o.storage.size() / size_of(o.desc.dtype), false);
      for (int64_t j = 0; j < n_out; ++j) covered[static_cast<size_t>(o.storage_index(j))] = true;
      for (size_t e = 0; e < covered.size(); ++e)
        if (!covered[e]) {
          for (size_t q = 0; q < size_of(o.desc.dtype); ++q)
            ASSERT_EQ(o.storage[e * size_of(o.desc.dtype) + q], out.storage[e * size_of(o.desc.dtype) + q])
                << "storage element " << e << " outside the output view was written";
        }
      if (threads == 1)
        first = o.storage;
      else
        EXPECT_TRUE(first == o.storage) << threads << " threads and 1 thread give different bits";
    }
  }
}

void check_both(const std::string& desc, Layout in_layout = Layout::contiguous,
                Layout out_layout = Layout::contiguous) {
  check(desc, Gradient::input, in_layout, out_layout);
  check(desc, Gradient::weight, in_layout, out_layout);
}

TEST(ImplSmallChannels, OneChannel1d) {
  check_both("mb2ic1iw40oc12kw10sw5");          // the wav2vec2 front end, small
  check_both("mb1ic1iw23oc7kw3sw1pw1");         // one block, K tail of 1
  check_both("mb3ic1iw50oc6kw16sw2pw3pwr1");    // exactly 16 columns
  check_both("mb1ic1iw33oc13kw17sw3pw0dw2");    // 17 columns: a block of 1
}
TEST(ImplSmallChannels, Stem2d) {
  check_both("mb2ic3ih23iw21oc8kh7sh2ph3");     // the resnet stem, small
  check_both("mb1ic3ih16oc64kh7sh2ph3");        // K = 64 (10 exact k-tiles + 4)
}
TEST(ImplSmallChannels, ChannelCounts) {
  for (const char* d : {"mb2ic1ih9oc5kh3ph1", "mb2ic2ih9oc7kh3ph1", "mb2ic3ih9oc11kh3sh2ph1", "mb2ic4ih9oc6kh3ph1",
                        "mb1ic4ih7oc3kh2sh1ph0", "mb2ic2ih5iw9oc9kh1kw1"})
    check_both(d);
}
TEST(ImplSmallChannels, StrideAboveKernel) {
  // Some gradient positions are reached by no tap: they must come out zero.
  check_both("mb1ic2ih11iw10oc5kh2sh3sw4");
  check_both("mb2ic1iw29oc9kw2sw5pw1");
}
TEST(ImplSmallChannels, DilationAndPadding) {
  check_both("mb2ic3ih12oc10kh3dh2ph2");
  check_both("mb2ic2ih9iw13oc8kh3kw4sh2sw1ph1phr2pw0pwr3dw2");
  check_both("mb1ic1ih3iw4oc4kh3kw3ph4pw5");  // padding wider than the image
}
TEST(ImplSmallChannels, Groups) {
  check_both("mb2ic6ih7oc20kh3ph1g2");
  check_both("mb2ic12iw31oc9kw5sw2pw2g3");
}
TEST(ImplSmallChannels, ThreeD) {
  check_both("mb2ic1id5ih6iw7oc7kd3kh3kw3pd1ph1pw1");
  check_both("mb1ic3id6oc5kd2sd2pd1");
  check_both("mb2g2ic4id3ih4iw5oc2kd2kh2kw3sd2sh1sw2pd1ph0pw1pdr0phr1pwr2dd1dh2dw1");
}
TEST(ImplSmallChannels, LongRowsAndManyBands) {
  // Rows longer than a band or chunk, and several bands/chunks per image.
  check_both("mb2ic1iw3000oc7kw10sw5");
  check_both("mb1ic3ih60iw50oc6kh5sh2ph2");
  // Several data-gradient bands (T within 256 KiB: 408 pixels at 160
  // columns, 4092 at 16), bands ending inside a row.
  check_both("mb1ic3ih48iw46oc20kh7sh2ph3");
  check_both("mb1ic1ih100iw90oc8kh3ph1");
  // K beyond one 64-channel chunk of the data gradient: 64 + 64 + 2.
  check_both("mb1ic1iw1300oc130kw10sw5pw2");
  check_both("mb2ic2ih13iw9oc70kh3sh2ph1");
}
TEST(ImplSmallChannels, Dtypes) {
  check_both("mb2ic3ih11iw13oc10kh3sh2ph1_dtbf16");
  check_both("mb2ic3ih11iw13oc10kh3sh2ph1_dtf16");
  check_both("mb2ic1iw60oc9kw10sw5_dtf16:bf16:f32");
  check_both("mb2ic2ih7oc7kh3ph1_dtbf16:f32:f16");
}
TEST(ImplSmallChannels, OperandRounding) {
  check_both("mb2ic3ih9oc20kh3ph1_math1");
  check_both("mb2ic3ih9oc20kh3ph1_math2");
  check_both("mb2ic1iw45oc13kw10sw5_math1_dtbf16");
}
TEST(ImplSmallChannels, Layouts) {
  for (Layout in : {Layout::channels_last, Layout::padded, Layout::reversed})
    for (Layout out : {Layout::contiguous, Layout::padded, Layout::reversed}) {
      check_both("mb2ic3ih9iw8oc10kh3sh2ph1", in, out);
      check_both("mb2ic1iw40oc8kw10sw5", in, out);
    }
  check_both("mb1ic2id4oc7kd3pd1", Layout::reversed, Layout::channels_last);
}
TEST(ImplSmallChannels, SmallIntsExact) {
  // Small integers: every fp32 sum is exact, so the result must equal the
  // reference bit for bit (the tolerance would hide a lost product).
  for (Gradient g : {Gradient::input, Gradient::weight}) {
    check("mb2ic3ih19oc13kh7sh2ph3", g, Layout::contiguous, Layout::contiguous, Fill::small_ints);
    check("mb2ic1iw70oc17kw10sw5", g, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  }
}

TEST(ImplSmallChannels, Declines) {
  auto decline = [](const char* desc, Gradient which, const char* reason) {
    auto p = Problem::parse(desc);
    ASSERT_TRUE(p) << p.error().message;
    auto spec = detail::validate(p.value());
    ASSERT_TRUE(spec) << spec.error().message;
    const detail::OpSpec op = spec->op_for(which);
    std::string why;
    EXPECT_FALSE(impl_for(detail::Op::bwd_data).plan(op, {Isa::scalar, 1}, &why)) << desc;
    if (op.op != detail::Op::bwd_data) {
      why.clear();
      EXPECT_FALSE(impl_for(detail::Op::bwd_weights).plan(op, {Isa::scalar, 1}, &why)) << desc;
    }
    EXPECT_NE(why.find(reason), std::string::npos) << desc << ": " << why;
  };
  decline("mb1ic5ih8oc8kh3", Gradient::input, "exceed 4");
  decline("mb1ic5ih8oc8kh3", Gradient::weight, "exceed 4");
  decline("mb1ic3ih8oc8kh3sh2_tr", Gradient::input, "not this operation");
  // 8-bit tensors only reach gradInput of transposed convolutions (Op::fwd),
  // so an 8-bit operand is planted into a valid spec.
  auto p = Problem::parse("mb1ic3ih5oc4kh3");
  ASSERT_TRUE(p);
  auto spec = detail::validate(p.value());
  ASSERT_TRUE(spec);
  detail::OpSpec op = spec->op_for(Gradient::weight);
  op.b.dtype = DataType::f8e4m3;
  std::string why;
  EXPECT_FALSE(detail::kSmallChannelsBwdWeightsImpl.plan(op, {Isa::scalar, 1}, &why));
  EXPECT_NE(why.find("8-bit"), std::string::npos) << why;
}

TEST(ImplSmallChannels, ChosenByThePlan) {
  for (const char* d : {"mb4ic3ih224oc64kh7sh2ph3", "mb2ic1iw16000oc512kw10sw5", "mb4ic3ih224oc64kh7sh2ph3_dtbf16",
                        "mb2ic1iw16000oc512kw10sw5_dtf16"}) {
    auto p = Problem::parse(d);
    ASSERT_TRUE(p) << p.error().message;
    auto plan = Plan::create(p.value());
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->implementation(Gradient::input), "small_channels_dgrad") << d;
    EXPECT_EQ(plan->implementation(Gradient::weight), "small_channels_wgrad") << d;
  }
  // Eight channels per group stay with the GEMM paths.
  auto p = Problem::parse("mb2ic8ih8oc32kh3ph1");
  ASSERT_TRUE(p);
  auto plan = Plan::create(p.value());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_NE(plan->implementation(Gradient::input), "small_channels_dgrad");
}

}  // namespace
}  // namespace convbwd::test
