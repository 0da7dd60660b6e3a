#include "impl/nonfinite/nonfinite.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "impl/view_loops.hpp"
#include "numeric/float_formats.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail {
namespace {

// The smallest magnitude that rounds to Inf under `rounding` (Inf: only Inf
// and NaN are non-finite). fp16 rounds to nearest even: 65504 is the largest
// finite value and the midpoint 65520 ties up, to Inf. HF32 adds half of the
// 2^-11 quantum to the magnitude bits, so 0x7f7ff800 carries into Inf.
float overflow_limit(OperandRounding rounding) {
  switch (rounding) {
    case OperandRounding::none: return std::numeric_limits<float>::infinity();
    case OperandRounding::hf32: return std::bit_cast<float>(uint32_t{0x7f7ff800u});
    case OperandRounding::fp16: return 65520.0f;
  }
  return std::numeric_limits<float>::infinity();
}

// Any element of the run p[0], p[stride], ... (n elements) non-finite.
// Chunks of 1024 keep the inner loop free of early exits, so the compiler
// vectorizes it, while a hit still ends the scan soon.
template <class T, class Bad>
bool run_has(const T* p, int64_t stride, int64_t n, Bad bad) {
  constexpr int64_t kChunk = 1024;
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t i1 = std::min(n, i0 + kChunk);
    bool any = false;
    if (stride == 1)
      for (int64_t i = i0; i < i1; ++i) any |= bad(p[i]);
    else
      for (int64_t i = i0; i < i1; ++i) any |= bad(p[i * stride]);
    if (any) return true;
  }
  return false;
}

// Any element of the contiguous run p[0..n) with all exponent bits set
// (`exp`: the exponent mask, `one`: its lowest bit). (u & exp) + one carries
// into the sign bit exactly then, so the test is an OR of and/add results:
// a loop of constant trip count without branches, which GCC -O2 vectorizes
// (SSE2 suffices) where the compare-per-element form stayed scalar, 11% of a
// 1x1 convolution's execute.
template <class U>
bool contiguous_has_all_ones_exponent(const U* p, int64_t n, U exp, U one) {
  constexpr int64_t kChunk = 1024;
  const U sign = static_cast<U>(U{1} << (sizeof(U) * 8 - 1));
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    U any = 0;
    for (int64_t j = 0; j < kChunk; ++j) any = static_cast<U>(any | static_cast<U>((p[i + j] & exp) + one));
    if (any & sign) return true;
  }
  U any = 0;
  for (; i < n; ++i) any = static_cast<U>(any | static_cast<U>((p[i] & exp) + one));
  return (any & sign) != 0;
}

bool run_has_nonfinite(const void* base, DataType dt, int64_t start, int64_t stride, int64_t n, float limit) {
  switch (dt) {
    case DataType::f32: {
      const float* p = static_cast<const float*>(base) + start;
      if (std::isinf(limit) && stride == 1)
        return contiguous_has_all_ones_exponent(reinterpret_cast<const uint32_t*>(p), n, uint32_t{0x7f800000u},
                                                uint32_t{0x00800000u});
      if (std::isinf(limit))  // exponent all ones: Inf or NaN
        return run_has(reinterpret_cast<const uint32_t*>(p), stride, n,
                       [](uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u; });
      return run_has(p, stride, n, [limit](float v) { return !(std::fabs(v) < limit); });
    }
    case DataType::f16: {
      // fp16 values are below both rounding limits: only their own Inf/NaN.
      const auto* p = static_cast<const uint16_t*>(base) + start;
      if (stride == 1) return contiguous_has_all_ones_exponent(p, n, uint16_t{0x7c00u}, uint16_t{0x0400u});
      return run_has(p, stride, n, [](uint16_t u) { return (u & 0x7c00u) == 0x7c00u; });
    }
    case DataType::bf16: {
      const auto* p = static_cast<const uint16_t*>(base) + start;
      if (std::isinf(limit) && stride == 1)
        return contiguous_has_all_ones_exponent(p, n, uint16_t{0x7f80u}, uint16_t{0x0080u});
      if (std::isinf(limit)) return run_has(p, stride, n, [](uint16_t u) { return (u & 0x7f80u) == 0x7f80u; });
      return run_has(p, stride, n, [limit](uint16_t u) { return !(std::fabs(bf16_to_float(u)) < limit); });
    }
    case DataType::hif8:
    case DataType::f8e4m3:
      for (int64_t i = 0; i < n; ++i)
        if (!(std::fabs(load_as_float(base, start + i * stride, dt)) < limit)) return true;
      return false;
  }
  return false;
}

