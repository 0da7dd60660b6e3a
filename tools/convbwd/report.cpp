#include "report.hpp"

#include <cstdio>

namespace convbwd::cli {

std::string repro_line(Mode mode, const std::string& descriptor, const Options& o) {
  std::string s = "repro: convbwd --mode=" + std::string(to_string(mode)) + " " + descriptor;
  if (mode == Mode::data) {
    s += " --gradOutput=" + o.grad_output_path;
    if (!o.input_path.empty()) s += " --input=" + o.input_path;
    if (!o.weight_path.empty()) s += " --weight=" + o.weight_path;
    s += " --out-dir=" + o.out_dir;
  }
  if (mode == Mode::check || mode == Mode::all) {
    s += " --seed=" + std::to_string(o.seed);
    if (o.fill == Fill::small_ints) s += " --fill=ints";
    if (o.check_all) s += " --check-all";
  }
  if ((mode == Mode::perf || mode == Mode::all) && o.repeats) s += " --repeats=" + std::to_string(*o.repeats);
  if ((mode == Mode::perf || mode == Mode::all) && o.cold_cache) s += " --cold-cache";
  if (o.threads) s += " --threads=" + std::to_string(*o.threads);
  return s;
}

std::string format_dims(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string format_ms(double ms) {
  char buf[32];
  if (ms >= 100) std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  else if (ms >= 1) std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  else std::snprintf(buf, sizeof buf, "%.4f ms", ms);
  return buf;
}

std::string format_count(double v) {
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.3gG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

const char* gradient_name(Gradient g) {
  switch (g) {
    case Gradient::input: return "gradInput";
    case Gradient::weight: return "gradWeight";
    case Gradient::bias: return "gradBias";
  }
  return "?";
}

void print_error(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message.c_str());
}

}  // namespace convbwd::cli
