// The seam between planning and algorithms. Each algorithm family (one folder
// under src/impl/) offers Implementations; planning walks the ordered list for
// an operation and takes the first that accepts the problem.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "problem/spec.hpp"
#include "runtime/cpu.hpp"

namespace convbwd::detail {

class ThreadPool;

// What a NonfiniteMode::report kernel found while it read its operands:
// whether an element of a, or of b, was NaN or +-Inf after operand rounding.
struct NonfiniteFound {
  bool a = false;
  bool b = false;
};

// How a NonfiniteMode::report kernel gathers that answer from its tasks, on
// any thread: an OR, so the same whatever the schedule.
class NonfiniteSeen {
 public:
  void add(bool a, bool b) {
    if (a) a_.store(true, std::memory_order_relaxed);
    if (b) b_.store(true, std::memory_order_relaxed);
  }
  // Writes the answer where OpArgs::found asks for one.
  void report(NonfiniteFound* found) const {
    if (found) *found = NonfiniteFound{a_.load(), b_.load()};
  }

 private:
  std::atomic<bool> a_{false}, b_{false};
};

// Buffers of one operation, as in OpSpec (a, b operands; dst output), plus the
// workspace the kernel asked for (64-byte aligned when the caller's is).
struct OpArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* dst = nullptr;
  std::byte* workspace = nullptr;
  // Set when a or b holds NaN or +-Inf (after operand rounding): read every
  // such element as 0; execute then adds their products through real taps
  // (src/impl/nonfinite/nonfinite.hpp). An implementation that multiplies
  // zero-filled padding must honour it; one that skips missing taps the way
  // the reference does may ignore it.
  bool zero_nonfinite = false;
  // Set (with zero_nonfinite false) only for a NonfiniteMode::report
  // kernel: run() fills it in for the elements it read.
  NonfiniteFound* found = nullptr;
};

// What execute does about NaN and +-Inf for a kernel:
enum class NonfiniteMode {
  // Scans the operands first (a whole extra read of each) and, if it finds
  // any, runs the kernel with zero_nonfinite and then the event pass.
  scan,
  // Runs the kernel with OpArgs::found: the kernel checks its own fp32 copies
  // of the operands as it makes them, in cache, and execute runs it again
  // with zero_nonfinite only when it found something. Such a kernel writes
  // every element of dst on each run, so the second run leaves nothing of
  // the first. (The scan was 15% of a depthwise layer, bound by memory.)
  report,
  // Nothing: the kernel sums exactly the reference's products, never one
  // with a zero that stands for padding, so IEEE arithmetic already gives
  // the reference's NaN and Inf.
  native,
};

struct PlanContext {
  Isa isa = Isa::scalar;
  int threads = 1;
  // Multiple of the largest input's size that the workspace budget
  // (operand_access.hpp) allows: 1, or kRelaxedBudgetScale when the
  // planner's first pass found nothing but the reference (plan.cpp).
  int budget_scale = 1;
  // The last-level cache's bytes (CpuFeatures::llc_bytes): an output that
  // fits in a fraction of it is written with ordinary stores, which leave it
  // there for whatever reads it next; a larger one streams past the cache.
  // 0 (unknown) streams.
  int64_t llc_bytes = 0;
  // CpuFeatures::zmm_in_halves: the planners' shape choices that depend on
  // how the CPU runs 512-bit operations read it here, so that tests can
  // plan for either kind.
  bool zmm_in_halves = false;
};
constexpr int kRelaxedBudgetScale = 8;

// An implementation planned for one OpSpec: tiling chosen, workspace sized.
// run() is const and may be called from several threads at once with
// different workspaces.
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual size_t workspace_bytes() const { return 0; }
  virtual void run(const OpArgs&, ThreadPool&) const = 0;
  // How run() meets NaN and +-Inf in its operands (see
  // src/impl/nonfinite/nonfinite.hpp for the one semantics every path keeps).
  virtual NonfiniteMode nonfinite_mode() const { return NonfiniteMode::scan; }
  // Whether run() calls the tier's kernels (kernels/config.hpp): the name a
  // plan reports then carries the tier, "gemm_wgrad_nhwc:avx512". The
  // reference, the zero fill and the fp8 loops are plain C++ on every tier.
  virtual bool uses_tier_kernels() const { return true; }
};

struct Implementation {
  std::string_view name;
  // A planned kernel, or nullptr with *why_not saying why it declines.
  std::unique_ptr<OpKernel> (*plan)(const OpSpec&, const PlanContext&, std::string* why_not);
};

// The ordered list for an operation: fastest first, the reference last (it
// accepts everything).
std::span<const Implementation> implementations(Op);

// The operands and outputs of a FusedKernel: the problem's tensors, and the
// gradients it computes (gradInput, gradWeight, gradBias; null if not).
struct FusedArgs {
  const void* grad_output = nullptr;
  const void* input = nullptr;
  const void* weight = nullptr;
  std::array<void*, 3> dst{};
  std::byte* workspace = nullptr;
};

// One pass that computes several gradients of a plan together, so that the
// operand they share is read from memory once (depthwise layers are bound by
// memory: the data and weight gradients each read all of gradOutput). It is
// planned from the kernels the registry chose for each gradient, which stay
// in the plan: it checks its fp32 copies for NaN and +-Inf as it makes them
// (NonfiniteMode::report) and, if it finds any, execute runs those kernels
// instead, each with its own NaN handling, over whatever the pass wrote.
class FusedKernel {
 public:
  virtual ~FusedKernel() = default;
  virtual std::string_view name() const = 0;
  virtual size_t workspace_bytes() const = 0;
  // Which gradients run() computes (it writes every element of each).
  virtual std::array<bool, 3> covers() const = 0;
  // Returns false if it read a NaN or +-Inf: its outputs are then not final.
  virtual bool run(const FusedArgs&, ThreadPool&) const = 0;
};

// The fused pass for a plan's kernels (null where a gradient is not
// computed), or null when none applies.
std::unique_ptr<FusedKernel> plan_fused(const std::array<const OpKernel*, 3>& kernels);

// Reduction length of an operation (0: every output is an empty sum).
int64_t reduction_length(const OpSpec&);

}  // namespace convbwd::detail
