// convbwd: the backward pass of a convolution (gradInput, gradWeight, gradBias)
// on any CPU, with the numerics of CANN's aclnnConvolutionBackward.
//
// The data path is one-way:
//   Problem  --Plan::create-->  Plan (validated, algorithm chosen, workspace sized)
//            --Plan::execute--> gradients written into the caller's buffers.
// Nothing is validated after planning except the pointers bound at execute.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#if __cplusplus < 201703L
#error "convbwd/convbwd.hpp needs C++17 or later (the library is built as C++20)"
#endif

// The library is built with hidden visibility; the public C++ API is exported.
#define CONVBWD_API __attribute__((visibility("default")))

namespace convbwd {

// Status codes are CANN's aclnnStatus values, so the C API passes them through.
enum class Status : int32_t {
  ok = 0,
  null_pointer = 161001,       // ACLNN_ERR_PARAM_NULLPTR
  invalid_parameter = 161002,  // ACLNN_ERR_PARAM_INVALID
  runtime_error = 361001,      // ACLNN_ERR_RUNTIME_ERROR
  internal_error = 561000,     // ACLNN_ERR_INNER
};

// An error is a value: a status and a message naming the parameter, the value
// given and what was expected.
struct Error {
  Status status = Status::ok;
  std::string message;
  explicit operator bool() const { return status != Status::ok; }
};

// What value() throws on a Result that holds an Error: a programming error
// (test ok() first), reported with the error's own message, not as a bare
// std::bad_variant_access.
class CONVBWD_API BadResultAccess : public std::runtime_error {
 public:
  explicit BadResultAccess(Error e)
      : std::runtime_error("convbwd: value() of a failed Result: " + e.message), error_(std::move(e)) {}
  const Error& error() const { return error_; }

