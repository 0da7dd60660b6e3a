// The CLI's reporting: the progress line (with a fake clock and an in-memory
// stream, so its timing rules are tested without a terminal or waiting), the
// oracle's progress counts, and the CSV/JSON writers, whose expected texts are
// written out by hand.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <regex>
#include <thread>
#include <sstream>

#include <unistd.h>  // getpid

#include "impl/implementation.hpp"
#include "oracle.hpp"
#include "progress.hpp"
#include "results.hpp"

namespace cli = convbwd::cli;

namespace {

// A StatusLine writing into memory, with a clock the test sets.
struct FakeTerminal {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* f = open_memstream(&buf, &size);
  double t = 0;
  cli::StatusLine line;

  explicit FakeTerminal(int width = 0) {
    cli::StatusLine::Config c;
    c.out = f;
    c.clock = [this] { return t; };
    c.width = width;
    line.configure(c);
  }
  ~FakeTerminal() {
    std::fclose(f);
    std::free(buf);
  }
  // What was written since the last call.
  std::string take() {
    std::fflush(f);
    std::string s(buf, size);
    s = s.substr(seen);
    seen = size;
    return s;
  }
  size_t seen = 0;
};

const std::string kErase = "\r\x1b[K";

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST(CliProgress, WantedOnATerminalOrWhenForced) {
  EXPECT_TRUE(cli::progress_wanted(cli::Progress::auto_, true));
  EXPECT_FALSE(cli::progress_wanted(cli::Progress::auto_, false));
  EXPECT_TRUE(cli::progress_wanted(cli::Progress::always, false));
  EXPECT_FALSE(cli::progress_wanted(cli::Progress::never, true));
}

TEST(CliProgress, AQuickTaskPrintsNothing) {
  FakeTerminal term;
  term.line.begin_task("checking gradInput");
  for (int i = 1; i <= 10; ++i) {
    term.t = 0.09 * i;  // ends at 0.9 s, inside the 1 s delay
    term.line.update_task(i * 10, 100);
  }
  term.line.end_task();
  EXPECT_EQ(term.take(), "");
}

TEST(CliProgress, ALongTaskIsShownAfterTheDelayAtMostFourTimesASecondThenErased) {
  FakeTerminal term;
  term.t = 5;  // the delay counts from begin_task, not from the clock's zero
  term.line.begin_task("checking gradWeight");
  term.t = 5.5;
  term.line.update_task(10, 4000);
  EXPECT_EQ(term.take(), "");
  term.t = 6.0;
  term.line.update_task(1500, 4000);
  EXPECT_EQ(term.take(), kErase + "convbwd: checking gradWeight: 1.5k of 4k elements (37%)");
  term.t = 6.2;  // within 0.25 s of the last draw
  term.line.update_task(2000, 4000);
  EXPECT_EQ(term.take(), "");
  term.t = 6.3;
  term.line.update_task(1800, 4000);  // a worker reporting late: the count never goes back
  EXPECT_EQ(term.take(), kErase + "convbwd: checking gradWeight: 2k of 4k elements (50%)");
  term.line.end_task();
  EXPECT_EQ(term.take(), kErase);
  term.line.interrupt();  // nothing shown: nothing to erase
  EXPECT_EQ(term.take(), "");
}

TEST(CliProgress, ACheckInsideABatchExtendsTheBatchLine) {
  FakeTerminal term;
  term.line.set_case("case 1/2, 0 FAIL, 0 errors so far", "mb2ic4ih8");
  EXPECT_EQ(term.take(), kErase + "convbwd: case 1/2, 0 FAIL, 0 errors so far: mb2ic4ih8");
  term.line.begin_task("checking gradBias");  // quick: the line is left alone
  term.line.update_task(1, 8);
  term.line.end_task();
  EXPECT_EQ(term.take(), "");
  term.line.begin_task("checking gradInput");
  term.t = 2;
  term.line.update_task(7, 7);
  EXPECT_EQ(term.take(), kErase +
                             "convbwd: case 1/2, 0 FAIL, 0 errors so far, "
                             "checking gradInput: 7 of 7 elements (100%): mb2ic4ih8");
  term.line.end_task();  // back to the batch's part
  EXPECT_EQ(term.take(), kErase + "convbwd: case 1/2, 0 FAIL, 0 errors so far: mb2ic4ih8");
  term.line.interrupt();  // an error message follows on the terminal
  EXPECT_EQ(term.take(), kErase);
  term.line.set_case("case 2/2, 0 FAIL, 1 error so far", "ic4");
  term.line.finish("2 cases done");
  EXPECT_EQ(term.take(),
            kErase + "convbwd: case 2/2, 0 FAIL, 1 error so far: ic4" + kErase + "convbwd: 2 cases done\n");
}

// The oracle's workers all report: each drawn line is whole, and the count
// it shows never goes back.
TEST(CliProgress, ConcurrentUpdatesDrawWholeLinesWithRisingCounts) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* f = open_memstream(&buf, &size);
  std::atomic<int64_t> ticks{0};
  cli::StatusLine line({f, [&] { return 0.01 * static_cast<double>(ticks++); }, 0.5, 0.1, 0});
  line.begin_task("checking gradInput");
  std::atomic<int64_t> done{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) line.update_task(++done, 4000);
    });
  for (auto& t : workers) t.join();
  line.end_task();
  std::fflush(f);
  const std::string out(buf, size);
  std::fclose(f);
  std::free(buf);
  std::vector<std::string> lines;
  for (size_t at = 0; (at = out.find(kErase, at)) != std::string::npos;) {
    const size_t next = out.find(kErase, at + kErase.size());
    lines.push_back(out.substr(at + kErase.size(), next == std::string::npos ? next : next - at - kErase.size()));
    at += kErase.size();
  }
  ASSERT_GE(lines.size(), 2u) << "some lines, then the erase";
  EXPECT_EQ(lines.back(), "");
  EXPECT_EQ(out.substr(0, kErase.size()), kErase);
  double last = 0;
  const std::regex whole(R"(convbwd: checking gradInput: ([0-9.]+)(k?) of 4k elements \([0-9]+%\))");
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, whole)) << lines[i];
    const double shown = std::stod(m[1]) * (m[2] == "k" ? 1000 : 1);
    EXPECT_GE(shown, last) << lines[i];
    last = shown;
  }
}

