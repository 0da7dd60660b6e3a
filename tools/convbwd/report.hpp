// What the CLI prints: repro lines, dims, times. Output goes to stdout,
// errors to stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"

namespace convbwd::cli {

// "repro: convbwd --mode=check mb4ic30ih80oc320kh3ph1 --seed=1": the one line
// that reruns a case, with every flag that changes its result.
std::string repro_line(Mode mode, const std::string& descriptor, const Options& options);

std::string format_dims(const std::vector<int64_t>& dims);
std::string format_ms(double ms);
std::string format_count(double v);  // 1.23e+06 -> "1.23M"
std::string format_exact(double v);  // the shortest text that reads back as v

const char* gradient_name(Gradient g);

// "f32" when all three agree, else "bf16:f32:f32" (gradOutput:input:weight),
// as the descriptor's _dt token spells them.
std::string dtype_text(DataType grad_output, DataType input, DataType weight);

// "1 thread", "2 threads": a count with its noun, plural unless it is 1.
std::string counted(int64_t n, const char* noun);

// "error: ..." on stderr (erasing the progress line first).
void print_error(const std::string& message);

}  // namespace convbwd::cli
