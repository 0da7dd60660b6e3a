// The CLI's check machinery (tools/convbwd): sharded reference runs equal one
// reference run bit for bit, the tolerance is pinned, the
// comparison catches errors, and the flags and --help text hold together.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

#include "args.hpp"
#include "compare.hpp"
#include "host.hpp"
#include "impl/implementation.hpp"
#include "oracle.hpp"
#include "report.hpp"
#include "reference/reference.hpp"
#include "util/tensor.hpp"

namespace cli = convbwd::cli;
using convbwd::DataType;
using convbwd::Gradient;
using convbwd::Problem;

namespace {

struct Operands {
  cli::HostTensor go, in, w;
};

Operands seeded(const Problem& p, uint64_t seed) {
  Operands o{cli::make_host(p.grad_output.dtype, p.grad_output.dims), cli::make_host(p.input.dtype, p.input.dims),
             cli::make_host(p.weight.dtype, p.weight.dims)};
  std::mt19937_64 rng(seed);
  for (cli::HostTensor* t : {&o.go, &o.in, &o.w}) cli::fill(*t, cli::Fill::uniform, rng);
  return o;
}

// The operation of gradient g with its operand pointers, dst contiguous.
struct BoundOp {
  convbwd::detail::OpSpec op;
  const void *a, *b;
};
BoundOp bind(const Problem& p, const Operands& o, Gradient g) {
  auto spec = convbwd::detail::validate(p);
  EXPECT_TRUE(spec) << spec.error().message;
  BoundOp r{spec->op_for(g), o.go.data(), o.w.data()};
  if (g == Gradient::weight) {
    r.a = p.transposed ? o.in.data() : o.go.data();
    r.b = p.transposed ? o.go.data() : o.in.data();
  }
  r.op.dst = cli::contiguous_view(r.op.dst, p.gradient_dtype(g));
  return r;
}

const char* const kProblems[] = {
    "mb3ic5ih7oc4kh3ph1",          "mb2ic16iw21oc8kw5sw2pw2",    "mb2ic3id5oc4kd3pd1",
    "mb2ic8ih7oc6kh3sh2ph1oph1_tr", "mb3g4ic8ih9oc12kh3ph1",      "mb2g8ic8ih9oc8kh3ph1",
    "mb2ic6ih12oc4kh3dh1ph2",      "mb2ic6ih10oc4kh3ph1pw2phr0pwr1", "mb2ic6ih10oc4kh3ph1_dtbf16",
    "mb2ic6ih10oc4kh3ph1_dtf16:f32:bf16_math0", "mb2g2ic4ih6oc70kh3_tr",  "mb2ic6ih10oc4kh3ph1_math1",
};

}  // namespace

// Every output element is computed by exactly one shard, and the shards
// together give the same bits as one reference call, for every operation and
// every feature (the slicing arithmetic is the risky part).
// A repro shows no raw control bytes and still reruns exactly (bash $'').
TEST(CliRepro, ControlBytesAreEscapedAndQuotesKept) {
  cli::Options o;
  const std::string r = cli::repro_line(cli::Mode::check, "ic3ih5\x1b[31m", o);
  EXPECT_EQ(r.find('\x1b'), std::string::npos) << r;
  EXPECT_NE(r.find("convbwd --mode=check $'ic3ih5\\x1b[31m' --seed=1"), std::string::npos) << r;
  const std::string q = cli::repro_line(cli::Mode::check, "ic3ih5n\"a b\"", o);
  EXPECT_NE(q.find("convbwd --mode=check 'ic3ih5n\"a b\"' --seed=1"), std::string::npos) << q;
}

