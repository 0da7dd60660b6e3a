// The depthwise/grouped implementations (depthwise_cl for one channel per
// group, depthwise_direct for the rest) against the reference: every op
// (bwd_data, fwd for transposed, bwd_weights), 1D/2D/3D, stride, dilation,
// asymmetric padding, width tails, group counts not a multiple of 8, every
// dtype and rounding, strided views, every tier that runs here (test_isas), and identical
// bits for 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "impl/depthwise/depthwise_cl.hpp"
#include "impl/implementation.hpp"
#include "kernels/config.hpp"
#include "impl/registry_entries.hpp"
#include "numeric/float_formats.hpp"
#include "reference/reference.hpp"
#include "runtime/cpu.hpp"
#include "runtime/thread_pool.hpp"
#include "util/guarded.hpp"
#include "util/tensor.hpp"
#include "util/tiers.hpp"

namespace convbwd::test {
namespace {

using detail::Isa;

// Depthwise and small-group geometries: tails (widths 1-3, not a multiple of
// 8, more than 8 vectors), stride, dilation, asymmetric padding, 1D/3D, wide
// kernels (more taps than accumulators), channel multipliers.
const char* const kGeometries[] = {
    "mb2g4ic4ih9iw11oc4kh3kw3ph1pw1",
    "mb2g6ic6ih10iw13oc6kh3kw3sh2sw2ph1pw1",
    "mb2g3ic3ih12iw17oc3kh3kw3dh1dw1ph2pw1phr0pwr3",
    "mb3g5ic5iw17oc5kw5sw3pw2dw1",
    "mb2g3ic3id5ih6iw7oc3kd3kh3kw3pd1ph1pw1",
    "mb2g2ic4id1ih4iw4oc2kd1kh2kw2sd3sh2sw2pd1pdr0ph1phr1pw0dw1",
    "mb2g2ic4id3ih5iw9oc8kd1kh3kw3sd3ph1pw1",
    "mb2g2ic4id6ih5iw9oc4kd2kh3kw2sd2sh1sw2pd1pw1",
    "mb2g4ic16ih7iw9oc16kh3kw3ph1pw1",
    "mb2g2ic6ih6iw6oc10kh3kw2sh2pw1",
    "mb2g2ic4ih9iw10oc10kh3kw3sh2ph1pw1",
    "mb2g2ic8ih6iw28oc8kh3kw3ph1pw1",
    "mb2g3ic3ih8iw8oc6kh3kw3",
    "mb2g4ic4ih5iw1oc4kh3kw1ph1",
    "mb2g4ic4ih5iw2oc4kh3kw3ph1pw1",
    "mb2g4ic4ih4iw3oc4kh2kw3pw1",
    "mb1g2ic2iw40oc2kw11pw5",
    "mb1g2ic2iw45oc2kw13pw6dw1",
    "mb1g2ic2ih3iw150oc2kh3kw3ph1pw1",
    // More than 8 vectors of 16 lanes (two row blocks), with tails.
    "mb1g2ic2ih2iw300oc2kh3kw3ph1pw1",
    "mb1g2ic2ih3iw263oc2kh3kw5sw2pw2",
    "mb2g2ic2ih5iw37oc2kh1kw4sw5pw3pwr0",
    // Transposed: gradInput is the fwd op.
    "mb2g4ic4ih5iw7oc4kh3kw3sh2sw2ph1pw1_tr",
    "mb2g6ic12ih4iw9oc6kh2kw2sh2sw2_tr",
    "mb2g3ic3iw10oc3kw4sw3pw1dw1_tr",
    "mb1g2ic2id3ih4iw5oc4kd3kh3kw3sd2sh2sw2pd1ph1pw1_tr",
    // One channel per group (depthwise_cl): group counts around the 8- and
    // 16-lane blocks, stride 3, stride above the kernel, taps beyond one
    // register block (25), large trailing padding, 1D/3D and transposed.
    "mb2g16ic16ih14iw14oc16kh3kw3sh2sw2ph1pw1",
    "mb2g24ic24ih5iw21oc24kh3kw3ph1pw1",
    "mb1g31ic31ih4iw17oc31kh3kw3sh2sw2ph1pw1",
    "mb1g33ic33iw40oc33kw5pw2",
    "mb1g9ic9ih7iw30oc9kh3kw3sh3sw3ph1pw2",
    "mb1g17ic17ih6iw9oc17kh3kw3ph1pw1",
    "mb1g8ic8ih9iw11oc8kh5kw5ph2pw2",
    "mb1g8ic8ih9iw20oc8kh2kw2sh3sw3",
    "mb1g8ic8ih6iw6oc8kh3kw3ph1pw1phr3pwr4",
    "mb1g10ic10id4ih5iw19oc10kd3kh3kw3sd2sh1sw2pd1ph1pw1",
    "mb2g12ic12iw50oc12kw7sw2pw3dw1",
    "mb1g8ic8ih7iw9oc8kh3kw3dh1dw2ph2pw3phr0pwr1",
    "mb2g9ic9ih5iw6oc9kh3kw3sh2sw2ph1pw1_tr",
    "mb1g8ic8ih4iw10oc8kh3kw4sh3sw3ph2pw1_tr",
    // Width stride 1 with kw 2 and 3 over rows longer than a few vectors,
    // 1D/2D/3D (27 taps: more than one chunk of accumulators).
    "mb2g17ic17ih5iw21oc17kh2kw2",
    "mb1g9ic9id3ih4iw13oc9kd3kh3kw3pd1ph1pw1",
    "mb2g20ic20iw37oc20kw3pw1",
    "mb1g18ic18ih4iw24oc18kh3kw3ph1pw1",
    // 6 to 8 channels per group on each side (depthwise_cl, grouped mode):
    // ResNeXt's 8 -> 8, out-channel blocks of 4 with a remainder (6), 7
    // channels (a lane unused), 25 taps, strides, 3D and transposed.
    "mb2g2ic16ih6iw11oc16kh3kw3ph1pw1",
    "mb1g3ic21ih5iw9oc24kh3kw3sh2sw2ph1pw1",
    "mb1g2ic16ih5iw6oc12kh3kw3ph1pw1",
    "mb1g2ic12ih5iw6oc16kh3kw3sh2ph1pw0",
    "mb1g2ic16ih7iw7oc16kh5kw5ph2pw2",
    "mb1g2ic16id3ih4iw5oc16kd3kh3kw3pd1ph1pw1",
    "mb2g2ic16ih5iw6oc16kh3kw3sh2sw2ph1pw1_tr",
    "mb1g2ic14ih4iw9oc16kh2kw3sw3dw1pw2_tr",
};

// One channel per group, or 6 to 8 on each side (the lanes mostly filled).
bool takes_cl(const detail::Geometry& g) {
  return (g.c == 1 && g.k == 1) || (g.c >= 6 && g.c <= 8 && g.k >= 6 && g.k <= 8);
}

// The implementation the registry should pick for a geometry's gradInput
// and gradWeight (both requested): the channel-blocked kernels where they
// apply, which run both gradients in one pass unless gradInput is a forward
// convolution (transposed layers).
std::string expected_impl(const Problem& p) {
  auto s = detail::validate(p);
  if (!s) return "invalid";
  if (!takes_cl(s.value().op_for(Gradient::weight).geo)) return "depthwise_direct";
  return p.transposed ? "depthwise_cl" : "depthwise_cl_fused";
}

Problem parse(const std::string& d) {
  auto p = Problem::parse(d);
  EXPECT_TRUE(p) << d << ": " << p.error().message;
  return p ? p.value() : Problem{};
}

void expect_pass(const std::string& desc, const CheckOptions& opt) {
  SCOPED_TRACE(desc + " in:" + to_string(opt.in_layout) + " out:" + to_string(opt.out_layout));
  const Problem p = parse(desc);
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), expected_impl(p));
  EXPECT_EQ(impl_base(plan->implementation(Gradient::weight)), expected_impl(p));
  const Comparison c = check_against_reference(p, opt);
  EXPECT_TRUE(c.pass) << desc << ": " << c.first_failure;
}

