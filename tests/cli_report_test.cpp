// The CLI's reporting: the CSV/JSON writers, whose expected texts are written
// out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>  // getpid

#include "results.hpp"

namespace cli = convbwd::cli;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

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