// Element index of (d0, d1, spatial) in a view of rank 2 + spatial.
struct Indexer {
  const View* v;
  int spatial;
  int64_t operator()(int64_t d0, int64_t d1, const std::array<int64_t, 3>& s) const {
    int64_t i = v->offset + d0 * v->strides[0] + d1 * v->strides[1];
    for (int d = 0; d < spatial; ++d) i += s[3 - spatial + d] * v->strides[2 + d];
    return i;
  }
};

// An operand as the reference reads it: decoded, then rounded.
struct Loader {
  const void* base;
  DataType dtype;
  OperandRounding rounding;
  double operator()(int64_t i) const {
    // The common dtypes inline: the event pass reads every operand element.
    const float v = dtype == DataType::f32    ? static_cast<const float*>(base)[i]
                    : dtype == DataType::bf16 ? bf16_to_float(static_cast<const uint16_t*>(base)[i])
                    : dtype == DataType::f16  ? f16_to_float(static_cast<const uint16_t*>(base)[i])
                                              : load_as_float(base, i, dtype);
    switch (rounding) {
      case OperandRounding::none: return v;
      case OperandRounding::hf32: return round_to_hf32(v);
      case OperandRounding::fp16: return round_to_fp16(v);
    }
    return v;
  }
};

template <class F>
void for_each_index(const std::array<int64_t, 3>& size, F&& f) {
  std::array<int64_t, 3> i{};
  for (i[0] = 0; i[0] < size[0]; ++i[0])
    for (i[1] = 0; i[1] < size[1]; ++i[1])
      for (i[2] = 0; i[2] < size[2]; ++i[2]) f(i);
}

// The three tensors of the normal geometry (x image side, y result side, w
// weights); one of them is the output, the other two the operands.
enum class Role { x, y, w };

}  // namespace

bool bf16_run_has_nonfinite(const uint16_t* p, int64_t n) {
  return contiguous_has_all_ones_exponent(p, n, uint16_t{0x7f80u}, uint16_t{0x0080u});
}

bool has_nonfinite(const void* base, const View& v, OperandRounding rounding, ThreadPool* pool, int threads) {
  if (v.empty()) return false;
  const float limit = overflow_limit(rounding);
  // A view whose elements fill a block of memory without holes, in any dim
  // order (contiguous, channels-last, ...), is scanned as one run: read once,
  // in memory order.
  {
    std::array<std::pair<int64_t, int64_t>, kMaxRank> ds{};  // (stride, dim)
    int m = 0;
    bool positive = true;
    for (int i = 0; i < v.rank; ++i)
      if (v.dims[i] != 1) {
        ds[static_cast<size_t>(m++)] = {v.strides[i], v.dims[i]};
        positive = positive && v.strides[i] > 0;
      }
    for (int i = 1; i < m; ++i)  // insertion sort by stride: at most five dims
      for (int j = i; j > 0 && ds[static_cast<size_t>(j)].first < ds[static_cast<size_t>(j - 1)].first; --j)
        std::swap(ds[static_cast<size_t>(j)], ds[static_cast<size_t>(j - 1)]);
    int64_t expect = 1;
    bool dense = positive;
    for (int i = 0; i < m && dense; ++i) {
      dense = ds[static_cast<size_t>(i)].first == expect;
      expect *= ds[static_cast<size_t>(i)].second;
    }
    if (dense) {
      const int64_t n = v.elements();
      // Chunks of at least 64K elements (below that a hand-off costs more
      // than the scan), four per thread against a busy neighbour.
      const int64_t chunks = pool && threads > 1 ? std::min<int64_t>(4 * threads, n >> 16) : 1;
      if (chunks <= 1) return run_has_nonfinite(base, v.dtype, v.offset, 1, n, limit);
      std::atomic<bool> found{false};
      pool->parallel_for(chunks, threads, [&](int64_t t, int) {
        const int64_t lo = n * t / chunks, hi = n * (t + 1) / chunks;
        if (!found.load(std::memory_order_relaxed) && run_has_nonfinite(base, v.dtype, v.offset + lo, 1, hi - lo, limit))
          found.store(true, std::memory_order_relaxed);
      });
      return found.load();
    }
  }
  // Otherwise runs along the dim of smallest stride, the others in any order.
  int inner = v.rank - 1;
  for (int i = 0; i < v.rank; ++i)
    if (v.dims[i] > 1 && (v.dims[inner] == 1 || std::abs(v.strides[i]) < std::abs(v.strides[inner]))) inner = i;
  View outer = v;
  outer.dims[static_cast<size_t>(inner)] = 1;
  const int64_t n = v.dims[static_cast<size_t>(inner)], stride = v.strides[static_cast<size_t>(inner)];
  bool found = false;
  for_each_element(outer, [&](int64_t start) {
    if (!found) found = run_has_nonfinite(base, v.dtype, start, stride, n, limit);
  });
  return found;
}