TEST(DepthwiseDirect, EveryGeometryF32) {
  for (const char* g : kGeometries) expect_pass(g, {});
}

// Groups of 16 -> 16 channels in 2D and 3D are left to the GEMM paths (the
// row-vectorized direct kernels were slower there); in 1D, and below 16 on
// either side, they stay direct. A tier with 16-lane channel blocks takes
// groups of up to 16 a side there instead (depthwise_cl, grouped), unless
// the GEMMs multiply the operands as bf16 pairs.
TEST(DepthwiseDirect, SixteenChannelGroupsIn2DAnd3DGoToGemm) {
  struct Case {
    const char* desc;
    bool gemm;
  } cases[] = {
      {"mb2g2ic32ih6iw9oc32kh3kw3ph1pw1", true},
      {"mb1g3ic48id3ih4iw5oc48kd3kh3kw3pd1ph1pw1", true},
      {"mb2g2ic32iw40oc32kw3pw1", false},
      {"mb2g2ic32ih6iw9oc30kh3kw3ph1pw1", false},
  };
  const detail::KernelConfig& cfg = detail::kernel_config(detail::active_isa());
  for (const Case& c : cases)
    for (const char* sfx : {"", "_dtbf16"}) {
      const std::string desc = std::string(c.desc) + sfx;
      SCOPED_TRACE(desc);
      const Problem p = parse(desc);
      const bool pairs = std::string(sfx) == "_dtbf16" && cfg.bf16.gather != nullptr;
      const bool blocks = cfg.depthwise.cl.lanes >= 16 && !pairs;
      auto plan = Plan::create(p);
      ASSERT_TRUE(plan) << plan.error().message;
      for (Gradient gr : {Gradient::input, Gradient::weight}) {
        const std::string impl(impl_base(plan->implementation(gr)));
        if (blocks)
          EXPECT_EQ(impl, "depthwise_cl_fused");
        else if (c.gemm)
          EXPECT_EQ(impl.rfind("gemm_", 0), 0u) << impl;
        else
          EXPECT_EQ(impl, "depthwise_direct");
      }
      const Comparison cmp = check_against_reference(p, {});
      EXPECT_TRUE(cmp.pass) << cmp.first_failure;
    }
}