 private:
  Error error_;
};

// Either a value or an Error. Small on purpose: C++20 has no std::expected.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return check(), std::get<0>(v_); }
  const T& value() const& { return check(), std::get<0>(v_); }
  T&& value() && { return check(), std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  void check() const {
    if (!ok()) throw BadResultAccess(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
};

enum class DataType : int8_t {
  f32,
  f16,
  bf16,
  hif8,     // Huawei HiFloat8 (transposed gradInput only)
  f8e4m3,   // OCP FLOAT8_E4M3FN (transposed gradInput only)
};
CONVBWD_API std::string_view to_string(DataType);
CONVBWD_API size_t size_of(DataType);

// CANN's cubeMathType.
enum class MathMode : int8_t {
  keep_dtype = 0,
  allow_fp32_down_precision = 1,  // fp32 computations round inputs to HF32
  use_fp16 = 2,                   // fp32 and bf16 operands round to fp16 (gradBias: unrounded)
  use_hf32 = 3,                   // fp32 computations round inputs to HF32
};

// A tensor as seen by the library: element type, dims (N, C, spatial...) and a
// strided view into the caller's storage. Strides and offset count elements.
struct TensorDesc {
  DataType dtype = DataType::f32;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // empty: contiguous (row-major) strides
  int64_t offset = 0;
  // Elements the storage holds, when known; the view must stay inside it.
  // -1: unknown (the caller vouches for the buffer).
  int64_t storage_elements = -1;
};

enum class Gradient : int { input = 0, weight = 1, bias = 2 };

struct CONVBWD_API Problem {
  TensorDesc grad_output;
  TensorDesc input;
  TensorDesc weight;
  // Per spatial dim. padding_after empty: same as padding_before.
  std::vector<int64_t> stride;
  std::vector<int64_t> padding_before;
  std::vector<int64_t> padding_after;
  std::vector<int64_t> dilation;
  bool transposed = false;
  std::vector<int64_t> output_padding;  // empty: all zero
  int64_t groups = 1;
  std::array<bool, 3> output_mask = {true, true, true};  // gradInput, gradWeight, gradBias
  // [Cout]; may be absent when gradBias is not requested.
  std::optional<std::vector<int64_t>> bias_sizes;
  MathMode math_mode = MathMode::keep_dtype;
  // Output views. dims empty: the implied shape, contiguous, implied dtype.
  // Given dims and dtype must equal the implied ones.
  TensorDesc grad_input;
  TensorDesc grad_weight;
  TensorDesc grad_bias;
  // The descriptor's n"..." name, shown in reports; no effect on the result.
  std::string name;

  // The problem descriptor string: the one currency of tests, benchmarks and
  // bug reports. See README.md for the syntax.
  static Result<Problem> parse(std::string_view descriptor);
  std::string descriptor() const;
  // Shape of each gradient (the shape of input, weight and [Cout]).
  std::vector<int64_t> gradient_dims(Gradient) const;
  DataType gradient_dtype(Gradient) const;
};

// Buffers bound at execute. Each pointer is the start of the storage; a view's
// offset is applied on top. Unrequested outputs may be null.
struct Buffers {
  const void* grad_output = nullptr;
  const void* input = nullptr;
  const void* weight = nullptr;
  void* grad_input = nullptr;
  void* grad_weight = nullptr;
  void* grad_bias = nullptr;
};

// How many elements (of the view's dtype) each buffer of Buffers holds, from
// its pointer. execute checks every buffer it reads or writes against the
// largest element its view touches (offset + sum (dim-1)*stride, plus one).
// Unrequested outputs may be 0.
struct BufferSizes {
  int64_t grad_output = 0;
  int64_t input = 0;
  int64_t weight = 0;
  int64_t grad_input = 0;
  int64_t grad_weight = 0;
  int64_t grad_bias = 0;
};

namespace detail {
struct PlanState;
}

// The workspace's alignment that execute requires: what malloc, new and
// aclrtMalloc always give. The kernels keep fp32 values there.
inline constexpr size_t kWorkspaceAlignment = 16;

// A validated problem with its algorithms chosen and its workspace sized.
// Immutable after creation; execute may run from several threads at once.
class CONVBWD_API Plan {
 public:
  static Result<Plan> create(const Problem&);
  // Parses a descriptor and plans it: one Result to check, whose message
  // says what is wrong with the descriptor or with the problem it names.
  static Result<Plan> create(std::string_view descriptor);

  const Problem& problem() const;
  // Bytes of scratch memory execute needs, at an address that is a multiple
  // of kWorkspaceAlignment (64-byte alignment recommended).
  size_t workspace_size() const;
  // Name of the implementation chosen for a gradient ("" when not requested).
  std::string_view implementation(Gradient) const;
  // Floating-point operations of the requested gradients (2 per multiply-add).
  double flops() const;
  // Elements each buffer must hold for execute (0 for a buffer the plan
  // neither reads nor writes): allocate these, pass what you allocated.
  BufferSizes buffer_sizes() const;

  // Runs the plan. Checks the pointers, each buffer's size against its view
  // and the workspace (see check) before writing anything; allocates nothing
  // on the heap.
  Error execute(const Buffers&, const BufferSizes&, void* workspace, size_t workspace_bytes) const;
  // The same without the sizes: the caller vouches that every buffer holds
  // its view (the C API's contract, where tensors carry their storage size).
  Error execute(const Buffers&, void* workspace, size_t workspace_bytes) const;
  // What execute checks, without running: requested buffers and the
  // workspace are present, the workspace is large and aligned enough, and
  // no output or workspace byte is shared with another buffer.
  Error check(const Buffers&, const void* workspace, size_t workspace_bytes) const;

 private:
  explicit Plan(std::shared_ptr<const detail::PlanState> s) : s_(std::move(s)) {}
  // What both execute forms and check verify (sizes: null when not given).
  Error validate(const Buffers&, const BufferSizes*, const void* workspace, size_t workspace_bytes) const;
  // Runs a validated call.
  Error run(const Buffers&, void* workspace) const;
  std::shared_ptr<const detail::PlanState> s_;
};

// Threads used by plans created after the call (0: the default, which is the
// CONVBWD_NUM_THREADS environment variable or else the number of cores).
// Results are bit-identical for any thread count.
CONVBWD_API void set_num_threads(int);
CONVBWD_API int num_threads();

// The library's version, "MAJOR.MINOR.PATCH" (the CMake package's version).
CONVBWD_API std::string_view version();

// The instruction set in use: "avx512", "avx2" or "scalar". CONVBWD_ISA forces
// a lower one.
CONVBWD_API std::string_view isa();

}  // namespace convbwd
