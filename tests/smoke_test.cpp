#include <gtest/gtest.h>

#include "util/tensor.hpp"

namespace convbwd::test {

TEST(Smoke, Sample2dAgainstReference) {
  auto p = Problem::parse("mb2ic3ih8oc4kh3ph1");
  ASSERT_TRUE(p) << p.error().message;
  auto c = check_against_reference(p.value());
  EXPECT_TRUE(c.pass) << c.first_failure;
}

}  // namespace convbwd::test