void add_nonfinite_terms(const OpSpec& op, const void* a, const void* b, void* dst, bool scan_a, bool scan_b,
                         ThreadPool& pool, int threads) {
  if (op.op == Op::bias) return;
  const Geometry& g = op.geo;
  const Space s = space_of(g);
  const int sp = g.spatial;

  // Which tensor each of a, b, dst is (see OpSpec's roles).
  Role ra = Role::y, rb = Role::w, rd = Role::x;
  if (op.op == Op::fwd) ra = Role::x, rb = Role::w, rd = Role::y;
  if (op.op == Op::bwd_weights) ra = Role::y, rb = Role::x, rd = Role::w;
  const View* view[3] = {};
  view[static_cast<int>(ra)] = &op.a;
  view[static_cast<int>(rb)] = &op.b;
  view[static_cast<int>(rd)] = &op.dst;
  const Indexer at[3] = {{view[0], sp}, {view[1], sp}, {view[2], sp}};
  const Loader load_a{a, op.a.dtype, op.rounding}, load_b{b, op.b.dtype, op.rounding};
  using Pos = std::array<int64_t, 3>;

  // Element indices of a, b and dst for one real tap: image n, group gr,
  // y channel k, x channel c, output position o, kernel tap r, image
  // position xi (= o*s - pad + r*d, inside the image).
  struct Tap {
    int64_t a, b, dst;
  };
  auto tap = [&](int64_t n, int64_t gr, int64_t k, int64_t c, const Pos& o, const Pos& r, const Pos& xi) {
    const int64_t idx[3] = {at[0](n, gr * g.c + c, xi), at[1](n, gr * g.k + k, o), at[2](gr * g.k + k, c, r)};
    return Tap{idx[static_cast<int>(ra)], idx[static_cast<int>(rb)], idx[static_cast<int>(rd)]};
  };

  // Calls f(tap) for every real tap through element (d0, d1, p) of the
  // tensor in `role`, until f returns false.
  auto for_each_tap = [&](Role role, int64_t d0, int64_t d1, const Pos& p, auto&& f) {
    auto each = [](const Pos& size, auto&& body) {  // false: stopped early
      Pos i{};
      for (i[0] = 0; i[0] < size[0]; ++i[0])
        for (i[1] = 0; i[1] < size[1]; ++i[1])
          for (i[2] = 0; i[2] < size[2]; ++i[2])
            if (!body(i)) return false;
      return true;
    };
    switch (role) {
      case Role::x: {  // x[n, g*C + c, xi]: every k and tap r whose output position o exists
        const int64_t n = d0, gr = d1 / g.c, c = d1 % g.c;
        for (int64_t k = 0; k < g.k; ++k)
          if (!each(s.k, [&](const Pos& r) {
                Pos o{};
                for (int d = 0; d < 3; ++d) {
                  const int64_t t = p[d] + s.pb[d] - r[d] * s.d[d];
                  if (t < 0 || t % s.s[d] != 0 || t / s.s[d] >= s.y[d]) return true;
                  o[d] = t / s.s[d];
                }
                return f(tap(n, gr, k, c, o, r, p));
              }))
            return;
        return;
      }
      case Role::y: {  // y[n, g*K + k, o]: every c and tap r whose image position exists
        const int64_t n = d0, gr = d1 / g.k, k = d1 % g.k;
        for (int64_t c = 0; c < g.c; ++c)
          if (!each(s.k, [&](const Pos& r) {
                Pos xi{};
                for (int d = 0; d < 3; ++d) {
                  xi[d] = p[d] * s.s[d] - s.pb[d] + r[d] * s.d[d];
                  if (xi[d] < 0 || xi[d] >= s.x[d]) return true;
                }
                return f(tap(n, gr, k, c, p, r, xi));
              }))
            return;
        return;
      }
      case Role::w: {  // w[g*K + k, c, r]: every image and output position o whose image position exists
        const int64_t gr = d0 / g.k, k = d0 % g.k, c = d1;
        for (int64_t n = 0; n < g.n; ++n)
          if (!each(s.y, [&](const Pos& o) {
                Pos xi{};
                for (int d = 0; d < 3; ++d) {
                  xi[d] = o[d] * s.s[d] - s.pb[d] + p[d] * s.d[d];
                  if (xi[d] < 0 || xi[d] >= s.x[d]) return true;
                }
                return f(tap(n, gr, k, c, o, p, xi));
              }))
            return;
        return;
      }
    }
  };

  // Calls f(d0, d1, p) for every element of the tensor in `role`.
  auto for_each_element_of = [&](Role role, auto&& f) {
    const View& v = *view[static_cast<int>(role)];
    Pos size{1, 1, 1};
    for (int d = 0; d < sp; ++d) size[static_cast<size_t>(3 - sp + d)] = v.dims[static_cast<size_t>(2 + d)];
    for (int64_t d0 = 0; d0 < v.dims[0]; ++d0)
      for (int64_t d1 = 0; d1 < v.dims[1]; ++d1) for_each_index(size, [&](const Pos& p) { f(d0, d1, p); });
  };
  // Taps through one element of a tensor (an upper bound: padding cuts some).
  auto fan = [&](Role role) {
    return role == Role::x ? g.k * s.taps() : role == Role::y ? g.c * s.taps() : g.n * s.y_pixels();
  };

  const DataType dt = op.dst.dtype;
  auto add = [&](int64_t d, double term) {
    store_from_double(dst, d, dt, static_cast<double>(load_as_float(dst, d, dt)) + term);
  };

  // Two ways to visit the same terms.
  // Sparse: from each non-finite operand element through its taps (cost:
  // their count times their fan-out; a product of two non-finite factors is
  // added twice, which changes nothing).
  // Dense: from each output through its taps, stopping at the first NaN
  // term (nothing changes a NaN): all-NaN operands cost about one tap per
  // output; the worst case (every term +-Inf of one sign) is one plain loop
  // version of the operation.
  const Role roles[2] = {ra, rb};
  const Loader* loads[2] = {&load_a, &load_b};
  const void* bases[2] = {a, b};
  const bool scanned[2] = {scan_a, scan_b};
  // Calls f(d0, d1, p, value) for every non-finite element of operand
  // `which` until f returns false; planes (d0, d1) without any are skipped
  // by the vectorized scan, so a few NaNs cost little more than that scan.
  auto for_each_event = [&](int which, auto&& f) {
    bool go = true;
    const Role role = roles[which];
    const Indexer& idx = at[static_cast<int>(role)];
    const Loader& load = *loads[which];
    const View& v = *view[static_cast<int>(role)];
    Pos size{1, 1, 1};
    for (int d = 0; d < sp; ++d) size[static_cast<size_t>(3 - sp + d)] = v.dims[static_cast<size_t>(2 + d)];
    for (int64_t d0 = 0; d0 < v.dims[0] && go; ++d0)
      for (int64_t d1 = 0; d1 < v.dims[1] && go; ++d1) {
        View plane = v;
        plane.offset += d0 * v.strides[0] + d1 * v.strides[1];
        plane.dims[0] = plane.dims[1] = 1;
        if (!has_nonfinite(bases[which], plane, op.rounding)) continue;
        for_each_index(size, [&](const Pos& p) {
          if (!go) return;
          const double e = load(idx(d0, d1, p));
          if (!std::isfinite(e)) go = f(d0, d1, p, e);
        });
      }
  };
  // The sparse cost, counted only as far as the choice needs.
  const double dense_cost = static_cast<double>(op.dst.elements()) * static_cast<double>(fan(rd));
  double sparse_cost = 0;
  for (int which = 0; which < 2; ++which)
    if (scanned[which]) {
      const auto cost = static_cast<double>(fan(roles[which]));
      for_each_event(which, [&](int64_t, int64_t, const Pos&, double) {
        sparse_cost += cost;
        return 4 * sparse_cost < dense_cost;
      });
    }

  // The dense pass's bound is rarely reached: once most outputs meet a NaN
  // early, it costs a few taps per output. So the sparse pass must be clearly
  // cheaper to be chosen (a quarter: all-NaN operands then go dense).
  if (4 * sparse_cost < dense_cost) {
    for (int which = 0; which < 2; ++which)
      if (scanned[which])
        for_each_event(which, [&](int64_t d0, int64_t d1, const Pos& p, double e) {
          for_each_tap(roles[which], d0, d1, p, [&](const Tap& t) {
            // A NaN event makes every term NaN: the other factor need not be read.
            add(t.dst, std::isnan(e) ? e : load_a(t.a) * load_b(t.b));
            return true;
          });
          return true;
        });
    return;
  }

  // What each operand holds: whether some element is NaN, +-Inf, zero,
  // positive, negative.
  struct Summary {
    bool nan = false, inf = false, zero = false, pos = false, neg = false;
  } sum[2];
  // Stops once the answer below is settled: a NaN anywhere (some term is
  // NaN), or every kind seen.
  auto summarize = [&](int which) {
    const Indexer& idx = at[static_cast<int>(roles[which])];
    Summary& m = sum[which];
    for_each_element_of(roles[which], [&](int64_t d0, int64_t d1, const Pos& p) {
      if (m.nan || (m.inf && m.zero && m.pos && m.neg)) return;
      const double v = (*loads[which])(idx(d0, d1, p));
      m.nan |= std::isnan(v);
      m.inf |= std::isinf(v);
      m.zero |= v == 0;
      m.pos |= v > 0;
      m.neg |= v < 0;
    });
  };
  summarize(0);
  if (!sum[0].nan) summarize(1);
  // When no term can be NaN and all non-finite terms have one sign, an
  // output's first non-finite term is its final state: the dense pass stops
  // there (every operand +Inf, say, costs one tap per output too).
  const Summary &sa = sum[0], &sb = sum[1];
  const bool nan_term = sa.nan || sb.nan || (sa.inf && sb.zero) || (sb.inf && sa.zero);
  const bool pos_term = (sa.pos && sb.pos) || (sa.neg && sb.neg);
  const bool neg_term = (sa.pos && sb.neg) || (sa.neg && sb.pos);
  const bool first_is_final = !nan_term && !(pos_term && neg_term);
  const Indexer& out = at[static_cast<int>(rd)];
  // Outputs are independent here (each gets one add of a state summed in a
  // fixed tap order), so planes of the output run in parallel: the bits do
  // not depend on which thread computes which plane.
  const View& dv = op.dst;
  Pos size{1, 1, 1};
  for (int d = 0; d < sp; ++d) size[static_cast<size_t>(3 - sp + d)] = dv.dims[static_cast<size_t>(2 + d)];
  pool.parallel_for(dv.dims[0] * dv.dims[1], threads, [&](int64_t plane, int) {
    const int64_t d0 = plane / dv.dims[1], d1 = plane % dv.dims[1];
    for_each_index(size, [&](const Pos& p) {
      double state = 0;  // the sum of the non-finite terms so far (0: none)
      for_each_tap(rd, d0, d1, p, [&](const Tap& t) {
        const double term = load_a(t.a) * load_b(t.b);
        if (!std::isfinite(term)) state += term;
        return !(std::isnan(state) || (first_is_final && std::isinf(state)));
      });
      if (!std::isfinite(state)) add(out(d0, d1, p), state);
    });
  });
}

bool every_tap_is_real(const Geometry& g) {
  const Space sp = space_of(g);
  for (int d = 0; d < 3; ++d) {
    if (sp.k[d] != 1 || sp.pb[d] != 0) return false;
    // Outputs read x at o*s: all inside x; and each x position i = o*s of the
    // data gradient maps back to an output o < y (outputPadding < s adds
    // x positions that no tap reaches, which get no term either way).
    if ((sp.y[d] - 1) * sp.s[d] > sp.x[d] - 1 || (sp.x[d] - 1) / sp.s[d] > sp.y[d] - 1) return false;
  }
  return true;
}

}  // namespace convbwd::detail