TEST(DepthwiseDirect, DtypesAndRounding) {
  const char* const kSuffixes[] = {"_dtf16", "_dtbf16", "_dtf16:bf16:f32", "_dtbf16:f32:f16", "_math1", "_math2",
                                   "_math3", "_dtf16_math1"};
  for (const char* g : kGeometries)
    for (const char* s : kSuffixes) expect_pass(std::string(g) + s, {});
}

TEST(DepthwiseDirect, StridedViews) {
  const Layout kLayouts[] = {Layout::channels_last, Layout::padded, Layout::reversed};
  for (const char* g : kGeometries)
    for (Layout in : kLayouts)
      for (Layout out : kLayouts) {
        CheckOptions o;
        o.in_layout = in;
        o.out_layout = out;
        o.seed = 7;
        expect_pass(std::string(g) + "_dtbf16:f32:f16", o);
        expect_pass(g, o);
      }
}

// The benchmark suite's depthwise and grouped rows (issue 4) take these
// paths in every dtype.
TEST(DepthwiseDirect, SuiteRowsPickDepthwise) {
  const std::pair<const char*, const char*> kRows[] = {
      {"mb8g144ic144ih56oc144kh3ph1", "depthwise_cl_fused"},
      {"mb8g192ic192ih28oc192kh3sh2ph1", "depthwise_cl_fused"},
      {"mb8g32ic256ih28oc256kh3ph1", "depthwise_cl_fused"},
  };
  for (const auto& [desc, impl] : kRows)
    for (const char* sfx : {"", "_dtbf16", "_dtf16"}) {
      const Problem p = parse(std::string(desc) + sfx);
      auto plan = Plan::create(p);
      ASSERT_TRUE(plan) << desc;
      EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), impl) << desc << sfx;
      EXPECT_EQ(impl_base(plan->implementation(Gradient::weight)), impl) << desc << sfx;
    }
}

