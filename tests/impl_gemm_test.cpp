// The dense GEMM paths (src/impl/gemm: gemm_fwd_nhwc, gemm_dgrad_phase_nhwc,
// gemm_wgrad_nhwc) against the fp64 reference, planned directly with every
// ISA this CPU has and with 1 and 2 threads (whose bits must be identical).
// The shapes walk exact 6x16 tiles, row/column tails, sub-tiles, strides,
// dilation, asymmetric padding, groups, transposed, 1D/2D/3D, each dtype and
// operand rounding, and strided output views (canaries around them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "impl/gemm/common.hpp"
#include "impl/registry_entries.hpp"
#include "kernels/config.hpp"
#include "numeric/float_formats.hpp"
#include "problem/spec.hpp"
#include "reference/reference.hpp"
#include "runtime/thread_pool.hpp"
#include "util/impl_check.hpp"
#include "util/tensor.hpp"
#include "util/tiers.hpp"

namespace convbwd::test {
namespace {

using detail::Isa;

const detail::Implementation& impl_for(detail::Op op) {
  switch (op) {
    case detail::Op::fwd: return detail::kGemmFwdImpl;
    case detail::Op::bwd_data: return detail::kGemmBwdDataImpl;
    default: return detail::kGemmBwdWeightsImpl;
  }
}

void check(const std::string& desc, Gradient which, Layout in_layout = Layout::contiguous,
           Layout out_layout = Layout::contiguous, Fill fill_kind = Fill::uniform,
           const detail::Implementation* impl = nullptr) {
  check_implementation(
      desc, which,
      [impl](detail::Op op) -> const detail::Implementation& { return impl != nullptr ? *impl : impl_for(op); },
      in_layout, out_layout, fill_kind, {1, 2});
}

void check_both(const std::string& desc, Layout in_layout = Layout::contiguous,
                Layout out_layout = Layout::contiguous) {
  check(desc, Gradient::input, in_layout, out_layout);
  check(desc, Gradient::weight, in_layout, out_layout);
}

TEST(ImplGemm, ExactTiles2d) { check_both("mb2ic16ih6iw8oc12kh1"); }
TEST(ImplGemm, Tails2d) { check_both("mb3ic19ih7oc23kh3ph1"); }
TEST(ImplGemm, SubTiles) {
  check_both("mb1ic1ih1oc1kh1");
  check_both("mb1ic3ih2iw3oc5kh2");
}
TEST(ImplGemm, Strided) {
  check_both("mb2ic17ih11oc20kh3sh2ph1");
  check_both("mb2ic8ih13iw9oc7kh3kw2sh3sw2ph2pw0");
  check_both("mb1ic5ih9oc6kh1sh4");  // stride above the kernel: some gradient rows are zero
  // 1D data gradients whose phase copy starts at a later gradient position
  // (its stored position 0 is source position 1): the whole-row copy must
  // not start at source position 0 (a fuzz finding).
  check_both("mb3ic5iw11oc26kw1sw2pw1");
  check_both("mb2ic21iw13oc17kw3sw3pw3");
}
TEST(ImplGemm, Dilated) { check_both("mb2ic9ih12oc18kh3dh1ph2"); }
TEST(ImplGemm, AsymmetricPadding) { check_both("mb2ic8ih9oc8kh3ph1phr2pw0pwr1"); }
TEST(ImplGemm, Groups) { check_both("mb2ic24ih7oc36kh3ph1g3"); }
TEST(ImplGemm, OneByOne) {
  check_both("mb2ic40ih7oc70kh1");
  check_both("mb2ic33ih6oc18kh1sh2");
}
TEST(ImplGemm, Transposed) {
  check_both("mb2ic16ih5oc12kh4sh2ph1_tr");
  check_both("mb2ic8ih7oc9kh3sh2ph1oph1_tr");
  check_both("mb1ic10ih6oc6kh2sh2g2_tr");
}
TEST(ImplGemm, OneD) {
  check_both("mb2ic12iw40oc20kw3sw2pw1");
  check_both("mb1ic8iw30oc8kw2dw3");
}
TEST(ImplGemm, ThreeD) {
  check_both("mb1ic8id6oc10kd3pd1");
  check_both("mb1ic6id7oc5kd2sd2_tr");
  // Odd corners: a 1x1x1 image entirely in the padding, asymmetric padding
  // with dilation, output padding with mixed dtypes.
  check_both("mb1ic2id1ih1iw1oc2kd1sd3sh2sw3pd1ph0pw0");
  check_both("mb2g2ic4id1ih4iw4oc2kd1kh2kw2sd3sh2sw2pd1ph1pw0pdr0phr1pwr0dd0dh0dw1_math1");
  check_both("mb2g2ic4id1ih2iw4oc4kd1kh2kw2sd2sh3sw1pdr0phr2pwr0dd1dh1dw0opd1oph2opw0_tr_dtf16:bf16:f32");
  check_both("mb1ic2id1ih3iw3oc2kd1kh2kw1sd2sh2sw2pd0ph1pw1opd1oph0opw1_tr");
}
TEST(ImplGemm, Dtypes) {
  // Width 19 and channels 18/20: full 8x8 transpose blocks of the
  // channels-last conversion plus pixel and channel tails.
  check_both("mb2ic18ih5iw19oc20kh3ph1_dtbf16");
  check_both("mb2ic18ih5iw19oc20kh3ph1_dtf16");
  check_both("mb2ic10ih6oc9kh3sh2ph1_dtf16:bf16:f32");
  check_both("mb2ic10ih6oc9kh3sh2ph1_dtbf16_tr");
}
// 16-bit gradInput whose channel stride is a multiple of 1 KiB (512
// pixels: 16x32, 8^3) takes the whole-channel-run store of the gather path
// (GatherConvKernel::channel_stride_aliases); 28 rows of 9 channels, a tile
// tail on both sides, and the phase path of a stride-2 layer.
TEST(ImplGemm, SixteenBitOutputsOnAliasingChannelStrides) {
  check("mb2ic19ih16iw32oc20kh3ph1_dtf16", Gradient::input);
  check("mb2ic19ih16iw32oc20kh3ph1_dtbf16", Gradient::input);
  check("mb1ic9ih32iw64oc12kh3sh2ph1_dtf16", Gradient::input);
  check("mb1ic16id8ih8iw8oc20kd2kh2kw2sd2sh2sw2_tr_dtbf16", Gradient::input);
  check("mb2ic19ih16iw32oc20kh3ph1_dtf16:f16:f32", Gradient::input, Layout::contiguous, Layout::channels_last);
}

// A planar gradInput's neighbouring pixels are stored as runs across the
// tiles of a task (up to GatherConvKernel::kMaxRunPixels): rows longer than
// several runs, images that end inside a tile, 12-row tiles (16-channel
// groups on AVX-512: the run cap is no multiple of them), padded rows (a run
// ends with each row) and channels-last outputs (no runs), in each dtype.
TEST(ImplGemm, PlanarOutputRunsAcrossTiles) {
  for (const char* dt : {"", "_dtbf16", "_dtf16", "_dtbf16:bf16:f32"}) {
    const std::string d = dt;
    check("mb2ic19iw700oc20kw3pw1" + d, Gradient::input);
    check("mb3ic9ih13iw11oc12kh3ph1" + d, Gradient::input);
    check("mb2g2ic32iw300oc32kw3pw1" + d, Gradient::input);
    check("mb2ic19ih9iw40oc20kh3ph1" + d, Gradient::input, Layout::contiguous, Layout::padded);
    check("mb2ic19ih9iw40oc20kh3ph1" + d, Gradient::input, Layout::contiguous, Layout::channels_last);
    check("mb2ic12iw300oc20kw4sw2_tr" + d, Gradient::input);
  }
}

// bf16 operands on a tier with bf16 pair kernels (avx512_bf16, natively or
// emulated) stay bf16 in the gather path's copies and packs: odd reductions
// (a padded last pair), channel tails, stride phases, dilation, groups with
// odd channels per group, 1D, 3D, transposed, a reduction of 600 channels
// (300 pairs: more than one 256-step chunk, a run split across chunks), HF32
// (which leaves bf16 as it is), channels-last and exact fills.
TEST(ImplGemm, Bf16PairsInTheGatherPath) {
  for (const char* d : {"mb2ic7ih6oc9kh3ph1_dtbf16", "mb2ic9ih6oc7kh3ph1_dtbf16", "mb2ic17ih11oc21kh3sh2ph1_dtbf16",
                        "mb2ic9ih12oc19kh3dh2ph2_dtbf16", "mb2ic15ih7oc21kh3ph1g3_dtbf16",
                        "mb2ic13iw40oc11kw3sw2pw1_dtbf16", "mb1ic7id6oc9kd3pd1_dtbf16", "mb1ic5id7oc3kd2sd2_tr_dtbf16",
                        "mb2ic9ih5oc13kh4sh2ph1_tr_dtbf16", "mb1ic40ih4oc600kh3ph1_dtbf16",
                        "mb2ic18ih7oc21kh3ph1_dtbf16_math3"})
    check(d, Gradient::input);
  check("mb2ic19ih5iw7oc33kh3ph1_dtbf16", Gradient::input, Layout::channels_last, Layout::padded);
  check("mb2ic21ih6oc19kh3sh2ph1_dtbf16", Gradient::input, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  check("mb2ic21ih6oc19kh3sh2ph1_tr_dtbf16", Gradient::input, Layout::reversed, Layout::channels_last,
        Fill::small_ints);
}
// The gather path joins neighbouring taps into one kernel run where the
// copy's pixel pitch equals the reduction (GatherConvKernel::merge_runs):
// reductions of 16 and 32 fp32 channels, bf16 pairs of 16 channels (a
// pitch of 8) and 32, 16-channel groups, with the data gradient's taps in
// mirrored order (WeightPack::flip_taps). Runs that touch in A but not in
// the packed weights must stay apart: stride 2 and 3 phases (the taps of a
// phase are s slots apart), dilation; and 1D, 3D, transposed (the forward,
// whose taps join in natural order), and joined runs cut by chunk caps.
TEST(ImplGemm, NeighbouringTapsJoinIntoOneRun) {
  for (const char* dt : {"", "_dtbf16"}) {
    const std::string t = dt;
    for (const char* d : {"mb2ic16ih7iw9oc16kh3ph1", "mb2ic20ih6iw7oc32kh3ph1", "mb2g2ic32ih6iw13oc32kh3ph1",
                          "mb2ic16ih9iw11oc16kh3sh2ph1", "mb2ic12ih8iw13oc16kh4sh2ph1", "mb1ic8ih10iw14oc32kh5sh3ph2",
                          "mb2ic16ih9iw9oc16kh3dh1ph2", "mb2ic16iw40oc16kw5pw2", "mb1ic8id5ih5iw6oc16kd3kh3kw3pd1ph1pw1",
                          "mb2ic16ih5iw6oc16kh4sh2ph1_tr", "mb2ic32ih4iw5oc16kh3ph1_tr"})
      check(d + t, Gradient::input);
    for (const char* steps : {"5", "16"}) {
      SCOPED_TRACE(std::string("CONVBWD_GEMM_CHUNK_STEPS=") + steps);
      setenv("CONVBWD_GEMM_CHUNK_STEPS", steps, 1);
      check("mb2ic16ih7iw9oc32kh3ph1" + t, Gradient::input);
      check("mb2g2ic32ih6iw7oc32kh3ph1" + t, Gradient::input, Layout::contiguous, Layout::contiguous,
            Fill::small_ints);
    }
    unsetenv("CONVBWD_GEMM_CHUNK_STEPS");
  }
}
// Data gradients strided along the last dim, into outputs whose pixels
// along it are neighbours, run that dim's phases that hold the same pixels
// as one bundle and store their tiles interleaved, as runs of neighbours
// (GatherConvKernel::bundle_phases). A bundle only moves tiles between
// tasks, so its bits must equal those of every phase apart
// (CONVBWD_GEMM_NO_BUNDLES), on every tier and thread count, and the
// reference: strides 2, 3 and 4 (and 5, never bundled); even widths, odd
// ones (phases of unequal widths: no bundle) and rows that wrap inside a
// tile; phases no tap reaches (1x1 stride 2, stride above the kernel);
// padding boxes; dilation; stride along the outer dims too; 1D and 3D;
// groups; fp32, bf16 and fp16 outputs; and for fp32 padded, reversed and
// channels-last outputs (the last two not bundled: pixels not neighbours).
TEST(ImplGemm, DataGradientPhaseBundlesKeepTheBits) {
  const std::vector<std::string> no_bundles{"CONVBWD_GEMM_NO_BUNDLES=1"};
  for (const char* d : {"mb2ic17ih11iw12oc20kh3sh2ph1", "mb2ic16ih8iw14oc24kh3sh2ph1", "mb2ic9ih6iw9oc12kh3sh2ph1",
                        "mb2ic8ih7iw12oc10kh3kw2sh2sw3ph1pw0", "mb1ic7ih6iw16oc9kh3sh2sw4ph1pw1",
                        "mb1ic7ih5iw15oc9kh3sh1sw5pw1", "mb2ic24ih10iw20oc40kh1sh2", "mb2ic5ih9iw12oc6kh1sh4",
                        "mb2ic12ih10iw10oc16kh3sh2dh1ph2", "mb2ic12iw40oc20kw3sw2pw1", "mb1ic6iw30oc8kw5sw3dw2pw4",
                        "mb1ic6id4ih6iw8oc9kd3kh3kw3sd2sh2sw2pd1ph1pw1", "mb2g3ic18ih8iw10oc15kh3sh2ph1",
                        "mb2ic16ih12iw26oc33kh4sh2ph1phr2pw1pwr2"})
    for (const char* dt : {"", "_dtbf16", "_dtf16"})
      for (Layout out : {Layout::contiguous, Layout::padded, Layout::reversed, Layout::channels_last})
        if (*dt == '\0' || out == Layout::contiguous)
          check_implementation(std::string(d) + dt, Gradient::input, impl_for, Layout::contiguous, out,
                               Fill::uniform, {1, 2}, no_bundles);
  // Exact sums, and bundles cut by reduction chunks.
  check_implementation("mb2ic40ih9iw18oc24kh3sh2ph1", Gradient::input, impl_for, Layout::contiguous,
                       Layout::contiguous, Fill::small_ints, {1, 3}, {"CONVBWD_GEMM_NO_BUNDLES=1",
                                                                      "CONVBWD_GEMM_CHUNK_STEPS=5"});
}
// The forward weight pack of the gather path (a transposed layer's
// gradInput, whose packed columns are the weight's rows far apart) goes
// through each tier's converter when a weight's taps are one unit-stride
// run: fp32, bf16 pairs (odd reductions: a zero past the last pair) and
// fp16, columns past one block with a tail, groups, 1D and 3D, and exact
// fills; and the element-by-element pack where it may not: strided and
// channels-last weights, and bf16 with more taps than its widened rows hold.
TEST(ImplGemm, ForwardWeightPack) {
  for (const char* d : {"mb2ic37ih5oc9kh4sh2ph1_tr", "mb2ic37ih5oc9kh4sh2ph1_tr_dtbf16", "mb2ic37ih5oc9kh4sh2ph1_tr_dtf16",
                        "mb2ic70ih3oc10kh3sh2ph1_tr_dtbf16", "mb2ic12ih5oc10kh3sh2ph1g2_tr_dtbf16",
                        "mb2ic11iw9oc7kw5sw2pw1_tr_dtbf16", "mb1ic5id4oc7kd2sd2_tr_dtbf16",
                        "mb1ic6ih3oc5kh9ph4_tr_dtbf16", "mb1ic6ih3oc5kh9ph4_tr"})
    check(d, Gradient::input);
  check("mb2ic37ih5oc9kh4sh2ph1_tr_dtbf16", Gradient::input, Layout::contiguous, Layout::contiguous,
        Fill::small_ints);
  check("mb2ic37ih5oc9kh4sh2ph1_tr", Gradient::input, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  for (Layout l : {Layout::padded, Layout::channels_last}) {
    check("mb2ic37ih5oc9kh4sh2ph1_tr_dtbf16", Gradient::input, l, Layout::contiguous);
    check("mb2ic37ih5oc9kh4sh2ph1_tr", Gradient::input, l, Layout::contiguous);
  }
}
// The weight gradients on the bf16 pair kernels (gemm_wgrad_nhwc: pixel pair
// copies of dy and x; gemm_wgrad_1x1_nchw: pair rows and panels): odd row
// widths (a zero-padded last pair in every row), stride 2 and 3 with odd
// and even widths (pairs s columns apart, several column classes),
// dilation, a tap column past the first pair (q0 > 0), asymmetric padding,
// k tails of the 8-row tile and c tails of the 32-column one, several
// images, groups, 1D, 3D, transposed, HF32, channels-last and strided
// views, and exact fills, against the fp64 reference, on every tier (the
// pair path where a tier has the kernels, avx512_bf16 emulated on any CPU).
TEST(ImplGemm, Bf16PairsInTheWeightGradients) {
  for (const char* d :
       {"mb2ic7ih6iw7oc9kh3ph1_dtbf16", "mb3ic33ih5iw9oc17kh3sh2ph1_dtbf16", "mb2ic10ih7iw11oc12kh3sh3ph1_dtbf16",
        "mb2ic12ih8iw12oc10kh3sh3ph1_dtbf16", "mb2ic9ih8iw13oc19kh3kw3dh1dw2ph2pw3_dtbf16",
        "mb2ic12ih9iw15oc10kh3kw4sh2sw3dw1pw2_dtbf16", "mb2ic8ih9iw9oc8kh3ph1phr2pw0pwr1_dtbf16",
        "mb2ic15ih7oc21kh3ph1g3_dtbf16", "mb2ic13iw41oc11kw5sw2pw2_dtbf16", "mb1ic7id5ih4iw5oc9kd3kh2kw3pd1pw1_dtbf16",
        "mb2ic9ih5oc13kh4sh2ph1_tr_dtbf16", "mb2ic18ih7oc21kh3ph1_dtbf16_math3", "mb2ic33ih5iw5oc40kh1sh2_dtbf16",
        "mb1ic5id4ih3iw1oc3kd2kh3kw1_dtbf16"})
    check(d, Gradient::weight);
  check("mb2ic19ih5iw7oc33kh3ph1_dtbf16", Gradient::weight, Layout::channels_last, Layout::padded);
  // Rows wider than the copy's 256-column window (slots on both sides of a
  // window edge), and a stride above it (a pair's columns in two ranges).
  check("mb2ic9iw1101oc10kw5sw2dw1pw3_dtbf16", Gradient::weight, Layout::contiguous, Layout::contiguous,
        Fill::small_ints);
  check("mb2ic7iw613oc5kw3pw1_dtbf16", Gradient::weight, Layout::channels_last, Layout::contiguous);
  // Planar rows of unit stride, short or long, take the adjacent-pair copy
  // (the source's own words): rows past its 16-slot register blocks, both
  // column classes (dilation 3), and padding on either side.
  check("mb2ic7iw613oc5kw3pw1_dtbf16", Gradient::weight, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  check("mb2ic5iw517oc6kw3dw2pw2pwr1_dtbf16", Gradient::weight);
  check("mb1ic40ih3iw300oc9kh2kw2ph1pw0_dtbf16", Gradient::weight, Layout::padded, Layout::contiguous);
  check("mb1ic5iw1501oc7kw3sw300pw1_dtbf16", Gradient::weight, Layout::contiguous, Layout::contiguous,
        Fill::small_ints);
  check("mb2ic21ih6iw9oc19kh3sh2ph1_dtbf16", Gradient::weight, Layout::contiguous, Layout::contiguous,
        Fill::small_ints);
  check("mb2ic21ih6iw7oc19kh3sh2ph1_tr_dtbf16", Gradient::weight, Layout::reversed, Layout::channels_last,
        Fill::small_ints);
  // Planar rows converted several at a time (256 / width rows per call),
  // the general path of strides above 1 (unit-stride rows are the
  // adjacent-pair copy's): images taller than one call, with padding rows,
  // channel tails, stride 2 (two column classes a step apart) and 3D.
  for (const char* d : {"mb2ic19ih15iw40oc10kh3ph1_dtbf16", "mb1ic9ih20iw33oc7kh3sh2ph1_dtbf16",
                        "mb1ic5id3ih12iw30oc6kd2kh3kw3pd1ph1pw1_dtbf16"})
    check(d, Gradient::weight, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  // Chunks of rows (tiles resting in fp32 between them), a single-pair
  // chunk cap, and batches of images accumulating into the same tiles.
  for (const char* steps : {"1", "3", "7"}) {
    SCOPED_TRACE(std::string("CONVBWD_GEMM_CHUNK_STEPS=") + steps);
    setenv("CONVBWD_GEMM_CHUNK_STEPS", steps, 1);
    check("mb2ic21ih5iw9oc17kh3sh2ph1_dtbf16", Gradient::weight, Layout::contiguous, Layout::contiguous,
          Fill::small_ints);
    check("mb2ic13ih6iw7oc38kh3ph1_dtbf16", Gradient::weight);
  }
  unsetenv("CONVBWD_GEMM_CHUNK_STEPS");
  for (const char* cap : {"1", "2"}) {
    SCOPED_TRACE(std::string("CONVBWD_GEMM_MAX_BATCH=") + cap);
    setenv("CONVBWD_GEMM_MAX_BATCH", cap, 1);
    check("mb5ic20ih9iw7oc14kh3ph1_dtbf16", Gradient::weight, Layout::contiguous, Layout::contiguous,
          Fill::small_ints);
    check("mb3ic12ih7iw9oc10kh3sh2ph1_dtbf16", Gradient::weight);
  }
  unsetenv("CONVBWD_GEMM_MAX_BATCH");
}
// Bits at 1, 2, 3 and 5 threads on the pair path of both weight gradients:
// uniform data, so a sum taken in another order would show in the bits.
TEST(ImplGemm, Bf16PairWeightGradientsAreBitIdenticalAtAnyThreadCount) {
  for (const char* d : {"mb3ic40ih9iw11oc36kh3sh2ph1_dtbf16", "mb2ic70ih7iw9oc20kh3ph1_dtbf16"})
    check_implementation(d, Gradient::weight, impl_for, Layout::contiguous, Layout::contiguous, Fill::uniform,
                         {1, 2, 3, 5});
  setenv("CONVBWD_GEMM_CHUNK_STEPS", "5", 1);
  check_implementation("mb3ic40ih9iw11oc36kh3sh2ph1_dtbf16", Gradient::weight, impl_for, Layout::contiguous,
                       Layout::contiguous, Fill::uniform, {1, 2, 3, 5});
  unsetenv("CONVBWD_GEMM_CHUNK_STEPS");
  for (const char* d : {"mb2ic150ih9iw7oc13kh1_dtbf16", "mb2ic40ih17iw19oc45kh1_dtbf16"})
    check_implementation(
        d, Gradient::weight, [](detail::Op) -> const detail::Implementation& { return detail::kGemm1x1BwdWeightsImpl; },
        Layout::contiguous, Layout::contiguous, Fill::uniform, {1, 2, 3, 5});
}
// That the pair path is the one planned: the pair kernels read bf16
// subnormal operands as zero (their contract, kernels/gemm.hpp), which
// widening to fp32 does not. dy = 1 and x (w for gradInput) = 2^-127 (a bf16
// subnormal): each gradient element is a sum of such products, exactly 0
// where a tier has pair kernels and positive where bf16 widens to fp32.
TEST(ImplGemm, Bf16GradientsPlanThePairKernels) {
  struct Case {
    const char* desc;
    Gradient which;
    const detail::Implementation* impl;
  };
  for (const auto& [desc, which, impl] :
       {Case{"mb2ic33ih4iw7oc9kh3ph1_dtbf16", Gradient::weight, &detail::kGemmBwdWeightsImpl},
        Case{"mb2ic33ih4iw7oc9kh3sh2ph1_dtbf16", Gradient::weight, &detail::kGemmBwdWeightsImpl},
        Case{"mb2ic33ih5iw7oc9kh1_dtbf16", Gradient::weight, &detail::kGemm1x1BwdWeightsImpl},
        Case{"mb2ic9ih8iw9oc33kh1_dtbf16", Gradient::input, &detail::kGemm1x1BwdDataImpl},
        Case{"mb2ic9ih4iw7oc33kh3ph1_dtbf16", Gradient::input, &detail::kGemmBwdDataImpl},
        Case{"mb2ic3ih9iw8oc9kh7sh2ph3_dtbf16", Gradient::weight, &detail::kSmallChannelsBwdWeightsImpl},
        Case{"mb2ic3ih9iw8oc9kh7sh2ph3_dtbf16", Gradient::input, &detail::kSmallChannelsBwdDataImpl}}) {
    SCOPED_TRACE(desc);
    auto p = Problem::parse(desc);
    ASSERT_TRUE(p) << p.error().message;
    const bool weight = which == Gradient::weight;
    // dy and the other operand (x for gradWeight, w for gradInput), and the output.
    HostTensor go = make_tensor(DataType::bf16, p->grad_output.dims, Layout::contiguous);
    HostTensor other = make_tensor(DataType::bf16, weight ? p->input.dims : p->weight.dims, Layout::contiguous);
    HostTensor result = make_tensor(DataType::bf16, weight ? p->weight.dims : p->input.dims, Layout::contiguous);
    auto set_all = [](HostTensor& t, uint16_t bits) {
      for (int64_t i = 0; i < t.elements(); ++i)
        std::memcpy(t.storage.data() + t.storage_index(i) * 2, &bits, sizeof bits);
    };
    set_all(go, 0x3f80);     // 1.0
    set_all(other, 0x0040);  // 2^-127
    Problem prob = p.value();
    prob.grad_output = go.desc;
    (weight ? prob.input : prob.weight) = other.desc;
    (weight ? prob.grad_weight : prob.grad_input) = result.desc;
    auto spec = detail::validate(prob);
    ASSERT_TRUE(spec) << spec.error().message;
    const detail::OpSpec op = spec->op_for(which);
    detail::ThreadPool pool(2);
    for (Isa isa : test_isas()) {
      SCOPED_TRACE(tier_name(isa));
      std::string why;
      auto k = impl->plan(op, detail::PlanContext{isa, 2}, &why);
      ASSERT_TRUE(k) << why;
      std::vector<std::byte> ws(k->workspace_bytes() + 64);
      auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) / 64 * 64);
      HostTensor out = result;
      detail::OpArgs args{go.data(), other.data(), out.data(), aligned};
      k->run(args, pool);
      const bool pairs = detail::kernel_config(isa).bf16.strided != nullptr;
      for (int64_t i = 0; i < out.elements(); ++i) {
        if (pairs) {
          ASSERT_EQ(out.at(i), 0.0) << "element " << i;
        } else {
          ASSERT_GT(out.at(i), 0.0) << "element " << i;
        }
      }
    }
  }
}
TEST(ImplGemm, OperandRounding) {
  check_both("mb2ic18ih7oc20kh3ph1_math1");
  check_both("mb2ic18ih4iw17oc20kh3ph1_math1");
  check_both("mb2ic18ih4iw17oc20kh3ph1_math2");
  check_both("mb2ic18ih7oc20kh3ph1_math3_tr");
}
TEST(ImplGemm, Layouts) {
  check_both("mb2ic18ih7oc20kh3ph1", Layout::channels_last, Layout::padded);
  check_both("mb2ic18ih3iw17oc20kh3ph1_dtbf16", Layout::channels_last, Layout::contiguous);
  check_both("mb2ic18ih7oc20kh3sh2ph1", Layout::padded, Layout::reversed);
  check_both("mb1ic9id4oc7kd3pd1", Layout::reversed, Layout::channels_last);
}
TEST(ImplGemm, SmallIntsExact) {
  // Small integers: every fp32 sum is exact, so the result must equal the
  // reference bit for bit (the tolerance above would hide a lost product).
  check("mb2ic21ih9oc17kh3sh2ph1", Gradient::input, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  check("mb2ic21ih9oc17kh3sh2ph1", Gradient::weight, Layout::contiguous, Layout::contiguous, Fill::small_ints);
}

TEST(ImplGemm, SeveralBatches) {
  // Copies of only some images at a time (the path of problems whose copies
  // exceed the workspace budget): the weight gradient accumulates across
  // batches, the data gradient and the forward restart their tiles per batch.
  for (const char* cap : {"1", "2", "3"}) {
    SCOPED_TRACE(std::string("CONVBWD_GEMM_MAX_BATCH=") + cap);
    setenv("CONVBWD_GEMM_MAX_BATCH", cap, 1);
    check_both("mb5ic20ih9oc14kh3ph1");
    check_both("mb5ic12ih9oc10kh3sh2ph1_tr");
  }
  unsetenv("CONVBWD_GEMM_MAX_BATCH");
}

TEST(ImplGemm, WeightGradientOnePassWhenAllCopiesFitTheTileBuffer) {
  // A short reduction runs in one pass over every image's copies at once
  // when they take no more memory than the tile buffer they replace, even
  // where the batch rule alone would copy fewer images (DeepLab's 512->512:
  // two images, 7 MB of copies, against 9.4 MB of tiles). The batch cap
  // stands in for that rule here: the plan must still hold no tile buffer
  // (the weights' size in fp32), and the sums stay exact.
  setenv("CONVBWD_GEMM_MAX_BATCH", "1", 1);
  for (const char* desc : {"mb3ic40ih3oc40kh3ph1", "mb2ic30ih3iw4oc44kh3ph1g2"}) {
    SCOPED_TRACE(desc);
    auto p = Problem::parse(desc);
    ASSERT_TRUE(p) << p.error().message;
    auto spec = detail::validate(p.value());
    ASSERT_TRUE(spec) << spec.error().message;
    std::string why;
    auto k = detail::kGemmBwdWeightsImpl.plan(spec->op_for(Gradient::weight), {Isa::scalar, 2}, &why);
    ASSERT_TRUE(k) << why;
    EXPECT_LT(k->workspace_bytes(), static_cast<size_t>(spec->grads[1].elements()) * sizeof(float));
    check(desc, Gradient::weight, Layout::contiguous, Layout::contiguous, Fill::small_ints);
  }
  unsetenv("CONVBWD_GEMM_MAX_BATCH");
}

TEST(ImplGemm, ReductionChunks) {
  // The forward and the data gradient cut each tile's reduction (taps x
  // channels) into chunks of at most N steps, splitting runs at chunk ends.
  // The weight gradient walks chunks of whole output rows (at least one)
  // when its reduction (images x output pixels) exceeds N, its tiles
  // resting in the workspace between chunks; up to N it runs one pass, each
  // tile stored as it is finished. Chunk sizes that divide the runs, cut
  // runs in two, are shorter than a 4-step unroll and 1, on odd channel
  // counts with several taps and phases; small integers make every sum
  // exact, so a lost, doubled or reordered product shows as a wrong value,
  // not within a tolerance.
  for (const char* steps : {"1", "3", "7", "19", "64"}) {
    SCOPED_TRACE(std::string("CONVBWD_GEMM_CHUNK_STEPS=") + steps);
    setenv("CONVBWD_GEMM_CHUNK_STEPS", steps, 1);
    for (const char* desc : {"mb2ic21ih9oc17kh3ph1", "mb2ic13ih9oc38kh3sh2ph1", "mb2ic9ih5oc12kh4sh2ph1_tr"})
      for (Gradient which : {Gradient::input, Gradient::weight})
        check(desc, which, Layout::contiguous, Layout::contiguous, Fill::small_ints);
    check_both("mb2ic18ih7oc20kh3ph1_math1");
  }
  unsetenv("CONVBWD_GEMM_CHUNK_STEPS");
}

TEST(ImplGemm, WeightSlabs) {
  // Weight-heavy layers pack the weights slab by slab, each inside the task
  // that runs every tile of the batch over it (gather_conv.cpp). Forced on
  // small layers: slabs of 1, 2 and 3 blocks (a short last slab), column
  // tails, stride phases, groups, transposed, several batches, exact sums.
  for (const char* blocks : {"1", "2", "3"}) {
    SCOPED_TRACE(std::string("CONVBWD_GEMM_SLAB_BLOCKS=") + blocks);
    setenv("CONVBWD_GEMM_SLAB_BLOCKS", blocks, 1);
    for (const char* desc : {"mb2ic70ih7oc23kh1", "mb2ic21ih9oc50kh3sh2ph1", "mb2ic36ih5oc38kh3ph1g2",
                             "mb2ic9ih5oc60kh4sh2ph1_tr", "mb1ic12iw9oc40kw3pw1_dtbf16"})
      check(desc, Gradient::input, Layout::contiguous, Layout::contiguous, Fill::small_ints);
    check("mb2ic21ih9oc50kh3ph1", Gradient::input, Layout::padded, Layout::reversed);
    setenv("CONVBWD_GEMM_MAX_BATCH", "1", 1);
    check("mb3ic21ih6oc50kh3sh2ph1", Gradient::input, Layout::contiguous, Layout::contiguous, Fill::small_ints);
    unsetenv("CONVBWD_GEMM_MAX_BATCH");
  }
  unsetenv("CONVBWD_GEMM_SLAB_BLOCKS");
}

// The planar 1x1 path (gemm_fwd_1x1_nchw / gemm_dgrad_1x1_nchw): row tiles
// of 6 output channels with tails, 16-pixel panels with a pixel tail, strips
// of several panels per task (a short strip at the end of an image), 1D/3D,
// groups, dtypes, operand rounding, strided outputs.
void check_1x1(const std::string& desc, Layout out_layout = Layout::contiguous, Fill fill_kind = Fill::uniform) {
  auto p = Problem::parse(desc);
  ASSERT_TRUE(p) << p.error().message;
  const detail::Implementation& impl = p->transposed ? detail::kGemm1x1FwdImpl : detail::kGemm1x1BwdDataImpl;
  check(desc, Gradient::input, Layout::contiguous, out_layout, fill_kind, &impl);
}
TEST(ImplGemm, Planar1x1) {
  check_1x1("mb2ic16ih8oc12kh1");                 // exact tiles, 64 pixels
  check_1x1("mb2ic23ih9iw13oc17kh1");             // row and pixel tails
  check_1x1("mb1ic7ih40iw41oc300kh1", Layout::contiguous, Fill::small_ints);  // several strips, exact sums
  check_1x1("mb2ic20iw300oc9kw1");                // 1D
  check_1x1("mb1ic6id4ih5iw6oc10kd1kh1kw1");      // 3D
  check_1x1("mb2ic24ih9oc36kh1g3");               // groups
  check_1x1("mb2ic18ih8iw17oc20kh1_dtbf16");
  check_1x1("mb2ic18ih8iw17oc20kh1_dtf16:bf16:f32");
  check_1x1("mb2ic18ih9oc20kh1_math1");
  check_1x1("mb2ic18ih9oc20kh1_math2");
  check_1x1("mb2ic18ih9oc20kh1", Layout::channels_last);
  check_1x1("mb2ic19ih9oc21kh1_tr");              // forward (transposed gradInput)
  check_1x1("mb2ic13ih11oc6kh1_tr_dtbf16");
}
// bf16 pairs on the planar 1x1 path (tiers with bf16 arithmetic): odd and
// even reductions (dy channels for gradInput, x channels for the transposed
// one's forward), a single reduced channel, row tails, pixel tails and
// several strips, groups, 1D/3D, a channels-last output, and cubeMathType HF32 (which
// keeps bf16 as it is); a data gradient of 1100 columns, whose weight pack
// interleaves them 512 at a time (the last piece with a row-tile tail).
TEST(ImplGemm, Bf16PairsInThePlanar1x1DataGradient) {
  for (const char* d : {"mb2ic18ih8iw17oc21kh1_dtbf16", "mb2ic9ih8iw8oc1kh1_dtbf16", "mb1ic33ih40iw41oc300kh1_dtbf16",
                        "mb2ic25ih9oc35kh1g5_dtbf16", "mb2ic20iw301oc9kw1_dtbf16", "mb1ic6id4ih5iw6oc11kd1kh1kw1_dtbf16",
                        "mb2ic13ih11oc7kh1_tr_dtbf16", "mb2ic17ih9oc20kh1_dtbf16_math3", "mb1ic1100ih8iw9oc7kh1_dtbf16",
                        "mb1g2ic2200ih8iw8oc10kh1_dtbf16"})
    check_1x1(d);
  check_1x1("mb1ic7ih40iw41oc301kh1_dtbf16", Layout::contiguous, Fill::small_ints);
  check_1x1("mb2ic19ih9oc21kh1_dtbf16", Layout::channels_last);
  for (const char* d : {"mb2ic150ih9iw17oc13kh1_dtbf16", "mb2ic40ih17iw19oc45kh1_dtbf16"})
    check_implementation(
        d, Gradient::input, [](detail::Op) -> const detail::Implementation& { return detail::kGemm1x1BwdDataImpl; },
        Layout::contiguous, Layout::contiguous, Fill::uniform, {1, 2, 3, 5});
}
// The planar 1x1 weight gradient (gemm_wgrad_1x1_nchw): k-tile and c-block
// tails, one pass over the batch (short reductions) or pixel chunks (256)
// crossed within and across images, tasks split
// over k-tiles and groups or (more x channels than dy channels, enough
// c-blocks) over c-blocks and groups, dy read in place (fp32) or converted
// (bf16, f16, operand rounding), strided weight-gradient views.
void check_1x1_wgrad(const std::string& desc, Layout out_layout = Layout::contiguous,
                     Fill fill_kind = Fill::uniform) {
  check(desc, Gradient::weight, Layout::contiguous, out_layout, fill_kind, &detail::kGemm1x1BwdWeightsImpl);
}
TEST(ImplGemm, Planar1x1Wgrad) {
  check_1x1_wgrad("mb2ic16ih8oc12kh1");
  check_1x1_wgrad("mb2ic23ih9iw13oc17kh1");
  check_1x1_wgrad("mb3ic7ih23iw21oc301kh1", Layout::contiguous, Fill::small_ints);  // chunks, exact sums
  check_1x1_wgrad("mb2ic20iw300oc9kw1");
  check_1x1_wgrad("mb1ic6id4ih5iw6oc10kd1kh1kw1");
  check_1x1_wgrad("mb2ic24ih9oc36kh1g3");
  check_1x1_wgrad("mb2ic18ih8iw17oc20kh1_dtbf16");
  check_1x1_wgrad("mb2ic18ih8iw17oc20kh1_dtf16:bf16:f32");
  check_1x1_wgrad("mb2ic18ih9oc20kh1_math1");
  check_1x1_wgrad("mb2ic18ih9oc20kh1_math2");
  check_1x1_wgrad("mb2ic18ih9oc20kh1", Layout::padded);
  check_1x1_wgrad("mb2ic18ih9oc20kh1", Layout::reversed);
  check_1x1_wgrad("mb2ic19ih9oc21kh1_tr");
  // Tasks over c-blocks: tails, chunks, groups (a task spanning two), dy
  // converted per group.
  check_1x1_wgrad("mb2ic70ih9oc13kh1");
  check_1x1_wgrad("mb2ic50ih17iw19oc7kh1", Layout::contiguous, Fill::small_ints);
  check_1x1_wgrad("mb2ic96ih8oc12kh1g2");
  check_1x1_wgrad("mb2ic60ih8oc18kh1g3_dtbf16");
  check_1x1_wgrad("mb2ic70ih9oc13kh1_math1", Layout::padded);
  // Chunks (images over 256 pixels) with dy converted, over k-tiles and
  // over c-blocks.
  check_1x1_wgrad("mb2ic18ih17iw19oc20kh1_dtbf16");
  check_1x1_wgrad("mb2ic70ih17iw19oc13kh1_dtf16:bf16:f32");
}
// bf16 with USE_FP16 (issue 19): operands rounded to fp16 after widening,
// on data the rounding changes (fp16_subnormals; sums exact, so every ISA
// must give the reference's bits), including the planar 1x1 paths.
TEST(ImplGemm, Bf16UseFp16) {
  for (const char* desc : {"mb2ic18ih7oc20kh3ph1_dtbf16_math2", "mb2ic18iw11oc17kw3sw2pw1_dtbf16:f32:f32_math2",
                           "mb1ic17ih5iw4oc18kh3kw2sh2sw2ph1pw1_tr_dtbf16_math2",
                           "mb1ic9id4oc7kd3pd1_dtf32:bf16:bf16_math2"})
    for (Gradient g : {Gradient::input, Gradient::weight})
      check(desc, g, Layout::channels_last, Layout::padded, Fill::fp16_subnormals);
  for (const char* desc : {"mb2ic18ih9oc20kh1_dtbf16_math2", "mb2ic19ih9oc21kh1_tr_dtbf16_math2",
                           "mb2ic20iw300oc9kw1_dtf16:bf16:f32_math2"}) {
    check_1x1(desc, Layout::contiguous, Fill::fp16_subnormals);
    check_1x1_wgrad(desc, Layout::padded, Fill::fp16_subnormals);
  }
}

// One pass (every image's pixels in one kernel call per tile, stored from
// registers): 7x7 images, which only this mode takes, many runs, tasks over
// c-blocks, dy converted per run, groups, tails, exact sums, strided views.
TEST(ImplGemm, Planar1x1WgradOnePass) {
  check_1x1_wgrad("mb8ic16ih7oc12kh1");
  check_1x1_wgrad("mb32ic17ih7oc13kh1", Layout::contiguous, Fill::small_ints);  // 1568 steps, 32 runs
  check_1x1_wgrad("mb3ic70ih7oc13kh1");                                         // tasks over c-blocks
  check_1x1_wgrad("mb2ic60ih7oc18kh1g3_dtbf16");
  check_1x1_wgrad("mb3ic70ih7oc13kh1_dtf16:bf16:f32");
  check_1x1_wgrad("mb4ic40ih9iw11oc30kh1", Layout::contiguous, Fill::small_ints);
  check_1x1_wgrad("mb2ic18ih7oc20kh1_math1", Layout::padded);
  check_1x1_wgrad("mb2ic18ih7oc20kh1", Layout::reversed);
}
// bf16 pairs of pixels in the planar 1x1 weight gradient: odd images in one
// pass (a padded last pair per image), chunks of 256 pixels with an odd last
// chunk, tasks over c-blocks, groups, 1D, 3D, transposed, k and c tails,
// exact fills and strided views.
TEST(ImplGemm, Bf16PairsInThePlanar1x1WeightGradient) {
  for (const char* d : {"mb2ic18ih7iw9oc20kh1_dtbf16", "mb2ic40ih17iw19oc13kh1_dtbf16", "mb2ic150ih9iw7oc13kh1_dtbf16",
                        "mb2ic60ih7oc18kh1g3_dtbf16", "mb2ic33ih8iw8oc41kh1_dtbf16", "mb2ic19ih9oc21kh1_tr_dtbf16",
                        "mb1ic6id4ih5iw5oc10kd1kh1kw1_dtbf16", "mb2ic18ih9oc20kh1_dtbf16_math3"})
    check_1x1_wgrad(d);
  check_1x1_wgrad("mb9ic17ih5iw5oc19kh1_dtbf16", Layout::contiguous, Fill::small_ints);
  check_1x1_wgrad("mb2ic20iw301oc9kw1_dtbf16", Layout::contiguous, Fill::small_ints);
  check_1x1_wgrad("mb2ic70ih17iw19oc13kh1_dtbf16", Layout::padded, Fill::small_ints);
  check_1x1_wgrad("mb3ic18ih7oc20kh1_dtbf16", Layout::reversed);
  // Even images, whose dy rows are read in place as pair words: one pass
  // with several runs (image strides in words), chunks with an even last
  // one, tasks over k-tiles and over c-blocks, groups, 1D.
  for (const char* d : {"mb3ic18ih8oc20kh1_dtbf16", "mb3ic40ih8oc13kh1_dtbf16", "mb2ic18ih16iw18oc20kh1_dtbf16",
                        "mb2ic40ih16iw18oc13kh1_dtbf16", "mb2ic60ih8oc18kh1g3_dtbf16", "mb2ic20iw300oc9kw1_dtbf16"})
    check_1x1_wgrad(d, Layout::contiguous, Fill::small_ints);
}
// It holds no fp32 tile buffer: the workspace is the per-thread x panels
// (and no dy rows, read in place in fp32), far below the weight gradient's
// fp32 size; and it stops where the reduction is too long for one pass.
TEST(ImplGemm, Planar1x1WgradOnePassHoldsNoTileBuffer) {
  auto plan = [](const char* d) {
    auto p = Problem::parse(d);
    EXPECT_TRUE(p) << p.error().message;
    auto spec = detail::validate(p.value());
    EXPECT_TRUE(spec) << spec.error().message;
    std::string why;
    auto k = detail::kGemm1x1BwdWeightsImpl.plan(spec->op_for(Gradient::weight), {Isa::scalar, 2}, &why);
    EXPECT_TRUE(k || !why.empty());
    return k;
  };
  const size_t tiles = size_t{1024} * 512 * sizeof(float);  // the weight gradient in fp32
  auto one = plan("mb8ic1024ih7oc512kh1");
  ASSERT_TRUE(one);
  EXPECT_LT(one->workspace_bytes(), tiles / 4);
  EXPECT_FALSE(plan("mb33ic1024ih7oc512kh1"));  // 1617 steps of 49-pixel images
  auto chunked = plan("mb8ic1024ih16oc512kh1");  // 2048 steps: chunks, tiles in fp32
  ASSERT_TRUE(chunked);
  EXPECT_GE(chunked->workspace_bytes(), tiles);
}

TEST(ImplGemm, Planar1x1Declines) {
  for (const char* d : {"mb2ic16ih8oc12kh3ph1", "mb2ic16ih8oc12kh1sh2", "mb2ic16ih8oc12kh1ph1", "mb40ic16ih7oc12kh1"}) {
    auto p = Problem::parse(d);
    ASSERT_TRUE(p) << p.error().message;
    auto spec = detail::validate(p.value());
    ASSERT_TRUE(spec) << spec.error().message;
    std::string why;
    EXPECT_FALSE(detail::kGemm1x1BwdDataImpl.plan(spec->op_for(Gradient::input), {Isa::scalar, 1}, &why)) << d;
    EXPECT_FALSE(why.empty()) << d;
    why.clear();
    EXPECT_FALSE(detail::kGemm1x1BwdWeightsImpl.plan(spec->op_for(Gradient::weight), {Isa::scalar, 1}, &why)) << d;
    EXPECT_FALSE(why.empty()) << d;
  }
}

TEST(ImplGemm, DeclinesEightBitAndBias) {
  auto p = Problem::parse("mb1ic4ih5oc4kh3_tr_dtf8e4m3_mask100");
  ASSERT_TRUE(p) << p.error().message;
  auto spec = detail::validate(p.value());
  ASSERT_TRUE(spec) << spec.error().message;
  std::string why;
  EXPECT_FALSE(detail::kGemmFwdImpl.plan(spec->op_for(Gradient::input), {Isa::scalar, 1}, &why));
  EXPECT_NE(why.find("8-bit"), std::string::npos) << why;
}

TEST(ImplGemm, ChosenByThePlan) {
  auto p = Problem::parse("mb2ic32ih8oc32kh3ph1");
  ASSERT_TRUE(p);
  auto plan = Plan::create(p.value());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(impl_base(plan->implementation(Gradient::input)), "gemm_dgrad_phase_nhwc");
  EXPECT_EQ(impl_base(plan->implementation(Gradient::weight)), "gemm_wgrad_nhwc");
  auto t = Problem::parse("mb2ic32ih8oc32kh3ph1_tr");
  ASSERT_TRUE(t);
  auto tplan = Plan::create(t.value());
  ASSERT_TRUE(tplan) << tplan.error().message;
  EXPECT_EQ(impl_base(tplan->implementation(Gradient::input)), "gemm_fwd_nhwc");
}

}  // namespace
}  // namespace convbwd::test
