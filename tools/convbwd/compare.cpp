#include "compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "numeric/float_formats.hpp"
#include "numeric/tolerance.hpp"

namespace convbwd::cli {

double tolerance(DataType out, double ref, double sum_abs, int64_t n) {
  return detail::comparison_tolerance(out, ref, sum_abs, n);
}

std::string element_name(const char* name, const std::vector<int64_t>& dims, int64_t i) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(dims[d], 1);
    idx[d] = i % extent;
    i /= extent;
  }
  std::string s = std::string(name) + "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? "," : "") + std::to_string(idx[d]);
  return s + "]";
}

Comparison compare(const char* name, const HostTensor& got, const OracleResult& oracle, int64_t n, bool exact) {
  constexpr size_t kShown = 5;
  Comparison c;
  const DataType dt = got.dtype;
  auto note = [&](int64_t j, const std::string& what) {
    ++c.failures;
    if (c.first_failures.size() < kShown) c.first_failures.push_back(element_name(name, got.dims, j) + ": " + what);
  };
  for (const Shard& s : oracle.computed) {
    for (int64_t j = s.begin; j < s.end; ++j) {
      ++c.checked;
      const double want = detail::load_as_float(oracle.ref.data(), j, dt);
      const double have = got.at(j);
      char buf[200];
      if (std::isnan(want) || std::isnan(have) || std::isinf(want) || std::isinf(have)) {
        // Non-finite values must match exactly (NaN with NaN, Inf with the same Inf).
        const bool same = (std::isnan(want) && std::isnan(have)) || want == have;
        if (!same) {
          std::snprintf(buf, sizeof buf, "got %.9g, want %.9g", have, want);
          note(j, buf);
          c.worst_scaled_error = HUGE_VAL;
          c.worst_index = j;
        }
        continue;
      }
      const double sum_abs = oracle.sum_abs[static_cast<size_t>(j)];
      const double tol = tolerance(dt, want, sum_abs, n);
      const double err = std::fabs(have - want);
      const bool exact_needed = exact && dt == DataType::f32 && sum_abs < 0x1p24;
      if (err / tol > c.worst_scaled_error) {
        c.worst_scaled_error = err / tol;
        c.worst_index = j;
      }
      if (exact_needed ? err != 0 : err > tol) {
        std::snprintf(buf, sizeof buf, "got %.9g, want %.9g, error %.3g, tolerance %.3g%s", have, want, err, tol,
                      exact_needed ? " (exact expected)" : "");
        note(j, buf);
      }
    }
  }
  return c;
}

}  // namespace convbwd::cli
