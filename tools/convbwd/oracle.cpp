#include "oracle.hpp"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "impl/implementation.hpp"
#include "reference/reference.hpp"

namespace convbwd::cli {

using detail::Op;
using detail::OpSpec;
using detail::View;

View contiguous_view(const View& v, DataType dtype) {
  View c = v;
  c.dtype = dtype;
  c.offset = 0;
  int64_t s = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    c.strides[i] = s;
    s *= std::max<int64_t>(v.dims[i], 1);
  }
  return c;
}

std::vector<Shard> make_shards(const OpSpec& op, int64_t target) {
  std::vector<Shard> out;
  if (op.dst.empty()) return out;
  const detail::Geometry& g = op.geo;
  const View &a = op.a, &b = op.b, &d = op.dst;
  // Channels of the output per group, and how many (n, group) units precede
  // the channel split.
  auto chunk_for = [&](int64_t channels, int64_t units) {
    const int64_t per_unit = std::max<int64_t>(1, target / std::max<int64_t>(units, 1));
    return std::max<int64_t>(1, (channels + per_unit - 1) / per_unit);
  };
  switch (op.op) {
    case Op::fwd: {  // dst y [N, G*K, ...]: slice n, group, k
      const int64_t chunk = chunk_for(g.k, g.n * g.groups);
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t gr = 0; gr < g.groups; ++gr)
          for (int64_t k0 = 0; k0 < g.k; k0 += chunk) {
            const int64_t len = std::min(chunk, g.k - k0);
            Shard s{op, 0, 0};
            s.op.geo.n = 1;
            s.op.geo.groups = 1;
            s.op.geo.k = len;
            s.op.a.offset += n * a.strides[0] + gr * g.c * a.strides[1];
            s.op.a.dims[0] = 1;
            s.op.a.dims[1] = g.c;
            s.op.b.offset += (gr * g.k + k0) * b.strides[0];
            s.op.b.dims[0] = len;
            s.op.dst.offset += n * d.strides[0] + (gr * g.k + k0) * d.strides[1];
            s.op.dst.dims[0] = 1;
            s.op.dst.dims[1] = len;
            s.begin = s.op.dst.offset - d.offset;
            s.end = s.begin + len * d.strides[1];
            out.push_back(s);
          }
      break;
    }
    case Op::bwd_data: {  // dst x [N, G*C, ...]: slice n, group, c
      const int64_t chunk = chunk_for(g.c, g.n * g.groups);
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t gr = 0; gr < g.groups; ++gr)
          for (int64_t c0 = 0; c0 < g.c; c0 += chunk) {
            const int64_t len = std::min(chunk, g.c - c0);
            Shard s{op, 0, 0};
            s.op.geo.n = 1;
            s.op.geo.groups = 1;
            s.op.geo.c = len;
            s.op.a.offset += n * a.strides[0] + gr * g.k * a.strides[1];
            s.op.a.dims[0] = 1;
            s.op.a.dims[1] = g.k;
            s.op.b.offset += gr * g.k * b.strides[0] + c0 * b.strides[1];
            s.op.b.dims[0] = g.k;
            s.op.b.dims[1] = len;
            s.op.dst.offset += n * d.strides[0] + (gr * g.c + c0) * d.strides[1];
            s.op.dst.dims[0] = 1;
            s.op.dst.dims[1] = len;
            s.begin = s.op.dst.offset - d.offset;
            s.end = s.begin + len * d.strides[1];
            out.push_back(s);
          }
      break;
    }
    case Op::bwd_weights: {  // dst w [G*K, C, ...]: slice group, k
      const int64_t chunk = chunk_for(g.k, g.groups);
      for (int64_t gr = 0; gr < g.groups; ++gr)
        for (int64_t k0 = 0; k0 < g.k; k0 += chunk) {
          const int64_t len = std::min(chunk, g.k - k0);
          Shard s{op, 0, 0};
          s.op.geo.groups = 1;
          s.op.geo.k = len;
          s.op.a.offset += (gr * g.k + k0) * a.strides[1];
          s.op.a.dims[1] = len;
          s.op.b.offset += gr * g.c * b.strides[1];
          s.op.b.dims[1] = g.c;
          s.op.dst.offset += (gr * g.k + k0) * d.strides[0];
          s.op.dst.dims[0] = len;
          s.begin = s.op.dst.offset - d.offset;
          s.end = s.begin + len * d.strides[0];
          out.push_back(s);
        }
      break;
    }
    case Op::bias: {  // dst [channels]: slice channels
      const int64_t channels = a.dims[1];
      const int64_t chunk = chunk_for(channels, 1);
      for (int64_t c0 = 0; c0 < channels; c0 += chunk) {
        const int64_t len = std::min(chunk, channels - c0);
        Shard s{op, 0, 0};
        s.op.a.offset += c0 * a.strides[1];
        s.op.a.dims[1] = len;
        s.op.dst.offset += c0 * d.strides[0];
        s.op.dst.dims[0] = len;
        s.begin = s.op.dst.offset - d.offset;
        s.end = s.begin + len * d.strides[0];
        out.push_back(s);
      }
      break;
    }
  }
  return out;
}

