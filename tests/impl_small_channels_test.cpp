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
#include "util/impl_check.hpp"
#include "util/tensor.hpp"

namespace convbwd::test {
namespace {

using detail::Isa;

const detail::Implementation& impl_for(detail::Op op) {
  return op == detail::Op::bwd_data ? detail::kSmallChannelsBwdDataImpl : detail::kSmallChannelsBwdWeightsImpl;
}

void check(const std::string& desc, Gradient which, Layout in_layout = Layout::contiguous,
           Layout out_layout = Layout::contiguous, Fill fill_kind = Fill::uniform) {
  check_implementation(desc, which, impl_for, in_layout, out_layout, fill_kind, {1, 2, 3});
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
  check_both("mb1ic1iw33oc13kw17sw3pw0dw1");    // 17 columns: a block of 1
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
  check_both("mb2ic3ih12oc10kh3dh1ph2");
  check_both("mb2ic2ih9iw13oc8kh3kw4sh2sw1ph1phr2pw0pwr3dw1");
  check_both("mb1ic1ih3iw4oc4kh3kw3ph4pw5");  // padding wider than the image
}
TEST(ImplSmallChannels, Groups) {
  check_both("mb2ic6ih7oc20kh3ph1g2");
  check_both("mb2ic12iw31oc9kw5sw2pw2g3");
}
TEST(ImplSmallChannels, ThreeD) {
  check_both("mb2ic1id5ih6iw7oc7kd3kh3kw3pd1ph1pw1");
  check_both("mb1ic3id6oc5kd2sd2pd1");
  check_both("mb2g2ic4id3ih4iw5oc2kd2kh2kw3sd2sh1sw2pd1ph0pw1pdr0phr1pwr2dd0dh1dw0");
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
  // Narrow x read element by element rather than through the per-image fp32
  // copy of the weight gradient: grouped layers, and x without flat planes.
  check_both("mb2ic6ih7oc20kh3ph1g2_dtf16");
  check_both("mb2ic12iw31oc9kw5sw2pw2g3_dtbf16");
  check_both("mb2ic3ih9iw8oc10kh3sh2ph1_dtf16", Layout::channels_last, Layout::contiguous);
  check_both("mb2ic3ih9iw8oc10kh3sh2ph1_math2", Layout::padded, Layout::contiguous);
}
// bf16 pairs (tiers with bf16 pair kernels; the others widen): of pixels in
// the weight gradient, of channels in the data gradient. Odd images and odd
// K (a padded last pair), several chunks with an odd last one (pixels for
// the weight gradient, K beyond 64 and 128 channels for the data gradient),
// pixel tails of the tiles, groups read element by element, 3D, strided
// views (the data gradient's fp32-then-repack copy), and small integers,
// whose sums are exact (every tier must give the reference's bits).
TEST(ImplSmallChannels, Bf16Pairs) {
  for (const char* d : {"mb2ic3ih21iw21oc8kh7sh2ph3_dtbf16", "mb2ic1iw3000oc7kw10sw5_dtbf16",
                        "mb1ic3ih60iw50oc13kh5sh2ph2_dtbf16", "mb2ic12iw33oc9kw5sw2pw2g3_dtbf16",
                        "mb2ic1id5ih6iw7oc7kd3kh3kw3pd1ph1pw1_dtbf16", "mb2ic3ih9oc20kh3ph1_dtbf16_math1",
                        "mb1ic1iw1300oc131kw10sw5pw2_dtbf16", "mb1ic1ih100iw90oc71kh3ph1_dtbf16"})
    check_both(d);
  check_both("mb2ic3ih9iw8oc11kh3sh2ph1_dtbf16", Layout::padded, Layout::reversed);
  check_both("mb2ic2ih9iw8oc13kh3sh2ph1_dtbf16", Layout::channels_last, Layout::contiguous);
  for (Gradient g : {Gradient::input, Gradient::weight}) {
    check("mb2ic3ih19oc13kh7sh2ph3_dtbf16", g, Layout::contiguous, Layout::contiguous, Fill::small_ints);
    check("mb2ic1iw1283oc17kw10sw5_dtbf16", g, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  }
}
// Every count of (channel, tap) columns from 1 to 30, which the data
// gradient tiles by the tier's rows: whole tiles and a padded last one, or
// (kernels of each row count) an exact last one, alone or joined to the tile
// before it. fp32 and bf16 (the pair family), one K chunk and several (K
// beyond 64: the tiles rest in their own accumulators between chunks).
TEST(ImplSmallChannels, EveryColumnCountTheTilesSplit) {
  for (int cols = 1; cols <= 30; ++cols) {
    const std::string kw = std::to_string(cols);
    for (const char* dt : {"", "_dtbf16"}) {
      check("mb1ic1iw70oc5kw" + kw + "sw2" + dt, Gradient::input);
      if (cols % 3 == 0) check("mb1ic3iw40oc7kw" + std::to_string(cols / 3) + dt, Gradient::input);
      if (cols % 5 == 0) check("mb1ic1iw300oc70kw" + kw + "sw5" + dt, Gradient::input);
    }
    if (HasFatalFailure()) return;
  }
}
TEST(ImplSmallChannels, OperandRounding) {
  check_both("mb2ic3ih9oc20kh3ph1_math1");
  check_both("mb2ic3ih9oc20kh3ph1_math2");
  check_both("mb2ic1iw45oc13kw10sw5_math1_dtbf16");
}
// bf16 with USE_FP16 (issue 19): operands rounded to fp16 after widening.
// fp16_subnormals data is what the rounding changes (to 0 or 2^-24), and
// keeps sums exact, so every ISA must give the reference's bits.
TEST(ImplSmallChannels, Bf16UseFp16) {
  for (const char* desc : {"mb2ic3ih9oc20kh3ph1_dtbf16_math2", "mb2ic1iw45oc13kw10sw5_dtbf16:f32:f32_math2",
                           "mb2ic2ih7oc7kh3ph1_dtf16:bf16:f32_math2", "mb1ic2id4oc7kd3pd1_dtbf16_math2"})
    for (Gradient g : {Gradient::input, Gradient::weight})
      check(desc, g, Layout::padded, Layout::contiguous, Fill::fp16_subnormals);
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
    EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), "small_channels_dgrad") << d;
    EXPECT_EQ(impl_base(plan->implementation(Gradient::weight)), "small_channels_wgrad") << d;
  }
  // Eight channels per group stay with the GEMM paths.
  auto p = Problem::parse("mb2ic8ih8oc32kh3ph1");
  ASSERT_TRUE(p);
  auto plan = Plan::create(p.value());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_NE(impl_base(plan->implementation(Gradient::input)), "small_channels_dgrad");
}

}  // namespace
}  // namespace convbwd::test