TEST(CliProgress, LinesAreCutToTheTerminalWidth) {
  FakeTerminal term(20);
  term.line.set_case("case 1/300, 0 FAIL, 0 errors so far", "mb2ic4ih8");
  // 19 columns: a line as wide as the terminal would wrap on some terminals.
  EXPECT_EQ(term.take(), kErase + "convbwd: case 1/300");
}

TEST(CliProgress, DisabledWritesNothing) {
  cli::StatusLine line;  // no stream: what run() leaves when stderr is not a terminal
  EXPECT_FALSE(line.enabled());
  line.set_case("case 1/2", "x");
  line.begin_task("checking gradInput");
  line.update_task(1, 2);
  line.end_task();
  line.finish("done");  // reaching here without a stream to write to is the test
}

// The oracle reports every shard: the counts rise to the number of elements
// it computes (the subset's, when the budget cuts in), and reporting changes
// no bit of the result.
TEST(CliProgress, OracleCountsEveryElementOnceAndResultsDoNotChange) {
  auto p = convbwd::Problem::parse("mb2ic6ih10oc40kh3ph1");
  ASSERT_TRUE(p);
  std::vector<float> go(2 * 40 * 10 * 10), in(2 * 6 * 10 * 10);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : go) v = u(rng);
  for (float& v : in) v = u(rng);
  auto spec = convbwd::detail::validate(p.value());
  ASSERT_TRUE(spec);
  convbwd::detail::OpSpec op = spec->op_for(convbwd::Gradient::weight);
  op.dst = cli::contiguous_view(op.dst, convbwd::DataType::f32);
  for (const double budget : {0.0, 1e5}) {
    cli::OracleOptions plain;
    plain.threads = 3;
    plain.budget = budget;
    cli::OracleOptions counted = plain;
    std::mutex m;
    std::vector<std::pair<int64_t, int64_t>> calls;
    counted.progress = [&](int64_t done, int64_t total) {
      std::lock_guard<std::mutex> lock(m);
      calls.emplace_back(done, total);
    };
    const auto a = cli::run_oracle(op, go.data(), in.data(), go.data(), in.data(), plain);
    const auto b = cli::run_oracle(op, go.data(), in.data(), go.data(), in.data(), counted);
    EXPECT_EQ(a.ref, b.ref);
    EXPECT_EQ(a.sum_abs, b.sum_abs);
    EXPECT_EQ(budget > 0, b.subset());
    ASSERT_EQ(calls.size(), b.computed.size()) << "one call per shard";
    int64_t last = 0;
    for (const auto& [done, total] : calls) {
      EXPECT_EQ(total, b.computed_elements);
      last = std::max(last, done);
    }
    EXPECT_EQ(last, b.computed_elements);
  }
}

