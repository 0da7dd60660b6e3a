// convbwd_bench_info: one JSON line per descriptor with the problem the library
// parses from it and the plan it makes. bench/run.py builds its tensors from
// these shapes, so the descriptor grammar has one implementation only.
//
//   convbwd_bench_info [--threads N] DESCRIPTOR...
//
// A descriptor that does not parse or plan gives {"descriptor": ..., "error": ...}
// and the exit status 1 (after the other lines).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "convbwd/convbwd.hpp"

namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string json_ints(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    // Two appends, not const char* + std::string: GCC 12 at -O3 warns on the
    // latter (-Wrestrict false positive, GCC bug 105329).
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace convbwd;
  std::vector<std::string> descs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      set_num_threads(std::atoi(argv[++i]));
    } else {
      descs.push_back(arg);
    }
  }
  if (descs.empty()) {
    std::fprintf(stderr, "usage: %s [--threads N] DESCRIPTOR...\n", argv[0]);
    return 2;
  }
  int status = 0;
  for (const std::string& d : descs) {
    Result<Problem> p = Problem::parse(d);
    if (!p) {
      std::printf("{\"descriptor\":%s,\"error\":%s}\n", json_string(d).c_str(),
                  json_string(p.error().message).c_str());
      status = 1;
      continue;
    }
    const Problem& pr = p.value();
    // Planning time through the C++ API: the best of a few, after a first
    // call that pays for one-time setup (CPU detection, the thread pool).
    Result<Plan> plan = Plan::create(pr);
    if (!plan) {
      std::printf("{\"descriptor\":%s,\"error\":%s}\n", json_string(d).c_str(),
                  json_string(plan.error().message).c_str());
      status = 1;
      continue;
    }
    double best_us = 1e30;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      Result<Plan> again = Plan::create(pr);
      best_us = std::min(best_us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    const Plan& pl = plan.value();
    const auto pad_after = pr.padding_after.empty() ? pr.padding_before : pr.padding_after;
    const auto out_pad = pr.output_padding.empty() ? std::vector<int64_t>(pr.stride.size(), 0) : pr.output_padding;
    std::string line = "{\"descriptor\":" + json_string(d);
    line += ",\"canonical\":" + json_string(pr.descriptor());
    line += ",\"grad_output\":" + json_ints(pr.grad_output.dims);
    line += ",\"input\":" + json_ints(pr.input.dims);
    line += ",\"weight\":" + json_ints(pr.weight.dims);
    line += ",\"dtypes\":[" + json_string(to_string(pr.grad_output.dtype)) + "," +
            json_string(to_string(pr.input.dtype)) + "," + json_string(to_string(pr.weight.dtype)) + "]";
    line += ",\"gradient_dtypes\":[" + json_string(to_string(pr.gradient_dtype(Gradient::input))) + "," +
            json_string(to_string(pr.gradient_dtype(Gradient::weight))) + "," +
            json_string(to_string(pr.gradient_dtype(Gradient::bias))) + "]";
    line += ",\"stride\":" + json_ints(pr.stride);
    line += ",\"padding_before\":" + json_ints(pr.padding_before);
    line += ",\"padding_after\":" + json_ints(pad_after);
    line += ",\"dilation\":" + json_ints(pr.dilation);
    line += ",\"output_padding\":" + json_ints(out_pad);
    line += std::string(",\"transposed\":") + (pr.transposed ? "true" : "false");
    line += ",\"groups\":" + std::to_string(pr.groups);
    line += std::string(",\"mask\":[") + (pr.output_mask[0] ? "true" : "false") + "," +
            (pr.output_mask[1] ? "true" : "false") + "," + (pr.output_mask[2] ? "true" : "false") + "]";
    line += ",\"math\":" + std::to_string(static_cast<int>(pr.math_mode));
    line += ",\"flops\":" + std::to_string(pl.flops());
    line += ",\"workspace\":" + std::to_string(pl.workspace_size());
    line += ",\"implementations\":[" + json_string(pl.implementation(Gradient::input)) + "," +
            json_string(pl.implementation(Gradient::weight)) + "," + json_string(pl.implementation(Gradient::bias)) +
            "]";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", best_us);
    line += std::string(",\"plan_us\":") + buf;
    line += ",\"isa\":" + json_string(isa());
    line += ",\"threads\":" + std::to_string(num_threads()) + "}";
    std::printf("%s\n", line.c_str());
  }
  return status;
}
