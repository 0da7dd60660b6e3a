// The seam between planning and algorithms. Each algorithm family (one folder
// under src/impl/) offers Implementations; planning walks the ordered list for
// an operation and takes the first that accepts the problem.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "problem/spec.hpp"
#include "runtime/cpu.hpp"

namespace convbwd::detail {

class ThreadPool;

// What a kernel that OpKernel::reports_nonfinite() found while it read its
// operands: whether an element of a, or of b, was NaN or +-Inf after operand
// rounding.
struct NonfiniteFound {
  bool a = false;
  bool b = false;
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
  // Set (with zero_nonfinite false) only for a kernel that
  // reports_nonfinite(): run() fills it in for the elements it read.
  NonfiniteFound* found = nullptr;
};

struct PlanContext {
  Isa isa = Isa::scalar;
  int threads = 1;
};

// An implementation planned for one OpSpec: tiling chosen, workspace sized.
// run() is const and may be called from several threads at once with
// different workspaces.
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual size_t workspace_bytes() const { return 0; }
  virtual void run(const OpArgs&, ThreadPool&) const = 0;
  // Whether run() can check its own fp32 copies of the operands for NaN and
  // +-Inf as it makes them (OpArgs::found). Execute then skips its separate
  // scan, a whole extra read of each operand (15% of a depthwise layer, which
  // is bound by memory), and runs the kernel a second time, with
  // zero_nonfinite, only when something was found. Such a kernel must write
  // every element of dst on each run, so that the second run leaves nothing
  // of the first.
  virtual bool reports_nonfinite() const { return false; }
};

struct Implementation {
  std::string_view name;
  // A planned kernel, or nullptr with *why_not saying why it declines.
  std::unique_ptr<OpKernel> (*plan)(const OpSpec&, const PlanContext&, std::string* why_not);
};

// The ordered list for an operation: fastest first, the reference last (it
// accepts everything).
std::span<const Implementation> implementations(Op);

// Reduction length of an operation (0: every output is an empty sum).
int64_t reduction_length(const OpSpec&);

}  // namespace convbwd::detail