TEST(CliJson, StringsAreEscapedAndValidUtf8) {
  EXPECT_EQ(cli::json_string("ic4n\"a\\b\""), R"("ic4n\"a\\b\"")");
  EXPECT_EQ(cli::json_string(std::string("t\tn\nz\0x\x1b\x7f", 9)), R"("t\u0009n\u000az\u0000x\u001b\u007f")");
  // Well-formed UTF-8 stays: e-acute (2 bytes), the euro sign (3), an emoji (4).
  EXPECT_EQ(cli::json_string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
  // Anything else becomes U+FFFD, byte by byte: a stray byte, a cut
  // sequence, an overlong '/', a surrogate, a code point above U+10FFFF.
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(cli::json_string("a\xff" "b"), "\"a" + r + "b\"");
  EXPECT_EQ(cli::json_string("\xc3"), "\"" + r + "\"");
  EXPECT_EQ(cli::json_string("\xe2\x82"), "\"" + r + r + "\"");
  EXPECT_EQ(cli::json_string("\xc0\xaf"), "\"" + r + r + "\"");
  EXPECT_EQ(cli::json_string("\xed\xa0\x80"), "\"" + r + r + r + "\"");
  EXPECT_EQ(cli::json_string("\xf4\x90\x80\x80"), "\"" + r + r + r + r + "\"");
}

TEST(CliJson, NumbersReadBackExactlyAndNonFiniteOnesAreStrings) {
  EXPECT_EQ(cli::json_number(0.1), "0.1");
  EXPECT_EQ(cli::json_number(1e-9), "1e-09");
  EXPECT_EQ(cli::json_number(12345.5), "12345.5");
  EXPECT_EQ(cli::json_number(HUGE_VAL), "\"inf\"");
  EXPECT_EQ(cli::json_number(std::nan("")), "\"nan\"");
}

TEST(CliResults, RowsHoldOnlyTheFiguresTheModeMeasured) {
  cli::CaseResult r;
  r.outcome = cli::Outcome::fail;
  r.worst_scaled_error = 3.5;
  r.median_ms = 2;
  r.name = "x";
  r.descriptor = "ic4ih8n\"x\"";
  r.gradients = "gradInput";
  r.dtype = "bf16";
  r.repro = "repro: convbwd --mode=check 'ic4ih8n\"x\"' --seed=1 --threads=1";
  const cli::ResultRow check = cli::result_row(r, cli::Mode::check, "given");
  EXPECT_EQ(check.outcome, "FAIL");
  EXPECT_EQ(check.descriptor, r.descriptor);
  EXPECT_EQ(check.worst_scaled_error, 3.5);
  EXPECT_EQ(check.subset, false);
  EXPECT_FALSE(check.median_ms);
  EXPECT_FALSE(check.gflops);
  EXPECT_EQ(cli::json_object(check),
            R"({"name": "x", "descriptor": "ic4ih8n\"x\"", "mode": "check", "gradients": "gradInput", )"
            R"("dtype": "bf16", "outcome": "FAIL", "worst_scaled_error": 3.5, "subset": false, "median_ms": null, )"
            R"("gflops": null, "repro": "repro: convbwd --mode=check 'ic4ih8n\"x\"' --seed=1 --threads=1"})");
  EXPECT_EQ(cli::csv_row(check),
            "x,\"ic4ih8n\"\"x\"\"\",check,gradInput,bf16,FAIL,3.5,0,,,\"repro: convbwd --mode=check "
            "'ic4ih8n\"\"x\"\"' --seed=1 --threads=1\"\n");

  r.outcome = cli::Outcome::pass;
  r.gflops = 1.25;
  const cli::ResultRow perf = cli::result_row(r, cli::Mode::perf, "given");
  EXPECT_FALSE(perf.worst_scaled_error);
  EXPECT_FALSE(perf.subset);
  EXPECT_EQ(perf.median_ms, 2);
  EXPECT_EQ(perf.gflops, 1.25);

  // A descriptor that did not parse: the user's text, no figures at all.
  cli::CaseResult bad;
  bad.repro = "repro: convbwd --mode=all ic4qq --threads=1";
  const cli::ResultRow err = cli::result_row(bad, cli::Mode::all, "ic4qq");
  EXPECT_EQ(err.outcome, "ERROR");
  EXPECT_EQ(err.descriptor, "ic4qq");
  EXPECT_EQ(cli::csv_row(err), ",ic4qq,all,,,ERROR,,,,,repro: convbwd --mode=all ic4qq --threads=1\n");
}

