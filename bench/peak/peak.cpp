// convbwd_peak: measures this machine's peaks, so that "% of peak" in the
// benchmark table is measured where it runs, never assumed.
//
//   convbwd_peak [--quick] [--threads N]
//
// Prints one machine-readable line per measurement (key=value, space
// separated), then a "summary" line that bench/run.py reads:
//   peak kernel=fp32_fma_avx2 threads=1 gflops=58.2
//   bandwidth kernel=triad threads=2 gbs=21.4
//   summary threads=2 fp32_gflops_per_core=... fp32_gflops=... bf16_gflops=... triad_gbs=...
// A kernel the CPU (or OS) lacks prints status=not_available instead.
#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "chain.hpp"

namespace convbwd::bench {
namespace {

struct Cpuid {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Cpuid cpuid(unsigned leaf, unsigned sub) {
  Cpuid r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Cpuid{};
  return r;
}

// XCR0: which register states the OS saves on a context switch. A CPU flag
// without OS support would fault on the first instruction.
uint64_t xcr0() {
  if (!(cpuid(1, 0).c & (1u << 27))) return 0;  // no OSXSAVE: xgetbv would fault
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool os_avx() { return (xcr0() & 0x6) == 0x6; }            // SSE and AVX state
bool os_avx512() { return (xcr0() & 0xe6) == 0xe6; }       // plus opmask and zmm state

std::string brand() {
  char s[49] = {};
  if (cpuid(0x80000000u, 0).a < 0x80000004u) return "unknown";
  for (unsigned i = 0; i < 3; ++i) {
    const Cpuid r = cpuid(0x80000002u + i, 0);
    std::memcpy(s + 16 * i, &r, 16);
  }
  std::string out(s);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  while (!out.empty() && out.front() == ' ') out.erase(out.begin());
  return out;
}

}  // namespace

bool cpu_has_avx2_fma() { return os_avx() && (cpuid(7, 0).b & (1u << 5)) && (cpuid(1, 0).c & (1u << 12)); }
bool cpu_has_avx512f() { return os_avx512() && (cpuid(7, 0).b & (1u << 16)); }
bool cpu_has_avx512bf16() {
  // vdpbf16ps on zmm needs AVX512_BF16 (leaf 7 sub-leaf 1, eax bit 5).
  return cpu_has_avx512f() && cpuid(7, 0).a >= 1 && (cpuid(7, 1).a & (1u << 5));
}

namespace {

using Clock = std::chrono::steady_clock;

// Runs body(thread) on `threads` threads released together; returns the wall
// time from the release until the last one finishes.
double timed_parallel(int threads, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      body(t);
    });
  while (ready.load() < threads) {
  }
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::atomic<float> g_sink{0};  // keeps every checksum alive

// Best GFLOP/s of `reps` runs of about `seconds` each on `threads` threads.
double measure_peak(const PeakKernel& k, int threads, double seconds, int reps) {
  // Calibrate the iteration count on one thread; this also warms up the core
  // (clocks, and the AVX-512 power licence on cores that have one).
  int64_t iters = 1 << 14;
  for (;;) {
    const auto t0 = Clock::now();
    g_sink.store(k.run(iters));
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > seconds / 8 || iters > (int64_t{1} << 40)) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / dt));
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double dt = timed_parallel(threads, [&](int) { g_sink.store(k.run(iters)); });
    best = std::max(best, k.flops_per_step * static_cast<double>(iters) * threads / dt * 1e-9);
  }
  return best;
}

// Stream-like bandwidth (McCalpin's copy and triad) on arrays well beyond the
// last-level cache, each thread on its own contiguous slice (first touched by
// that thread, so pages sit near it on NUMA machines). Bytes counted as
// STREAM does: copy 2 x 8 per element, triad 3 x 8 (write-allocate excluded).
struct Bandwidth {
  double copy = 0, triad = 0;
};

Bandwidth measure_bandwidth(int threads, size_t n, int reps) {
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  auto slice = [&](int t, size_t& lo, size_t& hi) {
    lo = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
    hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
  };
  timed_parallel(threads, [&](int t) {
    size_t lo, hi;
    slice(t, lo, hi);
    for (size_t i = lo; i < hi; ++i) {
      a[i] = 1.0;
      b[i] = 2.0;
      c[i] = 0.5;
    }
  });
  Bandwidth best;
  const double bytes = static_cast<double>(n) * sizeof(double);
  for (int r = 0; r < reps; ++r) {
    double dt = timed_parallel(threads, [&](int t) {
      size_t lo, hi;
      slice(t, lo, hi);
      for (size_t i = lo; i < hi; ++i) c[i] = a[i];
    });
    best.copy = std::max(best.copy, 2 * bytes / dt * 1e-9);
    dt = timed_parallel(threads, [&](int t) {
      size_t lo, hi;
      slice(t, lo, hi);
      for (size_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0 * c[i];
    });
    best.triad = std::max(best.triad, 3 * bytes / dt * 1e-9);
  }
  g_sink.store(static_cast<float>(a[n / 2] + c[n / 3]));
  return best;
}

int usage(const char* argv0, const char* why) {
  if (why) std::fprintf(stderr, "convbwd_peak: %s\n", why);
  std::fprintf(stderr,
               "usage: %s [--quick] [--threads N]\n"
               "  --quick      short runs (a smoke test; the figures are rough)\n"
               "  --threads N  threads of the all-core figures (default: all logical CPUs)\n",
               argv0);
  return why ? 2 : 0;
}

}  // namespace
}  // namespace convbwd::bench

