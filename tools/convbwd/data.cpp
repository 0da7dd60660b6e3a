// Data mode: gradOutput/input/weight from .npy files, gradients to .npy files.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

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

// The sizes the .npy files say, as descriptor tokens: mb, oc and the output
// size from gradOutput, ic and the input size from input, the kernel from
// weight. Files that cannot be read say nothing here; load() reports them.
std::vector<std::pair<std::string, int64_t>> tokens_from_files(const Options& o) {
  std::vector<std::pair<std::string, int64_t>> t;
  auto spatial = [&](const std::vector<int64_t>& shape, const char* family) {
    static const char kDims[3] = {'d', 'h', 'w'};
    const size_t sp = shape.size() - 2;
    for (size_t i = 0; i < sp; ++i) t.emplace_back(std::string(family) + kDims[3 - sp + i], shape[2 + i]);
  };
  auto shape_of = [](const std::string& path) -> std::vector<int64_t> {
    if (path.empty()) return {};
    auto a = npy::read_file(path);
    return a && a->shape.size() >= 3 && a->shape.size() <= 5 ? a->shape : std::vector<int64_t>{};
  };
  if (const auto go = shape_of(o.grad_output_path); !go.empty()) {
    t.emplace_back("mb", go[0]);
    t.emplace_back("oc", go[1]);
    spatial(go, "o");
  }
  if (const auto in = shape_of(o.input_path); !in.empty()) {
    t.emplace_back("ic", in[1]);
    spatial(in, "i");
  }
  if (const auto w = shape_of(o.weight_path); !w.empty()) spatial(w, "k");
  return t;
}

// The descriptor with the files' sizes added for the tokens it lacks: each
// token the user gave wins (parse reports it as given twice, so it is left
// out of the additions and the parse tried again).
Result<Problem> parse_with_files(const std::string& given, const Options& o) {
  auto add = tokens_from_files(o);
  for (;;) {
    std::string prefix;
    for (const auto& [name, value] : add) prefix += name + std::to_string(value);
    auto parsed = Problem::parse(prefix.empty() ? given : prefix + "_" + given);
    if (parsed || prefix.empty()) return parsed;
    const std::string& m = parsed.error().message;
    const size_t at = m.find("': token '");
    const size_t end = at == std::string::npos ? at : m.find("' is given twice", at);
    if (end == std::string::npos) return Problem::parse(given);  // the user's own mistake, in their words
    const std::string twice = m.substr(at + 10, end - at - 10);
    const size_t before = add.size();
    std::erase_if(add, [&](const auto& tok) { return tok.first == twice; });
    if (add.size() == before) return Problem::parse(given);
  }
}

}  // namespace

Outcome run_data(const Options& o) {
  const std::string& given = o.descriptors.front();
  // The files give the shapes; the descriptor gives what they cannot (stride,
  // padding, dilation, groups, transposed, dtypes, mask), and may restate
  // sizes, which must then agree with the files.
  auto parsed = parse_with_files(given, o);
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
