// A portable stand-in for an 8-lane vector: the same kernel templates as the
// AVX2 path, in plain C++ (CONVBWD_ISA=scalar and CPUs without AVX2). Sums are
// taken in the same lane order as VecAvx2; products are not fused.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/depthwise/depthwise_plan.hpp"
#include "kernels/depthwise/depthwise_view_rows.hpp"
#include "kernels/any_nonfinite.hpp"

namespace convbwd::detail {
namespace {

struct VecScalar {
  struct R {
    float v[8];
  };
  static constexpr int64_t W = 8;

  static void prefetch(const void* p) { __builtin_prefetch(p, 0, 2); }
  static bool any_nonfinite(const float* p, int64_t n) { return scalar::any_nonfinite(p, n); }
  static R zero() { return R{}; }
  static R load(const float* p) {
    R r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  static void store(float* p, R v) { std::memcpy(p, v.v, sizeof v.v); }
  static R bcast(const float* p) {
    R r;
    for (float& x : r.v) x = *p;
    return r;
  }
  static R fma(R a, R b, R c) {
    for (int i = 0; i < 8; ++i) c.v[i] += a.v[i] * b.v[i];
    return c;
  }
  static R add(R a, R b) {
    for (int i = 0; i < 8; ++i) a.v[i] += b.v[i];
    return a;
  }
  static R keep_first(R v, int64_t n) {
    for (int64_t i = n; i < 8; ++i) v.v[i] = 0.0f;
    return v;
  }
  static float hsum(R v) {
    const float* l = v.v;
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  }
  static void interleave2(const float* a, const float* b, int64_t pairs, float* out) {
    for (int64_t i = 0; i < pairs; ++i) {
      out[2 * i] = a[i];
      out[2 * i + 1] = b[i];
    }
  }
  static void deinterleave2(const float* in, int64_t n, float* a, float* b) {
    for (int64_t i = 0; i < n; ++i) {
      a[i] = in[2 * i];
      b[i] = in[2 * i + 1];
    }
  }
  // out[j*os + i] = in[i*is + j] for i, j < 8 (through a copy: in and out
  // never overlap in the kernels, but the copy keeps that off the contract).
  static void transpose_block(const float* in, int64_t is, float* out, int64_t os) {
    float t[8][8];
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) t[j][i] = in[i * is + j];
    for (int j = 0; j < 8; ++j) std::memcpy(out + j * os, t[j], sizeof t[j]);
  }
  static bool load_rows_transposed(const void* base, DataType dt, const int64_t* rows, int64_t nv, int64_t n,
                                   OperandRounding rnd, float* out, bool check) {
    dw_load_rows_transposed_generic(base, dt, rows, 1, nv, n, rnd, W, out);
    return dw_rows_block_nonfinite<VecScalar>(out, n, check);
  }
  static void stream_row(const float* in, int64_t n, float* out) {
    std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  }
  static void store_fence() {}
  static R from(const void* base, DataType dt, int64_t i) {
    R r;
    dw_load_row_generic(base, dt, i, 1, 8, OperandRounding::none, r.v);
    return r;
  }
  static R from_partial(const void* base, DataType dt, int64_t i, int64_t n) {
    R r{};
    dw_load_row_generic(base, dt, i, 1, n, OperandRounding::none, r.v);
    return r;
  }
  static void load_row(const void* base, DataType dt, int64_t off, int64_t n, OperandRounding rnd, float* out) {
    if (dt == DataType::f32 && rnd == OperandRounding::none) {
      std::memcpy(out, static_cast<const float*>(base) + off, static_cast<size_t>(n) * sizeof(float));
      return;
    }
    dw_load_row_generic(base, dt, off, 1, n, rnd, out);
  }
  static void store_row(const float* in, int64_t n, void* base, DataType dt, int64_t off) {
    scalar::store_row(in, n, base, dt, off, 1);
  }
};

}  // namespace
}  // namespace convbwd::detail