// After every case the file is the complete document of the cases so far,
// with no temporary file left beside it.
TEST(CliResults, JsonFileIsACompleteDocumentAfterEveryCase) {
  const auto dir = std::filesystem::temp_directory_path() / ("cli_report_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto json = dir / "r.json", csv = dir / "r.csv";
  cli::ResultFiles files;
  ASSERT_FALSE(files.open(csv.string(), json.string()));
  EXPECT_EQ(read(json), "[]\n");
  EXPECT_EQ(read(csv), cli::csv_header());
  cli::ResultRow a;
  a.descriptor = "ic4";
  a.mode = "perf";
  a.outcome = "PASS";
  a.median_ms = 0.5;
  a.gflops = 2;
  files.add(a);
  const std::string one = R"({"name": "", "descriptor": "ic4", "mode": "perf", "gradients": "", "dtype": "", )"
                          R"("outcome": "PASS", "worst_scaled_error": null, "subset": null, "median_ms": 0.5, )"
                          R"("gflops": 2, "repro": ""})";
  EXPECT_EQ(read(json), "[\n  " + one + "\n]\n");
  cli::ResultRow b = a;
  b.outcome = "ERROR";
  b.median_ms = b.gflops = std::nullopt;
  files.add(b);
  EXPECT_EQ(read(json), "[\n  " + one + ",\n  " + cli::json_object(b) + "\n]\n");
  EXPECT_NE(cli::json_object(b).find(R"("outcome": "ERROR")"), std::string::npos);
  EXPECT_EQ(read(csv), cli::csv_header() + ",ic4,perf,,,PASS,,,0.5,2,\n,ic4,perf,,,ERROR,,,,,\n");
  files.close();
  EXPECT_FALSE(files.failed());
  EXPECT_FALSE(std::filesystem::exists(dir / "r.json.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(CliResults, UnwritablePathsAreNamedWithTheirFlag) {
  cli::ResultFiles files;
  const convbwd::Error e = files.open("", "/no/such/dir/r.json");
  ASSERT_TRUE(e);
  EXPECT_EQ(e.message, "/no/such/dir/r.json: cannot open for writing (--json)");
  cli::ResultFiles csv;
  const convbwd::Error c = csv.open("/no/such/dir/r.csv", "");
  ASSERT_TRUE(c);
  EXPECT_EQ(c.message, "/no/such/dir/r.csv: cannot open for writing (--csv)");
}
