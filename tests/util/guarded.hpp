// Guard-zone buffers for the reliability tests and the fuzzers: every buffer
// sits between poisoned guard zones, outputs start fully poisoned, and a check
// after the run finds any byte written outside the declared views (guards,
// the gap before the offset, and the holes inside strided views alike).
//
// Also the one oracle comparison that works on arbitrary caller views: the
// fp64 reference run on the same data, compared with tests/util's tolerance().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"

namespace convbwd::detail {
struct View;
}

namespace convbwd::test {

// Elements from the storage start to one past a validated view's furthest
// reach (0 for an empty view): what a buffer for it must hold.
int64_t storage_extent(const detail::View& v);
// The storage index of a view's element j in row-major order.
int64_t view_index(const detail::View& v, int64_t j);

// Guard bytes hold this value; output storage starts with it too. 0xCD as
// fp32 is -4.3e8 and as fp16/bf16 a large negative number: no plausible
// result, and never all-zero, so a stray memset or a stray zero store shows.
constexpr unsigned char kPoison = 0xCD;

// `bytes` of payload between two guard zones of kGuardBytes. The payload
// starts 64-byte aligned (as the C API's allocator gives) and the trailing
// guard starts right at its end, so a write one byte past the end is caught.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;
  GuardedBuffer() : GuardedBuffer(0) {}
  explicit GuardedBuffer(size_t bytes);
  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  // "" when both guards hold the poison; else which byte changed.
  std::string check_guards(const std::string& name) const;

 private:
  std::unique_ptr<unsigned char[]> block_;
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// Memory layout of a tensor view: the order of dims in memory (slowest
// first), a gap after each dim (holes inside the view) and an offset.
struct StridedLayout {
  std::vector<int> order;     // empty: row-major
  std::vector<int64_t> gaps;  // per dim; empty: none
  int64_t offset = 0;
};
// A random permutation, with gaps of 0..2 per dim and an offset 0..5 when
// `gaps` is set.
StridedLayout random_layout(int rank, bool gaps, std::mt19937_64& rng);
StridedLayout contiguous_layout();

// A tensor view into a guarded buffer holding exactly its storage (the
// elements up to the view's furthest reach).
struct GuardedTensor {
  TensorDesc desc;  // strides always explicit, storage_elements set
  GuardedBuffer buffer;

  void* data() { return buffer.data(); }
  const void* data() const { return buffer.data(); }
  int64_t elements() const;
  int64_t storage_index(int64_t i) const;  // of row-major view position i
  double at(int64_t i) const;
  void set(int64_t i, double v);  // rounded once into the dtype
  // Uniform in [-1, 1] (or small integers) into every view element.
  void fill_random(std::mt19937_64& rng, bool small_ints = false);
  // For outputs: "" when every byte outside the view (guards, holes, the
  // offset) still holds the poison.
  std::string check_outside_view(const std::string& name) const;
};

GuardedTensor make_guarded(DataType dtype, const std::vector<int64_t>& dims, const StridedLayout& layout);

// A copy of a buffer's bytes, to prove inputs were not written.
std::vector<unsigned char> snapshot(const GuardedTensor&);

// Compares every requested output in `b` against the fp64 reference run on
// the inputs in `b`, with the views of `p` (which must validate). Returns ""
// or the first mismatch, naming the gradient and the element.
std::string compare_with_reference(const Problem& p, const Buffers& b);

// The reference's value of every element of gradient g (row-major), rounded
// once into the gradient's dtype as the library must round it.
std::vector<double> reference_output(const Problem& p, const Buffers& b, Gradient g);

// Everything one guarded run needs: operands, outputs and workspace in
// guarded buffers, with the given layouts.
struct GuardedRun {
  Problem problem;  // with the operand and output descs filled in
  GuardedTensor grad_output, input, weight;
  GuardedTensor outs[3];
  std::vector<unsigned char> in_snapshots[3];
  std::unique_ptr<GuardedBuffer> pending_workspace;  // run_capi without synchronize
  Buffers buffers() const;
  // "" when guards, holes, inputs and values are all as they must be.
  std::string check() const;
};
// The output bits of every requested gradient, in row-major view order: what
// determinism and concurrency tests compare.
// `only`: one gradient (0, 1, 2) or all requested ones (-1).
std::vector<unsigned char> output_bits(const GuardedRun& r, int only = -1);

// Builds the tensors of `p` (which gives operand dims and dtypes; output
// descs are derived from the implied shapes) with random data; strided
// layouts are random permutations with holes.
GuardedRun make_guarded_run(const Problem& p, bool strided_inputs, bool strided_outputs, std::mt19937_64& rng);

// Runs r through Plan::execute with a guarded workspace of exactly
// workspace_size() bytes; "" or the first failure (error, guard, value).
std::string run_plan(GuardedRun& r);
// The same through aclnnConvolutionBackwardGetWorkspaceSize and
// aclnnConvolutionBackward on `stream` (an aclrtStream; null: the default
// stream), then aclrtSynchronizeStream. With check = false only runs (for
// callers that compare bits themselves); with synchronize = false it returns
// once the work is enqueued (the workspace is then leaked to the caller's
// care: it is parked in r and freed with it).
std::string run_capi(GuardedRun& r, void* stream, bool check = true, bool synchronize = true);

}  // namespace convbwd::test

namespace convbwd::test {

// Problems of every shape class the library distinguishes: every rank,
// normal and transposed, groups and depthwise, strides, dilation, padding
// (asymmetric too), 1x1, every dtype and precision mode, and empty ones.
// Shared by the guard, determinism and concurrency tests; small enough that
// the reference checks them quickly even under sanitizers.
std::vector<std::string> reliability_descriptors();

}  // namespace convbwd::test
