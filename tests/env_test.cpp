// The one rule for environment variables (src/runtime/env.hpp): a value is
// used only if it parses as a whole; anything else is reported once on
// stderr, naming the variable, the value and what is accepted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "convbwd/convbwd.hpp"
#include "runtime/env.hpp"

namespace convbwd::detail {
namespace {

std::optional<int64_t> int_of(const char* s, int64_t lo, int64_t hi) {
  std::string expected;
  return parse_int(s, lo, hi, &expected);
}

TEST(Env, ParseIntTakesOnlyWholeIntegersInRange) {
  EXPECT_EQ(int_of("1", 1, 256), 1);
  EXPECT_EQ(int_of("256", 1, 256), 256);
  EXPECT_EQ(int_of("-7", -10, 10), -7);
  EXPECT_EQ(int_of("-9223372036854775808", INT64_MIN, 0), INT64_MIN);
  EXPECT_EQ(int_of("9223372036854775807", 0, INT64_MAX), INT64_MAX);
  for (const char* bad : {"", "abc", "0", "-1", "2x", "x2", "99999", "257", " 2", "2 ", "1e3", "+3", "-", "0x10",
                          "9223372036854775808", "99999999999999999999"})
    EXPECT_FALSE(int_of(bad, 1, 256)) << "'" << bad << "' was accepted";
  std::string expected;
  (void)parse_int("abc", 1, 256, &expected);
  EXPECT_EQ(expected, "an integer from 1 to 256");
}

TEST(Env, AnInvalidIntegerIsReportedOnceWithNameValueAndRange) {
  setenv("CONVBWD_TEST_ENV_INT", "2x", 1);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(env_int("CONVBWD_TEST_ENV_INT", 1, 256));
  EXPECT_FALSE(env_int("CONVBWD_TEST_ENV_INT", 1, 256));  // read again: not printed again
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "convbwd: CONVBWD_TEST_ENV_INT=2x is invalid; expected an integer from 1 to 256\n");
  const auto reports = env_reports();
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back(), "CONVBWD_TEST_ENV_INT=2x is invalid; expected an integer from 1 to 256");
  setenv("CONVBWD_TEST_ENV_INT", "12", 1);
  EXPECT_EQ(env_int("CONVBWD_TEST_ENV_INT", 1, 256), 12);
  unsetenv("CONVBWD_TEST_ENV_INT");
  EXPECT_FALSE(env_int("CONVBWD_TEST_ENV_INT", 1, 256));
  EXPECT_EQ(env_reports().size(), reports.size()) << "a valid or unset value was reported";
}

TEST(Env, FlagIsZeroOrOne) {
  // CONVBWD_VERBOSE=0 used to turn verbose on (any value did).
  setenv("CONVBWD_TEST_ENV_FLAG", "0", 1);
  EXPECT_EQ(env_flag("CONVBWD_TEST_ENV_FLAG"), false);
  setenv("CONVBWD_TEST_ENV_FLAG", "1", 1);
  EXPECT_EQ(env_flag("CONVBWD_TEST_ENV_FLAG"), true);
  setenv("CONVBWD_TEST_ENV_FLAG", "yes", 1);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(env_flag("CONVBWD_TEST_ENV_FLAG"));
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "convbwd: CONVBWD_TEST_ENV_FLAG=yes is invalid; expected 0 or 1\n");
  unsetenv("CONVBWD_TEST_ENV_FLAG");
}

TEST(Env, VerboseZeroIsOff) {
  setenv("CONVBWD_VERBOSE", "0", 1);
  EXPECT_FALSE(verbose());
  setenv("CONVBWD_VERBOSE", "1", 1);
  EXPECT_TRUE(verbose());
  unsetenv("CONVBWD_VERBOSE");
  EXPECT_FALSE(verbose());
}

TEST(Env, ChoiceListsTheWords) {
  setenv("CONVBWD_TEST_ENV_CHOICE", "b", 1);
  EXPECT_EQ(env_choice("CONVBWD_TEST_ENV_CHOICE", {"a", "b", "c"}), 1);
  setenv("CONVBWD_TEST_ENV_CHOICE", "d\x1b", 1);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(env_choice("CONVBWD_TEST_ENV_CHOICE", {"a", "b", "c"}));
  // The escape byte is shown, not sent to the terminal.
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "convbwd: CONVBWD_TEST_ENV_CHOICE=d\\x1b is invalid; expected a, b or c\n");
  unsetenv("CONVBWD_TEST_ENV_CHOICE");
}

TEST(Env, NumThreadsFromTheEnvironmentIsStrict) {
  convbwd::set_num_threads(0);
  for (const char* bad : {"abc", "0", "-1", "2x", "99999"}) {
    setenv("CONVBWD_NUM_THREADS", bad, 1);
    testing::internal::CaptureStderr();
    (void)convbwd::num_threads();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(std::string("CONVBWD_NUM_THREADS=") + bad + " is invalid; expected an integer from 1 to 256"),
              std::string::npos)
        << bad << ": " << err;
  }
  setenv("CONVBWD_NUM_THREADS", "1", 1);
  EXPECT_EQ(convbwd::num_threads(), 1);
  unsetenv("CONVBWD_NUM_THREADS");
}

TEST(Env, SetNumThreadsRefusesANegativeCountAndChangesNothing) {
  convbwd::set_num_threads(1);
  ASSERT_EQ(convbwd::num_threads(), 1);
  testing::internal::CaptureStderr();
  convbwd::set_num_threads(-3);
  convbwd::set_num_threads(100000);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("convbwd::set_num_threads(-3) is invalid; expected 0 (the default) or a thread count from 1 to 256"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("set_num_threads(100000) is invalid"), std::string::npos) << err;
  EXPECT_EQ(convbwd::num_threads(), 1) << "a refused call changed the thread count";
  convbwd::set_num_threads(0);
}

}  // namespace
}  // namespace convbwd::detail