int main(int argc, char** argv) {
  using namespace convbwd::bench;
  bool quick = false;
  int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 1024)
        return usage(argv[0], ("--threads " + std::string(argv[i]) + " is not a count in 1..1024").c_str());
      threads = static_cast<int>(v);
    } else if (arg == "--help" || arg == "-h") {
      return usage(argv[0], nullptr);
    } else {
      return usage(argv[0], ("unknown argument '" + arg + "'").c_str());
    }
  }
  const double seconds = quick ? 0.02 : 0.25;
  const int reps = quick ? 1 : 3;

  std::printf("cpu model=\"%s\" logical_cpus=%u avx2_fma=%s avx512f=%s avx512_bf16=%s amx_bf16=%s\n",
              brand().c_str(), std::thread::hardware_concurrency(), cpu_has_avx2_fma() ? "yes" : "no",
              cpu_has_avx512f() ? "yes" : "no", cpu_has_avx512bf16() ? "yes" : "no",
              cpu_has_amx_bf16() ? "yes" : "no");

  // The fp32 peak is the best FMA kernel the CPU runs; the bf16 peak is the
  // dot-product kernel where there is one, else the fp32 peak (bf16 is then
  // widened to fp32 and computed with FMAs).
  // The AMX tile peak comes last, so where the CPU has it, it is the bf16
  // peak (the amx tier's bf16 kernels run on it), never an estimate.
  const PeakKernel* kernels[] = {&fma_avx2_kernel(), &fma_avx512_kernel(), &dpbf16_avx512_kernel(),
                                 &tdpbf16_amx_kernel()};
  double fp32_1 = 0, fp32_n = 0, bf16_1 = 0, bf16_n = 0;
  const char* bf16_source = "fp32_fma";
  for (const PeakKernel* k : kernels) {
    if (!k->available()) {
      if (k == &tdpbf16_amx_kernel())
        std::printf("peak kernel=%s status=not_available note=\"unmeasured: no AMX on this CPU\"\n", k->name);
      else
        std::printf("peak kernel=%s status=not_available\n", k->name);
      continue;
    }
    const double one = measure_peak(*k, 1, seconds, reps);
    std::printf("peak kernel=%s threads=1 gflops=%.1f\n", k->name, one);
    std::fflush(stdout);
    const double all = threads > 1 ? measure_peak(*k, threads, seconds, reps) : one;
    if (threads > 1) std::printf("peak kernel=%s threads=%d gflops=%.1f\n", k->name, threads, all);
    std::fflush(stdout);
    if (std::strncmp(k->name, "fp32", 4) == 0 && all > fp32_n) {
      fp32_1 = one;
      fp32_n = all;
    } else if (std::strncmp(k->name, "bf16", 4) == 0) {
      bf16_1 = one;
      bf16_n = all;
      bf16_source = k->name;
    }
  }
  if (bf16_n == 0) {
    bf16_1 = fp32_1;
    bf16_n = fp32_n;
  }

  // 3 arrays of 64 MiB: twice a 32 MiB L3, so the figures are DRAM's. The
  // quick smoke test uses 16 MiB arrays to stay well under 2 s; its figures
  // may then come partly from cache.
  const size_t n = size_t{1} << (quick ? 21 : 23);
  Bandwidth bw1 = measure_bandwidth(1, n, quick ? 1 : 4);
  std::printf("bandwidth kernel=copy threads=1 gbs=%.1f\nbandwidth kernel=triad threads=1 gbs=%.1f\n", bw1.copy,
              bw1.triad);
  Bandwidth bwn = bw1;
  if (threads > 1) {
    bwn = measure_bandwidth(threads, n, quick ? 1 : 4);
    std::printf("bandwidth kernel=copy threads=%d gbs=%.1f\nbandwidth kernel=triad threads=%d gbs=%.1f\n", threads,
                bwn.copy, threads, bwn.triad);
  }
  std::printf(
      "summary threads=%d quick=%d fp32_gflops_per_core=%.1f fp32_gflops=%.1f bf16_gflops_per_core=%.1f "
      "bf16_gflops=%.1f bf16_source=%s copy_gbs=%.1f triad_gbs=%.1f\n",
      threads, quick ? 1 : 0, fp32_1, fp32_n, bf16_1, bf16_n, bf16_source, bwn.copy, bwn.triad);
  return 0;
}
