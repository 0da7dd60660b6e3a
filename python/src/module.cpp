// The Python extension convbwd._convbwd: a thin layer over the C++ API. The
// Python package (python/convbwd/__init__.py) reads the tensors' pointers,
// shapes and strides, caches plans and allocates the outputs; this file only
// turns plain numbers into a Problem, plans it and executes it without the
// GIL. Nothing here copies tensor data.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "convbwd/convbwd.hpp"
#include "problem/spec.hpp"
#include "reference/reference.hpp"

namespace py = pybind11;

namespace {

using Dims = std::vector<int64_t>;
// (dtype code, dims, strides in elements): what the package passes for a tensor.
using Desc = std::tuple<int, Dims, Dims>;

convbwd::TensorDesc to_desc(const Desc& d) {
  convbwd::TensorDesc t;
  t.dtype = static_cast<convbwd::DataType>(std::get<0>(d));
  t.dims = std::get<1>(d);
  t.strides = std::get<2>(d);
  // The package passes each tensor's first element as its pointer, so the
  // offset is already applied and plans do not depend on it.
  t.offset = 0;
  return t;
}

// A failure reported to Python as (status, message); the package raises
// convbwd.Error from it, so the exception class lives in one place.
py::tuple failure(const convbwd::Error& e) { return py::make_tuple(static_cast<int>(e.status), e.message); }

// Scratch memory for execute, one growing buffer per thread: a training loop
// then allocates once, and plans executing from several threads at once
// (the C++ API allows it) never share a workspace.
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
  ~Workspace() { ::operator delete(data, std::align_val_t(64)); }
  void* reserve(size_t n) {
    if (n > bytes) {
      ::operator delete(data, std::align_val_t(64));
      data = nullptr;
      bytes = 0;
      data = ::operator new(n, std::align_val_t(64));
      bytes = n;
    }
    return data;
  }
};

Workspace& thread_workspace() {
  thread_local Workspace w;
  return w;
}

convbwd::Buffers buffers(uintptr_t go, uintptr_t in, uintptr_t w, uintptr_t gi, uintptr_t gw, uintptr_t gb) {
  convbwd::Buffers b;
  b.grad_output = reinterpret_cast<const void*>(go);
  b.input = reinterpret_cast<const void*>(in);
  b.weight = reinterpret_cast<const void*>(w);
  b.grad_input = reinterpret_cast<void*>(gi);
  b.grad_weight = reinterpret_cast<void*>(gw);
  b.grad_bias = reinterpret_cast<void*>(gb);
  return b;
}

convbwd::Error execute_plan(const convbwd::Plan& plan, const convbwd::Buffers& b) {
  const size_t need = plan.workspace_size();
  void* ws = nullptr;
  if (need > 0) {
    try {
      ws = thread_workspace().reserve(need);
    } catch (const std::bad_alloc&) {
      return {convbwd::Status::runtime_error,
              "workspace of " + std::to_string(need) + " bytes could not be allocated"};
    }
  }
  return plan.execute(b, ws, need);
}

// The library's fp64 reference on the plan's problem: every output element
// computed on its own and rounded once. Slow (plain loops, one thread); for
// golden data and tests. The operand roles are those Plan::execute binds.
convbwd::Error run_reference(const convbwd::Plan& plan, const convbwd::Buffers& b) {
  const convbwd::Problem& p = plan.problem();
  auto spec = convbwd::detail::validate(p);
  if (!spec) return spec.error();
  // An empty tensor may have a null pointer (torch's do): the loops never
  // read or write it.
  const auto empty = [](const std::vector<int64_t>& dims) {
    for (int64_t d : dims)
      if (d == 0) return true;
    return false;
  };
  const std::pair<const void*, const convbwd::TensorDesc*> operands[] = {
      {b.grad_output, &p.grad_output}, {b.input, &p.input}, {b.weight, &p.weight}};
  for (const auto& [ptr, desc] : operands)
    if (!ptr && !empty(desc->dims))
      return {convbwd::Status::null_pointer, "reference: an operand pointer is null; expected gradOutput, input and weight"};
  void* dst[3] = {b.grad_input, b.grad_weight, b.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto g = static_cast<convbwd::Gradient>(i);
    if (empty(p.gradient_dims(g))) continue;
    if (!dst[i]) return {convbwd::Status::null_pointer, "reference: a requested output's pointer is null"};
    const void* a = b.grad_output;
    const void* second = b.weight;
    if (g == convbwd::Gradient::weight) {
      a = p.transposed ? b.input : b.grad_output;
      second = p.transposed ? b.grad_output : b.input;
    }
    convbwd::detail::reference_run(spec->op_for(g), a, second, dst[i]);
  }
  return {};
}