// The fused pass keeps each gradient's summation order, so it must give the
// bits of one plan per gradient (the unfused depthwise_cl kernels and
// bias_reduce) exactly: every channel-blocked geometry, narrow dtypes and
// roundings, strided views, 1 and 3 threads.
TEST(DepthwiseDirect, FusedPassMatchesOnePlanPerGradientBitForBit) {
  struct Outputs {
    std::vector<unsigned char> input, weight, bias;
  };
  auto run = [](Problem p, const HostTensor& go, const HostTensor& in, const HostTensor& w, HostTensor dx,
                HostTensor dw, HostTensor db, std::array<bool, 3> mask, const char* want) {
    p.output_mask = mask;
    auto plan = Plan::create(p);
    EXPECT_TRUE(plan) << plan.error().message;
    if (!plan) return Outputs{};
    if (mask[0]) {
      EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), want) << p.descriptor();
    }
    if (mask[1]) {
      EXPECT_EQ(impl_base(plan->implementation(Gradient::weight)), want) << p.descriptor();
    }
    if (mask[2]) {
      // The fused pass also sums gradBias unless an operand rounding (it
      // rounds dy for the products; the bias sums dy as it is) rules it out.
      const bool fused_bias = mask[0] && p.math_mode == MathMode::keep_dtype;
      EXPECT_EQ(impl_base(plan->implementation(Gradient::bias)), fused_bias ? want : "bias_reduce") << p.descriptor();
    }
    std::vector<std::byte> ws(plan->workspace_size());
    Buffers b;
    b.grad_output = go.data();
    b.input = in.data();
    b.weight = w.data();
    b.grad_input = mask[0] ? dx.data() : nullptr;
    b.grad_weight = mask[1] ? dw.data() : nullptr;
    b.grad_bias = mask[2] ? db.data() : nullptr;
    EXPECT_FALSE(plan->execute(b, ws.data(), ws.size())) << p.descriptor();
    return Outputs{dx.storage, dw.storage, db.storage};
  };
  int fused = 0;
  for (const char* geo : kGeometries)
    for (const char* sfx : {"", "_dtbf16", "_dtf16:bf16:f32", "_math2"})
      for (Layout layout : {Layout::contiguous, Layout::padded})
        for (int threads : {1, 3}) {
          Problem p = parse(std::string(geo) + sfx);
          auto s = detail::validate(p);
          ASSERT_TRUE(s);
          if (p.transposed || !takes_cl(s.value().op_for(Gradient::weight).geo)) continue;
          SCOPED_TRACE(p.descriptor() + " " + to_string(layout) + " threads " + std::to_string(threads));
          set_num_threads(threads);
          std::mt19937_64 rng(11);
          HostTensor go = make_tensor(p.grad_output.dtype, p.grad_output.dims, layout);
          HostTensor in = make_tensor(p.input.dtype, p.input.dims, layout);
          HostTensor w = make_tensor(p.weight.dtype, p.weight.dims, layout);
          for (HostTensor* t : {&go, &in, &w}) fill(*t, Fill::uniform, rng);
          p.grad_output = go.desc;
          p.input = in.desc;
          p.weight = w.desc;
          HostTensor dx = make_tensor(p.gradient_dtype(Gradient::input), p.gradient_dims(Gradient::input), layout);
          HostTensor dw = make_tensor(p.gradient_dtype(Gradient::weight), p.gradient_dims(Gradient::weight), layout);
          HostTensor db = make_tensor(p.gradient_dtype(Gradient::bias), p.gradient_dims(Gradient::bias), layout);
          p.grad_input = dx.desc;
          p.grad_weight = dw.desc;
          p.grad_bias = db.desc;
          const Outputs all = run(p, go, in, w, dx, dw, db, {true, true, true}, "depthwise_cl_fused");
          const Outputs two = run(p, go, in, w, dx, dw, db, {true, true, false}, "depthwise_cl_fused");
          const Outputs one = run(p, go, in, w, dx, dw, db, {true, false, false}, "depthwise_cl");
          const Outputs other = run(p, go, in, w, dx, dw, db, {false, true, true}, "depthwise_cl");
          EXPECT_TRUE(all.input == one.input && two.input == one.input) << "gradInput differs";
          EXPECT_TRUE(all.weight == other.weight && two.weight == other.weight) << "gradWeight differs";
          EXPECT_TRUE(all.bias == other.bias) << "gradBias differs";
          ++fused;
        }
  set_num_threads(0);
  EXPECT_GE(fused, 100);
}

TEST(DepthwiseDirect, DeclinesLargeGroups) {
  const Problem p = parse("mb1g2ic64ih6oc64kh3ph1");
  auto plan = Plan::create(p);
  ASSERT_TRUE(plan);
  EXPECT_NE(impl_base(plan->implementation(Gradient::input)), "depthwise_direct");
  EXPECT_NE(impl_base(plan->implementation(Gradient::weight)), "depthwise_direct");
}

// Calling the implementation directly, with an explicit ISA and thread count.
struct Direct {
  HostTensor go, in, w;
  Problem problem;
  detail::Spec spec;

  Direct(const std::string& desc, Layout layout, Fill fill) {
    problem = parse(desc);
    std::mt19937_64 rng(3);
    go = make_tensor(problem.grad_output.dtype, problem.grad_output.dims, layout);
    in = make_tensor(problem.input.dtype, problem.input.dims, layout);
    w = make_tensor(problem.weight.dtype, problem.weight.dims, layout);
    for (HostTensor* t : {&go, &in, &w}) fill_tensor(*t, fill, rng);
    problem.grad_output = go.desc;
    problem.input = in.desc;
    problem.weight = w.desc;
    for (Gradient g : {Gradient::input, Gradient::weight}) {
      HostTensor o = make_tensor(problem.gradient_dtype(g), problem.gradient_dims(g), layout);
      (g == Gradient::input ? problem.grad_input : problem.grad_weight) = o.desc;
      outs.push_back(o);
    }
    auto s = detail::validate(problem);
    EXPECT_TRUE(s) << s.error().message;
    spec = s.value();
  }
  static void fill_tensor(HostTensor& t, Fill f, std::mt19937_64& rng) { fill(t, f, rng); }