TEST(CliOracle, ShardsEqualOneReferenceCall) {
  for (const char* d : kProblems) {
    auto p = Problem::parse(d);
    ASSERT_TRUE(p) << p.error().message;
    const Operands o = seeded(p.value(), 5);
    for (Gradient g : {Gradient::input, Gradient::weight, Gradient::bias}) {
      const BoundOp bo = bind(p.value(), o, g);
      const int64_t n = bo.op.dst.elements();
      const size_t bytes = static_cast<size_t>(n) * convbwd::size_of(bo.op.dst.dtype);
      std::vector<unsigned char> whole(bytes, 0xA5), pieces(bytes, 0x5A);
      convbwd::detail::reference_run(bo.op, bo.a, bo.b, whole.data());
      for (int64_t target : {1, 3, 64, 1000}) {
        std::fill(pieces.begin(), pieces.end(), 0x5A);
        std::vector<int> hits(static_cast<size_t>(n), 0);
        for (const cli::Shard& s : cli::make_shards(bo.op, target)) {
          ASSERT_LE(0, s.begin);
          ASSERT_LT(s.begin, s.end);
          ASSERT_LE(s.end, n);
          for (int64_t j = s.begin; j < s.end; ++j) ++hits[static_cast<size_t>(j)];
          convbwd::detail::reference_run(s.op, bo.a, bo.b, pieces.data());
        }
        for (int64_t j = 0; j < n; ++j) ASSERT_EQ(hits[static_cast<size_t>(j)], 1) << d << " element " << j;
        EXPECT_EQ(whole, pieces) << d << " gradient " << static_cast<int>(g) << " target " << target;
      }
    }
  }
}

TEST(CliOracle, ParallelRunEqualsSerialAndSubsetIsSeeded) {
  auto p = Problem::parse("mb2ic6ih10oc40kh3ph1");
  ASSERT_TRUE(p);
  const Operands o = seeded(p.value(), 9);
  const BoundOp bo = bind(p.value(), o, Gradient::weight);
  cli::OracleOptions one, many;
  one.threads = 1;
  many.threads = 4;
  const auto r1 = cli::run_oracle(bo.op, bo.a, bo.b, bo.a, bo.b, one);
  const auto r4 = cli::run_oracle(bo.op, bo.a, bo.b, bo.a, bo.b, many);
  EXPECT_EQ(r1.ref, r4.ref);
  EXPECT_EQ(r1.computed_elements, r1.total_elements);
  EXPECT_FALSE(r1.subset());

  cli::OracleOptions sub = many;
  sub.budget = 2.0 * static_cast<double>(convbwd::detail::reduction_length(bo.op)) *
               static_cast<double>(r1.total_elements) / 4;  // about a quarter
  const auto s1 = cli::run_oracle(bo.op, bo.a, bo.b, bo.a, bo.b, sub);
  const auto s2 = cli::run_oracle(bo.op, bo.a, bo.b, bo.a, bo.b, sub);
  EXPECT_TRUE(s1.subset());
  EXPECT_GT(s1.computed_elements, 0);
  EXPECT_LE(s1.computed_elements, r1.total_elements / 4 + 1);
  ASSERT_EQ(s1.computed.size(), s2.computed.size());
  for (size_t i = 0; i < s1.computed.size(); ++i) EXPECT_EQ(s1.computed[i].begin, s2.computed[i].begin);
  // First and last slices are always in.
  std::set<int64_t> begins;
  for (const auto& s : s1.computed) begins.insert(s.begin);
  EXPECT_TRUE(begins.count(0));
  EXPECT_EQ(std::max_element(s1.computed.begin(), s1.computed.end(),
                             [](const cli::Shard& x, const cli::Shard& y) { return x.end < y.end; })
                ->end,
            r1.total_elements);
  // The subset's values are the full run's.
  const size_t es = convbwd::size_of(bo.op.dst.dtype);
  for (const auto& s : s1.computed)
    EXPECT_EQ(0, std::memcmp(s1.ref.data() + s.begin * es, r1.ref.data() + s.begin * es,
                             static_cast<size_t>(s.end - s.begin) * es));
}