// Whether this thread held the GIL during its last execute, for the test
// that proves it does not (a check from outside would be a timing race).
thread_local bool last_execute_held_gil = false;

py::object create_plan(const Desc& grad_output, const Desc& input, const Desc& weight,
                       const std::optional<Desc>& grad_input, const std::optional<Desc>& grad_weight,
                       const std::optional<Desc>& grad_bias, const std::optional<Dims>& bias_sizes,
                       const Dims& stride, const Dims& padding_before, const Dims& padding_after,
                       const Dims& dilation, bool transposed, const Dims& output_padding, int64_t groups,
                       const std::array<bool, 3>& output_mask, int math_mode) {
  convbwd::Problem p;
  p.grad_output = to_desc(grad_output);
  p.input = to_desc(input);
  p.weight = to_desc(weight);
  if (grad_input) p.grad_input = to_desc(*grad_input);
  if (grad_weight) p.grad_weight = to_desc(*grad_weight);
  if (grad_bias) p.grad_bias = to_desc(*grad_bias);
  p.bias_sizes = bias_sizes;
  p.stride = stride;
  p.padding_before = padding_before;
  p.padding_after = padding_after;
  p.dilation = dilation;
  p.transposed = transposed;
  p.output_padding = output_padding;
  p.groups = groups;
  p.output_mask = output_mask;
  p.math_mode = static_cast<convbwd::MathMode>(math_mode);
  auto plan = convbwd::Plan::create(p);
  if (!plan) return failure(plan.error());
  return py::cast(std::move(plan).value());
}

}  // namespace

PYBIND11_MODULE(_convbwd, m) {
  m.doc() = "convbwd's C++ API, as the convbwd package uses it (not a public interface)";
  m.attr("__version__") = CONVBWD_VERSION;

  py::class_<convbwd::Plan>(m, "Plan")
      .def("execute",
           [](const convbwd::Plan& plan, uintptr_t go, uintptr_t in, uintptr_t w, uintptr_t gi, uintptr_t gw,
              uintptr_t gb) -> py::object {
             convbwd::Error e;
             {
               py::gil_scoped_release unlocked;
               last_execute_held_gil = PyGILState_Check() != 0;
               e = execute_plan(plan, buffers(go, in, w, gi, gw, gb));
             }
             if (e) return failure(e);
             return py::none();
           })
      .def("reference",
           [](const convbwd::Plan& plan, uintptr_t go, uintptr_t in, uintptr_t w, uintptr_t gi, uintptr_t gw,
              uintptr_t gb) -> py::object {
             convbwd::Error e;
             {
               py::gil_scoped_release unlocked;
               e = run_reference(plan, buffers(go, in, w, gi, gw, gb));
             }
             if (e) return failure(e);
             return py::none();
           })
      // Seconds per execute, timed in C++ over `repeats` calls: the baseline
      // the per-call overhead of the Python path is measured against.
      .def("_time_execute",
           [](const convbwd::Plan& plan, uintptr_t go, uintptr_t in, uintptr_t w, uintptr_t gi, uintptr_t gw,
              uintptr_t gb, int repeats) -> double {
             py::gil_scoped_release unlocked;
             const convbwd::Buffers b = buffers(go, in, w, gi, gw, gb);
             const auto t0 = std::chrono::steady_clock::now();
             for (int i = 0; i < repeats; ++i) (void)execute_plan(plan, b);
             const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
             return dt.count() / std::max(repeats, 1);
           })
      .def("gradient_dims",
           [](const convbwd::Plan& plan, int g) { return plan.problem().gradient_dims(static_cast<convbwd::Gradient>(g)); })
      .def("gradient_dtype",
           [](const convbwd::Plan& plan, int g) {
             return static_cast<int>(plan.problem().gradient_dtype(static_cast<convbwd::Gradient>(g)));
           })
      .def("implementation",
           [](const convbwd::Plan& plan, int g) {
             return std::string(plan.implementation(static_cast<convbwd::Gradient>(g)));
           })
      .def_property_readonly("workspace_size", &convbwd::Plan::workspace_size)
      .def_property_readonly("flops", &convbwd::Plan::flops)
      .def_property_readonly("descriptor", [](const convbwd::Plan& plan) { return plan.problem().descriptor(); });

  m.def("create_plan", &create_plan,
        "Plans a problem: returns a Plan, or (status, message) when the problem is invalid");
  m.def("_last_execute_held_gil", [] { return last_execute_held_gil; });
  m.def("set_num_threads", &convbwd::set_num_threads);
  m.def("num_threads", &convbwd::num_threads);
  m.def("isa", [] { return std::string(convbwd::isa()); });
}