  std::vector<HostTensor> outs;

  void operands(Gradient g, const void** a, const void** b) const {
    const bool tr = problem.transposed;
    *a = go.data();
    *b = w.data();
    if (g == Gradient::weight) {
      *a = tr ? in.data() : go.data();
      *b = tr ? go.data() : in.data();
    }
  }

  // The output storage after running the implementation (nullopt: declined).
  // The CPU the plans assume: its last-level cache (0, unknown: fp32 planes
  // are streamed; large: copied) and whether it runs zmm in halves.
  detail::PlanContext cpu;

  std::vector<unsigned char> run(Gradient g, Isa isa, int threads, detail::ThreadPool& pool,
                                 const detail::Implementation& impl = detail::kDepthwiseDirectImpl) const {
    const detail::OpSpec op = spec.op_for(g);
    detail::PlanContext ctx = cpu;
    ctx.isa = isa;
    ctx.threads = threads;
    std::string why;
    auto k = impl.plan(op, ctx, &why);
    EXPECT_TRUE(k) << problem.descriptor() << ": declined: " << why;
    if (!k) return {};
    std::vector<std::byte> ws(k->workspace_bytes() + 64);
    // The storage with poisoned guard bytes after it: a store past the
    // view's last element (a vector tail, a transposed block's spill) fails
    // here, not only where it happens to corrupt something.
    std::vector<unsigned char> out = outs[static_cast<size_t>(g)].storage;
    const size_t storage = out.size();
    out.resize(storage + kGuardBytes, kPoison);
    detail::OpArgs args;
    operands(g, &args.a, &args.b);
    args.dst = out.data();
    args.workspace = ws.data();
    k->run(args, pool);
    for (size_t i = storage; i < out.size(); ++i)
      if (out[i] != kPoison) {
        ADD_FAILURE() << problem.descriptor() << " " << impl.name << " " << tier_name(detail::kernel_config(isa))
                      << ": wrote byte " << (i - storage) << " after the output's storage";
        break;
      }
    out.resize(storage);
    return out;
  }
  static constexpr size_t kGuardBytes = GuardedBuffer::kGuardBytes;

  std::vector<unsigned char> reference(Gradient g) const {
    const detail::OpSpec op = spec.op_for(g);
    std::vector<unsigned char> out = outs[static_cast<size_t>(g)].storage;
    const void *a, *b;
    operands(g, &a, &b);
    detail::reference_run(op, a, b, out.data());
    return out;
  }
};

// The implementations that take a problem: depthwise_direct always, and
// depthwise_cl where it does (so both stay covered there).
std::vector<const detail::Implementation*> impls_for(const Direct& d) {
  std::vector<const detail::Implementation*> v{&detail::kDepthwiseDirectImpl};
  if (takes_cl(d.spec.op_for(Gradient::weight).geo)) v.push_back(&detail::kDepthwiseClImpl);
  return v;
}

// Small integers make every fp32 sum exact, so each ISA must reproduce the
// reference's bits exactly, canaries outside the views included.
void expect_exact_per_isa(const std::vector<const char*>& suffixes, Fill fill) {
  detail::ThreadPool pool(2);
  for (const char* geo : kGeometries)
    for (const char* sfx : suffixes)
      for (Layout layout : {Layout::contiguous, Layout::padded}) {
        const std::string desc = std::string(geo) + sfx;
        Direct d(desc, layout, fill);
        for (Gradient g : {Gradient::input, Gradient::weight}) {
          const auto want = d.reference(g);
          for (Isa isa : test_isas())
            for (const detail::Implementation* impl : impls_for(d)) {
              const auto got = d.run(g, isa, 2, pool, *impl);
              EXPECT_TRUE(got == want) << desc << " " << to_string(layout) << " grad " << static_cast<int>(g)
                                       << " isa " << tier_name(isa) << " " << impl->name;
            }
        }
      }
}
TEST(DepthwiseDirect, ExactPerIsa) {
  expect_exact_per_isa({"", "_dtf16", "_dtbf16", "_dtf16:bf16:f32", "_math1", "_math2"}, Fill::small_ints);
  if (test_isas().size() < 2) GTEST_SKIP() << "no vector tier runs here: only the scalar kernels ran";
}
// bf16 with USE_FP16 (issue 19): the operands are rounded to fp16 after
// widening, on data the rounding changes (to 0 or 2^-24) with exact sums.
TEST(DepthwiseDirect, Bf16UseFp16ExactPerIsa) {
  expect_exact_per_isa({"_dtbf16_math2", "_dtbf16:f32:f32_math2", "_dtf16:bf16:f32_math2"}, Fill::fp16_subnormals);
  if (test_isas().size() < 2) GTEST_SKIP() << "no vector tier runs here: only the scalar kernels ran";
}