// The CLI's check mode judges with the one tolerance: pinned here to values
// worked out by hand (tests/tolerance_test.cpp derives them), so a change to
// the definition or to the CLI's use of it fails, where comparing the CLI
// with the tests' wrapper of the same function could not.
TEST(CliCompare, ToleranceIsPinnedToHandComputedValues) {
  EXPECT_EQ(cli::tolerance(DataType::f32, 3.0, 250.0, 9), 2257 * 0x1p-24);  // (2*3 + 9*250 + 1) 2^-24
  EXPECT_EQ(cli::tolerance(DataType::f32, -3.0, 250.0, 9), 2257 * 0x1p-24);
  EXPECT_EQ(cli::tolerance(DataType::f32, 0.0, 1.0, 0), 0x1p-23);  // n = 0 counts as 1
  EXPECT_EQ(cli::tolerance(DataType::f16, -0.5, 1.0, 1), 0x1p-11 + 0x1p-23);
  EXPECT_EQ(cli::tolerance(DataType::bf16, 256.0, 0.0, 0), 2 + 0x1p-24);
  EXPECT_EQ(cli::tolerance(DataType::f8e4m3, 2.0, 3.0, 2), 0.25 + 7 * 0x1p-24);
  EXPECT_EQ(cli::tolerance(DataType::hif8, -4.0, 0.0, 3), 2 + 0x1p-24);
}

TEST(CliCompare, CatchesErrorsAboveTolerance) {
  auto p = Problem::parse("mb2ic4ih6oc3kh3ph1");
  ASSERT_TRUE(p);
  const Operands o = seeded(p.value(), 2);
  const BoundOp bo = bind(p.value(), o, Gradient::input);
  const Operands abs{cli::abs_copy(o.go), cli::abs_copy(o.in), cli::abs_copy(o.w)};
  const BoundOp babs = bind(p.value(), abs, Gradient::input);
  cli::OracleOptions opt;
  const auto ref = cli::run_oracle(bo.op, bo.a, bo.b, babs.a, babs.b, opt);
  for (float s : ref.sum_abs) ASSERT_GT(s, 0.0f);
  cli::HostTensor got = cli::make_host(DataType::f32, p->gradient_dims(Gradient::input));
  std::memcpy(got.bytes.data(), ref.ref.data(), got.bytes.size());
  const int64_t n = convbwd::detail::reduction_length(bo.op);
  auto c = cli::compare("gradInput", got, ref, n, false);
  EXPECT_TRUE(c.pass());
  EXPECT_EQ(c.worst_scaled_error, 0);
  EXPECT_EQ(c.checked, got.elements());

  // Just inside and just outside the tolerance at element 17.
  float* v = reinterpret_cast<float*>(got.bytes.data());
  const double want = v[17];
  const double tol = cli::tolerance(DataType::f32, want, ref.sum_abs[17], n);
  v[17] = static_cast<float>(want + 0.5 * tol);
  c = cli::compare("gradInput", got, ref, n, false);
  EXPECT_TRUE(c.pass());
  EXPECT_NEAR(c.worst_scaled_error, 0.5, 0.2);  // float rounding of want + tol/2
  v[17] = static_cast<float>(want + 2 * tol);
  c = cli::compare("gradInput", got, ref, n, false);
  EXPECT_FALSE(c.pass());
  EXPECT_EQ(c.failures, 1);
  ASSERT_EQ(c.first_failures.size(), 1u);
  EXPECT_EQ(c.first_failures[0].rfind("gradInput[0,0,2,5]:", 0), 0u) << c.first_failures[0];
  // An element never written (NaN) fails, whatever the tolerance.
  v[17] = std::nanf("");
  EXPECT_FALSE(cli::compare("gradInput", got, ref, n, false).pass());
  // exact: fp32 results of small sums must match bit for bit.
  v[17] = std::nextafter(static_cast<float>(want), 1e9f);
  EXPECT_TRUE(cli::compare("gradInput", got, ref, n, false).pass());
  EXPECT_FALSE(cli::compare("gradInput", got, ref, n, true).pass());
}