OracleResult run_oracle(const OpSpec& op, const void* a, const void* b, const void* a_abs, const void* b_abs,
                        const OracleOptions& opt) {
  OracleResult r;
  r.total_elements = op.dst.elements();
  const size_t n = static_cast<size_t>(std::max<int64_t>(r.total_elements, 1));
  r.ref.assign(n * size_of(op.dst.dtype), 0);
  r.sum_abs.assign(n, 0.0f);
  if (r.total_elements == 0) return r;

  // Enough shards to keep every thread busy and to make a subset fine-grained.
  std::vector<Shard> shards = make_shards(op, 64 * std::max(opt.threads, 1));
  // Each output element costs one reduction for the value and one for
  // sum |products|.
  const double per_element = 2.0 * static_cast<double>(std::max<int64_t>(detail::reduction_length(op), 1));
  const double total_cost = per_element * static_cast<double>(r.total_elements);
  if (!opt.all && opt.budget > 0 && total_cost > opt.budget && shards.size() > 1) {
    // A seeded random subset within the budget; the first and last shards
    // always, since edges (first/last channel, batch) are where slicing and
    // indexing bugs show.
    std::vector<size_t> order(shards.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937_64 rng(opt.seed ^ 0x9e3779b97f4a7c15ull);
    std::shuffle(order.begin() + 1, order.end() - 1, rng);
    std::swap(order[1], order.back());
    std::vector<bool> take(shards.size(), false);
    double spent = 0;
    for (size_t i : order) {
      const double c = per_element * static_cast<double>(shards[i].end - shards[i].begin);
      if (spent > 0 && spent + c > opt.budget) continue;
      take[i] = true;
      spent += c;
    }
    std::vector<Shard> kept;
    for (size_t i = 0; i < shards.size(); ++i)
      if (take[i]) kept.push_back(shards[i]);
    shards.swap(kept);
  }

  // Each thread pulls shard indices; every element is computed by exactly one
  // call, so the results do not depend on scheduling.
  int64_t to_do = 0;
  for (const Shard& s : shards) to_do += s.end - s.begin;
  std::atomic<size_t> next{0};
  std::atomic<int64_t> done{0};
  auto worker = [&]() {
    for (size_t i = next++; i < shards.size(); i = next++) {
      const Shard& s = shards[i];
      detail::reference_run(s.op, a, b, r.ref.data());
      OpSpec so = s.op;
      so.dst.dtype = DataType::f32;
      detail::reference_run(so, a_abs, b_abs, r.sum_abs.data());
      if (opt.progress) opt.progress(done += s.end - s.begin, to_do);
    }
  };
  const int threads = std::clamp<int>(opt.threads, 1, static_cast<int>(shards.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  r.computed_elements = to_do;
  r.computed = std::move(shards);
  return r;
}

}  // namespace convbwd::cli