// Same bits for 1 and 2 threads, on data whose sums round.
TEST(DepthwiseDirect, ThreadCountDoesNotChangeBits) {
  detail::ThreadPool pool(2);
  for (const char* geo : kGeometries) {
    Direct d(std::string(geo) + "_dtf16:f32:bf16", Layout::contiguous, Fill::uniform);
    Direct f(geo, Layout::padded, Fill::uniform);
    for (Gradient g : {Gradient::input, Gradient::weight})
      for (Isa isa : test_isas())
        for (const detail::Implementation* impl : impls_for(d)) {
          const auto& m = *impl;
          EXPECT_TRUE(d.run(g, isa, 1, pool, m) == d.run(g, isa, 2, pool, m)) << geo << " grad " << static_cast<int>(g) << " " << m.name << " " << tier_name(isa);
          EXPECT_TRUE(f.run(g, isa, 1, pool, m) == f.run(g, isa, 2, pool, m)) << geo << " grad " << static_cast<int>(g) << " " << m.name << " " << tier_name(isa);
          EXPECT_TRUE(f.run(g, isa, 2, pool, m) == f.run(g, isa, 3, pool, m)) << geo << " grad " << static_cast<int>(g) << " " << m.name << " " << tier_name(isa);
        }
  }
}

// On a tier with two channel-block widths (AVX-512: 16 and 8 lanes) the
// thread count picks one (depthwise_cl_kernels_for), so both must give the
// same bits: every geometry whose choice differs between 1 and 2 threads, on
// data whose sums round, both gradients, narrow dtypes and strided views.
TEST(DepthwiseDirect, WideAndNarrowChannelBlocksGiveTheSameBits) {
  detail::ThreadPool pool(2);
  int tiers = 0;
  for (Isa isa : test_isas()) {
    const detail::DepthwiseKernels& k = detail::kernel_config(isa).depthwise;
    if (k.cl_narrow.lanes == 0) continue;
    ++tiers;
    int flipping = 0;
    for (const char* geo : kGeometries) {
      const detail::Geometry g = Direct(geo, Layout::contiguous, Fill::small_ints).spec.op_for(Gradient::weight).geo;
      if (g.c != 1 || g.k != 1) continue;
      if (detail::depthwise_cl_kernels_for(g.groups, 1, k).lanes ==
          detail::depthwise_cl_kernels_for(g.groups, 2, k).lanes)
        continue;
      ++flipping;
      Direct d(std::string(geo) + "_dtf16:f32:bf16", Layout::contiguous, Fill::uniform);
      Direct f(geo, Layout::padded, Fill::uniform);
      for (Gradient gr : {Gradient::input, Gradient::weight}) {
        const auto& m = detail::kDepthwiseClImpl;
        EXPECT_TRUE(d.run(gr, isa, 1, pool, m) == d.run(gr, isa, 2, pool, m)) << geo << " " << tier_name(isa);
        EXPECT_TRUE(f.run(gr, isa, 1, pool, m) == f.run(gr, isa, 2, pool, m)) << geo << " " << tier_name(isa);
      }
    }
    EXPECT_GE(flipping, 5) << tier_name(isa);
  }
  if (tiers == 0) GTEST_SKIP() << "no tier here has two channel-block widths";
}

