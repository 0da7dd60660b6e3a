// Data mode: gradOutput/input/weight from .npy files, gradients to .npy files.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "host.hpp"
#include "modes.hpp"
#include "npy.hpp"
#include "problem/spec.hpp"
#include "report.hpp"

namespace convbwd::cli {
namespace {

std::string accepted_descrs(DataType t) {
  switch (t) {
    case DataType::f32: return "<f4 (float32)";
    case DataType::f16: return "<f2 (float16)";
    case DataType::bf16: return "<u2 or <V2 (bf16 bit patterns)";
    case DataType::hif8:
    case DataType::f8e4m3: return "|u1 (8-bit float bit patterns)";
  }
  return "?";
}

// Reads one operand and checks it against what the descriptor implies.
Result<HostTensor> load(const std::string& path, const char* role, const TensorDesc& want, const std::string& desc) {
  auto a = npy::read_file(path);
  if (!a) return a.error();
  if (!npy::descr_holds(a->descr, want.dtype))
    return Error{Status::invalid_parameter,
                 path + ": dtype '" + a->descr + "' does not match " + role + " dtype " +
                     std::string(to_string(want.dtype)) + " of descriptor '" + desc + "'; expected " +
                     accepted_descrs(want.dtype) + " (or change the descriptor's _dt option)"};
  if (a->shape != want.dims)
    return Error{Status::invalid_parameter, path + ": shape " + npy::format_shape(a->shape) + " does not match " +
                                                role + " shape " + format_dims(want.dims) + " of descriptor '" + desc +
                                                "'"};
  HostTensor t;
  t.dtype = want.dtype;
  t.dims = want.dims;
  t.bytes = std::move(a->data);
  return t;
}

}  // namespace

Outcome run_data(const Options& o) {
  const std::string& given = o.descriptors.front();
  auto parsed = Problem::parse(given);
  if (!parsed) {
    print_error(parsed.error().message);
    return Outcome::error;
  }
  Problem p = parsed.value();
  const std::string& desc = given;
  auto fail = [&](const std::string& msg) {
    print_error(msg);
    std::printf("%s\n", repro_line(Mode::data, desc, o).c_str());
    return Outcome::error;
  };
  // Validate the descriptor before reading files, so its errors come first.
  if (auto spec = detail::validate(p); !spec) return fail(desc + ": " + spec.error().message);
  const bool need_input = p.output_mask[1], need_weight = p.output_mask[0];
  if (need_input && o.input_path.empty()) return fail("gradWeight is requested (mask) so --input=FILE.npy is needed");
  if (need_weight && o.weight_path.empty())
    return fail("gradInput is requested (mask) so --weight=FILE.npy is needed");

  HostTensor go, in, w;
  struct Operand {
    const std::string& path;
    const char* role;
    TensorDesc& desc;
    HostTensor& t;
  } operands[] = {{o.grad_output_path, "gradOutput", p.grad_output, go},
                  {o.input_path, "input", p.input, in},
                  {o.weight_path, "weight", p.weight, w}};
  for (Operand& op : operands) {
    if (op.path.empty()) continue;  // not needed by the mask; the descriptor gives its shape
    auto t = load(op.path, op.role, op.desc, desc);
    if (!t) return fail(t.error().message);
    op.t = std::move(t.value());
    op.desc = op.t.desc();
  }
  HostTensor outs[3];
  TensorDesc* out_desc[3] = {&p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    outs[i] = make_host(p.gradient_dtype(g), p.gradient_dims(g));
    *out_desc[i] = outs[i].desc();
  }
  auto plan = Plan::create(p);
  if (!plan) return fail(desc + ": " + plan.error().message);
  Workspace ws = make_workspace(plan->workspace_size());
  const Bound bound = bind(go, in, w, outs);
  const auto t0 = std::chrono::steady_clock::now();
  const Error e = plan->execute(bound.buffers, bound.sizes, ws.ptr.get(), ws.bytes);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (e) return fail(desc + ": execute failed: " + e.message);

  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return fail(o.out_dir + ": cannot create the output directory: " + ec.message());
  std::printf("data %s  (execute %s)\n", desc.c_str(), format_ms(ms).c_str());
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto g = static_cast<Gradient>(i);
    npy::Array a;
    a.descr = std::string(npy::descr_for(outs[i].dtype));
    a.shape = outs[i].dims;
    a.data = std::move(outs[i].bytes);
    const std::string path = (std::filesystem::path(o.out_dir) / (std::string(gradient_name(g)) + ".npy")).string();
    if (Error we = npy::write_file(path, a)) return fail(we.message);
    std::printf("  %-10s %-6s %-16s %-12s -> %s\n", gradient_name(g), std::string(to_string(outs[i].dtype)).c_str(),
                format_dims(a.shape).c_str(), std::string(plan->implementation(g)).c_str(), path.c_str());
  }
  std::printf("%s\n", repro_line(Mode::data, desc, o).c_str());
  return Outcome::pass;
}

}  // namespace convbwd::cli