TEST(CliArgs, ParsesFlags) {
  const char* argv[] = {"convbwd", "--mode=perf", "--seed=42", "--repeats=7", "--threads=3", "--fill=ints",
                        "--check-all", "--cold-cache", "mb2ic4ih8", "mb1ic2iw9"};
  auto o = cli::parse_args(10, argv);
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->mode, cli::Mode::perf);
  EXPECT_EQ(o->seed, 42u);
  EXPECT_EQ(o->repeats, 7);
  EXPECT_EQ(o->threads, 3);
  EXPECT_EQ(o->fill, cli::Fill::small_ints);
  EXPECT_TRUE(o->check_all);
  EXPECT_TRUE(o->cold_cache);
  EXPECT_EQ(o->descriptors, (std::vector<std::string>{"mb2ic4ih8", "mb1ic2iw9"}));

  const char* none[] = {"convbwd"};
  auto d = cli::parse_args(1, none);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->no_arguments);
}

TEST(CliArgs, RejectsBadFlagsWithTheirName) {
  struct Case {
    std::vector<const char*> args;
    const char* fragment;
  } cases[] = {
      {{"--seed=-1", "mb1ic1iw4"}, "--seed=-1"},
      {{"--repeats=0", "mb1ic1iw4"}, "--repeats=0"},
      {{"--threads=99999", "mb1ic1iw4"}, "--threads=99999"},
      {{"--mode=data", "mb1ic1iw4"}, "--gradOutput"},
      {{"--mode=data", "--gradOutput=a.npy", "mb1ic1iw4"}, "--out-dir"},
      {{"--input=a.npy", "mb1ic1iw4"}, "belong to --mode=data"},
      {{"-x", "mb1ic1iw4"}, "unknown flag '-x'"},
      {{"--weight", "mb1ic1iw4"}, "--weight needs a value"},
      {{"--fill=gauss", "mb1ic1iw4"}, "--fill=gauss"},
      {{""}, "empty argument"},
  };
  for (const Case& c : cases) {
    std::vector<const char*> argv = {"convbwd"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto o = cli::parse_args(static_cast<int>(argv.size()), argv.data());
    ASSERT_FALSE(o) << c.fragment;
    EXPECT_NE(o.error().message.find(c.fragment), std::string::npos) << o.error().message;
  }
}

// Every example descriptor in --help parses, is a valid problem and, where
// the comment claims an output size, has it.
TEST(CliArgs, HelpExamplesAreValidProblems) {
  const std::string help = cli::help_text();
  const size_t start = help.find("EXAMPLES");
  const size_t end = help.find("DATA MODE FILES");
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::istringstream lines(help.substr(start, end - start));
  std::string line;
  int n = 0;
  std::getline(lines, line);  // the heading
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string d;
    if (!(words >> d)) continue;
    auto p = Problem::parse(d);
    ASSERT_TRUE(p) << d << ": " << p.error().message;
    auto plan = convbwd::Plan::create(p.value());
    EXPECT_TRUE(plan) << d << ": " << plan.error().message;
    ++n;
  }
  EXPECT_GE(n, 12);
  // The claims made by two of the comments.
  auto tr = Problem::parse("mb2ic32ih16oc16kh3sh2ph1oph1_tr");
  ASSERT_TRUE(tr);
  EXPECT_EQ(tr->grad_output.dims, (std::vector<int64_t>{2, 16, 32, 32}));
  auto asym = Problem::parse("mb2ic16ih32oc16kh3ph1pw2phr0pwr1");
  ASSERT_TRUE(asym);
  EXPECT_EQ(asym->padding_before, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(asym->padding_after, (std::vector<int64_t>{0, 1}));
  // Every flag the parser knows is documented.
  for (const char* flag : {"--mode", "--seed", "--fill", "--repeats", "--warmup", "--cold-cache", "--threads",
                           "--check-all", "--check-budget", "--batch", "--gradOutput", "--input", "--weight", "--out-dir",
                           "--csv", "--json", "--progress", "--verbose", "--help"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
}
