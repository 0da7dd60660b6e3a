#include <cstdio>
#include "convbwd/convbwd.hpp"
int main(int argc, char** argv) {
  auto p = convbwd::Problem::parse(argc > 1 ? argv[1] : "mb4ic30ih80oc320kh3ph1");
  if (!p) { std::fprintf(stderr, "%s\n", p.error().message.c_str()); return 1; }
  auto plan = convbwd::Plan::create(p.value());
  if (!plan) { std::fprintf(stderr, "%s\n", plan.error().message.c_str()); return 1; }
  std::printf("%s ws=%zu flops=%g\n", plan->problem().descriptor().c_str(), plan->workspace_size(), plan->flops());
}