// Groups of 6 to 16 channels a side with more than 8 on one in the 16-lane
// channel blocks of the tiers that have them, called directly: exact against
// the reference on small integers (both gradients, 1D/2D/3D, strides,
// transposed, channel tails on both sides, 8 -> 16 and 16 -> 6, fp16 and
// mixed dtypes, strided views), the same bits
// at 1, 2 and 3 threads on data whose sums round, and declined for bf16
// operands where the GEMMs have pair kernels.
TEST(DepthwiseDirect, SixteenChannelGroupsInSixteenLaneBlocks) {
  const char* const kWide[] = {
      "mb2g2ic32ih6iw11oc32kh3kw3ph1pw1",           "mb1g3ic36ih5iw9oc42kh3kw3sh2sw2ph1pw1",
      "mb1g2ic32id3ih4iw5oc32kd3kh3kw3pd1ph1pw1",   "mb2g2ic28ih5iw6oc32kh3kw3sh2sw2ph1pw1_tr",
      "mb2g2ic32iw40oc26kw5pw2",                    "mb1g2ic24ih7iw7oc24kh5kw5ph2pw2",
      "mb2g2ic16ih6iw9oc32kh3kw3ph1pw1",            "mb1g2ic32ih5iw7oc12kh3kw3sh2sw2ph1pw1",
      "mb2g3ic27ih6iw6oc30kh3kw3ph1pw1",
  };
  detail::ThreadPool pool(3);
  int tiers = 0;
  for (Isa isa : test_isas()) {
    const detail::KernelConfig& cfg = detail::kernel_config(isa);
    if (cfg.depthwise.cl.lanes < 16) continue;
    ++tiers;
    for (const char* geo : kWide) {
      for (const char* sfx : {"", "_dtf16", "_dtf16:bf16:f32"})
        for (Layout layout : {Layout::contiguous, Layout::padded}) {
          const std::string desc = std::string(geo) + sfx;
          Direct d(desc, layout, Fill::small_ints);
          Direct f(desc, layout, Fill::uniform);
          for (Gradient g : {Gradient::input, Gradient::weight}) {
            const auto& m = detail::kDepthwiseClImpl;
            EXPECT_TRUE(d.run(g, isa, 2, pool, m) == d.reference(g)) << desc << " " << tier_name(isa);
            const auto one = f.run(g, isa, 1, pool, m);
            EXPECT_TRUE(one == f.run(g, isa, 2, pool, m) && one == f.run(g, isa, 3, pool, m))
                << desc << " " << tier_name(isa);
          }
        }
      if (cfg.bf16.gather == nullptr) continue;
      Direct b(std::string(geo) + "_dtbf16", Layout::contiguous, Fill::small_ints);
      for (Gradient g : {Gradient::input, Gradient::weight}) {
        detail::PlanContext ctx;
        ctx.isa = isa;
        ctx.threads = 2;
        std::string why;
        EXPECT_EQ(detail::kDepthwiseClImpl.plan(b.spec.op_for(g), ctx, &why), nullptr) << geo << " " << tier_name(isa);
      }
    }
  }
  if (tiers == 0) GTEST_SKIP() << "no tier here has 16-lane channel blocks";
}

// An fp32 output whose channel planes are contiguous leaves the channel-
// blocked kernels a plane at a time: streamed past the cache when it is
// large, copied when it fits in the last-level cache (PlanContext::
// llc_bytes). Both must write exactly the reference's values (small
// integers) and the same bits as each other (sums that round): gradInput of
// every channel-blocked geometry (bwd_data, and fwd for transposed layers),
// with plane widths that leave head and tail floats outside whole 64-byte
// lines, on every tier, 1 and 3 threads. A cached output in full blocks of
// channels is written in place (direct_planes), each row's vector tail
// spilling into the rows after it: so also full 8- and 16-channel blocks
// with rows narrower than that spill (1 to 9 wide: a tail across several
// rows, the plane's last rows kept inside it), in 1D, 2D, 3D, strided and
// transposed, with a partial block beside a full one.
TEST(DepthwiseDirect, StreamedAndCopiedPlanesGiveTheSameBits) {
  constexpr int64_t kStreamed = 0, kCopied = int64_t{1} << 40;
  detail::ThreadPool pool(3);
  std::vector<const char*> geos(std::begin(kGeometries), std::end(kGeometries));
  for (const char* geo : {"mb2g16ic16ih4iw3oc16kh3kw3ph1pw1", "mb2g32ic32ih5iw5oc32kh3kw3ph1pw1",
                          "mb1g16ic16id3ih4iw5oc16kd3kh3kw3pd1ph1pw1", "mb2g24ic24iw7oc24kw3pw1",
                          "mb2g16ic16ih6iw1oc16kh3kw1ph1", "mb2g16ic16ih7iw9oc16kh3kw3sh2sw2ph1pw1",
                          "mb2g16ic16ih3iw2oc16kh3kw3sh2sw2ph1pw1_tr"})
    geos.push_back(geo);
  int geometries = 0;
  for (const char* geo : geos) {
    Direct exact(geo, Layout::contiguous, Fill::small_ints);
    if (!takes_cl(exact.spec.op_for(Gradient::weight).geo)) continue;
    ++geometries;
    Direct rounding(geo, Layout::contiguous, Fill::uniform);
    const auto want = exact.reference(Gradient::input);
    const auto& m = detail::kDepthwiseClImpl;
    for (Isa isa : test_isas())
      for (int threads : {1, 3}) {
        SCOPED_TRACE(std::string(geo) + " " + tier_name(isa) + " threads " + std::to_string(threads));
        auto run = [&](Direct& d, int64_t llc) {
          d.cpu.llc_bytes = llc;
          return d.run(Gradient::input, isa, threads, pool, m);
        };
        EXPECT_TRUE(run(exact, kStreamed) == want);
        EXPECT_TRUE(run(exact, kCopied) == want);
        EXPECT_TRUE(run(rounding, kStreamed) == run(rounding, kCopied));
      }
  }
  EXPECT_GE(geometries, 27);
}

