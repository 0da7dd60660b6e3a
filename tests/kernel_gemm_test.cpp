// Every GEMM microkernel of every tier this machine runs (native, and the
// SIMDe-emulated ones the test binaries register), held to the contract of
// kernels/gemm.hpp by the test's own loops: small-integer data, so every sum
// is exact and any dropped, doubled or misplaced product shows. The tile
// shape comes from the kernel's config entry, as the planners take it; the
// cases cover zero to several runs, empty and odd run lengths (tails of the
// unrolled step loops), offsets into A and B, strided B and A steps, and
// accumulate on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "kernels/config.hpp"

namespace convbwd::detail {
namespace {

struct TierGemm {
  std::string name;
  GemmKernels k;
};

std::vector<TierGemm> gemm_kernels() {
  std::vector<TierGemm> v;
  for (Isa i : kAllIsas) {
    if (const KernelConfig* n = native_kernel_config(i)) v.push_back({tier_name(*n), n->gemm});
    if (const KernelConfig* e = emulated_kernel_config(i)) v.push_back({tier_name(*e), e->gemm});
  }
  return v;
}

struct Case {
  std::vector<int64_t> len;
  int64_t as = 0, bs = 0;  // 0: the densest the kernel allows (mr, nr)
  bool accumulate = false;
};

// acc[i][j] (+)= sum_r sum_t A(i, r, t) * b[b_off[r] + t*bs + j], computed here.
void check(const TierGemm& g, bool gather, const Case& c, std::mt19937& rng) {
  const int mr = g.k.mr, nr = g.k.nr;
  ASSERT_GT(mr, 0);
  ASSERT_LE(mr, kMaxMr);
  ASSERT_GT(nr, 0);
  ASSERT_LE(nr, kMaxNr);
  const int64_t as = c.as ? c.as : mr, bs = gather ? nr : (c.bs ? c.bs : nr);
  const int64_t runs = static_cast<int64_t>(c.len.size());
  std::uniform_int_distribution<int> val(-4, 4), gap(0, 5);
  std::vector<int64_t> a_off(c.len.size()), b_off(c.len.size());
  int64_t a_end = 0, b_end = 0;
  for (int64_t r = 0; r < runs; ++r) {
    a_off[r] = a_end + gap(rng);
    b_off[r] = b_end + gap(rng);
    a_end = a_off[r] + (gather ? c.len[r] : c.len[r] * as + mr) + 1;
    b_end = b_off[r] + c.len[r] * bs + nr + 1;
  }
  // gather: mr rows of their own; strided: one array.
  std::vector<std::vector<float>> a(gather ? mr : 1, std::vector<float>(static_cast<size_t>(a_end + 8)));
  for (auto& row : a)
    for (float& x : row) x = static_cast<float>(val(rng));
  std::vector<float> b(static_cast<size_t>(b_end + 8));
  for (float& x : b) x = static_cast<float>(val(rng));
  std::vector<float> acc(static_cast<size_t>(mr * nr)), want(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = want[i] = c.accumulate ? static_cast<float>(val(rng)) : 1e9f;
  if (!c.accumulate) std::fill(want.begin(), want.end(), 0.0f);
  for (int64_t r = 0; r < runs; ++r)
    for (int64_t t = 0; t < c.len[r]; ++t)
      for (int i = 0; i < mr; ++i) {
        const float av = gather ? a[i][a_off[r] + t] : a[0][a_off[r] + t * as + i];
        for (int j = 0; j < nr; ++j) want[i * nr + j] += av * b[b_off[r] + t * bs + j];
      }
  MicroArgs ka;
  for (int i = 0; i < (gather ? mr : 1); ++i) ka.a[i] = a[i].data();
  ka.b = b.data();
  ka.as = as;
  ka.bs = bs;
  ka.a_off = a_off.data();
  ka.b_off = b_off.data();
  ka.len = c.len.data();
  ka.runs = runs;
  ka.acc = acc.data();
  ka.accumulate = c.accumulate;
  (gather ? g.k.gather : g.k.strided)(ka);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j)
      ASSERT_EQ(acc[i * nr + j], want[i * nr + j])
          << g.k.name << (gather ? " gather" : " strided") << " runs " << runs << " as " << as << " bs " << bs
          << " accumulate " << c.accumulate << " at (" << i << ", " << j << ")";
}

TEST(KernelGemm, EveryTierAgainstTheContract) {
  const std::vector<TierGemm> kernels = gemm_kernels();
  ASSERT_FALSE(kernels.empty());
  std::mt19937 rng(20261201);
  const std::vector<Case> cases = {
      {{}, 0, 0, false},          {{}, 0, 0, true},           {{1}, 0, 0, false},
      {{2}, 0, 0, true},          {{3}, 0, 0, false},         {{4}, 0, 0, false},
      {{5}, 0, 0, true},          {{7}, 0, 0, false},         {{17}, 0, 0, false},
      {{64}, 0, 0, true},         {{0, 3, 0}, 0, 0, false},   {{1, 1, 1, 1, 1}, 0, 0, true},
      {{9, 2, 31}, 0, 0, false},  {{6}, 40, 0, false},        {{5, 3}, 13, 0, true},
      {{4, 9}, 0, 48, false},     {{11}, 7, 80, true},        {{300}, 0, 0, false},
  };
  for (const TierGemm& g : kernels) {
    SCOPED_TRACE(g.name + " " + g.k.name);
    for (bool gather : {true, false})
      for (const Case& c : cases) {
        if (gather && (c.bs != 0 || c.as != 0)) continue;  // the gather contract: dense B, A rows of their own
        check(g, gather, c, rng);
        if (HasFatalFailure()) return;
      }
  }
}

// Each tier that runs here is listed, so a tier cannot drop out of the test
// silently: AVX2 CPUs run avx2 natively and avx512 emulated at least.
TEST(KernelGemm, TheListHasEveryTierThatRunsHere) {
  std::vector<std::string> names;
  for (const TierGemm& g : gemm_kernels()) names.push_back(g.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "scalar"), names.end());
  if (cpu_has(Isa::avx2)) {
    EXPECT_NE(std::find(names.begin(), names.end(), "avx2"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "avx512_emu"), names.end());
  }
  if (cpu_has(Isa::avx512)) {
    EXPECT_NE(std::find(names.begin(), names.end(), "avx512"), names.end());
  }
}

}  // namespace
}  // namespace convbwd::detail

namespace convbwd::detail {
namespace {

// The emulated rerun of scripts/test.sh (CONVBWD_EMULATED=1) must plan on the
// SIMDe build, or it would test the native kernels a second time.
TEST(KernelGemm, EmulatedRerunPlansTheEmulatedKernels) {
  const char* e = std::getenv("CONVBWD_EMULATED");
  const char* isa = std::getenv("CONVBWD_ISA");
  if (!e || std::string(e) != "1" || !isa) GTEST_SKIP() << "not the emulated rerun";
  const std::optional<Isa> want = isa_from_string(isa);
  ASSERT_TRUE(want) << isa;
  ASSERT_NE(emulated_kernel_config(*want), nullptr) << "no emulated " << isa << " is registered";
  EXPECT_EQ(active_isa(), *want);
  EXPECT_TRUE(kernel_config(active_isa()).emulated);
  auto p = Problem::parse("mb2ic32ih9oc32kh3ph1");
  ASSERT_TRUE(p);
  auto plan = Plan::create(p.value());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->implementation(Gradient::weight), "gemm_wgrad_nhwc:" + std::string(isa) + "_emu");
}

}  // namespace
}  // namespace convbwd::detail
