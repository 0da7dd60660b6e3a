// Times Plan::execute for each descriptor by wall clock AND by process CPU
// time. On a shared, overloaded machine the wall clock measures the neighbours;
// GFLOP per CPU-second (summed over the library's threads) still measures the
// kernels. Usage: gemm_cpu_time [--threads=N] [--repeats=N] DESCRIPTOR...
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"

namespace {

double now(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<unsigned char> random_tensor(const convbwd::TensorDesc& d, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t v : d.dims) n *= v;
  const size_t es = convbwd::size_of(d.dtype);
  std::vector<unsigned char> b(static_cast<size_t>(n) * es);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float f = u(rng);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    if (es == 4) std::memcpy(&b[static_cast<size_t>(i) * 4], &f, 4);
    else {
      // bf16 truncation is a valid bf16; for fp16 use a small exact value.
      const uint16_t h = d.dtype == convbwd::DataType::bf16 ? static_cast<uint16_t>(bits >> 16)
                                                            : static_cast<uint16_t>(0x3800 + (i % 512));
      std::memcpy(&b[static_cast<size_t>(i) * 2], &h, 2);
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::vector<std::string> descs;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) convbwd::set_num_threads(std::atoi(argv[i] + 10));
    else if (std::strncmp(argv[i], "--repeats=", 10) == 0) repeats = std::atoi(argv[i] + 10);
    else descs.emplace_back(argv[i]);
  }
  std::mt19937 rng(1);
  for (const std::string& d : descs) {
    auto p = convbwd::Problem::parse(d);
    if (!p) {
      std::fprintf(stderr, "%s\n", p.error().message.c_str());
      return 2;
    }
    auto plan = convbwd::Plan::create(p.value());
    if (!plan) {
      std::fprintf(stderr, "%s\n", plan.error().message.c_str());
      return 2;
    }
    const convbwd::Problem& q = plan->problem();
    auto go = random_tensor(q.grad_output, rng), in = random_tensor(q.input, rng), w = random_tensor(q.weight, rng);
    std::vector<unsigned char> outs[3];
    for (int g = 0; g < 3; ++g) {
      int64_t n = 1;
      for (int64_t v : q.gradient_dims(static_cast<convbwd::Gradient>(g))) n *= v;
      outs[g].resize(static_cast<size_t>(n) * 4);
    }
    std::vector<unsigned char> ws(plan->workspace_size() + 64);
    void* wsp = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
    convbwd::Buffers b{go.data(), in.data(), w.data(), outs[0].data(), outs[1].data(), outs[2].data()};
    double best_wall = 1e30, best_cpu = 1e30;
    for (int r = 0; r <= repeats; ++r) {
      const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
      if (auto e = plan->execute(b, wsp, plan->workspace_size())) {
        std::fprintf(stderr, "%s\n", e.message.c_str());
        return 1;
      }
      const double w1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
      if (r == 0) continue;  // warm-up
      best_wall = std::min(best_wall, w1 - w0);
      best_cpu = std::min(best_cpu, c1 - c0);
    }
    const double gf = plan->flops() * 1e-9;
    std::printf("%-44s %-24s wall %8.2f ms %7.1f GFLOP/s | cpu %8.2f ms %7.1f GFLOP/cpu-s  ws %.1f MiB\n", d.c_str(),
                std::string(plan->implementation(q.output_mask[0] ? convbwd::Gradient::input : convbwd::Gradient::weight))
                    .c_str(),
                best_wall * 1e3, gf / best_wall, best_cpu * 1e3, gf / best_cpu,
                static_cast<double>(plan->workspace_size()) / (1 << 20));
  }
  return 0;
}