// On a CPU that runs zmm in halves (Zen 4), depthwise layers with planes of
// 56x56 pixels or more take the narrow channel blocks: the rule's edges
// (narrow_planes_suit), its effect on the plan (the narrow blocks' smaller
// scratch), and the same bits either way, on data whose sums round (both
// gradients, fp32 and bf16, 1D/2D/3D). Elsewhere the choice stays the
// thread count's.
TEST(DepthwiseDirect, LargePlanesTakeNarrowBlocksWhereZmmRunsInHalves) {
  struct Case {
    const char* desc;
    bool narrow;
  };
  const Case kCases[] = {
      {"mb1g20ic20ih56iw56oc20kh3kw3ph1pw1", true},  {"mb1g20ic20ih56iw55oc20kh3kw3ph1pw1", false},
      {"mb1g20ic20ih28iw28oc20kh3kw3ph1pw1", false}, {"mb1g20ic20iw4000oc20kw5pw2", true},
      {"mb1g20ic20iw1000oc20kw5pw2", false},         {"mb1g20ic20id4ih28iw28oc20kd3kh3kw3pd1ph1pw1", true},
      {"mb1g20ic20ih112iw112oc20kh3kw3sh2sw2ph1pw1", true},
  };
  detail::ThreadPool pool(2);
  int tiers = 0;
  for (const Case& c : kCases) {
    Direct d(c.desc, Layout::contiguous, Fill::uniform);
    const detail::OpSpec op = d.spec.op_for(Gradient::weight);
    detail::PlanContext halves, whole;
    halves.zmm_in_halves = true;
    EXPECT_EQ(detail::narrow_planes_suit(op.geo, halves), c.narrow) << c.desc;
    EXPECT_FALSE(detail::narrow_planes_suit(op.geo, whole)) << c.desc;
    for (Isa isa : test_isas()) {
      if (detail::kernel_config(isa).depthwise.cl_narrow.lanes == 0) continue;
      ++tiers;
      halves.isa = whole.isa = isa;
      halves.threads = whole.threads = 2;
      std::string why;
      const auto narrow = detail::kDepthwiseClImpl.plan(op, halves, &why);
      const auto wide = detail::kDepthwiseClImpl.plan(op, whole, &why);
      ASSERT_TRUE(narrow && wide) << c.desc << ": " << why;
      if (c.narrow)
        EXPECT_LT(narrow->workspace_bytes(), wide->workspace_bytes()) << c.desc << " " << tier_name(isa);
      else
        EXPECT_EQ(narrow->workspace_bytes(), wide->workspace_bytes()) << c.desc << " " << tier_name(isa);
      if (!c.narrow) continue;
      Direct b(std::string(c.desc) + "_dtbf16", Layout::contiguous, Fill::uniform);
      for (Direct* t : {&d, &b})
        for (Gradient g : {Gradient::input, Gradient::weight}) {
          const auto& m = detail::kDepthwiseClImpl;
          t->cpu.zmm_in_halves = true;
          const auto in_halves = t->run(g, isa, 2, pool, m);
          t->cpu.zmm_in_halves = false;
          EXPECT_TRUE(in_halves == t->run(g, isa, 2, pool, m)) << t->problem.descriptor() << " " << tier_name(isa);
        }
    }
  }
  if (tiers == 0) GTEST_SKIP() << "no tier here has two channel-block widths";
}

// An Inf in an image column that no output reads stays out of gradWeight:
// the vector tail beyond a row's end is masked, not multiplied by zero.
TEST(DepthwiseDirect, UnreadInfStaysOut) {
  detail::ThreadPool pool(2);
  for (const char* desc : {"mb1g2ic2iw12oc2kw3sw2", "mb1g2ic2ih2iw12oc2kh1kw3sw2"}) {
    Direct d(desc, Layout::contiguous, Fill::small_ints);
    const int64_t cols = 12;
    for (int64_t i = cols - 1; i < d.in.elements(); i += cols)  // the last column of every row
      detail::store_from_double(d.in.data(), d.in.storage_index(i), d.in.desc.dtype, HUGE_VAL);
    const auto want = d.reference(Gradient::weight);
    for (Isa isa : test_isas())
      for (const detail::Implementation* impl : impls_for(d))
        EXPECT_TRUE(d.run(Gradient::weight, isa, 1, pool, *impl) == want) << desc << " " << impl->name << " " << tier_name(isa);
  }
}

}  // namespace
}  // namespace convbwd::test
