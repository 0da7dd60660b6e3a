// The 6x16 fp32 microkernels alone, on one thread, by where their operands
// live. Each timed pass runs `tiles` kernel calls of `steps` reduction steps:
// one B panel (steps x 16 floats) shared by every call, as a packed weight
// block or x panel is, and each call's own A rows (6 x steps floats), read
// once, as a stream of output tiles reads them.
//
// Why: the dense layers reach 50-65% of the FMA peak while these kernels
// dominate their time (bench/RESULTS.md). This separates what the kernel can
// do with its operands in L1/L2 from what it does when they stream from
// further out, on whatever machine runs it. Compare with bench/peak's
// per-core figure.
//
// Usage: microkernel_cache [--tiles=N]    (ISA: the library's, CONVBWD_ISA)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "impl/gemm/common.hpp"
#include "runtime/cpu.hpp"

namespace {

using convbwd::detail::MicroArgs;
using convbwd::detail::MicroKernel;

// Best GFLOP/s of 20 passes.
double measure(const convbwd::detail::GemmKernels& k, bool gather, int64_t steps, int64_t tiles) {
  const MicroKernel kern = gather ? k.gather : k.strided;
  const int64_t kMr = gather ? k.gather_rows() : k.mr, kNr = k.nr;
  std::vector<float> a(static_cast<size_t>(tiles * steps * kMr + 64), 0.5f);
  std::vector<float> b(static_cast<size_t>(steps * kNr + 64), 0.25f);
  alignas(64) float acc[convbwd::detail::kMaxMr * convbwd::detail::kMaxNr];
  MicroArgs ka;
  const int64_t zero = 0;
  ka.a_off = &zero;
  ka.b_off = &zero;
  ka.len = &steps;
  ka.runs = 1;
  ka.as = kMr;  // strided: A packed [step][6]
  ka.bs = kNr;
  ka.b = b.data();
  ka.acc = acc;
  double best = 1e30;
  for (int pass = 0; pass < 20; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t t = 0; t < tiles; ++t) {
      float* const rows = a.data() + t * steps * kMr;
      if (gather)
        for (int i = 0; i < kMr; ++i) ka.a[i] = rows + i * steps;  // six rows of `steps` floats
      else
        ka.a[0] = rows;
      kern(ka);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * static_cast<double>(kMr * kNr * steps * tiles) / best * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tiles = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tiles=", 8) == 0) {
      tiles = std::max<int64_t>(1, std::atoll(argv[i] + 8));
    } else {
      std::fprintf(stderr, "usage: %s [--tiles=N]\n", argv[0]);
      return 2;
    }
  }
  const convbwd::detail::Isa isa = convbwd::detail::active_isa();
  const auto& k = convbwd::detail::kernel_config(isa).gemm;
  std::printf("# %s (isa %s), 1 thread, %lld tiles per pass; B shared by all tiles, A read once per tile\n", k.name,
              std::string(convbwd::detail::to_string(isa)).c_str(), static_cast<long long>(tiles));
  std::printf("%8s %10s %14s %12s %12s\n", "steps", "B KiB", "A KiB (all)", "gather GF/s", "strided GF/s");
  for (const int64_t steps : {256, 576, 1024, 2048, 4096, 16384}) {
    const double g = measure(k, true, steps, tiles);
    const double s = measure(k, false, steps, tiles);
    std::printf("%8lld %10.0f %14.0f %12.1f %12.1f\n", static_cast<long long>(steps),
                static_cast<double>(steps * k.nr * 4) / 1024.0, static_cast<double>(tiles * steps * k.mr * 4) / 1024.0, g,
                s);
  }
  return 0;
}
